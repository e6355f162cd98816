"""`pack-bench`: the packing MILP (deployment_toolkit.deployment.packing) on N models built from recorded
capacities: every config whose open-loop capacity a committed search measured (a search.csv row with capacity_median,
its host memory beside it) is a record; each model draws one (seeded), a peak load of 0.03 to 3 replicas' worth
(log-uniform), and a day-shaped rate over 24 h (a raised cosine peaking by day or by night, a floor, a little noise;
some models given by their peak alone). Prints models, time slices, solve time, replicas and cost, the lower bound,
the gap, and what non-coinciding peaks saved; writes packing.md, packing.csv and run.json to --result-path.
A benchmark: it prints whether the targets were met (under 10 s, within 10 % of the bound); it does not fail."""
from __future__ import annotations

import argparse
import csv
import math
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from deployment_toolkit import cli
from deployment_toolkit.errors import UserInputError
from deployment_toolkit.results.run_folder import add_result_path_argument

if TYPE_CHECKING:
    from deployment_toolkit.deployment.packing import Packing
    from deployment_toolkit.deployment.traffic import Series, Traffic

TARGET_S = 10.0
TARGET_GAP = 0.10
DEFAULT_OUT = "results/packing-100-cpu"
SHARED_HEADERS = ("group", "replicas", "by peaks", "peak of sum", "sum of peaks", "worst slice", "GB")


@dataclass(frozen=True)
class Record:
    """One measured capacity: a search's open-loop capacity of a config and the host memory at its best point."""

    source: str  # the search.csv it was read from
    config: str
    capacity: float  # inferences/s (the median of the search's capacity searches)
    memory_gb: float  # the whole server's host memory with that model: an upper bound on the model's share


def recorded_capacities(root: Path) -> list[Record]:
    """Every search.csv row under `root` with a measured open-loop capacity, in path order (not results/local/,
    which is git-ignored: a draw that others cannot repeat)."""
    records = []
    for path in sorted(root.rglob("search.csv")):
        if path.relative_to(root).parts[0] == "local":
            continue
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                try:
                    capacity, memory = float(row.get("capacity_median") or "nan"), float(
                        row.get("best_host_memory_gb") or 0)
                except ValueError:
                    continue
                if math.isfinite(capacity) and capacity > 0:
                    records.append(Record(str(path), row["config"], capacity, memory))
    if not records:
        raise UserInputError(f"no recorded capacity under {root} (a search.csv with capacity_median): point "
                             "--recorded at a results folder holding committed searches")
    return records


@dataclass(frozen=True)
class Drawn:
    name: str
    record: Record
    peak_rps: float
    peaks_at: str  # "day", "night" or "flat" (given by its peak alone)


def day_shape(rng: np.random.Generator, hours: np.ndarray, night: bool) -> np.ndarray:
    """A raised cosine (squared: a sharper peak) over 24 h, its peak by day (11-17 h) or by night (23-05 h), a
    floor of 5-30 % of the peak, +-5 % noise; the maximum is 1."""
    centre = (2.0 if night else 14.0) + rng.uniform(-3, 3)
    floor = rng.uniform(0.05, 0.3)
    shape = floor + (1 - floor) * ((1 + np.cos(2 * np.pi * (hours - centre) / 24)) / 2) ** 2
    shape = shape * rng.uniform(0.95, 1.05, size=hours.shape)
    return shape / shape.max()


def draw(records: list[Record], args: argparse.Namespace) -> list[tuple[Drawn, "Series"]]:
    """The N models: (Drawn, traffic series) each, seeded."""
    from deployment_toolkit.deployment.traffic import DAY_S, Series, TimeKind, constant

    rng = np.random.default_rng(args.seed)
    step = DAY_S / args.slices
    times = tuple(k * step for k in range(args.slices))
    hours = np.asarray(times) / 3600
    out = []
    for i in range(args.models):
        record = records[int(rng.integers(len(records)))]
        load = math.exp(rng.uniform(math.log(0.03), math.log(3.0)))
        peak = load * record.capacity / (1 + args.headroom)
        kind = rng.choice(["day", "night", "flat"], p=[0.6, 0.3, 0.1])
        name = f"m{i:03d}"
        if kind == "flat":
            series = constant(peak, f"{name} peak_rps")
        else:
            rates = peak * day_shape(rng, hours, kind == "night")
            series = Series(times, tuple(float(r) for r in rates), TimeKind.CLOCK, name)
        out.append((Drawn(name, record, peak, str(kind)), series))
    return out


def overflowing(packing: "Packing", traffic: "Traffic", capacity: dict[str, float], headroom: float) -> list[str]:
    """The groups whose load exceeds their replicas in some slice, recomputed from the traffic (none, or a bug)."""
    out = []
    for g in packing.groups:
        load = sum(traffic.matrix([n])[0] * (1 + headroom) / capacity[n] for n in g.models)
        if load.max() > g.replicas + 1e-9:
            out.append(" + ".join(g.models))
    return out


def figures(packing: "Packing", alone: int, wall_s: float, traffic: "Traffic", overflow: list[str]
            ) -> list[tuple[str, str]]:
    """The table the command prints: one figure a row."""
    shared = [g for g in packing.groups if g.shared]
    cost = (f"${packing.cost:,.2f}/h" if packing.limits.price_per_replica is not None else "-")
    return [
        ("models", f"{sum(len(g.models) for g in packing.groups)} packed, {len(packing.misfits)} fit nowhere"),
        ("time slices", f"{traffic.slices} ({24 * 60 // traffic.slices} min over a day); "
                        f"{packing.slices_solved} needed as rows in one MILP"),
        ("solve time", f"{packing.seconds:.2f} s (pack); {wall_s:.2f} s with aligning the traffic"),
        ("replicas", f"{packing.replicas}"),
        ("cost", cost),
        ("lower bound", f"{packing.lower_bound} replicas ({packing.bound_source.value})"),
        ("gap", f"{packing.gap:.1%} ({packing.status.value}; {packing.solves} MILP solves)"),
        ("shared groups", f"{len(shared)} holding {sum(len(g.models) for g in shared)} models; "
                          f"{len(packing.groups) - len(shared)} models alone"),
        ("peak-of-sum savings", f"{packing.replicas_by_peaks} replicas if the same groups were sized by the sum of "
                                f"their members' peaks: {packing.replicas_by_peaks - packing.replicas} saved"),
        ("against each model alone", f"{alone} replicas: {alone - packing.replicas} saved "
                                     f"({(alone - packing.replicas) / alone:.0%})"),
        ("checked", "every group holds its load in every slice" if not overflow else
                    f"{len(overflow)} group(s) overflow a slice: {'; '.join(overflow)}"),
    ]


def write(out: Path, args: argparse.Namespace, packing: "Packing", rows: list[tuple[str, str]],
          drawn: list[tuple[Drawn, "Series"]], records: list[Record], traffic: "Traffic", verdict: str) -> None:
    """packing.md (the figures, the shared groups, the records drawn), packing.csv (every group) and run.json."""
    from deployment_toolkit.results.rows import RowSchema, to_csv
    from deployment_toolkit.results.run_folder import RunFolder
    from deployment_toolkit.spec import atomic_write_text
    from deployment_toolkit.tables import markdown_table

    by_name = {d.name: d for d, _ in drawn}
    group_rows = [{"models": " ".join(g.models), "shared": g.shared, "replicas": g.replicas,
                   "replicas_by_peaks": g.replicas_by_peaks if g.shared else g.replicas,
                   "peak_of_sum_load": round(g.load, 4), "sum_of_peaks_load": round(g.sum_of_peaks, 4),
                   "worst_slice": traffic.label(g.worst_slice), "memory_gb": round(g.memory_gb, 3),
                   "peaks_at": " ".join(by_name[n].peaks_at for n in g.models)} for g in packing.groups]
    schema = RowSchema(columns=tuple(group_rows[0]), types={"shared": bool, "replicas": int,
                                                            "replicas_by_peaks": int, "peak_of_sum_load": float,
                                                            "sum_of_peaks_load": float, "memory_gb": float})
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "packing.csv", to_csv(schema, group_rows))
    used = {}
    for d, _ in drawn:
        used.setdefault((d.record.source, d.record.config), [d.record, 0])[1] += 1
    sources = [[f"`{src}`", f"`{cfg}`", f"{rec.capacity:,.1f}", f"{rec.memory_gb:.2f}", n]
               for (src, cfg), (rec, n) in sorted(used.items())]
    shared = [[g.models[0] + f" + {len(g.models) - 1} more", g.replicas, g.replicas_by_peaks, f"{g.load:.2f}",
               f"{g.sum_of_peaks:.2f}", traffic.label(g.worst_slice), f"{g.memory_gb:.1f}"]
              for g in packing.groups if g.shared]
    atomic_write_text(out / "packing.md", (
        f"# Packing {args.models} models on Triton replicas (MILP, HiGHS)\n\n"
        f"{args.models} models drawn (seed {args.seed}) from {len(records)} recorded capacities: each a config whose "
        "open-loop capacity a committed search measured (`search.csv`, `capacity_median`), with the host memory at "
        "its best point. Each model: a peak load of 0.03 to 3 replicas' worth (log-uniform), a day-shaped rate over "
        f"24 h ({args.slices} slices) peaking by day (60 %) or by night (30 %), or its peak alone (10 %). Limits: "
        f"{args.memory_gb:g} GB per replica, {args.max_models} models per server, headroom {args.headroom:g}, "
        f"${args.price:g}/h per replica; solver time limit {args.time_limit:g} s, gap {args.gap:.0%}.\n\n"
        f"{markdown_table(['figure', 'value'], rows, 'll')}\n\nVerdict: {verdict}.\n\n"
        "## Shared groups\n\nPeak of the sum against the sum of the peaks, in replicas' worth (u / s summed at the "
        "group's worst slice, and each member's own peak summed):\n\n"
        f"{markdown_table(SHARED_HEADERS, shared, 'lrrrrrr')}"
        "\n\nEvery group, solo ones included: `packing.csv`.\n\n## Recorded capacities drawn\n\n"
        f"{markdown_table(['search', 'config', 'capacity (inf/s)', 'memory (GB)', 'models'], sources, 'llrrr')}\n"))
    RunFolder(out).record({"kind": "pack-bench", **{k: v for k, v in vars(args).items() if k != "result_path"},
                           "result_path": str(out), "replicas": packing.replicas, "lower_bound": packing.lower_bound,
                           "bound_source": packing.bound_source.value, "packing_gap": packing.gap,
                           "status": packing.status.value, "solve_s": packing.seconds,
                           "replicas_by_peaks": packing.replicas_by_peaks, "cost_per_hour": packing.cost,
                           "highspy": metadata.version("highspy")})


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(__doc__, """
        deployment-toolkit-lab pack-bench --models 100 --seed 0 --result-path results/packing-100-cpu
    """)
    p.add_argument("--models", type=int, default=100, help="models to pack (default 100)")
    p.add_argument("--seed", type=int, default=0, help="draws the records, peaks and shapes (default 0)")
    p.add_argument("--slices", type=int, default=288, help="time slices over 24 h (default 288: 5 minutes)")
    p.add_argument("--memory-gb", type=float, default=8.0, help="memory per replica, GB (default 8)")
    p.add_argument("--max-models", type=int, default=8, help="models per server (default 8)")
    p.add_argument("--headroom", type=float, default=0.2, help="fraction added on top of the load (default 0.2)")
    p.add_argument("--price", type=float, default=0.40,
                   help="$/h of one replica (default 0.40, examples/deployment/deployment.yaml's host_hour)")
    p.add_argument("--time-limit", type=float, default=8.0, help="the solver's time limit, s (default 8)")
    p.add_argument("--gap", type=float, default=0.01, help="relative gap at which the solver stops (default 0.01)")
    p.add_argument("--recorded", default="results", help="where to look for recorded capacities (default results/)")
    add_result_path_argument(p, help=f"default: {DEFAULT_OUT}")
    args = p.parse_args(argv)
    for flag, value in (("--models", args.models), ("--slices", args.slices), ("--max-models", args.max_models)):
        if value < 1:
            raise UserInputError(f"{flag} must be >= 1, got {value}")

    from deployment_toolkit.committed import refuse_committed
    from deployment_toolkit.deployment.packing import PackLimits, SolverSettings, models_from_traffic, pack
    from deployment_toolkit.deployment.traffic import align
    from deployment_toolkit.tables import markdown_table

    out = Path(args.result_path or DEFAULT_OUT)
    refuse_committed(out, "--result-path")
    records = recorded_capacities(Path(args.recorded))
    limits = PackLimits(memory_gb=args.memory_gb, max_models=args.max_models, headroom=args.headroom,
                        price_per_replica=args.price)
    settings = SolverSettings(time_limit_s=args.time_limit, gap=args.gap)
    drawn = draw(records, args)
    started = time.perf_counter()
    traffic = align({d.name: series for d, series in drawn})
    models = models_from_traffic(traffic, {d.name: d.record.capacity for d, _ in drawn},
                                 {d.name: d.record.memory_gb for d, _ in drawn})  # sharing factors 1: time sharing
    packing = pack(models, limits, settings)
    wall = time.perf_counter() - started
    misfits = {m.name for m in packing.misfits}
    alone = sum(pack([m], limits, settings).replicas for m in models if m.name not in misfits)
    capacity = {d.name: d.record.capacity for d, _ in drawn}
    rows = figures(packing, alone, wall, traffic, overflowing(packing, traffic, capacity, args.headroom))
    met_time, met_gap = wall < TARGET_S, packing.gap <= TARGET_GAP
    verdict = (f"{wall:.2f} s {'<' if met_time else '>='} {TARGET_S:g} s ({'met' if met_time else 'not met'}); gap "
               f"{packing.gap:.1%} {'<=' if met_gap else '>'} {TARGET_GAP:.0%} ({'met' if met_gap else 'not met'})")
    write(out, args, packing, rows, drawn, records, traffic, verdict)
    print(markdown_table(["figure", "value"], rows, "ll"))
    print(f"Verdict: {verdict}.")
    print(f"wrote {out / 'packing.md'}")
    return 0


if __name__ == "__main__":
    cli.run(main)
