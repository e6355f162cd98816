"""PNG plots of a run (matplotlib, Agg backend: no display needed).

Online: throughput vs latency with every point labelled by its concurrency, and the per-stage latency
breakdown as stacked bars. Offline: throughput and latency vs client batch size. Unstable points are drawn
hollow and red (and their bars hatched), so they are never mistaken for good measurements.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from ..results.schema import BREAKDOWN_COLUMNS, THROUGHPUT  # noqa: E402
from .tables import key_column, sort_rows  # noqa: E402

UNSTABLE_COLOR = "#d62728"
# one colour per latency stage: client stages grey, transport blue, server stages oranges
STAGE_COLORS = {
    "Client Send": "#bdbdbd",
    "Network+server Send/recv": "#6baed6",
    "Server Queue": "#fdd0a2",
    "Server Compute Input": "#fdae6b",
    "Server Compute Infer": "#e6550d",
    "Server Compute Output": "#a63603",
    "Client Recv": "#525252",
}
CLAMP_MARK = "\u2020"  # dagger on the tick of a point whose residual was clamped to 0
DPI = 120


def _val(row: dict[str, Any], col: str) -> float:
    v = row.get(col)
    return float(v) if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)) else math.nan


def _finish(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path


def _unstable_legend(ax, rows, extra: list | None = None, **kw) -> None:
    handles = list(extra or [])
    if any(r.get("stable") is False for r in rows):
        handles.append(Line2D([], [], marker="o", linestyle="", markerfacecolor="white",
                              markeredgecolor=UNSTABLE_COLOR, markeredgewidth=2, label="unstable measurement"))
    if handles:
        ax.legend(handles=handles, **kw)


def throughput_vs_latency(rows: Sequence[dict[str, Any]], path: str | Path, title: str = "",
                          latency: str = "P99 Latency") -> Path:
    """Throughput (y) against p99 latency (x), one point per concurrency, labelled c=N, joined in concurrency order."""
    rows = sort_rows("online", rows)
    fig, ax = plt.subplots(figsize=(8, 5.2))
    xs = [_val(r, latency) for r in rows]
    ys = [_val(r, THROUGHPUT) for r in rows]
    ax.plot(xs, ys, "-", color="#1f77b4", linewidth=1.5, alpha=0.6, zorder=2)
    for r, x, y in zip(rows, xs, ys):
        unstable = r.get("stable") is False
        ax.plot([x], [y], "o", markersize=8, zorder=3,
                markerfacecolor="white" if unstable else "#1f77b4",
                markeredgecolor=UNSTABLE_COLOR if unstable else "#1f77b4", markeredgewidth=2)
        if not (math.isnan(x) or math.isnan(y)):
            ax.annotate(f"c={r.get('Concurrent client requests')}", (x, y), textcoords="offset points",
                        xytext=(7, 7), fontsize=9, zorder=4, color=UNSTABLE_COLOR if unstable else "#222222",
                        bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none", alpha=0.85))
    ax.set_xlabel(f"{latency} (ms)")
    ax.set_ylabel("Throughput (inferences/s)")
    ax.set_title(title or f"Online: throughput vs {latency.lower()} (points labelled by concurrency)")
    ax.grid(True, alpha=0.3)
    finite_x = [x for x in xs if not math.isnan(x)] or [1.0]
    finite_y = [y for y in ys if not math.isnan(y)] or [1.0]
    ax.set_xlim(0, max(finite_x) * 1.15)
    ax.set_ylim(0, max(finite_y) * 1.15)
    series = [Line2D([], [], color="#1f77b4", marker="o", linewidth=1.5, label=f"{latency} per concurrency")]
    _unstable_legend(ax, rows, series, loc="lower right")
    return _finish(fig, Path(path))


def latency_breakdown(rows: Sequence[dict[str, Any]], path: str | Path, kind: str = "online", title: str = "") -> Path:
    """Stacked bars of the latency stages per load level (concurrency, or batch size offline)."""
    rows = sort_rows(kind, rows)
    key = key_column(kind)
    labels = [str(r.get(key)) + ("*" if r.get("stable") is False else "") + (CLAMP_MARK if r.get("residual_clamped") else "")
              for r in rows]
    width = max(6.5, 0.9 * len(rows) + 4.5)
    fig, ax = plt.subplots(figsize=(width, 5.2))
    bottoms = [0.0] * len(rows)
    x = list(range(len(rows)))
    for stage in BREAKDOWN_COLUMNS:
        heights = [0.0 if math.isnan(_val(r, stage)) else _val(r, stage) for r in rows]
        bars = ax.bar(x, heights, bottom=bottoms, color=STAGE_COLORS[stage], edgecolor="white", linewidth=0.5,
                      label=stage, width=0.7)
        for bar, r in zip(bars, rows):
            if r.get("stable") is False:
                bar.set_hatch("//")
                bar.set_edgecolor(UNSTABLE_COLOR)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    for xi, r, total in zip(x, rows, bottoms):
        p99 = _val(r, "P99 Latency")
        ax.annotate(f"{total:.3g}", (xi, total), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8,
                    zorder=5, bbox=dict(boxstyle="round,pad=0.1", facecolor="white", edgecolor="none", alpha=0.85))
        if not math.isnan(p99):
            ax.plot([xi - 0.35, xi + 0.35], [p99, p99], color="black", linewidth=1.2, linestyle=":")
    ax.set_xticks(x, labels)
    ax.set_xlabel("Concurrent client requests" if kind == "online" else "Client batch size")
    ax.set_ylabel("Latency (ms)")
    ax.set_title(title or f"{kind.capitalize()}: latency breakdown per "
                 f"{'concurrency' if kind == 'online' else 'batch size'} (average per stage, stacked)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_ylim(0, max([*bottoms, *[_val(r, 'P99 Latency') for r in rows if not math.isnan(_val(r, 'P99 Latency'))], 1e-6]) * 1.15)
    handles = [Patch(facecolor=STAGE_COLORS[s], label=s) for s in reversed(BREAKDOWN_COLUMNS)]
    handles.append(Line2D([], [], color="black", linestyle=":", label="P99 Latency"))
    if any(r.get("stable") is False for r in rows):
        handles.append(Patch(facecolor="white", edgecolor=UNSTABLE_COLOR, hatch="//", label="unstable (*)"))
    if any(r.get("residual_clamped") for r in rows):
        handles.append(Patch(facecolor="none", edgecolor="none", label=f"{CLAMP_MARK} Network+server clamped to 0"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
    return _finish(fig, Path(path))


def offline_throughput_latency(rows: Sequence[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Two panels against client batch size: throughput, and avg/p90/p95/p99 latency."""
    rows = sort_rows("offline", rows)
    batches = [r.get("Client Batch Size") for r in rows]
    x = list(range(len(rows)))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.6))
    thr = [_val(r, THROUGHPUT) for r in rows]
    bars = left.bar(x, [0 if math.isnan(t) else t for t in thr], color="#1f77b4", width=0.6)
    for bar, r, t in zip(bars, rows, thr):
        if r.get("stable") is False:
            bar.set_facecolor("white")
            bar.set_edgecolor(UNSTABLE_COLOR)
            bar.set_hatch("//")
        if not math.isnan(t):
            left.annotate(f"{t:,.0f}" if t >= 100 else f"{t:.3g}", (bar.get_x() + bar.get_width() / 2, t), textcoords="offset points",
                          xytext=(0, 3), ha="center", fontsize=9)
    left.set_xticks(x, [str(b) + ("*" if r.get("stable") is False else "") for b, r in zip(batches, rows)])
    left.set_xlabel("Client batch size")
    left.set_ylabel("Throughput (inferences/s)")
    left.set_title("Throughput")
    left.grid(True, axis="y", alpha=0.3)
    left.set_ylim(0, max([t for t in thr if not math.isnan(t)] or [1]) * 1.15)
    styles = {"Avg Latency": ("#7f7f7f", "--"), "P90 Latency": ("#2ca02c", "-"),
              "P95 Latency": ("#ff7f0e", "-"), "P99 Latency": ("#d62728", "-")}
    for col, (color, ls) in styles.items():
        ys = [_val(r, col) for r in rows]
        if all(math.isnan(y) for y in ys):
            continue
        right.plot(x, ys, ls, color=color, marker="o", label=col, linewidth=1.6)
    for xi, r in zip(x, rows):
        if r.get("stable") is False:
            right.plot([xi], [_val(r, "P99 Latency")], "o", markersize=11, markerfacecolor="none",
                       markeredgecolor=UNSTABLE_COLOR, markeredgewidth=2)
    right.set_xticks(x, [str(b) for b in batches])
    right.set_xlabel("Client batch size")
    right.set_ylabel("Latency per request (ms)")
    right.set_title("Latency")
    right.set_ylim(bottom=0)
    right.grid(True, alpha=0.3)
    _unstable_legend(right, rows, right.get_legend_handles_labels()[0], loc="upper left", fontsize=9)
    fig.suptitle(title or "Offline: static batching at concurrency 1")
    fig.tight_layout()
    return _finish(fig, Path(path))


def plots_for(kind: str, rows: Sequence[dict[str, Any]], out_dir: str | Path) -> dict[str, Path]:
    """Every plot for one sweep kind, named `<kind>_*.png` in out_dir."""
    out_dir = Path(out_dir)
    if not rows:
        return {}
    if kind == "online":
        return {
            "online_throughput_latency": throughput_vs_latency(rows, out_dir / "online_throughput_latency.png"),
            "online_latency_breakdown": latency_breakdown(rows, out_dir / "online_latency_breakdown.png", "online"),
        }
    return {
        "offline_throughput_latency": offline_throughput_latency(rows, out_dir / "offline_throughput_latency.png"),
        "offline_latency_breakdown": latency_breakdown(rows, out_dir / "offline_latency_breakdown.png", "offline"),
    }
