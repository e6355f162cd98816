"""Serving overhead: in-process ONNX Runtime vs the same ONNX file served by the embedded Triton server.

Why: "how much of the runtime's own speed survives serving" is the number that says whether the Python
backend runtime is good enough, or where it loses time. One run does both sides on the same machine, so
the ratio stays meaningful on a shared host: per batch size the in-process session is timed, then every
serving variant (instances x intra-op threads) gets an online sweep (concurrency 1..N through perf_analyzer)
on a fresh server, each followed by another in-process timing. The reference is the best in-process timing and
the served number the best online point of the better variant (max against max), so background load can
only make serving look worse, never better. Triton's own statistics (executed batch sizes, time per
execution) are read around every point to show where the time goes. The single client (concurrency 1) is
measured once more in pairs next to in-process timings (overhead/single_client.py).

The settings are overhead/options.py, the arithmetic overhead/stats.py, the report
overhead/report.py, the private /dev/shm overhead/private_shm.py.
"""
from __future__ import annotations

import logging
import math
import statistics
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from deployment_toolkit.config import Protocol
from deployment_toolkit.results.bench_store import as_float as _f
from deployment_toolkit.results.schema import BREAKDOWN_COLUMNS, THROUGHPUT
from deployment_toolkit.runtimes.timing import Budget, time_call
from .options import OverheadOptions, Variant
from .report import DESIGN_BAR, to_csv, to_markdown, write_results  # noqa: F401  (re-exported)
from .stats import best_point, infer_inflation, single_client, stats_delta
from .private_shm import PRIVATE_SHM_ENV, private_shm_command, private_shm_reason  # noqa: F401  (re-exported)
from .single_client import PairedRound, measure_pairs, paired_summary, served_point_fn

_log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------- measuring

def time_inprocess(session: Callable[[dict], Any], inputs: dict, warmup: int, seconds: float) -> dict[str, float]:
    """Back-to-back calls for `seconds` after `warmup` calls (runtimes.timing); the framework bench's statistics."""
    from ..framework_bench import latency_stats

    batch = len(next(iter(inputs.values())))
    timing = time_call(lambda: session(inputs), Budget.for_seconds(seconds, warmup=warmup, min_iterations=3))
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
    from deployment_toolkit.export import ConvertOptions, convert
    from deployment_toolkit.repository.config import ConfigOptions
    from deployment_toolkit.export.reuse import reusable_artifact
    from deployment_toolkit.repository.layout import write_model

    ws = Path(opts.workspace)
    from deployment_toolkit.sources import resolve

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
    from deployment_toolkit.runtimes.artifact import OnnxRuntime

    log = log or _log.info
    result_dir = Path(result_dir)
    result_dir.mkdir(parents=True, exist_ok=True)
    load_before = _loadavg()
    onnx_dir, repo, manifest = prepare_repository(opts, log)
    session = OnnxRuntime(str(onnx_dir / manifest.artifact))  # ORT defaults, as the 1x0 variant
    ort_threads = session.session.get_session_options().intra_op_num_threads
    rows: list[dict[str, Any]] = []
    points: list[dict[str, Any]] = []
    pair_rows: list[dict[str, Any]] = []  # the single client's paired rounds (single_client.csv)
    run = _Run(opts, repo, manifest, onnx_dir, result_dir, log)
    for batch in opts.batch_sizes:
        inputs = manifest.signature.examples(batch, seed=opts.seed)
        log(f"batch {batch}: in-process ONNX Runtime ({opts.inprocess_seconds:g} s) ...")
        timings = [time_inprocess(session, inputs, opts.inprocess_warmup, opts.inprocess_seconds)]
        served: dict[Variant, list[dict[str, Any]]] = {}
        for variant in opts.variants:
            served[variant] = _sweep(run, variant, batch)
            points += served[variant]
            log(f"batch {batch}: in-process ONNX Runtime again ...")
            timings.append(time_inprocess(session, inputs, 1, opts.inprocess_seconds))
        batch_rows = _rows_for_batch(batch, timings, served, opts, ort_threads)
        if opts.single_client_rounds > 0:
            twin = _inprocess_twin(opts.variants)
            pairs = _single_client(run, twin, batch,
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
              "server_logs": run.server_logs, "server_restarts": run.restarts,
              "statistic": "reference = max of the in-process timings before and after each sweep; served = best "
              "online point (stable points preferred) of each variant; a fresh server per sweep, only that variant "
              "loaded; single client = median over paired rounds of served at concurrency 1 / the mean of the "
              "in-process timings just before and after it (overhead/single_client.py)"}
    paths = write_results(result_dir, rows, points, opts, config, run.server_version, pair_rows)
    return OverheadResult(result_dir, rows, points, paths, pair_rows)


@dataclass
class _Run:
    """One overhead run's fixed parts (the options, the repository and model written, where results go) and what
    its servers reported (version, logs, restarts)."""

    opts: OverheadOptions
    repo: Path
    manifest: Any
    onnx_dir: Path
    result_dir: Path
    log: Callable[[str], None]
    server_version: str | None = None
    server_logs: list[str] = field(default_factory=list)
    restarts: list[dict[str, Any]] = field(default_factory=list)

    def server_config(self, name: str, log_dir: Path):
        """The embedded server that loads only `name`, nothing else (no idle neighbours)."""
        from deployment_toolkit.server.local import ServerConfig

        return ServerConfig(self.repo, model_control_mode="explicit", load_models=(name,), log_dir=log_dir,
                            start_timeout_s=self.opts.server_start_timeout_s)


def _inprocess_twin(variants: Sequence[Variant]) -> Variant:
    """The variant that runs the model as the in-process session does (one instance, ORT's default threads), else
    the first one."""
    return next((v for v in variants if v.instances == 1 and v.threads == 0), variants[0])


def _single_client(run: _Run, variant: Variant, batch: int, inprocess: Callable[[], float]) -> list[PairedRound]:
    """perf.single_client's paired rounds on a fresh server that loads only `variant`."""
    from deployment_toolkit.server.local import LocalTritonServer

    opts = run.opts
    name = variant.model_name(opts.model)
    run.log(f"batch {batch}: single client, {opts.single_client_rounds} rounds of in-process then served at "
            f"concurrency 1 ({variant.label}) ...")
    log_dir = Path(opts.workspace) / "logs" / f"{name}_b{batch}" / "single_client"
    with LocalTritonServer(run.server_config(name, log_dir)) as server:
        server.require_models([name])
        url = server.grpc_url if opts.perf.protocol == Protocol.GRPC else server.http_url
        point = served_point_fn(name, url, batch, run.manifest, opts.perf, run.result_dir / "single_client")
        return measure_pairs(inprocess, point, opts.single_client_rounds, batch, run.log)


MAX_SERVER_STARTS = 3  # per sweep: a server that dies mid-sweep is restarted and the sweep resumed


def _sweep(run: _Run, variant: Variant, batch: int) -> list[dict[str, Any]]:
    """One online sweep of a variant on a fresh server that loads only that variant (no idle neighbours,
    nothing left over from the previous sweep). If the server dies, it is restarted and the sweep resumes
    from its completed points (run_sweep's store); each point gets Triton's statistics delta."""
    from deployment_toolkit.client import TritonClient
    from deployment_toolkit.config import Reuse
    from deployment_toolkit.server.local import LocalTritonServer
    from deployment_toolkit.perf.online import run_online
    from deployment_toolkit.perf.sweep import ServerAt, ServerDiedError, SweepSettings

    opts = run.opts
    name = variant.model_name(opts.model)
    sweep_dir = run.result_dir / "sweeps" / f"{name}_b{batch}"
    run.log(f"batch {batch}: {variant.label}: online sweep, concurrency {','.join(map(str, opts.concurrencies))} ...")
    extra: dict[int, dict[str, Any]] = {}
    restarts = 0
    for start in range(1, MAX_SERVER_STARTS + 1):
        log_dir = Path(opts.workspace) / "logs" / f"{name}_b{batch}" / f"start{start}"
        with LocalTritonServer(run.server_config(name, log_dir)) as server:
            server.require_models([name])
            stats_client = TritonClient(server.http_url, "http")
            run.server_version = run.server_version or stats_client.server_version()
            run.server_logs.append(str(server.log_path))
            snap = {"stats": stats_client.statistics(name)}

            def on_point(point, _result, client=stats_client, snap=snap) -> None:
                now = client.statistics(name)
                extra[point.concurrency] = {**stats_delta(snap["stats"], now), "loadavg_1m": _loadavg()[0],
                                            "server_restarts_before": restarts}
                snap["stats"] = now

            # side by side in one run: an earlier run's sweep is set aside (kept under superseded/), never
            # resumed; after a restart within this run, the sweep resumes from its own completed points
            settings = SweepSettings(progress=False, build_report=False, on_point_done=on_point,
                                     manifest_path=run.onnx_dir, reuse=Reuse.FRESH if start == 1 else Reuse.AUTO)
            try:
                outcome = run_online(name, ServerAt(server=server), run.manifest, list(opts.concurrencies), opts.perf,
                                     sweep_dir, batch_size=batch, settings=settings)
                break
            except ServerDiedError as err:
                restarts += 1
                first = str(err).splitlines()[0]
                run.restarts.append({"model": name, "batch": batch, "error": first, "log": str(server.log_path)})
                if start == MAX_SERVER_STARTS:
                    raise
                run.log(f"  {first}\n  restarting the server and resuming the sweep ({start} of "
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


__all__ = ["private_shm_command", "private_shm_reason", "PRIVATE_SHM_ENV", "Variant", "OverheadOptions", "OverheadResult", "run_overhead", "best_point", "stats_delta",
           "infer_inflation", "time_inprocess", "to_markdown", "to_csv", "DESIGN_BAR"]
