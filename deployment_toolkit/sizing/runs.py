"""Measured sweeps for sizing: the runs (online.csv / offline.csv and run.json, times in ms) and their points,
with the Little's-law consistency check that flags a point whose numbers disagree.

In a closed-loop sweep, concurrency = request rate x average latency, and request rate = Inferences/second /
client batch size. A point whose numbers disagree by more than 10% is unreliable (usually a window too short for
the load, or a client that was starved of CPU).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..errors import UserError
from ..client import instance_count
from ..results.runinfo import read_run_json
from ..results.store import read_store_csv

THROUGHPUT = "Inferences/second"
P99 = "P99 Latency"
AVG = "Avg Latency"
BATCH = "Client Batch Size"
CONCURRENCY = "Concurrent client requests"
KINDS = ("online", "offline")
LITTLE_TOLERANCE = 0.10


class SizingError(UserError, ValueError):
    """A run cannot be sized (no points, all unstable, unreadable); the message says why and what to do."""


# ---- runs ---------------------------------------------------------------------------------------

@dataclass
class Run:
    """One measured sweep (online or offline) of one model x format x config x device."""

    path: Path
    kind: str
    rows: list[dict[str, Any]]
    meta: dict[str, Any]
    model: str
    format: str
    precision: str
    instances: int
    device: str
    gpu: bool
    gpus_per_replica: int = 1
    family: str | None = None
    tile_hw: tuple[int, int] | None = None
    manifest_path: Path | None = None
    base_model: str = ""  # the registered model (manifest), shared by runs served under different Triton names

    @property
    def unit(self) -> str:
        return "GPU" if self.gpu else "host"

    @property
    def label(self) -> str:
        return f"{self.model} {self.format} {self.precision} x{self.instances} {self.kind}, {self.device_short}"

    @property
    def device_short(self) -> str:
        if self.gpu:
            return self.device.replace("NVIDIA ", "")
        cores = ((self.meta.get("hardware") or {}).get("cpu") or {}).get("usable_cores")
        return f"CPU host ({cores} cores)" if cores else "CPU host"

    @property
    def name(self) -> str:
        return f"{self.path.name}/{self.kind}"


def _resolve_manifest(meta: dict[str, Any], run_dir: Path) -> Path | None:
    raw = (meta.get("config") or {}).get("manifest")
    if not raw:
        return None
    p = Path(raw)
    candidates = [p] if p.is_absolute() else [Path(meta.get("cwd", ".")) / p, Path.cwd() / p, run_dir / p]
    for c in candidates:
        if c.is_dir():
            c = c / "manifest.json"
        if c.exists():
            return c
    return None


def _device(meta: dict[str, Any]) -> tuple[str, bool]:
    hw = meta.get("hardware") or {}
    gpus = hw.get("gpu")
    if isinstance(gpus, list) and gpus:
        names = sorted({str(g.get("name", "GPU")) for g in gpus if isinstance(g, dict)})
        return (names[0] if names else "GPU"), True
    cpu = hw.get("cpu") or {}
    cores = cpu.get("usable_cores") or cpu.get("logical_cores")
    model = str(cpu.get("model") or "unknown CPU")
    return (f"{model}, {cores} cores" if cores else model), False


def _gpus_per_replica(model_config: dict[str, Any]) -> int:
    ids = {int(g) for grp in (model_config.get("instance_group") or []) for g in (grp.get("gpus") or [])}
    return max(1, len(ids))


def _tile_hw(signature: dict[str, Any] | None) -> tuple[int, int] | None:
    """H, W of the first data input with two or more spatial dims (shape without the batch axis)."""
    for t in (signature or {}).get("inputs", []):
        if t.get("value") is not None:
            continue
        shape = t.get("example_shape") or t.get("shape") or []
        if len(shape) >= 2 and all(int(d) > 0 for d in shape[-2:]):
            return int(shape[-2]), int(shape[-1])
    return None


def load_runs(path: str | Path) -> list[Run]:
    """The sweeps in a run folder (online.csv and/or offline.csv), or the one CSV given."""
    path = Path(path)
    if path.is_file() and path.suffix == ".csv" and path.stem in KINDS:
        run_dir, kinds = path.parent, [path.stem]
    elif path.is_dir():
        run_dir, kinds = path, [k for k in KINDS if (path / f"{k}.csv").exists()]
    else:
        raise SizingError(f"{path}: not a run folder (with online.csv or offline.csv) nor such a CSV")
    if not kinds:
        raise SizingError(f"{run_dir} has no online.csv or offline.csv: run a performance test first "
                          "(triton/run_online_performance_test_on_triton.py)")
    meta = read_run_json(run_dir)
    cfg = meta.get("config") or {}
    model_config = cfg.get("model_config") or {}
    manifest_path = _resolve_manifest(meta, run_dir)
    manifest: dict[str, Any] = {}
    if manifest_path is not None:
        import json

        manifest = json.loads(manifest_path.read_text())
    backend = model_config.get("platform") or model_config.get("backend") or ""
    served = ((model_config.get("parameters") or {}).get("format") or {}).get("string_value")
    fmt = manifest.get("format") or served or backend or "unknown"
    if not manifest.get("format") and served and backend and backend != served:
        fmt = f"{served}/{backend}"
    if manifest.get("format") and backend == "python":
        fmt = f"{manifest['format']}/python"  # the artifact run by the Python backend (embedded server)
    device, gpu = _device(meta)
    runs = []
    for kind in kinds:
        rows = read_store_csv(run_dir / f"{kind}.csv")
        recorded = {r.get("Triton Instances") for r in rows if r.get("Triton Instances")}
        instances = (cfg.get("triton_instances") or (instance_count(model_config) if model_config else None)
                     or (max(recorded) if recorded else 1))
        precision = cfg.get("precision") or next((r.get("Precision") for r in rows if r.get("Precision")), "n/a")
        runs.append(Run(
            path=run_dir, kind=kind, rows=rows, meta=meta, model=cfg.get("model_name") or run_dir.name, format=fmt,
            precision=str(precision), instances=int(instances), device=device, gpu=gpu,
            gpus_per_replica=_gpus_per_replica(model_config) if gpu else 1,
            family=manifest.get("family"), tile_hw=_tile_hw(manifest.get("signature") or cfg.get("signature")),
            manifest_path=manifest_path, base_model=manifest.get("model") or cfg.get("model_name") or run_dir.name,
        ))
    return runs


# ---- points -------------------------------------------------------------------------------------

@dataclass
class Point:
    """One measured point with its Little's-law check."""

    run_kind: str
    batch: int
    concurrency: int
    throughput: float
    p99: float
    avg: float
    stable: bool
    note: str = ""
    queue_ms: float = math.nan  # perf_analyzer's Server Queue / Server Compute Infer at this point (ms)
    compute_ms: float = math.nan

    @property
    def level(self) -> str:
        if self.run_kind == "offline":
            return f"batch {self.batch} (concurrency {self.concurrency})"
        return f"concurrency {self.concurrency} (batch {self.batch})"

    @property
    def request_rate(self) -> float:
        return self.throughput / max(self.batch, 1)

    @property
    def little_concurrency(self) -> float:
        """Concurrency implied by Little's law: requests/s x average latency (ms -> s)."""
        return self.request_rate * self.avg / 1000.0

    @property
    def little_deviation(self) -> float | None:
        """|implied - measured| / measured concurrency; None when the average latency is missing."""
        if math.isnan(self.avg) or math.isnan(self.throughput) or self.concurrency <= 0:
            return None
        return abs(self.little_concurrency - self.concurrency) / self.concurrency

    @property
    def reliable(self) -> bool | None:
        dev = self.little_deviation
        return None if dev is None else dev <= LITTLE_TOLERANCE

    @property
    def usable(self) -> bool:
        return self.stable and not math.isnan(self.throughput) and not math.isnan(self.p99)


def points_of(run: Run) -> list[Point]:
    out = []
    for r in run.rows:
        out.append(Point(
            run_kind=run.kind, batch=int(r.get(BATCH) or 1), concurrency=int(r.get(CONCURRENCY) or 1),
            throughput=_num(r.get(THROUGHPUT)), p99=_num(r.get(P99)), avg=_num(r.get(AVG)),
            stable=r.get("stable") is not False, note=str(r.get("note") or ""),
            queue_ms=_num(r.get("Server Queue")), compute_ms=_num(r.get("Server Compute Infer")),
        ))
    key = (lambda p: (p.batch, p.concurrency)) if run.kind == "offline" else (lambda p: (p.concurrency, p.batch))
    return sorted(out, key=key)


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def little_flags(runs: Sequence[Run]) -> list[tuple[Run, Point]]:
    """Stable points whose throughput x average latency disagrees with the concurrency by more than 10%."""
    return [(r, p) for r in runs for p in points_of(r) if p.stable and p.reliable is False]
