"""sizing.md, sizing.csv and the cost-frontier plot (sizing.png) of a Sizing."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from ..report.sections import markdown_to_html
from ..results.rows import RowSchema, to_csv
from ..spec import atomic_write_text
from .frontier import FrontierStep, scaling_tables
from .frontier_plot import frontier_plot
from .memory import csv_cells as memory_cells, markdown as memory_markdown
from .plan import Plan, Sizing
from .runs import LITTLE_TOLERANCE, Run, little_flags

CSV_COLUMNS = (
    "rank", "recommended", "run", "kind", "model", "format", "precision", "device", "unit", "triton_instances",
    "gpus_per_replica", "peak_rps", "headroom", "planned_rate", "slo_p99_ms", "sustainable_throughput",
    "point", "point_batch", "point_concurrency", "point_p99_ms", "point_avg_ms", "little_deviation",
    "replicas", "devices", "nodes", "price_per_device_h", "cost_per_h", "cost_per_million_at_peak",
    "cost_per_million_at_capacity", "per_replica_rate", "utilisation", "excluded_unstable", "excluded_unreliable",
    "status", "basis", "replica_capacity", "open_loop_capacity", "open_loop_distribution", "open_loop_trials",
    "open_loop_spread", "derated_from", "memory_device", "memory_gb", "memory_per_instance_gb", "memory_budget_gb",
    "memory_fits", "memory_max_instances",
)


def _f(v: float | None, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:,.{digits}f}"


def _money(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"${v:,.2f}" if v >= 0.1 else f"${v:,.4f}"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:,.1f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:,.1f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:,.1f} h"
    return f"{seconds / 86400:,.1f} days"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    from ..tables import markdown_table

    align = ["l" if h in ("Configuration", "Run", "Point", "Device", "Note") else "r" for h in headers]
    return markdown_table(list(headers), [[str(c) for c in r] for r in rows], align)


def csv_rows(sizing: Sizing) -> list[dict[str, Any]]:
    out = []
    d = sizing.demand
    for p in sizing.plans:
        s, r = p.sustainable, p.run
        pt = s.point
        out.append({
            "rank": p.rank or "", "recommended": p is sizing.recommendation, "run": str(r.path), "kind": r.kind,
            "model": r.model, "format": r.format, "precision": r.precision, "device": r.device, "unit": r.unit,
            "triton_instances": r.instances, "gpus_per_replica": r.gpus_per_replica if r.gpu else "",
            "peak_rps": d.peak_rps, "headroom": d.headroom, "planned_rate": round(d.planned_rate, 6),
            "slo_p99_ms": d.slo_ms, "sustainable_throughput": _g(s.throughput),
            "point": pt.level if pt else "", "point_batch": pt.batch if pt else "",
            "point_concurrency": pt.concurrency if pt else "", "point_p99_ms": _g(pt.p99 if pt else None),
            "point_avg_ms": _g(pt.avg if pt else None),
            "little_deviation": _g(pt.little_deviation if pt else None),
            "replicas": p.replicas or "", "devices": p.devices or "", "nodes": p.nodes or "",
            "price_per_device_h": _g(p.price_per_device_h), "cost_per_h": _g(p.cost_h),
            "cost_per_million_at_peak": _g(p.cost_per_million_peak),
            "cost_per_million_at_capacity": _g(p.cost_per_million_capacity),
            "per_replica_rate": _g(p.per_replica_rate), "utilisation": _g(p.utilisation),
            "excluded_unstable": len(s.unstable), "excluded_unreliable": 0 if s.used_unreliable else len(s.unreliable),
            "status": "memory_does_not_fit" if p.rejected else ("ok" if p.reachable else "slo_unreachable"),
            "basis": p.basis, "replica_capacity": _g(p.replica_capacity),
            "open_loop_capacity": _g(p.open_loop.capacity if p.open_loop else None),
            "open_loop_distribution": p.open_loop.distribution if p.open_loop else "",
            "open_loop_trials": ";".join(f"{c:.6g}" for c in p.open_loop.capacities) if p.open_loop else "",
            "open_loop_spread": _g(p.open_loop.spread if p.open_loop else None), "derated_from": _g(p.derated_from),
            **memory_cells(p),
        })
    return out


def _g(v: float | None) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return f"{v:.6g}"


# sizing.csv as results.rows writes it: one row per plan in ranking order, floats as Python prints them
SCHEMA = RowSchema(columns=CSV_COLUMNS, float_format=repr)


def sizing_csv(sizing: Sizing) -> str:
    return to_csv(SCHEMA, csv_rows(sizing))


def sizing_markdown(sizing: Sizing, runs: Sequence[Run], plot_name: str | None = "sizing.png",
                    confirmation: str | None = None, command: str | None = None,
                    headroom_note: str | None = None, sections: Sequence[tuple[str, str]] = ()) -> str:
    """sizing.md: the demand and how capacity was read, the recommendation and the ranking, the open-loop searches,
    memory, what was left out and why, the consistency check, coverage, scaling, the frontier and the
    confirmation, in the order a reader checks a plan."""
    open_loop = [p for p in sizing.plans if p.open_loop is not None]
    md = _demand(sizing, runs, command, headroom_note, bool(open_loop))
    md += _recommendation(sizing)
    for note in sizing.notes:
        md += [f"Note: {note}", ""]
    if open_loop:
        md += _open_loop(open_loop)
    md += memory_markdown(sizing.plans, sizing.budget)
    md += _left_out(sizing)
    md += _little(sizing, runs)
    md += _coverage(sizing)
    md += _scaling(sizing)
    if plot_name:
        md += _frontier(sizing, plot_name, bool(open_loop))
    if confirmation:
        md += ["## Confirmation under open-loop load", "", confirmation, ""]
    for title, text in sections:
        md += [f"## {title}", "", text, ""]
    return "\n".join(md)


def _demand(sizing: Sizing, runs: Sequence[Run], command: str | None, headroom_note: str | None,
            open_loop: bool) -> list[str]:
    """The title, the command, the demand and what a replica's capacity means here (open-loop or, flagged,
    closed-loop only): a reader must know what the numbers below rest on before reading them."""
    d = sizing.demand
    md = ["# Fleet sizing", ""]
    if command:
        md += [f"Command: `{command}`", ""]
    md += [
        f"Demand: peak **{d.peak_rps:,.6g} inferences/s**, headroom {d.headroom:.1%} -> planned for "
        f"**{d.planned_rate:,.6g} inferences/s**, SLO **p99 <= {d.slo_ms:g} ms**"
        + (f", {d.gpus_per_node} GPUs per node" if any(r.gpu for r in runs) else "") + ".",
        "",
    ]
    if headroom_note:
        md += [headroom_note, ""]
    if open_loop:
        md += ["Per-replica capacity = the open-loop capacity: the highest offered request rate (perf_analyzer "
               "--request-intervals from a seeded schedule, async, Poisson or constant arrivals; p99 from each "
               "request's intended send time) at which one replica answered >= 97% of what was offered, its queue "
               "did not grow across windows and p99 met the SLO, found by bracketing and bisection from the "
               "closed-loop figure; the median of the repeated searches. "
               "replicas = ceil(peak x (1 + headroom) / open-loop capacity).", ""]
    else:
        md += ["**Closed loop only**: no open-loop capacity was measured (size_fleet.py --capacity URL), so this plan "
               "rests on closed-loop points, which overstate what a replica sustains under real (open-loop) traffic. "
               "Measure and confirm before buying from it.", ""]
    md += [
        "Closed-loop sustainable throughput = the best measured Inferences/second among stable points with p99 <= "
        "SLO (never extrapolated). A replica is one "
        "Triton server with the run's instance_group on its GPU(s); on a CPU-only run it is one server on one host. "
        "Throughput counts inferences (requests x client batch size); an offline point (batch b, concurrency 1) "
        "assumes clients that send batches of b.",
        "",
    ]
    return md


def _recommendation(sizing: Sizing) -> list[str]:
    """The recommendation's reason and the ranked configurations with their fleets and prices."""
    md = ["## Recommendation", "", sizing.reason, ""]
    if not sizing.ranked:
        return md
    headers = ["Rank", "Configuration", "Point", "Closed-loop inf/s (p99 <= SLO)", "P99 (ms)",
               "Open-loop capacity (inf/s)", "Planned per replica", "Replicas",
               "GPUs / hosts", "Nodes", "$/h", "$/M inf at peak", "$/M inf at capacity", "Utilisation"]
    rows = []
    for p in sizing.ranked:
        s = p.sustainable
        ol = p.open_loop.capacity if p.open_loop is not None else None
        rows.append([p.rank, p.run.label, s.point.level, _f(s.throughput), _f(s.point.p99, 3), _f(ol),
                     f"{_f(p.replica_capacity)} ({p.basis})", p.replicas,
                     f"{p.devices} {p.run.unit}{'s' if p.devices != 1 else ''}", p.nodes, _money(p.cost_h),
                     _money(p.cost_per_million_peak), _money(p.cost_per_million_capacity),
                     f"{p.utilisation:.0%}"])
    md += [f"## Configurations ranked by {sizing.ranked_by}", "", _table(headers, rows), ""]
    md += ["$/M inf at peak: the fleet's hourly cost over the inferences it serves in an hour at the peak rate; "
           "at capacity: with every replica at its sustainable throughput. Utilisation: planned rate / fleet "
           "capacity.", ""]
    return md


def _open_loop(open_loop: Sequence[Plan]) -> list[str]:
    """Open-loop capacity beside closed-loop for each configuration, then every search's points in the order
    measured, so a capacity can be traced to the rates that bounded it."""
    md = ["## Open-loop capacity next to closed-loop", ""]
    rows = []
    for p in open_loop:
        o = p.open_loop
        rows.append([p.run.label, _f(o.closed_loop), o.closed_loop_level or "n/a", o.distribution,
                     " / ".join(_f(t.capacity) if t.capacity is not None else "none" for t in o.trials) or "none", _f(o.capacity),
                     "n/a" if o.spread is None else f"{o.spread:.1%}", f"{o.headroom:.1%}",
                     "n/a" if o.ratio is None else f"{o.ratio:.0%}",
                     sum(len(t.points) for t in o.trials)])
    md += [_table(["Configuration", "Closed loop (inf/s)", "Closed-loop point", "Arrivals",
                   "Open-loop capacity per search", "Median", "Spread", "Headroom", "Open / closed", "Points"],
                  rows), ""]
    md += [f"- {p.open_loop.explain()}" for p in open_loop if p.open_loop.explain()] + [""]
    md += ["Spread = (max - min) / min of the repeated searches; headroom = max(spread, the search's resolution). "
           "Each point is in the run folder's openloop.csv (rate, distribution, perf options, trial, timestamp, "
           "perf_analyzer command and log, schedule seed). P99 is latency from each request's intended send "
           "time (perf_analyzer's own, from the actual send, beside it: they part when its sender falls behind); "
           "sent late: requests that went out more than 1 ms after their time.", ""]
    for p in open_loop:
        for i, t in enumerate(p.open_loop.trials, 1):
            rows = [[f"{q.offered:,.1f}", _f(q.sent), _f(q.answered), _f(q.p99, 3), _f(q.perf_p99, 3),
                     _f(q.late_pct, 1), ", ".join(f"{x:.1f}" for x in q.row.get("window_latency_ms") or []) or "n/a",
                     q.verdict(t.slo_ms)] for q in t.points]
            md += [f"{p.run.name}, search {i} (points in the order measured):", "",
                   _table(["Offered (inf/s)", "Sent", "Answered", "P99 (ms)", "P99 from actual send (ms)",
                           "Sent late (%)", "Window avg latency (ms)", "Note"], rows), ""]
    return md


def _left_out(sizing: Sizing) -> list[str]:
    """The configurations that cannot meet the SLO and the unstable points not used, each named."""
    md: list[str] = []
    if sizing.unreachable:
        md += ["## SLO not reachable", ""] + [f"- {t}" for t in sizing.unreachable] + [""]
    excluded = [(p.run, p.sustainable) for p in sizing.plans if p.sustainable.unstable]
    if excluded:
        md += ["## Excluded points", ""]
        for run, s in excluded:
            md.append(f"- {run.name}: {len(s.unstable)} unstable point(s) (stable=False) not used: "
                      + ", ".join(f"{q.level}" for q in s.unstable))
        md.append("")
    return md


def _little(sizing: Sizing, runs: Sequence[Run]) -> list[str]:
    """Little's law over the closed-loop points: those whose measured and implied concurrency part, or how many
    agreed (a window too short or a starved client shows here first)."""
    flags = little_flags(runs)
    md = ["## Consistency check (Little's law)", "",
          "In a closed-loop sweep, concurrency = (Inferences/second / client batch size) x Avg Latency (s). "
          f"Points where the two differ by more than {LITTLE_TOLERANCE:.0%} are unreliable (usually a measurement "
          "window too short, or a client starved of CPU)"
          + (" and were left out of the plan" if not any(p.sustainable.used_unreliable for p in sizing.plans)
             else "; --include-unreliable: they were kept") + ".", ""]
    if flags:
        rows = [[run.name, p.level, _f(p.throughput), _f(p.avg, 3), _f(p.little_concurrency, 2), p.concurrency,
                 f"{p.little_deviation:+.0%}".replace("+", "")] for run, p in flags]
        md += [_table(["Run", "Point", "Inferences/second", "Avg Latency (ms)", "Implied concurrency",
                       "Measured concurrency", "Deviation"], rows), ""]
    else:
        checked = sum(1 for r in runs for p in _pts(r) if p.reliable is not None)
        md += [f"All {checked} stable points with an average latency agree within {LITTLE_TOLERANCE:.0%}.", ""]
    return md


def _coverage(sizing: Sizing) -> list[str]:
    """Geospatial runs: the area a replica and the fleet cover per second, and the time to cover the target."""
    cov = [p for p in sizing.ranked if p.coverage]
    if not cov:
        return []
    area = cov[0].coverage[0].area_km2
    md = ["## Coverage (geospatial)", "",
          "km^2/s = Inferences/second x (tile px x GSD m)^2 / 10^6 (non-overlapping tiles); the fleet runs "
          f"every replica at its sustainable throughput; time to cover {area:,.0f} km^2.", ""]
    rows = []
    for p in cov:
        h, w = p.run.tile_hw
        for c in p.coverage:
            rows.append([p.run.label, f"{h}x{w}", f"{c.gsd_m:g}", f"{c.km2_per_inference:.6g}",
                         _f(c.km2_per_s_replica, 2), _f(c.km2_per_s_fleet, 2), _duration(c.seconds_to_cover)])
    md += [_table(["Configuration", "Tile (px)", "GSD (m)", "km^2 per inference", "km^2/s per replica",
                   "km^2/s fleet", "Time to cover"], rows), ""]
    return md


def _scaling(sizing: Sizing) -> list[str]:
    """Throughput against the number of Triton instances, beside perfect linear scaling."""
    md: list[str] = []
    for t in scaling_tables(sizing.plans):
        head = ["N (Triton instances)", *[str(n) for n in t.counts]]
        rows = [["Inferences/second (measured)", *[_f(v) for v in t.throughput]],
                ["Perfect linear scaling", *[_f(v) for v in t.perfect]],
                ["Speedup", *["n/a" if v is None else f"{v:.2f}x".replace(".00x", "x") for v in t.speedup]]]
        md += [f"## Scaling: {t.group}", "", f"Throughput: {t.basis}.", "", _table(head, rows), ""]
    return md


def _frontier(sizing: Sizing, plot_name: str, open_loop: bool) -> list[str]:
    """The cost-frontier plot and how to read it (its steps rest on closed-loop points)."""
    return ["## Cost frontier", "", f"![cost frontier]({plot_name})", "",
            "For SLOs from tight to loose: the cheapest configuration and its GPU/host count "
            "(the answer only changes at a measured p99)."
            + (" The frontier rests on the closed-loop points: open-loop capacity is measured at the requested "
               "SLO only, so read it for the shape"
               + ("; the star at the requested SLO is the plan." if sizing.recommendation else ".")
               if open_loop else ""), ""]


def _pts(run: Run):
    from .runs import points_of

    return [p for p in points_of(run) if p.stable]


def write_outputs(sizing: Sizing, runs: Sequence[Run], steps: Sequence[FrontierStep], out_dir: str | Path,
                  confirmation: str | None = None, command: str | None = None, headroom_note: str | None = None,
                  sections: Sequence[tuple[str, str]] = ()) -> dict[str, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    d = sizing.demand
    title = (f"Cheapest fleet per p99 SLO (peak {d.peak_rps:,.6g} inf/s, headroom {d.headroom:.0%})")
    png = frontier_plot(steps, d.slo_ms, out_dir / "sizing.png", title, plan=sizing.recommendation)
    paths = {"sizing.png": png, "sizing.md": out_dir / "sizing.md", "sizing.csv": out_dir / "sizing.csv"}
    atomic_write_text(paths["sizing.csv"], sizing_csv(sizing))
    md = sizing_markdown(sizing, runs, png.name, confirmation, command, headroom_note, sections)
    atomic_write_text(paths["sizing.md"], md)
    # for report.html: the same content as an HTML fragment with the plot embedded
    paths["sizing.html"] = out_dir / "sizing.html"
    atomic_write_text(paths["sizing.html"], markdown_to_html(md, out_dir, css_class="sizing"))
    include_in_report(out_dir)  # a report already in the folder gets the section now
    return paths


def include_in_report(run_dir: str | Path) -> dict[str, Path]:
    """Put the run folder's sizing section into its report.md / report.html (replacing an earlier one)."""
    from ..report.sections import include_section

    return include_section(run_dir, "sizing")
