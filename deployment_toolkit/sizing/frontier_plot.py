"""The cost-frontier plot of sizing.md (sizing.png): for SLOs from tight to loose, the cheapest fleet's $/h and its
GPU/host count, with the recommended plan as a star where it rests on open-loop or confirmed capacity."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from .frontier import FrontierStep
from .plan import Plan


@dataclass
class _Frame:
    """What every panel shares: the steps with a plan, the colours, the x range and where SLOs become reachable."""

    ok: list[FrontierStep]
    panels: list[tuple[str, str]]
    labels: list[str]
    color_of: dict[str, Any]
    plan: Plan | None
    slo_ms: float
    x_lo: float
    x_hi: float
    unreachable_to: float


def frontier_plot(steps: Sequence[FrontierStep], slo_ms: float, path: str | Path, title: str = "",
                  plan: Plan | None = None) -> Path:
    """For SLOs from tight to loose: the cheapest fleet's $/h (top, when every configuration has a price) and
    its GPU/host count (bottom), as steps coloured by configuration; values are written where they change;
    the requested SLO is a dashed line and SLOs no configuration meets are shaded. `plan`, the recommendation
    when it rests on open-loop or confirmed capacity (the steps rest on closed-loop points), is a star at the
    requested SLO, so that the plot cannot be read as a cheaper plan than the one recommended."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    frame = _frame(steps, slo_ms, plan, plt.get_cmap("tab10"))
    legend_rows = len(frame.labels) + 2
    fig_h = (2.6 * len(frame.panels)) + 0.9 + 0.19 * legend_rows
    fig, axes = plt.subplots(len(frame.panels), 1, figsize=(9, fig_h), sharex=True, squeeze=False)
    axes = [a[0] for a in axes]
    for ax, (what, ylabel) in zip(axes, frame.panels):
        _panel(ax, what, ylabel, frame)
    _x_axis(axes[-1], frame)
    axes[0].set_title(title or "Cheapest fleet per p99 SLO", fontsize=11)
    handles = _legend(frame)
    legend_h = 0.19 * len(handles) + 0.15
    fig.legend(handles=handles, loc="lower left", ncol=1, fontsize=8, frameon=False,
               bbox_to_anchor=(0.02, 0.0))
    fig.tight_layout(rect=(0, legend_h / fig_h, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _frame(steps: Sequence[FrontierStep], slo_ms: float, plan: Plan | None, cmap: Any) -> _Frame:
    """The panels (cost only when every configuration has a price), one colour per configuration, the plan's star
    only where it differs from the step at the requested SLO, and the x range around the measured SLOs."""
    steps = sorted(steps, key=lambda t: t.slo_ms)
    ok = [s for s in steps if s.plan is not None]
    has_cost = bool(ok) and all(s.plan.cost_h is not None for s in ok)
    panels = ([("cost", "fleet cost ($/h)")] if has_cost else [])
    units = sorted({s.plan.run.unit for s in ok})
    panels.append(("devices", (" / ".join(f"{u}s" for u in units) if units else "devices") + " needed"))
    labels = list(dict.fromkeys(s.plan.run.label for s in ok))
    color_of = {lab: cmap(i % 10) for i, lab in enumerate(labels)}
    if plan is not None and (plan.basis == "closed loop" or plan.devices is None):
        plan = None  # the closed-loop plan is the step at the requested SLO itself
    if plan is not None and plan.run.label not in color_of:
        color_of[plan.run.label] = cmap(len(color_of) % 10)
        labels.append(plan.run.label)
    xs = [s.slo_ms for s in steps] or [slo_ms]
    x_lo, x_hi = min(xs + [slo_ms]) / 1.15, max(xs + [slo_ms]) * 1.25
    unreachable_to = min((s.slo_ms for s in ok), default=x_hi)
    return _Frame(ok, panels, labels, color_of, plan, slo_ms, x_lo, x_hi, unreachable_to)


def _panel(ax: Any, what: str, ylabel: str, frame: _Frame) -> None:
    """One panel: the steps, the shaded unreachable SLOs, the requested SLO and the plan's star."""
    value: Callable[[Plan], Any] = (lambda pl: pl.cost_h) if what == "cost" else (lambda pl: pl.devices)
    _steps(ax, what, value, frame)
    if frame.unreachable_to > frame.x_lo:
        ax.axvspan(frame.x_lo, frame.unreachable_to, color="0.88", lw=0)
    ax.axvline(frame.slo_ms, color="0.25", linestyle="--", linewidth=1)
    plan = frame.plan
    if plan is not None and value(plan) is not None:
        y = value(plan)
        ax.plot([frame.slo_ms], [y], "*", color=frame.color_of[plan.run.label], markersize=13,
                markeredgecolor="black", zorder=5)
        text = f"plan: ${y:,.2f}/h" if what == "cost" else f"plan: {y}"
        ax.annotate(text, (frame.slo_ms, y), textcoords="offset points", xytext=(8, 4), fontsize=8,
                    fontweight="bold")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    top = max([value(s.plan) for s in frame.ok] + ([value(plan)] if plan is not None else []), default=1)
    ax.set_ylim(0, top * 1.25 + (0 if what == "cost" else 0.5))


def _steps(ax: Any, what: str, value: Callable[[Plan], Any], frame: _Frame) -> None:
    """The cheapest fleet per SLO as horizontal steps, its value written where it or the configuration changes."""
    ok = frame.ok
    prev = None
    for i, s in enumerate(ok):
        y = value(s.plan)
        x1 = ok[i + 1].slo_ms if i + 1 < len(ok) else frame.x_hi
        col = frame.color_of[s.plan.run.label]
        ax.hlines(y, s.slo_ms, x1, colors=[col], linewidth=3)
        if prev is not None and prev[1] != y:
            ax.vlines(s.slo_ms, prev[1], y, colors=["0.6"], linewidth=1, linestyles=":")
        if prev is None or prev[1] != y or prev[0] is not s.plan.run:
            ax.plot([s.slo_ms], [y], "o", color=col, markersize=4)
            text = f"${y:,.2f}/h" if what == "cost" else f"{y}"
            ax.annotate(text, (s.slo_ms, y), textcoords="offset points", xytext=(4, 5), fontsize=8)
        prev = (s.plan.run, y)


def _x_axis(ax: Any, frame: _Frame) -> None:
    """The SLO axis on a log scale with plain-number ticks (1, 2, 3, 5 per decade)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.set_xlim(frame.x_lo, frame.x_hi)
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("p99 latency SLO (ms, log scale)")


def _legend(frame: _Frame) -> list[Any]:
    """One line per configuration, the requested SLO, the plan's star (saying what it rests on) and the shading."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Line2D([0], [0], color=frame.color_of[lab], lw=3, label=lab) for lab in frame.labels]
    handles.append(Line2D([0], [0], color="0.25", ls="--", lw=1, label=f"requested SLO: p99 {frame.slo_ms:g} ms"))
    if frame.plan is not None:
        basis = frame.plan.basis.replace(" ", "-")
        handles.append(Line2D([0], [0], marker="*", color="white", markerfacecolor="0.5", markeredgecolor="black",
                              markersize=12, label=f"the recommended plan ({basis} capacity per replica); "
                              "the steps rest on closed-loop points"))
    if frame.unreachable_to > frame.x_lo:
        handles.append(Patch(color="0.88", label="no measured configuration meets this SLO"))
    return handles


__all__ = ["frontier_plot"]
