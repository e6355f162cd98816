"""What check-plan says and keeps: a table per replica group (each round, each model and the group), a summary line,
and check.json / check.md beside a run.json in the check's folder."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..results.run_folder import RunFolder
from ..spec import atomic_write_text
from ..tables import markdown_table
from .checkplan import (CLIENT_CPU_LIMIT, POISSON_Z, RULE, GroupCheck, GroupRound, ModelRound, PlanCheck,
                        Verdict)

HEADERS = ("round", "model", "target/s", "offered/s", "answered/s", "p50 ms", "p99 ms", "SLO ms", "errors",
           "within SLO", "client CPU", "host's others", "verdict")
ALIGN = ("l", "l", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "l")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _label(r: GroupRound) -> str:
    return f"{r.index}" + (" (again)" if r.attempt > 1 else "")


def _model_row(label: str, m: ModelRound, void: bool) -> list[str]:
    verdict = "void" if void else "holds" if m.holds else "fails"
    return [label, m.model, f"{m.planned_rps:,.1f}", f"{m.offered / m.window_s:,.1f}",
            f"{m.answered / m.window_s:,.1f}", _ms(m.p50_ms), _ms(m.p99_ms), f"{m.slo_ms:g}", str(m.errors),
            f"{m.within_slo:.1%}", "", "", verdict]


def group_table(check: GroupCheck) -> str:
    """Every round of one group: a row per model, then the group's row with the load generator's CPU."""
    rows: list[list[str]] = []
    for r in check.rounds:
        label = _label(r)
        rows += [_model_row(label, m, r.verdict is Verdict.VOID) for m in r.models]
        others = f"{r.neighbours.others_cores:.2f} cores" if r.neighbours else "-"
        rows.append([label, "(group)", "", "", "", "", "", "", "", "", f"{r.cpu_share:.2f} cores", others,
                     r.verdict.value])
    return markdown_table(HEADERS, rows, ALIGN)


def group_text(check: GroupCheck, rounds: int, scale: float = 1.0) -> list[str]:
    """The group's heading, table, why each miss missed, and its verdict line."""
    g = check.group
    rates = ", ".join(f"{m} {g.rates[m]:,.1f}/s" for m in g.models)
    scaled = f"; target/s: {scale:g}x those" if scale != 1 else ""
    served = ", ".join(f"{m} as {s}" for m, s in check.served.items() if s != m)
    lines = [f"### {g.label}", "",
             f"{g.replicas} replica(s) planned; per replica: {rates}{scaled}; at {check.url}"
             + (f"; {served}" if served else "") + ".",
             "Inputs: " + "; ".join(f"{m}: {d}" for m, d in check.data.items()) + ".",
             *([f"Neighbours: {check.server}."] if check.server else []), "", group_table(check), ""]
    for r in check.rounds:
        if r.verdict is Verdict.VOID:
            lines.append(f"- round {_label(r)}: void, {r.void_text()}; what it measured does not count")
        for m in r.models:
            lines += [f"- round {_label(r)}, {m.model}: {why}" for why in m.misses()]
    counted = check.counted()
    held = sum(r.verdict is Verdict.HOLDS for r in counted)
    verdict = check.verdict(rounds)
    lines += [""] if lines[-1] else []
    lines += [f"**{g.label}: {verdict.value}** (held in {held} of {rounds} round(s); needs {rounds // 2 + 1})", ""]
    return lines


def summary_line(result: PlanCheck) -> str:
    rounds = result.settings.rounds
    verdicts = {c.group.label: c.verdict(rounds) for c in result.groups}
    held = sum(v is Verdict.HOLDS for v in verdicts.values())
    text = (f"check-plan: {held} of {len(verdicts)} group(s) hold at {result.settings.scale:g}x the planned "
            "per-replica rates")
    others = [f"{label} {v.value}" for label, v in verdicts.items() if v is not Verdict.HOLDS]
    if others:
        text += f"; {', '.join(others)}"
    void = [r for c in result.groups if verdicts[c.group.label] is Verdict.VOID for r in c.counted()
            if r.verdict is Verdict.VOID]
    if any(r.disturbed for r in void):
        text += " (void: the host's other processes kept it busy; run it again on a quiet host)"
    elif void:
        text += (f" (void: the load generator used more than {CLIENT_CPU_LIMIT:g} of a core; run it from a host with "
                 "spare cores)")
    return text + f" (exit {result.code})"


def markdown(result: PlanCheck) -> str:
    s = result.settings
    head = [f"# Plan check: {result.plan.folder}", "",
            f"{s.rounds} round(s) per group of {s.window_s:g} s (after {s.warmup_s:g} s of warm-up), seed {s.seed}, "
            f"{s.scale:g}x the planned per-replica rates. {RULE}", ""]
    body = [line for c in result.groups for line in group_text(c, s.rounds, s.scale)]
    return "\n".join(head + body + [summary_line(result), ""])


def _model_dict(m: ModelRound) -> dict[str, Any]:
    return {"model": m.model, "planned_rps": m.planned_rps, "slo_ms": m.slo_ms, "window_s": m.window_s,
            "offered": m.offered, "answered": m.answered, "offered_rps": m.offered / m.window_s,
            "answered_rps": m.answered / m.window_s, "errors": m.errors, "first_error": m.first_error,
            "p50_ms": m.p50_ms, "p99_ms": m.p99_ms, "within_slo": m.within_slo, "late_p99_ms": m.late_p99_ms,
            "holds": m.holds, "misses": m.misses()}


def to_dict(result: PlanCheck) -> dict[str, Any]:
    s = result.settings
    return {
        "kind": "plan-check", "plan": str(result.plan.folder), "planner_confirmed": result.plan.confirmed,
        "settings": {"scale": s.scale, "rounds": s.rounds, "window_s": s.window_s, "warmup_s": s.warmup_s,
                     "seed": s.seed, "samples": s.samples, "timeout_s": s.timeout_s},
        "rule": RULE, "client_cpu_limit": CLIENT_CPU_LIMIT, "poisson_z": POISSON_Z, "rounds_needed": s.needed,
        "groups": [{"models": list(c.group.models), "label": c.group.label, "replicas": c.group.replicas,
                    "planned_rates": dict(c.group.rates), "url": str(c.url), "served": c.served, "data": c.data,
                    "verdict": c.verdict(s.rounds).value,
                    "neighbours": c.server,
                    "rounds": [{"round": r.index, "attempt": r.attempt, "cpu_share": r.cpu_share,
                                "host_others": r.neighbours.row() if r.neighbours else None, "judged": r.judged,
                                "verdict": r.verdict.value, "models": [_model_dict(m) for m in r.models]}
                               for r in c.rounds]} for c in result.groups],
        "holds": result.holds, "exit_code": result.code}


def write(result: PlanCheck, folder: Path) -> dict[str, Path]:
    """check.json, check.md and run.json (the command, host and versions) in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = to_dict(result)
    paths = {"check.json": folder / "check.json", "check.md": folder / "check.md"}
    atomic_write_text(paths["check.json"], json.dumps(doc, indent=2) + "\n")
    atomic_write_text(paths["check.md"], markdown(result))
    RunFolder(folder).record({k: doc[k] for k in ("kind", "plan", "settings", "holds", "exit_code")})
    paths["run.json"] = folder / "run.json"
    return paths


__all__ = ["group_table", "markdown", "summary_line", "to_dict", "write"]
