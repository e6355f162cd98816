"""`make demo`: the whole workflow for one model on the embedded server, step by step.

Each step calls the toolkit's own function for it (convert, deploy, inference on Triton and in the framework,
accuracy, offline and online sweeps) through the one step runner, and prints the command that does the same
from a shell, so the demo doubles as a tutorial; `demo_timings.md` lists the steps with their times and commands.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .config import add_arguments, check_numbers, from_args, setting
from .errors import UserError
from .results.run_folder import add_result_path_argument
from .steps import StepFailed, StepRunner, shown
from .steps import script_command as script

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = 32  # inference samples of the accuracy check
THRESHOLDS = ("max_abs_err<=1e-4", "top1_agreement>=1.0")


class RunFolderTaken(UserError, ValueError):
    """A user error (exit 2): the demo was pointed at a folder that already holds a run."""


@dataclass
class DemoSettings:
    """What the demo converts, serves and measures; each default written once (the demo's flags are built from these
    fields, and `--fast` swaps in FAST)."""

    model: str = setting("resnet50", flag="--model", help="a registered model")
    preset: str = setting("full", flag="--preset", help="small (CI size) or full (benchmark size)")
    max_batch_size: int = setting(8, flag="--max-batch-size", low=1, high=1 << 16, help="served max batch size")
    concurrency: str = setting("1:8:1", flag="--concurrency", help="online sweep, START:END:STEP or a list")
    batch_sizes: str = setting("1,2,4,8", flag="--batch-sizes", help="offline sweep's client batch sizes")
    measurement_interval_ms: int = setting(3000, flag="--measurement-interval", unit="ms", low=1,
                                           help="perf_analyzer window")
    max_attempts: int = setting(2, flag="--max-attempts", low=1, high=100,
                                help="tries per point before it is kept as unstable (each retry lengthens the window)")
    server_timeout_s: float | None = None  # --server-timeout (server.startup); None: its default

    def __post_init__(self) -> None:
        check_numbers(self)


def write_timings(path: Path, total_s: float, steps: StepRunner, what: str = "`make demo`") -> Path:
    """How long the demo and each of its steps took (after installation), as a table."""
    from .spec import atomic_write_text

    lines = [f"{what} finished in {total_s / 60:.1f} min after installation; its steps:", "", steps.table()]
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def accuracy(dump_dir: Path, reference_dir: Path, csv_path: Path, thresholds: tuple[str, ...]) -> dict[str, float]:
    """Triton's dump against the framework's: the CSV is written and the table shown before a missed bound fails
    the step."""
    from .metrics.calculate import (ThresholdsFailed, calculate_metrics, check_thresholds, format_table,
                                    parse_thresholds, write_metrics_csv)

    bounds = parse_thresholds(list(thresholds))
    metrics = calculate_metrics(dump_dir, reference_dir)
    write_metrics_csv(metrics, csv_path)
    print(format_table(metrics, bounds))
    failures = check_thresholds(metrics, bounds)
    if failures:
        raise ThresholdsFailed(failures, metrics)
    return metrics


def shown_sweep(kind: str, outcome):
    """A sweep's full table on the console, as its command prints it."""
    from .report.tables import full_table

    print(f"\nFull tabular data ({kind}, {outcome.csv_path}):\n\n{full_table(kind, outcome.rows)}", flush=True)
    return outcome


@dataclass
class _Demo:
    """One demo run: its settings, where it writes (results, the model's artifacts, its config) and its steps."""

    settings: DemoSettings
    result_dir: Path
    workspace: Path
    repository: Path
    steps: StepRunner

    @property
    def art(self) -> Path:
        return self.workspace / self.settings.model

    @property
    def onnx_dir(self) -> Path:
        return self.art / "onnx"

    @property
    def manifest_json(self) -> Path:
        return self.art / "onnx" / "manifest.json"


def run_demo(settings: DemoSettings, result_dir: Path, workspace: Path, repository: Path) -> Path:
    """Every step of the demo in turn, into `result_dir` (the model's artifacts in `workspace`, its config in
    `repository`); StepFailed names the step that failed."""
    from .server.local import LocalTritonServer, ServerConfig
    from .server.startup import DEFAULT_START_TIMEOUT_S

    demo = _Demo(settings, result_dir, workspace, repository, StepRunner())
    t0 = time.perf_counter()
    _convert_and_configure(demo)
    config = ServerConfig(repository, log_dir=workspace / "logs",
                          start_timeout_s=settings.server_timeout_s or DEFAULT_START_TIMEOUT_S)

    with contextlib.ExitStack() as stack:  # the server, once started, stops when the steps end or one fails
        def start() -> LocalTritonServer:
            started = stack.enter_context(LocalTritonServer(config))
            started.require_models([settings.model])
            return started

        server = demo.steps.call("start the embedded tritonserver (health check)", start,
                                 shown(["python", "-m", "deployment_toolkit", "serve", "--model-repository",
                                        str(repository)]))
        print(f"ready: gRPC {server.grpc_url}, HTTP {server.http_url}, log {server.log_path}", flush=True)
        _accuracy_steps(demo, server)
        _perf_steps(demo, server)
    _finish(demo, time.perf_counter() - t0)
    return result_dir


def _convert_and_configure(demo: _Demo) -> None:
    """The model converted to TorchScript and ONNX, and the ONNX one written into the repository (Python backend)."""
    from .api import ConvertOptions, convert
    from .repository import ConfigOptions, write_model

    model, preset, max_batch = demo.settings.model, demo.settings.preset, demo.settings.max_batch_size
    repository, onnx_dir = demo.repository, demo.onnx_dir
    for fmt in ("ts-trace", "onnx"):
        out = demo.art / fmt
        demo.steps.call(f"convert to {fmt}", lambda fmt=fmt, out=out: convert(
            model, fmt, out, ConvertOptions(preset=preset, max_batch_size=max_batch)),
            script("convert_model.py", "--model", model, "--preset", preset, "--output-type", fmt,
                   "--output-path", str(out), "--max-batch-size", str(max_batch)))
    demo.steps.call("configure on Triton (Python backend runs ONNX Runtime)", lambda: write_model(
        repository, onnx_dir, ConfigOptions(model_name=model, runtime="python", max_batch_size=max_batch,
                                            preferred_batch_sizes=(max_batch,), max_queue_delay_us=1000,
                                            instances=1)),
        script("config_model_on_triton.py", "--model-repository", str(repository), "--model-path", str(onnx_dir),
               "--model-format", "python", "--model-name", model, "--max-batch-size", str(max_batch),
               "--preferred-batch-sizes", str(max_batch), "--max-queue-delay-us", "1000",
               "--number-of-model-instances", "1"))


def _accuracy_steps(demo: _Demo, server) -> None:
    """Inference through Triton (system shared memory) and in the framework on the same samples, compared."""
    from .inference import DataSpec, FrameworkDumpSettings, TritonDumpSettings, framework_dump, triton_dump

    model, max_batch, art = demo.settings.model, demo.settings.max_batch_size, demo.art
    manifest_json, onnx_dir, result_dir = demo.manifest_json, demo.onnx_dir, demo.result_dir
    data = DataSpec("synthetic", num_samples=SAMPLES)
    common = ["--num-samples", str(SAMPLES), "--batch-size", str(max_batch), "--data-dir", "synthetic"]
    demo.steps.call("inference through Triton (system shared memory)", lambda: triton_dump(
        server.grpc_url, model, art / "dump_triton", data,
        TritonDumpSettings(manifest=manifest_json, batch_size=max_batch, shared_memory="system")),
        script("run_inference_on_triton.py", "--server-url", server.grpc_url, "--model-name", model,
               "--manifest", str(manifest_json), "--shared-memory", "system", "--output-dir",
               str(art / "dump_triton"), *common))
    demo.steps.call("inference in the framework (PyTorch eager)", lambda: framework_dump(
        onnx_dir, art / "dump_fw", data, FrameworkDumpSettings(runtime="framework", batch_size=max_batch)),
        script("run_inference_on_fw.py", "--model-path", str(onnx_dir), "--runtime", "framework",
               "--output-dir", str(art / "dump_fw"), *common))
    result_dir.mkdir(parents=True, exist_ok=True)
    csv_path = result_dir / "accuracy_metrics.csv"
    demo.steps.call("accuracy: Triton vs framework", lambda: accuracy(
        art / "dump_triton", art / "dump_fw", csv_path, THRESHOLDS),
        script("calculate_metrics.py", "--dump-dir", str(art / "dump_triton"), "--reference-dir",
               str(art / "dump_fw"), "--csv", str(csv_path),
               *[a for t in THRESHOLDS for a in ("--threshold", t)]))


def _perf_steps(demo: _Demo, server) -> None:
    """The offline (client batch) and online (concurrency) sweeps on the served model."""
    from .perf.analyzer import PerfOptions
    from .perf.offline import run_offline
    from .perf.online import run_online
    from .spec import Manifest

    d, model, manifest_json, result_dir = demo.settings, demo.settings.model, demo.manifest_json, demo.result_dir
    options = PerfOptions(protocol="grpc", shared_memory="system", measurement_interval_ms=d.measurement_interval_ms,
                          max_attempts=d.max_attempts, max_trials=6)
    sweep = dict(manifest_path=manifest_json, number_of_model_instances=1, server=server,
                 metrics_url=server.metrics_url)
    perf = ["--server-url", server.grpc_url, "--model-name", model, "--manifest", str(manifest_json),
            "--result-path", str(result_dir), "--shared-memory", "system", "--metrics-url", server.metrics_url,
            "--measurement-interval", str(d.measurement_interval_ms), "--number-of-model-instances", "1",
            "--max-attempts", str(d.max_attempts), "--max-trials", "6"]
    manifest = Manifest.load(demo.onnx_dir)
    demo.steps.call("offline performance (static batching, client batch sweep)", lambda: shown_sweep(
        "offline", run_offline(model, server.grpc_url, manifest, d.batch_sizes, options, result_dir, **sweep)),
        script("run_offline_performance_test_on_triton.py", *perf, "--batch-sizes", d.batch_sizes))
    demo.steps.call("online performance (dynamic batching, concurrency sweep)", lambda: shown_sweep(
        "online", run_online(model, server.grpc_url, manifest, d.concurrency, options, result_dir, **sweep)),
        script("run_online_performance_test_on_triton.py", *perf, "--concurrency", d.concurrency))


def _finish(demo: _Demo, total_s: float) -> None:
    """demo_timings.md, and where each result is (a missing one said), with the online table shown."""
    result_dir = demo.result_dir
    write_timings(result_dir / "demo_timings.md", total_s, demo.steps)
    print(f"\nDemo finished in {total_s / 60:.1f} min. Results in {result_dir}:")
    for name in ("accuracy_metrics.csv", "offline.csv", "online.csv", "report.md", "report.html", "run.json",
                 "demo_timings.md"):
        path = result_dir / name
        print(f"  {path}{'' if path.exists() else '  (missing!)'}")
    online_md = result_dir / "online.md"
    if online_md.exists():
        print("\n" + online_md.read_text())


# `--fast` (CI): the same steps on a small model with fewer, shorter points; every point it reports is measured.
FAST = dict(model="resnet18", preset="small", concurrency="1:2:1", batch_sizes="1,2", measurement_interval_ms=500,
            max_attempts=1)
LOCAL_RUNS = "local"  # results/local/ is git-ignored: where `make demo` writes a new run folder each time


def default_run_dir(results: Path, model: str) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return results / LOCAL_RUNS / f"demo-{model}-onnx-{stamp}"


def claim_new_run_dir(base: Path) -> Path:
    """`base`, or `base-2`, `base-3`, ... : the first that this process creates itself (mkdir is atomic), so two
    demos started in the same second never share a run folder."""
    base.parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        candidate = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise RunFolderTaken(f"{base} and 998 numbered folders beside it exist: clean up {base.parent}")


class Workplace:
    """The workspace and model repository a demo writes, held for the whole run (an flock on the workspace): a
    second demo in the same clone gets its own pair under the workspace instead of overwriting the first's
    artifacts and config while it measures them."""

    def __init__(self, workspace: Path, repository: Path, run_name: str):
        workspace.mkdir(parents=True, exist_ok=True)
        self._fh = open(workspace / ".demo.lock", "a")
        try:
            fcntl.flock(self._fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.workspace, self.repository, self.shared = workspace, repository, False
        except BlockingIOError:  # another demo holds it: a pair of our own
            self.workspace = workspace / run_name
            self.repository = self.workspace / "model_repository"
            self.shared = True

    def release(self) -> None:
        self._fh.close()  # closing drops the lock


def check_new_run_dir(result_dir: Path) -> None:
    """The demo measures where it runs: it never adds to, or writes over, a run folder that already exists
    (such as an example committed from another machine)."""
    if result_dir.exists() and any(result_dir.iterdir()):
        raise RunFolderTaken(f"{result_dir} already holds a run: the demo writes a new folder each time. Leave out "
                         "--result-path to get a fresh one under results/local/, or name a folder that does not exist")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  deployment-toolkit demo                 # resnet50 into results/local/demo-...\n"
               "  deployment-toolkit demo --fast          # resnet18 small, 2+2 points (CI)\n"
               "  deployment-toolkit demo --result-path results/demo-resnet50-onnx-cpu   # the committed example")
    add_arguments(p, DemoSettings, only=("model", "preset"))
    add_result_path_argument(p, "--output", dest="output",
                             help="run folder to create (must not exist or be empty; default: "
                                  "results/local/demo-<model>-onnx-<UTC time>, git-ignored)")
    p.add_argument("--fast", action="store_true",
                   help=f"CI mode: {FAST['model']} {FAST['preset']}, batch sizes {FAST['batch_sizes']}, "
                        f"concurrency {FAST['concurrency']}, {FAST['measurement_interval_ms']} ms windows, one attempt")
    p.add_argument("--workspace", default=str(ROOT / "workspace"))
    p.add_argument("--model-repository", default=str(ROOT / "model_repository"))
    p.add_argument("--results", default=str(ROOT / "results"))
    add_arguments(p, DemoSettings, skip=("model", "preset"))
    from .server.startup import add_server_timeout

    add_server_timeout(p)
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
    try:
        settings = from_args(DemoSettings, args, server_timeout_s=args.server_timeout)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    place = None
    try:
        if args.output:
            result_dir = Path(args.output)
            check_new_run_dir(result_dir)
        else:
            result_dir = claim_new_run_dir(default_run_dir(Path(args.results), args.model))
        place = Workplace(Path(args.workspace), Path(args.model_repository), result_dir.name)
        if place.shared:
            print(f"another demo is using {args.workspace}: this one works in {place.workspace}", flush=True)
        run_demo(settings, result_dir, place.workspace, place.repository)
    except RunFolderTaken as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except StepFailed as err:
        print(f"\nerror: {err}", file=sys.stderr)
        return 1
    finally:
        if place is not None:
            place.release()
    return 0


if __name__ == "__main__":  # `make demo`: through cli.run, as every command (the library's log lines, SIGTERM)
    from .cli import run

    run(main)
