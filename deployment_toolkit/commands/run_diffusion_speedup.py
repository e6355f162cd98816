"""End-to-end sampling latency, converted vs framework, side by side in one run (the seed-003 table): for
each batch size (= samples per conditioning, "num_images_per_prompt"), the whole sampling loop with the
eager PyTorch denoiser (AMP fp16 on GPU hosts) and with the fastest verified converted format on this host
(ONNX Runtime / TorchScript on CPU; TensorRT fp16 where it exists, else TorchScript fp16 on GPU).
Writes results/<run>/diffusion_speedup.csv, diffusion_speedup.md and run.json."""
import sys
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
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


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(__doc__, """
        deployment-toolkit diffusion-speedup --model sd_unet --preset small --sampler ddim --steps 50 \\
            --batch-sizes 1,2,4 --trials 3 --result-path results/diffusion-speedup-cpu
    """)
    p.add_argument("--model", default="sd_unet")
    p.add_argument("--preset", default="small")
    p.add_argument("--sampler", default="ddim", help="ddim | edm_heun")
    p.add_argument("--steps", type=int, default=50, help="inference steps (the seed uses 50)")
    p.add_argument("--batch-sizes", type=cli.int_list, default=(1, 2, 4))
    p.add_argument("--formats", default="auto",
                   help="comma-separated format:precision candidates (e.g. onnx:fp32,ts-trace:fp32); auto: by host")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument("--burn-in", type=int, default=3, help="untimed runs per batch size (TorchScript needs >= 2)")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--threads", type=int, default=0,
                   help="intra-op threads of both runtimes (torch.set_num_threads, ONNX Runtime intra_op); 0: their "
                        "defaults. 1 is far steadier on a host shared with other jobs: spinning thread pools collapse "
                        "when the cores are oversubscribed")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workspace", default="workspace", help="conversions: <workspace>/<model>_<preset>_<fmt>_<prec>")
    add_result_path_argument(p, "--result-dir", dest="result_dir", default="results/diffusion-speedup",
                             help="default: %(default)s")
    args = p.parse_args(argv)
    return run(args)


def run(args) -> int:
    import numpy as np

    from deployment_toolkit.diffusion.latency import (
        SPEEDUP_CSV_COLUMNS, SpeedupRow, csv_text, seconds, speedup_table, time_requests, write_text,
    )
    from deployment_toolkit.diffusion.runtime import InProcessPipeline, eager_denoiser
    from deployment_toolkit.results.run_folder import RunFolder

    import os

    device = _device(args.device)
    max_batch = max(args.batch_sizes)
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    candidates = _candidates(args.formats, device)
    probes, converted = _pick_fastest(args, candidates, device, max_batch)
    fmt, precision, label, pipe = converted
    amp = device == "cuda"
    fw_denoise, _ = eager_denoiser(args.model, args.preset, device="cuda:0" if amp else "cpu", amp=amp, seed=0)
    fw = InProcessPipeline(fw_denoise, pipe.settings, source="eager")
    fw_label = "FW FP16 (AMP)" if amp else "FW FP32"
    cond = np.random.default_rng(args.seed).standard_normal((1, *pipe.settings.cond_shape)).astype(np.float32)

    rows = []
    for batch in args.batch_sizes:
        outs: dict[str, np.ndarray] = {}
        sends = {key: (lambda p=p, key=key: outs.__setitem__(key, p(cond, args.steps, args.seed, batch)))
                 for key, p in (("conv", pipe), ("fw", fw))}
        for send in sends.values():
            for _ in range(args.burn_in):
                send()
        times = {key: [] for key in sends}
        for _ in range(args.trials):  # alternate, so background load hits both alike
            for key, send in sends.items():
                times[key] += time_requests(send, 0, 1)
        diff = float(np.max(np.abs(outs["conv"].astype(np.float64) - outs["fw"])))
        rows.append(SpeedupRow(f"{args.model} ({args.preset})", batch, args.sampler.upper().replace("_", " "),
                               args.steps, label, times["conv"], fw_label, times["fw"], diff))
        r = rows[-1]
        print(f"batch {batch}: {label} {seconds(r.converted_latency_s)}, {fw_label} {seconds(r.framework_latency_s)}"
              f" -> {r.speedup:.2f}x (max |converted - framework| = {diff:.3g})", flush=True)

    load_after = os.getloadavg()
    out = Path(args.result_dir)
    refuse_committed(out, "--result-path")
    write_text(out / "diffusion_speedup.csv", csv_text([r.row() for r in rows], SPEEDUP_CSV_COLUMNS))
    host = "GPU" if device == "cuda" else "CPU"
    md = (f"# Diffusion sampling: {label} vs framework ({host})\n\nEnd-to-end latency of the sampling loop "
          f"(all {args.steps} steps, {args.sampler} sampler, one conditioning, Batch Size = samples), mean of "
          f"{args.trials} trial(s) after {args.burn_in} burn-in, the two alternating trial by trial; same seed and "
          f"random weights for both. Host load average (1 min) {load_before[0]:.2f} before, {load_after[0]:.2f} "
          f"after ({os.cpu_count()} logical cores); intra-op threads: "
          f"{args.threads or 'runtime defaults'}.\n\n"
          + speedup_table(rows)
          + "\nSpeedup of the medians (robust to bursts of load on a shared host): "
          + ", ".join(f"batch {r.batch_size}: {r.row()['speedup_p50_x']:.2f}x" for r in rows) + ".\n"
          + f"\nConverted formats tried (probe: median sampling run at batch {max_batch}; the fastest is used):\n\n"
          + "".join(f"- {p}\n" for p in probes))
    write_text(out / "diffusion_speedup.md", md)
    config = {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(args).items()}
    config.update({"load_average_1_5_15_before": load_before, "load_average_1_5_15_after": load_after,
                   "device": device, "converted_format": fmt, "converted_precision": precision, "probes": probes,
                   "sampler_settings": {"sample_shape": list(pipe.settings.sample_shape),
                                        "denoiser_max_batch": pipe.settings.denoiser_max_batch}})
    RunFolder(out).record(config)
    print("\n" + md)
    print(f"wrote {out / 'diffusion_speedup.csv'}, {out / 'diffusion_speedup.md'}, {out / 'run.json'}")
    return 0


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


def _pick_fastest(args, candidates, device: str, max_batch: int):
    """Convert (or reuse) each candidate, keep the verified ones, time one sampling run each, return the fastest."""
    import statistics

    import numpy as np

    from deployment_toolkit.diffusion.latency import time_requests
    from deployment_toolkit.diffusion.runtime import InProcessPipeline
    from deployment_toolkit.export import (
        ConversionError, ConvertOptions, FormatUnavailable, VerificationError, convert,
    )
    from deployment_toolkit.spec import Manifest

    probes, best = [], None
    for fmt, precision, label in candidates:
        art = Path(args.workspace) / f"{args.model}_{args.preset}_{fmt}_{precision}"
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
        pipe = InProcessPipeline.from_artifact(art, args.sampler, max_samples=max_batch, threads=args.threads,
                                               device="cuda:0" if device == "cuda" else "cpu")
        cond = np.zeros((1, *pipe.settings.cond_shape), np.float32)
        # TorchScript's profiling executor specialises on the 2nd call per shape: warm up with the burn-in
        took = statistics.median(time_requests(lambda: pipe(cond, args.steps, args.seed, max_batch),
                                               max(args.burn_in, 1), min(args.trials, 3)))
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
