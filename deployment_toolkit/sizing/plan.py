"""Fleet sizing from measured perf curves: what one replica sustains under a p99 SLO, and how many it takes.

Everything here rests on measured points only (the online.csv / offline.csv a sweep wrote, times in ms):

- sustainable throughput of a run = the best `Inferences/second` among its points whose P99 Latency <= the
  SLO. Unstable points (stable=False) and points that fail the Little's-law check are left out (and listed);
  nothing is interpolated or extrapolated beyond the measured points.
- Little's law: in a closed-loop sweep, concurrency = request rate x average latency, and request rate =
  Inferences/second / client batch size. A point whose numbers disagree by more than 10% is unreliable
  (usually a window too short for the load, or a client that was starved of CPU).
- replicas = ceil(peak x (1 + headroom) / sustainable throughput); a replica is one Triton server with the
  run's instance_group on its GPU(s), or, on a CPU-only run, one server on one host.
- coverage of a geospatial model = throughput x (tile pixels x GSD m)^2 / 10^6 km^2/s.

`peak` counts inferences per second (requests x client batch size); for batch-1 online traffic that is the
request rate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..perf.sweep import instance_count, read_store_csv
from ..runinfo import read_run_json
from ..errors import UserError

THROUGHPUT = "Inferences/second"
P99 = "P99 Latency"
AVG = "Avg Latency"
BATCH = "Client Batch Size"
CONCURRENCY = "Concurrent client requests"
KINDS = ("online", "offline")
LITTLE_TOLERANCE = 0.10
EARTH_LAND_KM2 = 1.49e8
DEFAULT_GSD_M = (10.0,)


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
        ))
    key = (lambda p: (p.batch, p.concurrency)) if run.kind == "offline" else (lambda p: (p.concurrency, p.batch))
    return sorted(out, key=key)


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


# ---- the sustainable throughput ----------------------------------------------------------------

@dataclass
class Sustainable:
    """What one replica of a run sustains at p99 <= slo_ms, on which measured point that rests."""

    run: Run
    slo_ms: float
    point: Point | None
    points: list[Point]
    unstable: list[Point]
    unreliable: list[Point]
    used_unreliable: bool = False

    @property
    def throughput(self) -> float | None:
        return self.point.throughput if self.point else None

    @property
    def reachable(self) -> bool:
        return self.point is not None

    @property
    def candidates(self) -> list[Point]:
        bad = {id(p) for p in self.unstable} | ({id(p) for p in self.unreliable} if not self.used_unreliable else set())
        return [p for p in self.points if id(p) not in bad and p.usable]

    @property
    def at_highest_load(self) -> bool:
        """The chosen point is the sweep's highest measured load: more may be sustainable, it was not measured."""
        return self.point is not None and self.point is self.points[-1]

    @property
    def excluded_within_slo(self) -> list[Point]:
        """Unstable or unreliable points above the chosen throughput whose p99 met the SLO (remeasure them)."""
        if self.point is None:
            return []
        cands = {id(p) for p in self.candidates}
        return [p for p in self.points if id(p) not in cands and not math.isnan(p.p99) and p.p99 <= self.slo_ms
                and p.throughput > self.point.throughput]

    def unreachable_text(self) -> str:
        """The clear answer for an SLO no measured point meets."""
        cands = self.candidates
        best = min(cands, key=lambda p: (p.p99, -p.throughput))
        text = (f"SLO p99 <= {self.slo_ms:g} ms is unreachable for {self.run.name} ({self.run.label}): the best p99 "
                f"measured is {best.p99:.3f} ms, at {best.throughput:.1f} inf/s ({best.level})")
        tighter = [p for p in self.unstable if not math.isnan(p.p99) and p.p99 < best.p99]
        if tighter:
            p = min(tighter, key=lambda q: q.p99)
            text += f"; an unstable point reached {p.p99:.3f} ms ({p.level}) but is not trusted"
        return text + "."


def sustainable(run: Run, slo_ms: float, include_unreliable: bool = False) -> Sustainable:
    """The best measured throughput with p99 <= slo_ms; raises SizingError if the run has no usable point."""
    pts = points_of(run)
    if not pts:
        raise SizingError(f"{run.path / (run.kind + '.csv')} has no measured points: the sweep did not finish any; "
                          "rerun the performance test (it resumes)")
    unstable = [p for p in pts if not p.stable]
    if len(unstable) == len(pts):
        raise SizingError(
            f"all {len(pts)} points of {run.path / (run.kind + '.csv')} are unstable (stable=False): none can carry a "
            "plan. Remeasure with longer windows (--measurement-interval, --max-attempts) or on a quieter host")
    unreliable = [p for p in pts if p.stable and p.reliable is False]
    usable = [p for p in pts if p.usable and (include_unreliable or p.reliable is not False)]
    if not usable:
        why = "fail the Little's-law check" if unreliable else "lack throughput or p99"
        raise SizingError(f"no usable point in {run.path / (run.kind + '.csv')}: the stable points {why}"
                          + ("; pass --include-unreliable to use them anyway" if unreliable else ""))
    within = [p for p in usable if p.p99 <= slo_ms]
    point = max(within, key=lambda p: (p.throughput, -p.p99)) if within else None
    return Sustainable(run, slo_ms, point, pts, unstable, unreliable, used_unreliable=include_unreliable)


# ---- the plan -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Prices:
    """$/hour: per device name (a YAML mapping; a key matches the exact name, else case-insensitively as a
    substring, the longest key winning), else the flat GPU or host price."""

    by_device: dict[str, float] = field(default_factory=dict)
    gpu_hour: float | None = None
    host_hour: float | None = None

    def price(self, run: Run) -> float | None:
        if run.device in self.by_device:
            return float(self.by_device[run.device])
        low = run.device.lower()
        hits = sorted((k for k in self.by_device if k.lower() in low), key=len, reverse=True)
        if hits:
            return float(self.by_device[hits[0]])
        return self.gpu_hour if run.gpu else self.host_hour


def load_prices(path: str | Path) -> dict[str, float]:
    """A YAML mapping device name -> $/hour (a top-level `prices:` key is accepted too)."""
    import yaml

    data = yaml.safe_load(Path(path).read_text()) or {}
    if isinstance(data, dict) and isinstance(data.get("prices"), dict):
        data = data["prices"]
    if not isinstance(data, dict):
        raise SizingError(f"{path}: expected a mapping of device name to $/hour, e.g. 'NVIDIA H100 80GB HBM3: 4.5'")
    try:
        return {str(k): float(v) for k, v in data.items()}
    except (TypeError, ValueError) as err:
        raise SizingError(f"{path}: every price must be a number ($/hour): {err}") from None


@dataclass(frozen=True)
class Demand:
    peak_rps: float
    slo_ms: float
    headroom: float = 0.2
    gpus_per_node: int = 8

    def __post_init__(self) -> None:
        if self.peak_rps <= 0:
            raise SizingError("--peak-rps must be positive")
        if self.slo_ms <= 0:
            raise SizingError("--p99-ms must be positive")
        if self.headroom < 0:
            raise SizingError("--headroom must be >= 0 (0.2 = 20% spare capacity)")
        if self.gpus_per_node < 1:
            raise SizingError("--gpus-per-node must be >= 1")

    @property
    def planned_rate(self) -> float:
        """Inferences/s the fleet is built for: peak x (1 + headroom)."""
        return self.peak_rps * (1.0 + self.headroom)


def ceil_div(a: float, b: float) -> int:
    """ceil(a / b) without float noise (100 x 1.2 / 40 is 3.0000000000000004, which is 3 replicas, not 4)."""
    return max(1, math.ceil(round(a / b, 9)))


@dataclass
class Coverage:
    gsd_m: float
    km2_per_inference: float
    km2_per_s_replica: float
    km2_per_s_fleet: float
    area_km2: float

    @property
    def seconds_to_cover(self) -> float:
        return self.area_km2 / self.km2_per_s_fleet


def coverage_km2_per_s(throughput: float, tile_hw: tuple[int, int], gsd_m: float) -> float:
    """km^2/s = inferences/s x (H px x GSD m) x (W px x GSD m) / 10^6."""
    h, w = tile_hw
    return throughput * (h * gsd_m) * (w * gsd_m) / 1e6


@dataclass
class Plan:
    """The fleet one run's configuration needs for the demand."""

    sustainable: Sustainable
    demand: Demand
    replicas: int | None = None
    devices: int | None = None
    nodes: int | None = None
    price_per_device_h: float | None = None
    coverage: list[Coverage] = field(default_factory=list)
    rank: int | None = None
    open_loop: Any = None  # capacity.OpenLoopCapacity: what the plan rests on when measured
    derated_from: float | None = None  # the per-replica capacity before a failed confirmation derated it
    replica_override: float | None = None  # the confirmed per-replica capacity after a derate

    @property
    def run(self) -> Run:
        return self.sustainable.run

    @property
    def reachable(self) -> bool:
        return self.replicas is not None

    @property
    def cost_h(self) -> float | None:
        if self.devices is None or self.price_per_device_h is None:
            return None
        return self.devices * self.price_per_device_h

    @property
    def basis(self) -> str:
        """What one replica's capacity rests on: "confirmed" (derated), "open loop" or "closed loop"."""
        if self.replica_override is not None:
            return "confirmed"
        return "open loop" if self.open_loop is not None else "closed loop"

    @property
    def replica_capacity(self) -> float | None:
        """Inferences/s one replica is planned to carry: the confirmed rate after a derate, else the open-loop
        capacity when measured, else the closed-loop sustainable throughput."""
        if self.replica_override is not None:
            return self.replica_override
        if self.open_loop is not None:
            return self.open_loop.capacity
        return self.sustainable.throughput

    @property
    def capacity(self) -> float | None:
        """Inferences/s the fleet sustains under the SLO: replicas x per-replica capacity."""
        thr = self.replica_capacity
        return None if thr is None or self.replicas is None else self.replicas * thr

    @property
    def per_replica_rate(self) -> float | None:
        """Inferences/s each replica gets at the planned rate peak x (1 + headroom), spread evenly."""
        return None if self.replicas is None else self.demand.planned_rate / self.replicas

    @property
    def utilisation(self) -> float | None:
        cap = self.capacity
        return None if not cap else self.demand.planned_rate / cap

    @property
    def cost_per_million_peak(self) -> float | None:
        """$ per million inferences while serving the peak rate (the fleet's cost over peak x 3600 inferences)."""
        cost = self.cost_h
        return None if cost is None else cost / (self.demand.peak_rps * 3600.0) * 1e6

    @property
    def cost_per_million_capacity(self) -> float | None:
        """$ per million inferences with every replica at its sustainable throughput."""
        cost, cap = self.cost_h, self.capacity
        return None if cost is None or not cap else cost / (cap * 3600.0) * 1e6


def plan_for(s: Sustainable, demand: Demand, prices: Prices, gsd_m: Sequence[float] = (),
             area_km2: float = EARTH_LAND_KM2, open_loop: Any = None) -> Plan:
    plan = Plan(s, demand, price_per_device_h=prices.price(s.run), open_loop=open_loop)
    if not s.reachable or plan.replica_capacity is None:
        return plan
    _scale(plan, gsd_m, area_km2)
    return plan


def derate(plan: Plan, confirmed: float) -> Plan:
    """Re-plan on a lower confirmed per-replica capacity (inferences/s): more replicas, same demand."""
    if plan.derated_from is None:
        plan.derated_from = plan.replica_capacity
    plan.replica_override = confirmed
    gsd, area = [c.gsd_m for c in plan.coverage], (plan.coverage[0].area_km2 if plan.coverage else EARTH_LAND_KM2)
    plan.coverage = []
    _scale(plan, gsd, area)
    return plan


def _scale(plan: Plan, gsd_m: Sequence[float], area_km2: float) -> None:
    demand, run, thr = plan.demand, plan.run, plan.replica_capacity
    plan.replicas = ceil_div(demand.planned_rate, thr)
    plan.devices = plan.replicas * (run.gpus_per_replica if run.gpu else 1)
    plan.nodes = ceil_div(plan.devices, demand.gpus_per_node) if run.gpu else plan.devices
    if run.family == "geospatial" and run.tile_hw:
        for g in (gsd_m or DEFAULT_GSD_M):
            per = coverage_km2_per_s(1.0, run.tile_hw, g)
            plan.coverage.append(Coverage(g, per, thr * per, plan.capacity * per, area_km2))


@dataclass
class Sizing:
    demand: Demand
    plans: list[Plan]
    ranked_by: str
    recommendation: Plan | None
    reason: str
    unreachable: list[str]
    notes: list[str]

    @property
    def ranked(self) -> list[Plan]:
        return sorted((p for p in self.plans if p.reachable), key=lambda p: p.rank or 0)


def _rank_key(by_cost: bool):
    def key(p: Plan):
        cost = p.cost_h if by_cost else 0.0
        return (cost, p.devices, -(p.replica_capacity or 0.0), p.run.name)
    return key


def size(runs: Iterable[Run], demand: Demand, prices: Prices = Prices(), gsd_m: Sequence[float] = (),
         area_km2: float = EARTH_LAND_KM2, include_unreliable: bool = False,
         open_loop: dict[str, Any] | None = None) -> Sizing:
    """Plan every run, rank the reachable ones (by $/hour when every one has a price, else by device count)
    and recommend the first. `open_loop` maps a run's name to its measured OpenLoopCapacity: a run that has
    one is planned on it (the closed-loop figure then only seeded the search)."""
    runs = list(runs)
    if not runs:
        raise SizingError("no runs given")
    open_loop = open_loop or {}
    plans = [plan_for(sustainable(r, demand.slo_ms, include_unreliable), demand, prices, gsd_m, area_km2,
                      open_loop.get(r.name)) for r in runs]
    reachable = [p for p in plans if p.reachable]
    unreachable = [(p.open_loop.unreachable_text() if p.open_loop is not None and p.sustainable.reachable
                    else p.sustainable.unreachable_text()) for p in plans if not p.reachable]
    notes: list[str] = []
    by_cost = bool(reachable) and all(p.cost_h is not None for p in reachable)
    units = {p.run.unit for p in reachable}
    if by_cost:
        ranked_by = "cost per hour"
    else:
        ranked_by = "device count (no price for every configuration)"
        if reachable:
            notes.append("Not every configuration has a price: ranked by the number of "
                         + " / ".join(sorted(u + "s" for u in units))
                         + "; pass --gpu-hour-cost / --host-hour-cost or --prices to rank by cost.")
        if len(units) > 1:
            notes.append("GPU and CPU-host configurations are mixed without prices: their counts are not comparable.")
    for i, p in enumerate(sorted(reachable, key=_rank_key(by_cost)), start=1):
        p.rank = i
    best = min(reachable, key=_rank_key(by_cost)) if reachable else None
    reason = _reason(best, sorted(reachable, key=_rank_key(by_cost)), by_cost, demand) if best else (
        f"No configuration meets p99 <= {demand.slo_ms:g} ms at any measured point; see below for the best p99 of each.")
    return Sizing(demand, plans, ranked_by, best, reason, unreachable, notes)


def _reason(best: Plan, ranked: list[Plan], by_cost: bool, demand: Demand) -> str:
    s = best.sustainable
    unit = best.run.unit
    what = (f"{best.devices} {unit}{'s' if best.devices != 1 else ''}"
            + (f" at ${best.cost_h:,.2f}/h" if best.cost_h is not None else ""))
    if best.open_loop is not None:
        basis = (f"open-loop capacity, {best.open_loop.distribution} arrivals; the closed-loop sweep gave "
                 f"{s.throughput:.1f} inf/s at {s.point.level}, p99 {s.point.p99:.3f} ms")
    else:
        basis = f"closed loop, measured at {s.point.level}, p99 {s.point.p99:.3f} ms"
    text = (f"{best.run.label} is the {'cheapest' if by_cost else 'smallest'} fleet that meets p99 <= "
            f"{demand.slo_ms:g} ms: {what} ({best.replicas} replica{'s' if best.replicas != 1 else ''} x "
            f"{best.replica_capacity:.1f} inf/s each, {basis}).")
    if len(ranked) > 1:
        nxt = ranked[1]
        if by_cost and best.cost_h and math.isclose(nxt.cost_h, best.cost_h):
            text += (f" {nxt.run.label} costs the same (${nxt.cost_h:,.2f}/h); this one sustains more per replica "
                     f"({best.replica_capacity:.1f} vs {nxt.replica_capacity:.1f} inf/s), so it has more spare capacity.")
        elif by_cost and best.cost_h:
            extra = (nxt.cost_h - best.cost_h) / best.cost_h * 100
            text += f" The next, {nxt.run.label}, costs {extra:+.0f}% (${nxt.cost_h:,.2f}/h, {nxt.devices} {nxt.run.unit}s)."
        else:
            text += f" The next, {nxt.run.label}, needs {nxt.devices} {nxt.run.unit}s."
    if s.at_highest_load and best.open_loop is None:
        text += (" Its point is the highest load measured and still within the SLO, so one replica may sustain "
                 "more: measure higher concurrency (or batch) before buying fewer devices.")
    hidden = s.excluded_within_slo
    if hidden:
        text += (" Higher loads within the SLO were measured but not trusted ("
                 + "; ".join(f"{p.level}: {p.throughput:.1f} inf/s, {'unstable' if not p.stable else 'fails Little'}"
                             + ("" if not p.stable else "'s law") for p in hidden)
                 + "); remeasuring them with longer windows may allow fewer replicas.")
    if s.point.reliable is None:
        text += " (Little's-law check not possible: the run has no average latency.)"
    return text


# ---- SLO frontier and scaling --------------------------------------------------------------------

@dataclass
class FrontierStep:
    slo_ms: float
    plan: Plan | None


def frontier(runs: Sequence[Run], demand: Demand, prices: Prices = Prices(), include_unreliable: bool = False,
             slos: Sequence[float] | None = None) -> list[FrontierStep]:
    """The cheapest plan for SLOs from tight to loose. The answer only changes at a measured p99, so those
    (plus the requested SLO) are the SLOs evaluated unless `slos` is given."""
    if slos is None:
        values = {demand.slo_ms}
        for r in runs:
            for p in points_of(r):
                if p.usable and (include_unreliable or p.reliable is not False):
                    values.add(round(p.p99, 6))
        slos = sorted(values)
    steps = []
    for slo in slos:
        d = Demand(demand.peak_rps, slo, demand.headroom, demand.gpus_per_node)
        try:
            result = size(runs, d, prices, include_unreliable=include_unreliable)
        except SizingError:
            result = None
        steps.append(FrontierStep(slo, result.recommendation if result else None))
    return steps


@dataclass
class ScalingTable:
    group: str
    counts: list[int]
    throughput: list[float | None]
    basis: str

    @property
    def perfect(self) -> list[float | None]:
        base, n0 = self.throughput[0], self.counts[0]
        return [None if base is None else base * n / n0 for n in self.counts]

    @property
    def speedup(self) -> list[float | None]:
        base = self.throughput[0]
        return [None if base is None or t is None else t / base for t in self.throughput]


def scaling_tables(plans: Sequence[Plan]) -> list[ScalingTable]:
    """Seed-003 tables (N, measured throughput, perfect linear, speedup) for runs that differ only in the
    number of model instances. Throughput is the sustainable one under the SLO; if some count cannot meet it,
    the best stable throughput at any latency is used instead (the caption says which)."""
    groups: dict[tuple, dict[int, Plan]] = {}
    for p in plans:
        r = p.run
        key = (r.base_model or r.model, r.format, r.precision, r.device, r.kind)
        groups.setdefault(key, {})[r.instances] = p
    tables = []
    for key, by_n in groups.items():
        if len(by_n) < 2:
            continue
        counts = sorted(by_n)
        slo = by_n[counts[0]].demand.slo_ms
        thr = [by_n[n].sustainable.throughput for n in counts]
        basis = f"best stable Inferences/second with p99 <= {slo:g} ms"
        if any(t is None for t in thr):
            thr = [max((q.throughput for q in by_n[n].sustainable.candidates), default=None) for n in counts]
            basis = f"best stable Inferences/second at any latency (not every count meets p99 <= {slo:g} ms)"
        model, fmt, precision, device, kind = key
        tables.append(ScalingTable(f"{model} {fmt} {precision} ({kind}, {by_n[counts[0]].run.device_short})",
                                   counts, thr, basis))
    return tables


def little_flags(runs: Sequence[Run]) -> list[tuple[Run, Point]]:
    """Stable points whose throughput x average latency disagrees with the concurrency by more than 10%."""
    return [(r, p) for r in runs for p in points_of(r) if p.stable and p.reliable is False]
