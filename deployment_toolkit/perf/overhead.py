"""Serving overhead: in-process ONNX Runtime vs the same ONNX file served by the embedded Triton server.

Why: "how much of the runtime's own speed survives serving" is the number that says whether the Python
backend runtime is good enough, or where it loses time. One run does both sides on the same machine, so
the ratio stays meaningful on a shared host: per batch size the in-process session is timed, then every
serving variant (instances x intra-op threads) gets an online sweep (concurrency 1..N through perf_analyzer)
on a fresh server, each followed by another in-process timing. The reference is the best in-process timing and
the served number the best online point of the better variant (max against max), so background load can
only make serving look worse, never better. Triton's own statistics (executed batch sizes, time per
execution) are read around every point to show where the time goes. The single client (concurrency 1) is
measured once more in pairs next to in-process timings (perf/single_client.py).

Over 400 lines on purpose: one benchmark whose two sides (in-process timing, served sweeps with Triton's
statistics around each point) must alternate in one loop to keep the ratio fair on a shared host.
"""
from __future__ import annotations

import math
import statistics
import os
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import UserInputError
from ..results.bench_store import as_float as _f
from ..results.schema import BREAKDOWN_COLUMNS, THROUGHPUT
from .analyzer import PerfOptions

from .overhead_report import DESIGN_BAR, to_csv, to_markdown, write_results  # noqa: F401  (re-exported)
from .single_client import PairedRound, measure_pairs, paired_summary, served_point_fn


@dataclass(frozen=True)
class Variant:
    """A serving configuration: model instances x ONNX Runtime intra-op threads per instance (0: ORT's default)."""

    instances: int
    threads: int = 0

    @classmethod
    def parse(cls, text: str) -> "Variant":
        """`1x0` (one instance, default threads) or `2x1` (two instances, one thread each)."""
        try:
            a, b = text.lower().split("x")
            variant = cls(int(a), int(b))
        except ValueError:
            raise UserInputError(f"{text!r}: expected INSTANCESxTHREADS, e.g. 1x0 or 2x1 (0 threads = default)") from None
        if variant.instances < 1 or variant.threads < 0:
            raise UserInputError(f"{text!r}: instances must be >= 1 and threads >= 0")
        return variant

    @property
    def label(self) -> str:
        return f"{self.instances} instance{'s' if self.instances > 1 else ''} x " + (
            f"{self.threads} intra-op thread{'s' if self.threads > 1 else ''}" if self.threads else "default threads")

    def model_name(self, model: str) -> str:
        from ..sources import short_name

        return f"{short_name(model)}_i{self.instances}_t{self.threads}"


@dataclass
class OverheadOptions:
    model: str = "resnet50"
    preset: str = "full"
    batch_sizes: tuple[int, ...] = (1, 8)
    concurrencies: tuple[int, ...] = (1, 2, 3, 4)
    variants: tuple[Variant, ...] = (Variant(1, 0), Variant(2, 1))
    inprocess_warmup: int = 3
    inprocess_seconds: float = 10.0
    single_client_rounds: int = 3  # paired in-process / served-at-concurrency-1 rounds per batch (0: none)
    max_queue_delay_us: int = 0
    bar: float = 0.8  # the acceptance bar for served / in-process
    perf: PerfOptions = field(default_factory=lambda: PerfOptions(protocol="grpc", shared_memory="system"))
    workspace: Path = Path("workspace/overhead")
    server_start_timeout_s: float = 300.0
    seed: int = 0


# ---------------------------------------------------------------------------------------------- arithmetic

def best_point(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The online point with the highest throughput (stable points first: an unstable one wins only alone)."""
    usable = [r for r in rows if not math.isnan(_f(r.get(THROUGHPUT)))]
    stable = [r for r in usable if r.get("stable", True)]
    pool = stable or usable
    return max(pool, key=lambda r: _f(r[THROUGHPUT])) if pool else None


def stats_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Triton statistics between two snapshots: requests, executions, samples, time per stage, executed batches.

    Triton's `inference_stats` accumulate per request (a dynamic batch of 3 requests adds its compute time 3
    times), so stage times are divided by the request count; the time per execution comes from
    `batch_stats`, which count each execution once, per executed batch size."""

    def stage(stats: dict, name: str, key: str = "ns") -> int:
        return int(stats.get("inference_stats", {}).get(name, {}).get(key, 0) or 0)

    def batches(stats: dict) -> dict[int, tuple[int, int]]:
        return {int(b["batch_size"]): (int(b.get("compute_infer", {}).get("count", 0) or 0),
                                       int(b.get("compute_infer", {}).get("ns", 0) or 0))
                for b in stats.get("batch_stats", []) or []}

    execs = int(after.get("execution_count", 0) or 0) - int(before.get("execution_count", 0) or 0)
    samples = int(after.get("inference_count", 0) or 0) - int(before.get("inference_count", 0) or 0)
    requests = stage(after, "success", "count") - stage(before, "success", "count")
    b0, b1 = batches(before), batches(after)
    hist: dict[int, tuple[int, float]] = {}
    for size, (count, total) in sorted(b1.items()):
        c0, t0 = b0.get(size, (0, 0))
        if count - c0 > 0:
            hist[size] = (count - c0, float(total - t0))
    exec_count = sum(c for c, _ in hist.values())
    out = {"requests": requests, "executions": execs, "inferences": samples,
           "avg_exec_batch": samples / execs if execs else math.nan,
           "exec_batch_hist": ";".join(f"{s}:{c}" for s, (c, _) in hist.items()),
           "infer_ms_by_exec_batch": ";".join(f"{s}:{ns / c / 1e6:.2f}" for s, (c, ns) in hist.items()),
           "infer_ms_per_exec": sum(ns for _, ns in hist.values()) / exec_count / 1e6 if exec_count else math.nan}
    for name in ("queue", "compute_input", "compute_infer", "compute_output"):
        out[f"{name}_ms_per_request"] = (stage(after, name) - stage(before, name)) / requests / 1e6 \
            if requests else math.nan
    return out


def infer_inflation(infer_ms_per_exec: float, avg_exec_batch: float, inprocess_throughput: float) -> float:
    """Server Compute Infer per execution / the in-process time for that many samples (linear in batch).

    1.0: the backend's ONNX Runtime runs as fast as in-process; above 1: it is slowed down (threads fighting
    the server, perf_analyzer or another instance for the cores)."""
    if not inprocess_throughput or math.isnan(avg_exec_batch) or math.isnan(infer_ms_per_exec):
        return math.nan
    return infer_ms_per_exec / (avg_exec_batch / inprocess_throughput * 1e3)


def single_client(point: dict[str, Any], batch: int, best: float, median: float) -> dict[str, Any]:
    """The concurrency-1 point against in-process, where serving costs most (nothing overlaps the per-request
    work): its throughput over the best and the median in-process timing, the time per request outside the
    runtime's inference (client, network, queue, input and output staging) and the inference against the
    in-process time per request (the median timing's)."""
    c1 = _f(point.get(THROUGHPUT))
    infer = _f(point.get("Server Compute Infer"))
    outside = sum(_f(point.get(c)) for c in BREAKDOWN_COLUMNS if c != "Server Compute Infer")
    inprocess_ms = batch * 1000.0 / median if median else math.nan
    return {"inprocess_median": median, "c1_throughput": c1,
            "c1_ratio": c1 / best if best and not math.isnan(c1) else math.nan,
            "c1_ratio_median": c1 / median if median and not math.isnan(c1) else math.nan,
            "c1_latency_ms": _f(point.get("Avg Latency")), "c1_outside_ms": outside, "c1_infer_ms": infer,
            "inprocess_ms_per_request": inprocess_ms,
            "c1_infer_inflation": infer / inprocess_ms if inprocess_ms and not math.isnan(infer) else math.nan}


# ---------------------------------------------------------------------------------------------- measuring

def time_inprocess(session: Callable[[dict], Any], inputs: dict, warmup: int, seconds: float) -> dict[str, float]:
    """Back-to-back calls for `seconds` after `warmup` calls; the framework bench's statistics."""
    from ..export.speed import time_interleaved
    from .framework import latency_stats

    batch = len(next(iter(inputs.values())))
    timing = time_interleaved({"ort": lambda: session(inputs)}, warmup=warmup, iterations=sys.maxsize,
                              min_iterations=3, max_seconds=seconds)["ort"]
    return {**latency_stats(timing.seconds, batch), "background_cpu": timing.background_cpu}


def _loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return [math.nan] * 3


@dataclass
class OverheadResult:
    result_dir: Path
    rows: list[dict[str, Any]]  # one per (batch size, variant)
    points: list[dict[str, Any]]  # every online point, with Triton's statistics
    paths: dict[str, Path]
    pairs: list[dict[str, Any]] = field(default_factory=list)  # the single client's paired rounds


def prepare_repository(opts: OverheadOptions, log: Callable[[str], None]) -> tuple[Path, Path, Any]:
    """ONNX artifact (reused when the workspace already holds this model/preset) and one repository entry
    per variant. Returns (onnx dir, repository, manifest)."""
    from ..export import ConvertOptions, convert
    from ..repository.config import ConfigOptions
    from ..export.reuse import reusable_artifact
    from ..repository.layout import write_model

    ws = Path(opts.workspace)
    from ..sources import resolve

    resolved = resolve(opts.model, preset=opts.preset)  # any model source; an artifact folder brings its record
    onnx_dir = ws / f"{resolved.slug}-{opts.preset}-onnx"
    max_batch = max(resolved.max_batch_size, max(opts.batch_sizes))
    reuse = reusable_artifact(onnx_dir, resolved, "onnx", opts.preset, min_max_batch_size=max_batch,
                              require_verified=False)
    manifest = reuse.manifest
    if manifest is not None:
        log(reuse.reason)
    else:
        log(f"converting {opts.model} ({opts.preset}) to ONNX in {onnx_dir} ...")
        manifest = convert(resolved, "onnx", onnx_dir, ConvertOptions(preset=opts.preset, max_batch_size=max_batch,
                                                                           verify=False, seed=opts.seed))
    repo = ws / "model_repository"
    if repo.exists():
        shutil.rmtree(repo)
    for v in opts.variants:
        write_model(repo, onnx_dir, ConfigOptions(model_name=v.model_name(opts.model), instances=v.instances,
                                                  intra_op_threads=v.threads, max_queue_delay_us=opts.max_queue_delay_us,
                                                  instance_kind="cpu", host_has_gpu=False))
    return onnx_dir, repo, manifest


def run_overhead(opts: OverheadOptions, result_dir: str | Path, log: Callable[[str], None] | None = None,
                 run_config: dict[str, Any] | None = None) -> OverheadResult:
    from ..runtimes.artifact import OnnxRuntime

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    result_dir = Path(result_dir)
    result_dir.mkdir(parents=True, exist_ok=True)
    load_before = _loadavg()
    onnx_dir, repo, manifest = prepare_repository(opts, log)
    session = OnnxRuntime(str(onnx_dir / manifest.artifact))  # ORT defaults, as the 1x0 variant
    ort_threads = session.session.get_session_options().intra_op_num_threads
    rows: list[dict[str, Any]] = []
    points: list[dict[str, Any]] = []
    pair_rows: list[dict[str, Any]] = []  # the single client's paired rounds (single_client.csv)
    server_info: dict[str, Any] = {"version": None, "logs": [], "restarts": []}
    for batch in opts.batch_sizes:
        inputs = manifest.signature.examples(batch, seed=opts.seed)
        log(f"batch {batch}: in-process ONNX Runtime ({opts.inprocess_seconds:g} s) ...")
        timings = [time_inprocess(session, inputs, opts.inprocess_warmup, opts.inprocess_seconds)]
        served: dict[Variant, list[dict[str, Any]]] = {}
        for variant in opts.variants:
            served[variant] = _sweep(repo, variant, batch, opts, manifest, result_dir, log, server_info, onnx_dir)
            points += served[variant]
            log(f"batch {batch}: in-process ONNX Runtime again ...")
            timings.append(time_inprocess(session, inputs, 1, opts.inprocess_seconds))
        batch_rows = _rows_for_batch(batch, timings, served, opts, ort_threads)
        if opts.single_client_rounds > 0:
            twin = _inprocess_twin(opts.variants)
            pairs = _single_client(repo, twin, batch, opts, manifest, result_dir, log,
                                   lambda: time_inprocess(session, inputs, 1, opts.inprocess_seconds)["throughput"])
            for row in batch_rows:
                if row["variant"] == f"{twin.instances}x{twin.threads}":
                    row.update(paired_summary(pairs))
            pair_rows += [{"variant": f"{twin.instances}x{twin.threads}", "paired_round": p.round,
                           "batch_size": batch, "inprocess_before": p.inprocess_before, "served_c1": p.served,
                           "inprocess_after": p.inprocess_after, "ratio": p.ratio, "stable": p.stable} for p in pairs]
        rows += batch_rows
        best = max((r for r in rows if r["batch_size"] == batch), key=lambda r: _f(r["served_throughput"]))
        log(f"batch {batch}: in-process {best['inprocess_throughput']:.2f}/s, served best "
            f"{best['served_throughput']:.2f}/s ({best['variant']}, concurrency {best['best_concurrency']}) "
            f"-> ratio {best['ratio']:.3f}")
    config = {**(run_config or {}), "options": _jsonable(asdict(opts)), "onnx_dir": str(onnx_dir),
              "repository": str(repo), "manifest": manifest.to_dict(), "inprocess_ort_threads": ort_threads or "default",
              "load_average_before": load_before, "load_average_after": _loadavg(),
              "server_logs": server_info["logs"], "server_restarts": server_info["restarts"],
              "statistic": "reference = max of the in-process timings before and after each sweep; served = best "
              "online point (stable points preferred) of each variant; a fresh server per sweep, only that variant "
              "loaded; single client = median over paired rounds of served at concurrency 1 / the mean of the "
              "in-process timings just before and after it (perf/single_client.py)"}
    paths = write_results(result_dir, rows, points, opts, config, server_info["version"], pair_rows)
    return OverheadResult(result_dir, rows, points, paths, pair_rows)


def _inprocess_twin(variants: Sequence[Variant]) -> Variant:
    """The variant that runs the model as the in-process session does (one instance, ORT's default threads), else
    the first one."""
    return next((v for v in variants if v.instances == 1 and v.threads == 0), variants[0])


def _single_client(repo: Path, variant: Variant, batch: int, opts: OverheadOptions, manifest, result_dir: Path,
                   log: Callable[[str], None], inprocess: Callable[[], float]) -> list[PairedRound]:
    """perf.single_client's paired rounds on a fresh server that loads only `variant`."""
    from ..server.local import LocalTritonServer, ServerConfig

    name = variant.model_name(opts.model)
    log(f"batch {batch}: single client, {opts.single_client_rounds} rounds of in-process then served at "
        f"concurrency 1 ({variant.label}) ...")
    log_dir = Path(opts.workspace) / "logs" / f"{name}_b{batch}" / "single_client"
    with LocalTritonServer(ServerConfig(repo, model_control_mode="explicit", load_models=(name,), log_dir=log_dir,
                                        start_timeout_s=opts.server_start_timeout_s)) as server:
        server.require_models([name])
        url = server.grpc_url if opts.perf.protocol == "grpc" else server.http_url
        point = served_point_fn(name, url, batch, manifest, opts.perf, result_dir / "single_client")
        return measure_pairs(inprocess, point, opts.single_client_rounds, batch, log)


MAX_SERVER_STARTS = 3  # per sweep: a server that dies mid-sweep is restarted and the sweep resumed


def _sweep(repo: Path, variant: Variant, batch: int, opts: OverheadOptions, manifest, result_dir: Path,
           log: Callable[[str], None], server_info: dict[str, Any], onnx_dir: Path) -> list[dict[str, Any]]:
    """One online sweep of a variant on a fresh server that loads only that variant (no idle neighbours,
    nothing left over from the previous sweep). If the server dies, it is restarted and the sweep resumes
    from its completed points (run_sweep's store); each point gets Triton's statistics delta."""
    from ..client import TritonClient
    from ..server.local import LocalTritonServer, ServerConfig
    from .online import run_online
    from .sweep import ServerDiedError

    name = variant.model_name(opts.model)
    sweep_dir = result_dir / "sweeps" / f"{name}_b{batch}"
    log(f"batch {batch}: {variant.label}: online sweep, concurrency {','.join(map(str, opts.concurrencies))} ...")
    extra: dict[int, dict[str, Any]] = {}
    restarts = 0
    for start in range(1, MAX_SERVER_STARTS + 1):
        log_dir = Path(opts.workspace) / "logs" / f"{name}_b{batch}" / f"start{start}"
        server = LocalTritonServer(ServerConfig(repo, model_control_mode="explicit", load_models=(name,),
                                                log_dir=log_dir, start_timeout_s=opts.server_start_timeout_s))
        with server:
            server.require_models([name])
            stats_client = TritonClient(server.http_url, "http")
            server_info["version"] = server_info["version"] or stats_client.server_version()
            server_info["logs"].append(str(server.log_path))
            snap = {"stats": stats_client.statistics(name)}

            def on_point(point, _result, client=stats_client, snap=snap) -> None:
                now = client.statistics(name)
                extra[point.concurrency] = {**stats_delta(snap["stats"], now), "loadavg_1m": _loadavg()[0],
                                            "server_restarts_before": restarts}
                snap["stats"] = now

            try:
                # side by side in one run: an earlier run's sweep is set aside (kept under superseded/), never
                # resumed; after a restart within this run, the sweep resumes from its own completed points
                outcome = run_online(name, None, manifest, list(opts.concurrencies), opts.perf, sweep_dir,
                                     server=server, batch_size=batch, progress=False, build_report=False,
                                     on_point_done=on_point, manifest_path=onnx_dir,
                                     reuse="fresh" if start == 1 else "auto")
                break
            except ServerDiedError as err:
                restarts += 1
                first = str(err).splitlines()[0]
                server_info["restarts"].append({"model": name, "batch": batch, "error": first,
                                                "log": str(server.log_path)})
                if start == MAX_SERVER_STARTS:
                    raise
                log(f"  {first}\n  restarting the server and resuming the sweep ({start} of "
                    f"{MAX_SERVER_STARTS - 1} restarts)")
    out = []
    for row in outcome.rows:
        c = int(row["Concurrent client requests"])
        out.append({"variant": f"{variant.instances}x{variant.threads}", "model_name": name, **row, **extra.get(c, {})})
    return out


def _rows_for_batch(batch: int, timings: list[dict], served: dict, opts: OverheadOptions,
                    ort_threads: int) -> list[dict[str, Any]]:
    """One row per variant; the in-process reference is the best of the timings taken before, between and
    after the sweeps."""
    ref = max(t["throughput"] for t in timings)
    median = statistics.median(t["throughput"] for t in timings)
    out = []
    for variant, points in served.items():
        best = best_point(points) or {}
        tp = _f(best.get(THROUGHPUT))
        one = next((p for p in points if int(p.get("Concurrent client requests") or 0) == 1), {})
        row = {
            "model": opts.model, "preset": opts.preset, "batch_size": batch,
            "variant": f"{variant.instances}x{variant.threads}", "instances": variant.instances,
            "intra_op_threads": variant.threads or "default",
            "inprocess_throughput": ref, "inprocess_timings": ";".join(f"{t['throughput']:.2f}" for t in timings),
            "inprocess_p50_ms": min(t["p50_ms"] for t in timings),
            "inprocess_ort_threads": ort_threads or "default",
            "inprocess_background_cpu": max(t["background_cpu"] for t in timings),
            "served_throughput": tp, "ratio": tp / ref if ref and not math.isnan(tp) else math.nan,
            "best_concurrency": best.get("Concurrent client requests"), "best_stable": best.get("stable"),
            "served_by_concurrency": ";".join(f"{p['Concurrent client requests']}:{_f(p.get(THROUGHPUT)):.2f}"
                                              for p in points),
            "p50_ms": _f(best.get("P50 Latency")), "p99_ms": _f(best.get("P99 Latency")),
            "avg_latency_ms": _f(best.get("Avg Latency")),
            **{_snake(c) + "_ms": _f(best.get(c)) for c in BREAKDOWN_COLUMNS},
            "avg_exec_batch": _f(best.get("avg_exec_batch")), "exec_batch_hist": best.get("exec_batch_hist", ""),
            "infer_ms_per_exec": _f(best.get("infer_ms_per_exec")),
            "infer_inflation": infer_inflation(_f(best.get("infer_ms_per_exec")),
                                               _f(best.get("avg_exec_batch")), ref),
            "loadavg_1m": best.get("loadavg_1m", math.nan),
            "server_restarts": max((int(p.get("server_restarts_before", 0) or 0) for p in points), default=0),
            **single_client(one, batch, ref, median),
        }
        out.append(row)
    top = max(out, key=lambda r: _f(r["served_throughput"]) if not math.isnan(_f(r["served_throughput"])) else -1)
    for r in out:
        r["reported"] = r is top
    return out


def _snake(column: str) -> str:
    return column.lower().replace("+", "_").replace("/", "_").replace(" ", "_")


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


# ---------------------------------------------------------------------------------------------- private /dev/shm

PRIVATE_SHM_ENV = "DTK_PRIVATE_SHM"


def private_shm_reason() -> str | None:
    """None when this process can run under a private /dev/shm (root + unshare), else why not."""
    if os.environ.get(PRIVATE_SHM_ENV) == "1":
        return "already inside a private /dev/shm"
    if not sys.platform.startswith("linux"):
        return "Linux only"
    if os.geteuid() != 0:
        return "needs root (a mount namespace and a tmpfs mount)"
    if shutil.which("unshare") is None:
        return "no `unshare` binary (util-linux)"
    return None


def private_shm_command(argv: Sequence[str]) -> list[str]:
    """Re-run `argv` in a new mount namespace with its own empty tmpfs on /dev/shm.

    Why: perf_analyzer names its system shared-memory regions after the tensors (/dev/shm/input__0_0_0,
    /dev/shm/output__0) and offers no prefix, so two perf_analyzer runs on one host against models with
    the same tensor names share the files: a batch-1 run truncating the region a batch-8 server still maps
    kills that server with SIGBUS (seen here). The server, its Python stubs and perf_analyzer are all
    children of this process, so a private /dev/shm isolates every region they share.
    """
    script = 'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", *argv]


__all__ = ["private_shm_command", "private_shm_reason", "PRIVATE_SHM_ENV", "Variant", "OverheadOptions", "OverheadResult", "run_overhead", "best_point", "stats_delta",
           "infer_inflation", "time_inprocess", "to_markdown", "to_csv", "DESIGN_BAR"]
