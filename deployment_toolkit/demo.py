"""`make demo`: the whole workflow for one model on the embedded server, through the user-facing scripts.

Each step runs the same `python triton/<script>.py ...` command a user would type (printed before it
runs), so the demo doubles as a tutorial and as an end-to-end check of the scripts.
"""
from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from pathlib import Path

from .server.local import LocalTritonServer, ServerConfig
from .errors import ToolkitError, UserError

ROOT = Path(__file__).resolve().parents[1]


class StepFailed(ToolkitError, RuntimeError):
    pass


class RunFolderTaken(UserError, ValueError):
    """A user error (exit 2): the demo was pointed at a folder that already holds a run."""


# (step, seconds, command) of this demo run, for demo_timings.md
_TIMINGS: list[tuple[str, float, str]] = []


def run_step(step: str, script: str, *args: str) -> None:
    """Run `python <script> args` from the checkout's root as a user would type it (printed first), timed.
    `script` is relative to the root (a bare name means triton/<name>)."""
    path = script if "/" in script else f"triton/{script}"
    cmd = [sys.executable, str(ROOT / path), *args]
    shown = " ".join(shlex.quote(_relative(c)) for c in ["python", path, *args])
    print(f"\n=== {step}\n$ {shown}", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT)
    if proc.returncode != 0:
        raise StepFailed(f"step '{step}' failed (exit {proc.returncode}): {shown}")
    seconds = time.perf_counter() - t0
    _TIMINGS.append((step, seconds, shown))
    print(f"--- {step}: {seconds:.1f} s", flush=True)





def _relative(arg: str) -> str:
    """Paths inside the checkout as the user would type them (from its root)."""
    prefix = f"{ROOT}/"
    return arg[len(prefix):] if arg.startswith(prefix) else arg


def write_timings(path: Path, total_s: float, what: str = "`make demo`") -> Path:
    """How long the demo and each of its steps took (after installation), as a table."""
    from .spec import atomic_write_text
    from .tables import markdown_table

    lines = [f"{what} finished in {total_s / 60:.1f} min after installation; its steps:", "",
             markdown_table(["step", "seconds", "command"],
                            [[step, f"{seconds:.1f}", f"`{shown}`"] for step, seconds, shown in _TIMINGS], "lrl")]
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def run_demo(model: str, preset: str, result_dir: Path, workspace: Path, repository: Path,
             max_batch: int, concurrency: str, batch_sizes: str, measurement_interval_ms: int,
             max_attempts: int = 2) -> Path:
    art = workspace / model
    t0 = time.perf_counter()
    _TIMINGS.clear()
    for fmt in ("ts-trace", "onnx"):
        run_step(f"convert to {fmt}", "convert_model.py", "--model", model, "--preset", preset, "--output-type", fmt,
             "--output-path", str(art / fmt), "--max-batch-size", str(max_batch))
    run_step("configure on Triton (Python backend runs ONNX Runtime)", "config_model_on_triton.py",
         "--model-repository", str(repository), "--model-path", str(art / "onnx"), "--model-format", "python",
         "--model-name", model, "--max-batch-size", str(max_batch), "--preferred-batch-sizes", str(max_batch),
         "--max-queue-delay-us", "1000", "--number-of-model-instances", "1")
    print(f"\n=== start the embedded tritonserver on {repository}", flush=True)
    t_server = time.perf_counter()
    with LocalTritonServer(ServerConfig(repository, log_dir=workspace / "logs")) as server:
        server.require_models([model])
        _TIMINGS.append(("start the embedded tritonserver (health check)", time.perf_counter() - t_server,
                         f"python -m deployment_toolkit serve --model-repository {_relative(str(repository))}"))
        print(f"ready: gRPC {server.grpc_url}, HTTP {server.http_url}, log {server.log_path}", flush=True)
        common = ["--num-samples", "32", "--batch-size", str(max_batch), "--data-dir", "synthetic"]
        run_step("inference through Triton (system shared memory)", "run_inference_on_triton.py",
             "--server-url", server.grpc_url, "--model-name", model, "--manifest", str(art / "onnx" / "manifest.json"),
             "--shared-memory", "system", "--output-dir", str(art / "dump_triton"), *common)
        run_step("inference in the framework (PyTorch eager)", "run_inference_on_fw.py",
             "--model-path", str(art / "onnx"), "--runtime", "framework", "--output-dir", str(art / "dump_fw"), *common)
        result_dir.mkdir(parents=True, exist_ok=True)
        run_step("accuracy: Triton vs framework", "calculate_metrics.py", "--dump-dir", str(art / "dump_triton"),
             "--reference-dir", str(art / "dump_fw"), "--csv", str(result_dir / "accuracy_metrics.csv"),
             "--threshold", "max_abs_err<=1e-4", "--threshold", "top1_agreement>=1.0")
        perf = ["--server-url", server.grpc_url, "--model-name", model, "--manifest",
                str(art / "onnx" / "manifest.json"), "--result-path", str(result_dir), "--shared-memory", "system",
                "--metrics-url", server.metrics_url,
                "--measurement-interval", str(measurement_interval_ms), "--number-of-model-instances", "1",
                "--max-attempts", str(max_attempts), "--max-trials", "6"]
        run_step("offline performance (static batching, client batch sweep)", "run_offline_performance_test_on_triton.py",
             *perf, "--batch-sizes", batch_sizes)
        run_step("online performance (dynamic batching, concurrency sweep)", "run_online_performance_test_on_triton.py",
             *perf, "--concurrency", concurrency)
    total_s = time.perf_counter() - t0
    write_timings(result_dir / "demo_timings.md", total_s)
    print(f"\nDemo finished in {total_s / 60:.1f} min. Results in {result_dir}:")
    for name in ("accuracy_metrics.csv", "offline.csv", "online.csv", "report.md", "report.html", "run.json",
                 "demo_timings.md"):
        path = result_dir / name
        print(f"  {path}{'' if path.exists() else '  (missing!)'}")
    online_md = result_dir / "online.md"
    if online_md.exists():
        print("\n" + online_md.read_text())
    return result_dir


# `--fast` (CI): the same steps on a small model with fewer, shorter points; every point it reports is measured.
FAST = dict(model="resnet18", preset="small", concurrency="1:2:1", batch_sizes="1,2", measurement_interval=1000,
            max_attempts=1)
LOCAL_RUNS = "local"  # results/local/ is git-ignored: where `make demo` writes a new run folder each time


def default_run_dir(results: Path, model: str) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return results / LOCAL_RUNS / f"demo-{model}-onnx-{stamp}"


def check_new_run_dir(result_dir: Path) -> None:
    """The demo measures where it runs: it never adds to, or writes over, a run folder that already exists
    (such as an example committed from another machine)."""
    if result_dir.exists() and any(result_dir.iterdir()):
        raise RunFolderTaken(f"{result_dir} already holds a run: the demo writes a new folder each time. Leave out "
                         "--output to get a fresh one under results/local/, or name a folder that does not exist")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  deployment-toolkit demo                 # resnet50 into results/local/demo-...\n"
               "  deployment-toolkit demo --fast          # resnet18 small, 2+2 points (CI)\n"
               "  deployment-toolkit demo --output results/demo-resnet50-onnx-cpu   # the committed example")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--preset", default="full")
    p.add_argument("--output", default=None, metavar="DIR",
                   help="run folder to create (must not exist or be empty; default: "
                        "results/local/demo-<model>-onnx-<UTC time>, git-ignored)")
    p.add_argument("--fast", action="store_true",
                   help=f"CI mode: {FAST['model']} {FAST['preset']}, batch sizes {FAST['batch_sizes']}, "
                        f"concurrency {FAST['concurrency']}, {FAST['measurement_interval']} ms windows, one attempt")
    p.add_argument("--workspace", default=str(ROOT / "workspace"))
    p.add_argument("--model-repository", default=str(ROOT / "model_repository"))
    p.add_argument("--results", default=str(ROOT / "results"))
    p.add_argument("--max-batch-size", type=int, default=8)
    p.add_argument("--concurrency", default="1:8:1")
    p.add_argument("--batch-sizes", default="1,2,4,8")
    p.add_argument("--measurement-interval", type=int, default=3000, help="perf_analyzer window, ms")
    p.add_argument("--max-attempts", type=int, default=2,
                   help="tries per point before it is kept as unstable (each retry lengthens the window)")
    args = p.parse_args(argv)
    from .repository.names import ModelNameError, check_model_name

    try:
        check_model_name(args.model, "--model")  # it becomes folder names (workspace, repository, run folder)
    except ModelNameError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.fast:
        for key, value in FAST.items():
            setattr(args, key, value)
    result_dir = Path(args.output) if args.output else default_run_dir(Path(args.results), args.model)
    try:
        check_new_run_dir(result_dir)
        run_demo(args.model, args.preset, result_dir, Path(args.workspace), Path(args.model_repository),
                 args.max_batch_size, args.concurrency, args.batch_sizes, args.measurement_interval, args.max_attempts)
    except RunFolderTaken as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except StepFailed as err:
        print(f"\nerror: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
