"""What a search leaves behind: search.csv (every config tried and why it was dropped), search_points.csv,
search.md with the verdict and its spread, search_frontier.png, and the winning config in the repository."""
from __future__ import annotations

import math
import statistics
import warnings
from pathlib import Path
from typing import Any

from ..report.sections import include_section, markdown_to_html
from ..repository.config import build_config, to_text
from ..repository.layout import write_model
from ..results.rows import RowSchema, to_csv
from ..spec import atomic_write_text
from ..tables import markdown_table
from .progress import format_seconds
from .trials import FormatInfo, SearchOutcome, Trial

CSV_COLUMNS = (
    "config", "stage", "format", "instances", "threads", "threads_used", "cores", "max_batch_size",
    "preferred_batch_sizes", "max_queue_delay_us", "status", "verdict", "reason", "best_concurrency",
    "best_throughput", "best_p99_ms", "min_p99_ms", "concurrencies", "stop_reason", "confirm_concurrency",
    "confirm_throughput_median", "confirm_throughput_min", "confirm_throughput_max", "confirm_p99_median",
    "confirm_p99_max", "confirm_holds_budget", "points_measured_now", "seconds",
    "best_server_throughput", "best_server_queue_ms", "best_server_compute_ms", "best_host_memory_gb",
    "best_gpu_memory_gb", "capacity_median", "capacity_min", "capacity_max", "capacity_searches",
    "capacity_p99_ms",
)
POINT_COLUMNS = ("config", "concurrency", "sample", "throughput", "p99_ms", "p50_ms", "avg_ms", "queue_ms",
                 "compute_ms", "stable", "note", "seconds", "server_throughput", "server_queue_ms",
                 "server_compute_ms", "host_memory_bytes", "gpu_memory_bytes")
HIGHLIGHT = {"winner": "#2ca02c", "runner-up": "#ff7f0e", "default": "#1f77b4"}
LABEL_OFFSET = {"winner": (6, 4), "runner-up": (6, -11), "default": (-20, 5)}  # concurrency labels apart


def _num(v: float | None, digits: int = 4) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return float(f"{v:.{digits}g}") if isinstance(v, float) else v


def trial_row(t: Trial, outcome: SearchOutcome) -> dict[str, Any]:
    s = outcome.settings
    c = t.candidate
    best = t.best
    low = t.sweep.min_p99 if t.sweep else None
    conf = t.confirmation
    return {
        "config": c.slug, "stage": t.stage, "format": c.format, "instances": c.instances,
        "threads": c.threads or "default", "threads_used": c.threads_used(s.cores), "cores": s.cores,
        "max_batch_size": c.max_batch_size, "preferred_batch_sizes": " ".join(map(str, c.preferred_batch_sizes)),
        "max_queue_delay_us": c.max_queue_delay_us, "status": t.status, "verdict": t.verdict,
        "reason": t.detail or t.reason,
        "best_concurrency": best.concurrency if best else "", "best_throughput": _num(best.throughput) if best else "",
        "best_p99_ms": _num(best.p99_ms) if best else "", "min_p99_ms": _num(low.p99_ms) if low else "",
        "concurrencies": " ".join(str(p.concurrency) for p in sorted(t.sweep.points, key=lambda p: p.concurrency))
        if t.sweep else "",
        "stop_reason": t.sweep.stop_reason if t.sweep else "",
        "confirm_concurrency": conf.concurrency if conf else "",
        "confirm_throughput_median": _num(conf.throughput.median) if conf else "",
        "confirm_throughput_min": _num(conf.throughput.low) if conf else "",
        "confirm_throughput_max": _num(conf.throughput.high) if conf else "",
        "confirm_p99_median": _num(conf.p99.median) if conf else "",
        "confirm_p99_max": _num(conf.p99.high) if conf else "",
        "confirm_holds_budget": ("yes" if conf.holds else "no") if conf else "",
        "points_measured_now": t.measured_points, "seconds": round(t.seconds, 1),
        **_capacity_fields(t),
        # the server's own view at the best level (sample 0's scrape; empty where the endpoint did not answer)
        "best_server_throughput": _num(best.server_throughput) if best else "",
        "best_server_queue_ms": _num(best.server_queue_ms) if best else "",
        "best_server_compute_ms": _num(best.server_compute_ms) if best else "",
        "best_host_memory_gb": _num(best.host_memory_bytes / 1e9) if best else "",
        "best_gpu_memory_gb": _num(best.gpu_memory_bytes / 1e9) if best else "",
    }


def _capacity_fields(t: Trial) -> dict[str, Any]:
    """The open-loop capacity of a finalist under --objective capacity (empty otherwise)."""
    cap = t.capacity
    if cap is None:
        return {}
    spread = cap.spread
    best = [s.best for s in cap.result.trials if s.best is not None]
    return {"capacity_median": _num(spread.median) if spread else "",
            "capacity_min": _num(spread.low) if spread else "",
            "capacity_max": _num(spread.high) if spread else "", "capacity_searches": len(cap.result.trials),
            "capacity_p99_ms": _num(statistics.median([b.p99 for b in best])) if best else ""}


def capacity_markdown(outcome: SearchOutcome) -> list[str]:
    """The finalists' open-loop capacity: what the winner was chosen by under --objective capacity."""
    s, d = outcome.settings, outcome.decision
    measured = [t for t in outcome.trials if t.capacity is not None]
    if not measured:
        return []
    role = {id(d.winner): "winner", id(d.runner_up): "runner-up", id(d.default): "default"}
    rows = []
    for t in sorted(measured, key=lambda t: -(t.capacity.spread.median if t.capacity.spread else -1)):
        f = _capacity_fields(t)
        closed = t.capacity.result.closed_loop
        rows.append([role.get(id(t), t.verdict), f"`{t.candidate.slug}`",
                     t.capacity.spread.text() if t.capacity.spread else "none within the budget",
                     str(f["capacity_p99_ms"]), f"{closed:,.1f}" if closed else "-",
                     f"{t.capacity.result.ratio:.0%}" if t.capacity.result.ratio else "-",
                     str(f["capacity_searches"]), t.capacity.error or ""])
    return ["### Open-loop capacity (the ranking)", "",
            f"Each config's highest Poisson arrival rate that one replica sustains with p99 <= {s.budget_ms:g} ms "
            "(p99 from each request's intended send time; answered >= 97% of what was offered; queue not growing), "
            "from its searches taken in turns (median [min..max]; a search that found no rate counts as 0), next to "
            "its closed-loop best within the budget:", "",
            markdown_table(["role", "config", "capacity (inf/s)", "p99 at it (ms)", "closed loop (inf/s)",
                            "open / closed", "searches", "note"], rows, "llrrrrrl"), ""]


# the two CSVs as results.rows writes them: rows in the order given, floats as Python prints them (repr)
TRIALS_SCHEMA = RowSchema(columns=CSV_COLUMNS, float_format=repr)
POINTS_SCHEMA = RowSchema(columns=POINT_COLUMNS, key=("config", "concurrency", "sample"),
                          types={"concurrency": int, "sample": int}, float_format=repr)


def write_csvs(outcome: SearchOutcome, store, result_dir: Path) -> tuple[Path, Path]:
    order = {"winner": 0, "runner-up": 1, "default": 2}
    trials = sorted(outcome.trials, key=lambda t: order.get(t.verdict, 3))
    path = result_dir / "search.csv"
    atomic_write_text(path, to_csv(TRIALS_SCHEMA, [trial_row(t, outcome) for t in trials]))
    slug = {t.key: t.candidate.slug for t in outcome.trials}
    rows = []
    for p in sorted(store.points.values(), key=lambda p: (p.candidate, p.concurrency, p.sample)):
        if p.candidate in slug:
            values = {k: _num(v) if isinstance(v, float) else v for k, v in p.to_dict().items()}
            rows.append({**values, "config": slug[p.candidate]})
    points = result_dir / "search_points.csv"
    atomic_write_text(points, to_csv(POINTS_SCHEMA, rows))
    return path, points


# ---- frontier plot -------------------------------------------------------------------------------

def plot_frontier(outcome: SearchOutcome, path: Path, title: str) -> Path | None:
    """Throughput vs p99 of every measured config, one line per config through its concurrency levels; the
    finalists' re-measurements drawn as median with min..max bars, so the spread behind the verdict shows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budget = outcome.settings.budget_ms
    measured = [t for t in outcome.trials if t.sweep and t.sweep.points]
    if not measured:
        return None
    fig, ax = plt.subplots(figsize=(10, 6.2))
    all_p99 = [p.p99_ms for t in measured for p in t.sweep.points if p.p99_ms > 0] + [budget]
    log_x = max(all_p99) / max(min(all_p99), 1e-9) > 20
    handles: dict[str, Any] = {}
    d = outcome.decision
    roles = {id(t): r for r, t in (("default", d.default), ("runner-up", d.runner_up), ("winner", d.winner)) if t}
    rank = {"winner": 0, "runner-up": 1, "default": 2}
    for t in sorted(measured, key=lambda t: -rank.get(roles.get(id(t), ""), 3)):  # highlighted lines on top
        _config_line(ax, t, roles.get(id(t), ""), t is d.default, budget, handles)
    _envelope(ax, measured, budget)
    if log_x:
        ax.set_xscale("log")
    ax.set_xlabel("p99 latency (ms)" + (", log scale" if log_x else ""))
    ax.set_ylabel("throughput (inferences/s)")
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    _legend(ax, handles, budget)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def _config_line(ax: Any, t: Trial, role: str, is_default: bool, budget: float, handles: dict[str, Any]) -> None:
    """One config through its concurrency levels (the winner, runner-up and default highlighted and labelled,
    the rest grey), hollow markers over the budget, and its final re-measurement as median with min..max bars."""
    pts = sorted(t.sweep.points, key=lambda p: p.concurrency)
    main = role in HIGHLIGHT
    color = HIGHLIGHT.get(role, "#b0b0b0")
    (line,) = ax.plot([p.p99_ms for p in pts], [p.throughput for p in pts], "-", color=color,
                      lw=2.4 if main else 1.0, alpha=1.0 if main else 0.7, zorder=3 if main else 1)
    if main:
        what = "winner (the default)" if role == "winner" and is_default else role
        verdict = "" if t.verdict in ("winner", "runner-up", "default") else f" - {t.verdict}"
        line.set_label(f"{what}: {t.candidate.label()}{verdict}")
        handles[role] = line
    elif "other" not in handles:
        line.set_label("other configs tried")
        handles["other"] = line
    for p in pts:
        inside = p.p99_ms <= budget
        ax.plot([p.p99_ms], [p.throughput], "o", ms=7 if main else 4, color=color,
                markerfacecolor=color if inside else "white", markeredgewidth=1.5, zorder=4 if main else 2)
        if main:
            ax.annotate(f"c{p.concurrency}", (p.p99_ms, p.throughput), textcoords="offset points",
                        xytext=LABEL_OFFSET[role], fontsize=8, color=color)
    c = t.confirmation
    if c is not None:
        ax.errorbar([c.p99.median], [c.throughput.median],
                    xerr=[[c.p99.median - c.p99.low], [c.p99.high - c.p99.median]],
                    yerr=[[c.throughput.median - c.throughput.low], [c.throughput.high - c.throughput.median]],
                    fmt="D", ms=9, color=color, markeredgecolor="black", ecolor=color, elinewidth=1.5,
                    capsize=4, zorder=6)


def _envelope(ax: Any, measured: list[Trial], budget: float) -> None:
    """The best throughput reachable at each p99 within the budget (a step line), and the budget itself."""
    inside = sorted((p.p99_ms, p.throughput) for t in measured for p in t.sweep.points if p.p99_ms <= budget)
    env, best = [], -1.0
    for x, y in inside:
        if y > best:
            env.append((x, y))
            best = y
    if env:
        ax.step([x for x, _ in env] + [budget], [y for _, y in env] + [env[-1][1]], where="post", color="black",
                lw=1.0, ls=":", zorder=2, label="frontier: best throughput reachable at each p99")
    ax.axvline(budget, color="#d62728", ls="--", lw=1.5, zorder=2, label=f"p99 budget {budget:g} ms")


def _legend(ax: Any, handles: dict[str, Any], budget: float) -> None:
    """The highlighted configs first, then the budget and the frontier, then what the markers mean."""
    from matplotlib.lines import Line2D

    ordered = [handles[k] for k in ("winner", "runner-up", "default", "other") if k in handles]
    others = [h for h in ax.get_legend_handles_labels()[0] if h not in ordered and h.get_label() in
              (f"p99 budget {budget:g} ms", "frontier: best throughput reachable at each p99")]
    extra = [Line2D([], [], marker="o", ls="", color="#555555", markerfacecolor="white", label="point over the budget"),
             Line2D([], [], marker="D", ls="", color="#555555", markeredgecolor="black",
                    label="final re-measurement: median, bars min..max")]
    ax.legend(handles=ordered + others + extra, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12),
              ncol=2, frameon=False)


# ---- markdown ------------------------------------------------------------------------------------

def write_markdown(outcome: SearchOutcome, result_dir: Path, *, title: str, host: str, command: str,
                   written: Path | None, plot: Path | None, store=None) -> Path:
    """search.md (and search.html for the report); `store` (the checkpoint) adds the refused or failed configs it
    remembered and the memory per instance count."""
    md = _header(outcome, title, host, command, store.reused_failures if store is not None else 0)
    md += _result(outcome)
    md += capacity_markdown(outcome)
    if written:
        md += [f"Written to the model repository: `{written}`", ""]
    if plot:
        md += [f"![throughput vs p99 per configuration]({plot.name})", "",
               "Each line is one configuration through its concurrency levels (c1, c2, c4, ...); hollow markers "
               "are over the budget (each sweep stops at the first of them).", ""]
    md += _every_config(outcome)
    if store is not None:
        from .memory import markdown as memory_markdown

        md += memory_markdown(outcome, store)
    md += ["## How the search went", ""]
    md += [f"- {n}" for n in outcome.notes] or ["- every dimension was explored"]
    if outcome.stopped:
        md += [f"- exploration stopped early: {outcome.stopped}"]
    md += ["", "Configs are named format/instances/threads/max batch/preferred sizes/queue delay (us); "
               "`tdef` = the runtime's default thread count (one per core).", ""]
    path = result_dir / "search.md"
    text = "\n".join(md)
    atomic_write_text(path, text)
    # report.html's section: the same content as HTML with the frontier plot embedded
    atomic_write_text(result_dir / "search.html", markdown_to_html(text, result_dir, css_class="search"))
    include_section(result_dir, "search")  # a report already in the folder gets the section now
    return path


def _header(outcome: SearchOutcome, title: str, host: str, command: str, reused_failures: int) -> list[str]:
    """The title, where and how the search ran (budget, objective, cores, command), its cost and the noise."""
    s = outcome.settings
    return [f"# {title}", "",
            f"Host: {host}; budget p99 <= {s.budget_ms:g} ms; objective: {s.objective_name}; "
            f"threads x instances capped at {s.cores} cores"
            + (" (oversubscription allowed)" if s.allow_oversubscribe else ""),
            "", f"Command: `{command}`", "",
            f"Wall time {format_seconds(outcome.wall_s)}; {outcome.measured_points} points measured in this run, "
            f"{outcome.reused_points} reused from the checkpoint"
            + (f", {reused_failures} refused/failed configs remembered" if reused_failures else "") + ".", "",
            f"Noise: {outcome.noise.text()}.", "", "## Result", ""]


def _result(outcome: SearchOutcome) -> list[str]:
    """The winner and why (or why none), the finalists' re-measurement and the gain over the default."""
    s, d = outcome.settings, outcome.decision
    if d.winner is None:
        return [f"**No winner.** {d.message}", ""]
    which = "the default config, " if d.winner is d.default else ""
    md = [f"**Winner: {which}{d.winner.candidate.label()}** (`{d.winner.candidate.slug}`).", "",
          d.message[0].upper() + d.message[1:] + ".", ""]
    rows = []
    for role, t in (("winner", d.winner), ("runner-up", d.runner_up), ("default", d.default)):
        if t is None or t.confirmation is None or (role == "default" and t is d.winner):
            continue
        c = t.confirmation
        rows.append([role, t.candidate.label(), str(c.concurrency), c.throughput.text(), c.p99.text(),
                     str(c.throughput.n), "yes" if c.holds else "no"])
    if rows:
        md += [f"Final re-measurement (fresh samples taken in turns; median [min..max]). A level holds the budget "
               f"when every sample is within it and the median is with room for the p99 noise "
               f"({outcome.noise.p99 * 100:.1f}%):", "",
               markdown_table(["role", "config", "concurrency", "throughput (inf/s)", "p99 (ms)", "samples",
                               "holds the budget"], rows, ["l", "l", "r", "r", "r", "r", "l"]), ""]
    if d.gain is not None and s.rank_by != "capacity":
        md += [f"Gain over the default: {d.gain.text()}; noise {outcome.noise.throughput * 100:.1f}%"
               + (" -> **the default is as good**." if d.default_as_good else "."), ""]
    return md


def _every_config(outcome: SearchOutcome) -> list[str]:
    """Every config considered, the finalists first, with its verdict, best level and why it was dropped."""
    rows = []
    order = {"winner": 0, "runner-up": 1, "default": 2}
    for t in sorted(outcome.trials, key=lambda t: order.get(t.verdict, 3)):
        r = trial_row(t, outcome)
        rows.append([f"`{t.candidate.slug}`", t.stage, t.verdict or t.status, str(r["best_throughput"]),
                     str(r["best_concurrency"]), str(r["best_p99_ms"]), r["concurrencies"], r["reason"]])
    return ["## Every configuration considered", "",
            markdown_table(["config", "stage", "verdict", "best inf/s", "at c", "p99 ms", "concurrencies", "why"], rows,
                           ["l", "l", "l", "r", "r", "r", "l", "l"]), ""]


def write_winner(outcome: SearchOutcome, formats: dict[str, FormatInfo], repository: Path, model_name: str,
                 result_dir: Path) -> Path | None:
    """Write the winning config into the repository (the same write_model every script uses)."""
    w = outcome.decision.winner
    if w is None:
        return None
    info = formats[w.candidate.format]
    opts = w.candidate.config_options(model_name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model_dir = write_model(repository, info.artifact_dir, opts)
        atomic_write_text(result_dir / "winner_config.pbtxt", to_text(build_config(info.manifest, opts)))
    return model_dir / "config.pbtxt"
