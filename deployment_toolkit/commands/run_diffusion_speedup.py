"""End-to-end sampling latency, converted vs framework, side by side in one run (the seed-003 table): for
each batch size (= samples per conditioning, "num_images_per_prompt"), the whole sampling loop with the
eager PyTorch denoiser (AMP fp16 on GPU hosts) and with the fastest verified converted format on this host
(ONNX Runtime / TorchScript on CPU; TensorRT fp16 where it exists, else TorchScript fp16 on GPU).
Writes results/<run>/diffusion_speedup.csv, diffusion_speedup.md and run.json."""
import argparse
from pathlib import Path
from typing import Any

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.config import add_arguments  # noqa: E402
from deployment_toolkit.results.run_folder import add_result_path_argument  # noqa: E402
from deployment_toolkit.errors import UserInputError  # noqa: E402
from deployment_toolkit.committed import refuse_committed  # noqa: E402

# (format, precision, label) in order of preference; the fastest verified one is used
CANDIDATES = {
    "cpu": (("onnx", "fp32", "ONNX Runtime FP32"), ("ts-trace", "fp32", "TorchScript FP32")),
    "cuda": (("trt", "fp16", "TensorRT FP16"), ("ts-trace", "fp16", "TorchScript FP16")),
}
FORMAT_LABELS = {(f, p): label for cands in CANDIDATES.values() for f, p, label in cands} | {
    ("onnx", "fp16"): "ONNX Runtime FP16", ("ts-trace", "fp32"): "TorchScript FP32"}


def _parser() -> argparse.ArgumentParser:
    p = cli.parser(__doc__, """
        deployment-toolkit diffusion-speedup --model sd_unet --preset small --sampler ddim --steps 50 \\
            --batch-sizes 1,2,4 --trials 3 --result-path results/diffusion-speedup-cpu
    """)
    from deployment_toolkit.diffusion.latency import SpeedupPlan
    from deployment_toolkit.diffusion.pipeline import DenoiserSource, PipelineOptions
    from deployment_toolkit.export import ConvertOptions

    add_arguments(p, DenoiserSource, only=("model",))
    add_arguments(p, ConvertOptions, only=("preset",))
    add_arguments(p, PipelineOptions, only=("sampler",))
    add_arguments(p, SpeedupPlan, only=("steps", "batch_sizes"))
    p.add_argument("--formats", default="auto",
                   help="comma-separated format:precision candidates (e.g. onnx:fp32,ts-trace:fp32); auto: by host")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    add_arguments(p, SpeedupPlan, only=("burn_in", "trials", "threads", "seed"))
    add_arguments(p, DenoiserSource, only=("workspace",))
    add_result_path_argument(p, "--result-dir", dest="result_dir", default="results/diffusion-speedup",
                             help="default: %(default)s")
    return p


def main(argv: list[str] | None = None) -> int:
    return run(_parser().parse_args(argv))


def run(args) -> int:
    """The fastest verified converted format picked, both pipelines timed batch by batch, then the table, the
    markdown and run.json."""
    import os

    import numpy as np

    from deployment_toolkit.config import from_args
    from deployment_toolkit.diffusion.latency import SPEEDUP_CSV_COLUMNS, SpeedupPlan, csv_text, write_text
    from deployment_toolkit.diffusion.runtime import InProcessPipeline, eager_denoiser

    plan = from_args(SpeedupPlan, args)
    device = _device(args.device)
    max_batch = max(plan.batch_sizes)
    if plan.threads > 0:
        import torch

        torch.set_num_threads(plan.threads)
    load_before = os.getloadavg()
    candidates = _candidates(args.formats, device)
    probes, converted = _pick_fastest(args, plan, candidates, device, max_batch)
    _, _, label, pipe = converted
    amp = device == "cuda"
    fw_denoise, _ = eager_denoiser(args.model, args.preset, device="cuda:0" if amp else "cpu", amp=amp, seed=0)
    fw = InProcessPipeline(fw_denoise, pipe.settings, source="eager")
    fw_label = "FW FP16 (AMP)" if amp else "FW FP32"
    cond = np.random.default_rng(plan.seed).standard_normal((1, *pipe.settings.cond_shape)).astype(np.float32)
    rows = [_timed(args, plan, batch, (label, pipe), (fw_label, fw), cond) for batch in plan.batch_sizes]

    loads = (load_before, os.getloadavg())
    out = Path(args.result_dir)
    refuse_committed(out, "--result-path")
    write_text(out / "diffusion_speedup.csv", csv_text([r.row() for r in rows], SPEEDUP_CSV_COLUMNS))
    md = _markdown(args, plan, rows, probes, label, device, loads)
    write_text(out / "diffusion_speedup.md", md)
    _record(args, out, device, converted, probes, loads)
    print("\n" + md)
    print(f"wrote {out / 'diffusion_speedup.csv'}, {out / 'diffusion_speedup.md'}, {out / 'run.json'}")
    return 0


def _timed(args, plan, batch: int, converted: tuple[str, Any], framework: tuple[str, Any], cond: Any) -> Any:
    """One batch size: both pipelines burnt in, then timed in alternating trials (so background load hits both
    alike), with how far their samples differ; said as one line."""
    import numpy as np

    from deployment_toolkit.diffusion.latency import SpeedupRow, seconds, time_requests

    (label, pipe), (fw_label, fw) = converted, framework
    outs: dict[str, np.ndarray] = {}
    sends = {key: (lambda p=p, key=key: outs.__setitem__(key, p(cond, plan.steps, plan.seed, batch)))
             for key, p in (("conv", pipe), ("fw", fw))}
    for send in sends.values():
        for _ in range(plan.burn_in):
            send()
    times: dict[str, list] = {key: [] for key in sends}
    for _ in range(plan.trials):  # alternate, so background load hits both alike
        for key, send in sends.items():
            times[key] += time_requests(send, 0, 1)
    diff = float(np.max(np.abs(outs["conv"].astype(np.float64) - outs["fw"])))
    r = SpeedupRow(f"{args.model} ({args.preset})", batch, args.sampler.upper().replace("_", " "),
                   plan.steps, label, times["conv"], fw_label, times["fw"], diff)
    print(f"batch {batch}: {label} {seconds(r.converted_latency_s)}, {fw_label} {seconds(r.framework_latency_s)}"
          f" -> {r.speedup:.2f}x (max |converted - framework| = {diff:.3g})", flush=True)
    return r


def _markdown(args, plan, rows: list, probes: list[str], label: str, device: str,
              loads: tuple[tuple[float, ...], tuple[float, ...]]) -> str:
    """diffusion_speedup.md: how it was measured (with the host's load before and after), the table, the speedup
    of the medians and every converted format tried."""
    import os

    from deployment_toolkit.diffusion.latency import speedup_table

    load_before, load_after = loads
    host = "GPU" if device == "cuda" else "CPU"
    return (f"# Diffusion sampling: {label} vs framework ({host})\n\nEnd-to-end latency of the sampling loop "
            f"(all {plan.steps} steps, {args.sampler} sampler, one conditioning, Batch Size = samples), mean of "
            f"{plan.trials} trial(s) after {plan.burn_in} burn-in, the two alternating trial by trial; same seed and "
            f"random weights for both. Host load average (1 min) {load_before[0]:.2f} before, {load_after[0]:.2f} "
            f"after ({os.cpu_count()} logical cores); intra-op threads: "
            f"{plan.threads or 'runtime defaults'}.\n\n"
            + speedup_table(rows)
            + "\nSpeedup of the medians (robust to bursts of load on a shared host): "
            + ", ".join(f"batch {r.batch_size}: {r.row()['speedup_p50_x']:.2f}x" for r in rows) + ".\n"
            + f"\nConverted formats tried (probe: median sampling run at batch {max(plan.batch_sizes)}; the fastest "
              "is used):\n\n"
            + "".join(f"- {p}\n" for p in probes))


def _record(args, out: Path, device: str, converted: tuple, probes: list[str],
            loads: tuple[tuple[float, ...], tuple[float, ...]]) -> None:
    """run.json: the flags, the host's load, the converted format used and what each probe found."""
    from deployment_toolkit.results.run_folder import RunFolder

    fmt, precision, _, pipe = converted
    config = {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(args).items()}
    config.update({"load_average_1_5_15_before": loads[0], "load_average_1_5_15_after": loads[1],
                   "device": device, "converted_format": fmt, "converted_precision": precision, "probes": probes,
                   "sampler_settings": {"sample_shape": list(pipe.settings.sample_shape),
                                        "denoiser_max_batch": pipe.settings.denoiser_max_batch}})
    RunFolder(out).record(config)


def _device(choice: str) -> str:
    if choice != "auto":
        return choice
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _candidates(text: str, device: str) -> list[tuple[str, str, str]]:
    if text == "auto":
        return list(CANDIDATES[device])
    out = []
    for item in text.split(","):
        fmt, _, prec = item.strip().partition(":")
        prec = prec or "fp32"
        out.append((fmt, prec, FORMAT_LABELS.get((fmt, prec), f"{fmt} {prec.upper()}")))
    return out


def _pick_fastest(args, plan, candidates, device: str, max_batch: int):
    """Convert (or reuse) each candidate, keep the verified ones, time one sampling run each, return the fastest."""
    import statistics

    import numpy as np

    from deployment_toolkit.diffusion.latency import time_requests
    from deployment_toolkit.diffusion.runtime import InProcessPipeline
    from deployment_toolkit.export import (
        ConversionError, ConvertOptions, FormatUnavailable, VerificationError, convert,
    )
    from deployment_toolkit.config import from_args
    from deployment_toolkit.diffusion.pipeline import DenoiserSource
    from deployment_toolkit.spec import Manifest

    source = from_args(DenoiserSource, args)
    probes, best = [], None
    for fmt, precision, label in candidates:
        art = source.artifact_dir(args.preset, fmt, precision)
        try:
            m = Manifest.load(art) if (art / "manifest.json").exists() else None
            if not (m and m.verification.get("passed") and m.preset == args.preset and m.max_batch_size >= max_batch):
                print(f"converting {args.model} ({args.preset}) to {label} ...", flush=True)
                m = convert(args.model, fmt, art, ConvertOptions(preset=args.preset, precision=precision,
                                                                 max_batch_size=max(max_batch, 1),
                                                                 verify_batch_sizes=(1,)))
        except FormatUnavailable as err:
            probes.append(f"{label}: unavailable on this host ({err})")
            continue
        except VerificationError as err:
            probes.append(f"{label}: failed verification ({err})")
            continue
        except ConversionError as err:
            probes.append(f"{label}: conversion failed ({str(err).splitlines()[0]})")
            continue
        pipe = InProcessPipeline.from_artifact(art, args.sampler, max_samples=max_batch, threads=plan.threads,
                                               device="cuda:0" if device == "cuda" else "cpu")
        cond = np.zeros((1, *pipe.settings.cond_shape), np.float32)
        # TorchScript's profiling executor specialises on the 2nd call per shape: warm up with the burn-in
        took = statistics.median(time_requests(lambda: pipe(cond, plan.steps, plan.seed, max_batch),
                                               max(plan.burn_in, 1), min(plan.trials, 3)))
        probes.append(f"{label}: verified (max abs err {m.verification.get('max_abs_err', float('nan')):.3g}), "
                      f"{took:.3f} s")
        print(f"probe {label}: {took:.3f} s", flush=True)
        if best is None or took < best[0]:
            best = (took, (fmt, precision, label, pipe))
    if best is None:
        raise UserInputError("no converted format is available and verified on this host:\n  " + "\n  ".join(probes))
    return probes, best[1]


if __name__ == "__main__":
    cli.run(main)
