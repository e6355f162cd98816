"""Diffusion latency per request, the CorrDiff NIM way: for each step count, burn-in requests, then timed
trials, repeated over runs and averaged; mean / p50 / p95 per request, seconds per step and per denoiser
evaluation. Targets: the Triton sampler model (gRPC; an embedded server is started on --model-repository
unless --server-url is given), the same sampler in-process (--targets in-process), or a /v1/infer service
of the NIM's kind (--url: multipart form with samples, steps, seed and an input_array .npy file).
Writes results/<run>/diffusion_latency.csv, diffusion_latency.md (rows: steps; columns: device) and run.json."""
import argparse
import sys
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.config import add_arguments, from_args  # noqa: E402
from deployment_toolkit.results.run_folder import add_result_path_argument  # noqa: E402
from deployment_toolkit.errors import UserInputError  # noqa: E402
from deployment_toolkit.tables import markdown_table  # noqa: E402
from deployment_toolkit.committed import refuse_committed  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    p = cli.parser(__doc__, """
        # served vs in-process on this host, the seed's 8 and 18 steps (pipeline from deploy_diffusion.py):
        deployment-toolkit diffusion-latency --model-repository model_repository --model-name sd_pipeline \\
            --targets triton,in-process --steps 8,18 --burn-in 3 --trials 10 --runs 3 \\
            --result-path results/diffusion-latency-cpu
        # a deployed service of the NIM's kind:
        deployment-toolkit diffusion-latency --targets http --url http://localhost:8000/v1/infer \\
            --input-array input.npy --device-label H100 --result-path results/corrdiff-nim
    """)
    from deployment_toolkit.diffusion.latency import LatencyPlan
    from deployment_toolkit.diffusion.targets import TARGETS, TargetOptions, TritonSamplerTarget

    p.add_argument("--targets", default=TritonSamplerTarget.name, help=f"comma-separated: {', '.join(TARGETS)}")
    add_arguments(p, TargetOptions, only=("model_repository", "model_name", "server_url", "url", "input_array"))
    add_arguments(p, LatencyPlan)  # --steps, --samples, --seed, --burn-in, --trials, --runs
    add_arguments(p, TargetOptions, only=("timeout_s", "sampler", "threads"))
    p.add_argument("--device-label", default=None, help="table column name (default: this host's CPU/GPU)")
    p.add_argument("--perf-analyzer", action="store_true",
                   help="also measure the triton target with perf_analyzer (concurrency 1, count windows of "
                        "max(trials, 5) requests): the server-side latency breakdown per steps value")
    add_result_path_argument(p, "--result-dir", dest="result_dir", default="results/diffusion-latency",
                             help="default: %(default)s")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from deployment_toolkit.diffusion.targets import TARGETS

    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    if args.url and "http" not in targets:
        targets.append("http")
    unknown = sorted(set(targets) - set(TARGETS))
    if unknown or not targets:
        raise UserInputError(f"unknown target(s) {unknown}; choose from {', '.join(TARGETS)}")
    if "http" in targets and not args.url:
        raise UserInputError("the http target needs --url http://HOST:PORT/v1/infer")
    if ("in-process" in targets or ("triton" in targets and not args.server_url)) and not args.model_repository:
        raise UserInputError("--model-repository is needed for the in-process target and to start an embedded server")
    return run(args, targets)


def run(args, targets: list[str]) -> int:
    import contextlib
    import os
    import signal

    # SIGTERM (a job killed by its scheduler) unwinds like Ctrl-C, so the embedded server is stopped too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    from deployment_toolkit.diffusion.latency import (
        LATENCY_CSV_COLUMNS, LatencyPlan, csv_text, device_label, latency_report, measure, seconds,
        served_vs_in_process, write_text,
    )
    from deployment_toolkit.diffusion.targets import TargetOptions, load_cond, make_target
    from deployment_toolkit.results.run_folder import RunFolder

    options, plan = from_args(TargetOptions, args), from_args(LatencyPlan, args)

    out_dir = Path(args.result_dir)
    refuse_committed(out_dir, "--result-path")
    out_dir.mkdir(parents=True, exist_ok=True)
    device = args.device_label or device_label("cuda" if _denoiser_on_gpu(options) else "cpu")
    notes: list[str] = []
    pa_section = ""
    with contextlib.ExitStack() as stack:
        cond_shape, url, server_version = _cond_shape_and_url(options, targets, stack)
        cond = load_cond(options.input_array, cond_shape, seed=0) if cond_shape is not None else None
        objs = [stack.enter_context(contextlib.closing(make_target(n, options, url, cond))) for n in targets]
        labels = [device if n != "http" or args.device_label else "remote service" for n in targets]
        print(f"{', '.join(targets)}: steps {list(plan.steps)}, samples {plan.samples}, burn-in {plan.burn_in}, "
              f"trials {plan.trials}, runs {plan.runs} (timed requests alternate between targets)", flush=True)
        load_before = os.getloadavg()
        points = measure(objs, plan, labels, [t.sampler or options.sampler for t in objs])
        load_after = os.getloadavg()
        if args.perf_analyzer and "triton" in targets:
            pa_rows = _perf_analyzer(options, plan, url, out_dir)
            write_text(out_dir / "diffusion_perf_analyzer.csv", csv_text(pa_rows, list(pa_rows[0])))
            pa_section = _perf_analyzer_note(pa_rows)

    rows = [pt.row() for pt in points]
    write_text(out_dir / "diffusion_latency.csv", csv_text(rows, LATENCY_CSV_COLUMNS))
    notes.append(f"Per request, {plan.samples} sample(s); burn-in {plan.burn_in}, {plan.trials} trials, "
                 f"averaged over {plan.runs} run(s). Targets: {', '.join(targets)}. Host load average (1 min) "
                 f"{load_before[0]:.2f} before, {load_after[0]:.2f} after ({os.cpu_count()} logical cores).")
    report = latency_report(points, "Diffusion latency per request", notes) + pa_section
    write_text(out_dir / "diffusion_latency.md", report)
    config = {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(args).items()}
    config.update({"targets": targets, "device": device, "load_average_1_5_15_before": load_before,
                   "load_average_1_5_15_after": load_after})
    RunFolder(out_dir).record(config, server_version)
    print("\n" + report)
    for r in served_vs_in_process(points):
        print(f"{r['steps']} steps: served {seconds(r['served_s_per_step'])}/step vs in-process "
              f"{seconds(r['in_process_s_per_step'])}/step -> served / in-process = {r['ratio']:.3f} "
              f"(medians: {r['p50_ratio']:.3f})")
    print(f"wrote {out_dir / 'diffusion_latency.csv'}, {out_dir / 'diffusion_latency.md'}, {out_dir / 'run.json'}")
    return 0


def _perf_analyzer(options, plan, url: str, out_dir: Path) -> list[dict]:
    """One perf_analyzer point per steps value on the sampler model (deployment_toolkit.perf)."""
    from deployment_toolkit.diffusion.targets import TritonSamplerTarget, sampler_signature
    from deployment_toolkit.config import Concurrency, Protocol
    from deployment_toolkit.perf import PerfOptions, PerfTarget, run_point
    from deployment_toolkit.diffusion.pipeline import PipelineSettings

    settings = PipelineSettings.from_parameters(TritonSamplerTarget.config_params(url, options.model_name))
    # few retries: a sampling request is long, and a busy host rarely stabilises by waiting longer
    opts = PerfOptions(protocol=Protocol.GRPC, measurement_mode="count_windows",
                       measurement_request_count=max(plan.trials, 5), max_attempts=2,
                       timeout_s=max(600.0, options.timeout_s))
    rows = []
    for steps in plan.steps:
        sig = sampler_signature(settings, steps, plan.seed, plan.samples)
        point_dir = out_dir / "perf_analyzer" / f"steps_{steps}"
        point = run_point(PerfTarget(options.model_name, url, sig), 1, Concurrency(1), opts, point_dir / "perf.csv")
        rows.append({"steps": steps, "samples": plan.samples, **point.row()})
        print(f"  perf_analyzer: {steps} steps: avg {point.row()['Avg Latency']:.1f} ms "
              f"(server compute infer {point.row()['Server Compute Infer']:.1f} ms)", flush=True)
    return rows


def _perf_analyzer_note(rows: list[dict]) -> str:
    table = markdown_table(
        ["Diffusion Steps", "Avg latency", "p95 latency", "Server Queue", "Server Compute Infer",
         "Network+server Send/recv", "stable"],
        [[f"{r['steps']} Steps", f"{r['Avg Latency']:.2f}", f"{r['P95 Latency']:.2f}", f"{r['Server Queue']:.3f}",
          f"{r['Server Compute Infer']:.2f}", f"{r['Network+server Send/recv']:.3f}", r["stable"]] for r in rows],
        ["l"] + ["r"] * 5 + ["l"])
    return "\n## perf_analyzer on the sampler model (concurrency 1, ms)\n\n" + table + "\n"


def _denoiser_on_gpu(options) -> bool:
    """The table's column is the device the denoiser runs on: GPU when its config asks for GPU instances."""
    if not options.model_repository:
        return False
    try:
        from deployment_toolkit.repository.config import read_config
        from deployment_toolkit.diffusion.pipeline import read_pipeline

        settings, version_dir = read_pipeline(options.model_repository, options.model_name)
        cfg = read_config(version_dir.parent / "config.pbtxt")
        return any(g.kind == g.KIND_GPU for g in cfg.instance_group)
    except (OSError, ValueError, KeyError):
        return False


def _cond_shape_and_url(options, targets, stack):
    """The conditioning's per-item shape, the gRPC URL (starting the embedded server if needed) and the
    server's version."""
    cond_shape, url, version = None, options.server_url, None
    if options.model_repository:
        from deployment_toolkit.diffusion.pipeline import read_pipeline

        cond_shape = read_pipeline(options.model_repository, options.model_name)[0].cond_shape
    if "triton" in targets and not url:
        from deployment_toolkit.server import LocalTritonServer, ServerConfig

        server = stack.enter_context(LocalTritonServer(ServerConfig(Path(options.model_repository))))
        server.require_models([options.model_name])
        url = server.grpc_url
        version = server.metadata().get("version")
        print(f"started the embedded tritonserver {version} at {url} (log: {server.log_path})", flush=True)
    if cond_shape is None and "triton" in targets:
        from deployment_toolkit.diffusion.targets import TritonSamplerTarget

        params = TritonSamplerTarget.config_params(url, options.model_name)
        cond_shape = tuple(int(v) for v in params["cond_shape"].split(","))
    if cond_shape is None and not options.input_array:
        raise UserInputError("--input-array is needed: without a pipeline config the conditioning shape is unknown")
    return cond_shape, url, version


if __name__ == "__main__":
    cli.run(main)
