"""PyTorch eager vs ONNX Runtime throughput for a registered model, side by side in one process.

Why: the serving stack on CPU hosts runs ONNX Runtime inside Triton's Python backend, so "how much does
converting buy over eager PyTorch" is the first number a user asks for. Both runtimes get the same inputs
and the timed calls are interleaved (eager, ORT, eager, ORT, ...), so background load on a shared machine
hits both alike and the ratio stays meaningful even when the absolute numbers drift.
"""
from __future__ import annotations

import logging
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from deployment_toolkit.config import setting
from deployment_toolkit.export.convert import ConvertOptions
from deployment_toolkit.errors import UserInputError
from deployment_toolkit.results.rows import RowSchema, to_csv as rows_to_csv
from deployment_toolkit.results.run_folder import RunFolder
from deployment_toolkit.runtimes.timing import Budget, Timing, machine_busy_seconds, time_calls, usable_cores
from deployment_toolkit.spec import Manifest, atomic_write_text
from deployment_toolkit.tables import markdown_table

_log = logging.getLogger(__name__)

EAGER, ORT = "pytorch-eager", "onnxruntime"
CSV_NAME = "runtime_speed.csv"


@dataclass
class SpeedRow:
    model: str
    preset: str
    batch_size: int
    runtime: str  # pytorch-eager | onnxruntime
    threads: str  # what the runtime uses ("default (N)" when left to the runtime)
    warmup: int
    iterations: int
    median_s: float  # per call (one batch)
    min_s: float
    max_s: float
    throughput: float  # batch_size / median_s
    unit: str  # images/s, volumes/s, samples/s
    ratio_vs_eager: float  # throughput / eager throughput at the same batch size
    max_abs_err_vs_eager: float  # sanity: both runtimes computed the same thing
    # share of the machine's CPU that OTHER processes used during this runtime's timed calls (0..1; -1 when
    # /proc/stat is unavailable): on a shared host, a number measured beside someone else's job is flagged
    background_cpu: float = -1.0


COLUMNS = [f.name for f in fields(SpeedRow)]
# runtime_speed.csv through the one row writer: every float with 6 significant digits, as before
CSV_SCHEMA = RowSchema(tuple(COLUMNS), key=("model", "preset", "batch_size", "runtime"),
                       types={f.name: {"int": int, "float": float}.get(str(f.type), str) for f in fields(SpeedRow)})


@dataclass
class SpeedPlan:
    """One model to measure; `batch_sizes` override the run's default when given."""

    model: str
    batch_sizes: tuple[int, ...] = ()

    @classmethod
    def parse(cls, text: str) -> "SpeedPlan":
        """`resnet50` or `nnunet3d:1` or `resnet50:1,8`; also any model source (`timm:resnet50:1,8`,
        `pkg.module:function`): only a last `:` part made of batch sizes is taken as such."""
        prefix, rest = ("timm:", text[len("timm:"):]) if text.startswith("timm:") else ("", text)
        name, _, sizes = rest.partition(":")
        if "." in name and sizes and not sizes[0].isdigit():  # package.module:function[:B1,B2]
            func, _, sizes = sizes.partition(":")
            name = f"{name}:{func}"
        name = prefix + name
        try:
            batches = tuple(int(b) for b in sizes.split(",") if b)
        except ValueError as err:
            raise UserInputError(f"{text!r}: expected MODEL or MODEL:B1,B2 (integer batch sizes)") from err
        if any(b < 1 for b in batches):
            raise UserInputError(f"{text!r}: batch sizes must be >= 1")
        return cls(name, batches)


def throughput_unit(manifest: Manifest) -> str:
    if manifest.task == "denoising":
        return "samples/s"
    spatial = len(manifest.inputs[0].concrete_shape) - 1
    return "volumes/s" if spatial == 3 else "images/s"


BACKGROUND_WARN = 0.10  # warn when other processes took more than this share of the CPU while timing


def time_interleaved(runners: dict[str, Callable[[], object]], warmup: int, iterations: int,
                     min_iterations: int = 3, max_seconds: float | None = None) -> dict[str, Timing]:
    """Per-call seconds for each runner, calls interleaved round by round (runtimes.timing, the one timer). Stops
    after `iterations` rounds, or earlier once `min_iterations` rounds are done and one runner has used
    `max_seconds`; also measures how much CPU other processes took meanwhile."""
    return time_calls(runners, Budget(warmup, iterations, min_iterations, max_seconds))


DEFAULT_BATCH_SIZES = (1,)  # batch sizes a model is timed at unless it names its own (bench-runtimes --batch-sizes)
DEFAULT_SEED = 0  # random weights and batches


@dataclass
class TimingOptions:
    """How each (model, batch) point is timed, and how a shared machine is dealt with."""

    warmup: int = setting(1, flag="--warmup", low=0, help="untimed calls per runtime and batch size")
    iterations: int = setting(10, flag="--iterations", low=1,
                              help="timed calls per runtime and batch size (at most)")
    min_iterations: int = setting(3, flag="--min-iterations", low=1,
                                  help="timed calls at least, whatever --max-seconds says")
    max_seconds: float | None = setting(None, flag="--max-seconds", type=float, low=0, low_open=True, unit="s",
                                        help="stop timing a batch size once a runtime has spent this long (slow "
                                             "models)")
    wait_quiet_s: float = setting(0.0, flag="--wait-quiet", metavar="SECONDS", low=0,
                                  help="shared machines: before each point, wait up to this long for other "
                                       "processes to go quiet")
    retries: int = setting(0, flag="--retries", low=0,
                           help="shared machines: re-time a point during which other processes used > 10%% of the "
                                "CPU (the quietest attempt is kept)")
    background_threshold: float = BACKGROUND_WARN


def wait_until_quiet(max_wait_s: float, threshold: float = BACKGROUND_WARN, window_s: float = 5.0,
                     say: Callable[[str], None] | None = None) -> float | None:
    """Sleep in `window_s` steps until other processes use less than `threshold` of the CPU, or until
    `max_wait_s` has passed. Returns the last measured share (None: no /proc/stat)."""
    cores = usable_cores()
    deadline = time.monotonic() + max_wait_s
    share = None
    while True:
        b0, own0 = machine_busy_seconds(), time.process_time()
        if b0 is None:
            return None
        time.sleep(window_s)
        foreign = (machine_busy_seconds() - b0) - (time.process_time() - own0)
        share = min(1.0, max(0.0, foreign / (window_s * cores)))
        if share < threshold or time.monotonic() >= deadline:
            if share >= threshold and say:
                say(f"  machine still busy ({share:.0%} CPU by other processes) after waiting {max_wait_s:.0f} s; "
                    "timing anyway")
            return share


def time_point(runners: dict[str, Callable[[], object]], opts: TimingOptions,
               log: Callable[[str], None]) -> dict[str, Timing]:
    """time_interleaved with the shared-machine policy: wait for quiet, retry when disturbed."""
    best: dict[str, Timing] | None = None
    for attempt in range(opts.retries + 1):
        if opts.wait_quiet_s > 0:
            wait_until_quiet(opts.wait_quiet_s, opts.background_threshold, say=log)
        times = time_interleaved(runners, opts.warmup, opts.iterations, opts.min_iterations, opts.max_seconds)
        busy = max(t.background_cpu for t in times.values())
        if best is None or busy < max(t.background_cpu for t in best.values()):
            best = times
        if busy <= opts.background_threshold:
            break
        if attempt < opts.retries:
            log(f"  other processes used {busy:.0%} of the CPU meanwhile: timing again "
                f"(attempt {attempt + 2} of {opts.retries + 1})")
    return best


def measure_model(model: str, preset: str = ConvertOptions.preset, batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES,
                  timing: TimingOptions | None = None, *, seed: int = DEFAULT_SEED, onnx_dir: str | Path | None = None,
                  log: Callable[[str], None] | None = None) -> list[SpeedRow]:
    """Measure eager PyTorch and ONNX Runtime (CPU, default threads) on the same random batches.

    The ONNX artifact comes from `onnx_dir` (a convert_model output) or is exported here without
    verification (the outputs of both runtimes are compared on the timed batches instead)."""
    import torch

    from deployment_toolkit.runtimes.artifact import OnnxRuntime
    from deployment_toolkit.sources import resolve
    from deployment_toolkit.export.convert import ConvertOptions, convert
    from deployment_toolkit.sources.outputs import torch_callable

    opts = timing or TimingOptions()
    log = log or _log.info
    resolved = resolve(model, preset=preset)  # any model source; an artifact folder brings its own record
    tmp = None
    try:
        if onnx_dir is None:
            tmp = tempfile.TemporaryDirectory(prefix=f"speed-{resolved.slug}-")
            onnx_dir = Path(tmp.name)
            t0 = time.perf_counter()
            log(f"{model} ({preset}): exporting ONNX ...")
            manifest = convert(resolved, "onnx", onnx_dir, ConvertOptions(preset=preset, verify=False, seed=seed))
            log(f"{model} ({preset}): exported in {time.perf_counter() - t0:.1f} s")
        else:
            manifest = Manifest.load(onnx_dir)
            if manifest.format != "onnx" or manifest.model != resolved.name or manifest.preset != preset:
                raise UserInputError(f"{onnx_dir} holds {manifest.model} ({manifest.preset}) as {manifest.format}; "
                                 f"expected {model} ({preset}) as onnx")
        in_names = [t.name for t in manifest.inputs]
        out_names = [t.name for t in manifest.outputs]
        eager = torch_callable(resolved.build(seed), in_names, out_names, output_paths=resolved.output_paths)
        session = OnnxRuntime(str(Path(onnx_dir) / manifest.artifact))  # threads=0: ORT's default
        ort_threads = session.session.get_session_options().intra_op_num_threads
        threads = {EAGER: str(torch.get_num_threads()),
                   ORT: f"default ({ort_threads})" if ort_threads else "default"}
        unit = throughput_unit(manifest)
        rows: list[SpeedRow] = []
        for batch in batch_sizes:
            if manifest.max_batch_size and batch > manifest.max_batch_size:
                log(f"note: batch {batch} exceeds {model} ({preset})'s max batch size {manifest.max_batch_size} "
                    "as served; measuring it anyway")
            inputs = manifest.signature.examples(batch, seed=seed)
            ref, got = eager(inputs), session(inputs)
            err = max(float(np.max(np.abs(np.asarray(ref[n], np.float64) - np.asarray(got[n], np.float64))))
                      for n in out_names)
            log(f"{model} ({preset}) batch {batch}: timing (warm-up {opts.warmup}, up to {opts.iterations} rounds) ...")
            times = time_point({EAGER: lambda: eager(inputs), ORT: lambda: session(inputs)}, opts, log)
            eager_tp = batch / statistics.median(times[EAGER].seconds)
            for name, t in times.items():
                med = statistics.median(t.seconds)
                rows.append(SpeedRow(
                    model=model, preset=preset, batch_size=batch, runtime=name, threads=threads[name],
                    warmup=opts.warmup, iterations=len(t.seconds), median_s=med, min_s=min(t.seconds),
                    max_s=max(t.seconds), throughput=batch / med, unit=unit, ratio_vs_eager=(batch / med) / eager_tp,
                    max_abs_err_vs_eager=0.0 if name == EAGER else err, background_cpu=t.background_cpu,
                ))
            busy = max(r.background_cpu for r in rows[-2:])
            log(f"  eager {eager_tp:.2f} {unit}, ORT {rows[-1].throughput:.2f} {unit}, "
                f"ORT/eager {rows[-1].ratio_vs_eager:.2f}x (background CPU {_share(busy)})")
            if busy > opts.background_threshold:
                log(f"  warning: other processes used {busy:.0%} of the CPU while this was timed; "
                    "rerun on a quiet machine for numbers to quote")
        return rows
    finally:
        if tmp is not None:
            tmp.cleanup()


# --------------------------------------------------------------------------- output

def _share(value: float) -> str:
    return "n/a" if value < 0 else f"{value:.0%}"


def to_csv(rows: Sequence[SpeedRow]) -> str:
    return rows_to_csv(CSV_SCHEMA, [asdict(r) for r in rows])


def to_markdown(rows: Sequence[SpeedRow]) -> str:
    """One line per (model, batch): eager and ORT throughput and their ratio."""
    out = []
    by_key: dict[tuple, dict[str, SpeedRow]] = {}
    for r in rows:
        by_key.setdefault((r.model, r.preset, r.batch_size), {})[r.runtime] = r
    for (model, preset, batch), pair in by_key.items():
        e, o = pair.get(EAGER), pair.get(ORT)
        if e is None or o is None:
            continue
        out.append([model, preset, batch, f"{e.throughput:.2f}", f"{o.throughput:.2f}", f"{o.ratio_vs_eager:.2f}x",
                    e.unit, e.iterations, _share(max(e.background_cpu, o.background_cpu))])
    headers = ["model", "preset", "batch", "eager", "ONNX Runtime", "ORT / eager", "unit", "timed iterations",
               "background CPU"]
    return markdown_table(headers, out, ["l", "l", "r", "r", "r", "r", "l", "r", "r"]) + "\n"


def write_results(result_dir: str | Path, rows: Sequence[SpeedRow], config: dict) -> dict[str, Path]:
    """runtime_speed.csv, runtime_speed.md and run.json (hardware, versions, command, config)."""
    result_dir = Path(result_dir)
    paths = {"csv": result_dir / CSV_NAME, "md": result_dir / "runtime_speed.md"}
    atomic_write_text(paths["csv"], to_csv(rows))
    atomic_write_text(paths["md"], "# PyTorch eager vs ONNX Runtime (CPU)\n\nThroughput = batch / median "
                      "seconds per call; calls interleaved between the runtimes. Background CPU: share of the machine's CPU "
                      "other processes used while a point was timed (0% = quiet machine).\n\n" + to_markdown(rows))
    folder = RunFolder(result_dir)
    folder.record(config)
    paths["run_json"] = folder.run_json_path
    return paths
