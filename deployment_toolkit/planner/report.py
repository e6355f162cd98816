"""plan.md and plan.html: the one page a person buys hardware from. The chosen format and config, capacity per
replica with the spread of its searches, replicas, cost, the confirmation, what was tried and rejected and why, where
the inputs came from, every stage with its time, and the files behind each figure."""
from __future__ import annotations

from pathlib import Path

from ..report.sections import plan_page
from ..spec import atomic_write_text
from ..tables import markdown_table


def _rel(result, path: Path | str) -> str:
    try:
        return str(Path(path).resolve().relative_to(result.out_dir.resolve()))
    except ValueError:
        return str(path)


def plan_markdown(result, demand, checks, deploy, command: str = "") -> str:
    searched, plan = result.search, result.plan
    outcome = searched.outcome
    winner = outcome.decision.winner
    cap = winner.capacity
    md = [f"# Fleet plan: {searched.model_name}, peak {demand.peak_rps:,.6g} inf/s at p99 <= {demand.p99_ms:g} ms", ""]
    if command:
        md += [f"Command: `{command}`", ""]
    cost = f", **${plan.cost_h:,.2f}/h**" if plan.cost_h is not None else ""
    md += ["## The plan", "",
           f"**{plan.replicas} replica(s)** of `{winner.candidate.slug}` ({winner.candidate.label()}), "
           f"{plan.devices} {plan.run.unit}(s) on {plan.nodes} node(s){cost}.", "",
           markdown_table(["", ""], [
               ["format and config", f"{winner.candidate.label()}"],
               ["capacity per replica (open loop, Poisson)", f"{cap.spread.text()} inf/s (median [min..max] of "
                f"{len(cap.result.trials)} searches)"],
               ["planned per replica", f"{plan.replica_capacity:,.1f} inf/s ({plan.basis})"],
               ["headroom", f"{plan.demand.headroom:.1%}"],
               ["closed loop, for comparison", f"{cap.result.closed_loop:,.1f} inf/s at {cap.result.closed_loop_level}"
                if cap.result.closed_loop else "-"],
               ["device", plan.run.device_short],
               ["memory per replica", plan.memory.text() if plan.memory is not None else "not recorded"],
               ["replicas x devices x nodes", f"{plan.replicas} x {plan.devices} x {plan.nodes}"],
               ["cost", f"${plan.cost_h:,.2f}/h" if plan.cost_h is not None else
                "no price given (--host-hour-cost / --gpu-hour-cost)"],
           ], "ll"), ""]
    md += [f"Why this config: {outcome.decision.message}.", ""]
    if result.holding is not None:
        h = result.holding
        md += ["## The capacity, re-tested at the rate itself", "",
               f"The search's capacity is the highest rate one bisection saw pass; rates at that edge pass and fail by "
               f"turns. Before the plan uses it, it is re-tested {h.k} times at the rate itself (independent Poisson "
               f"arrivals each), stepping down 10 % after a failure: {h.text()}.", "",
               markdown_table(["rate (inf/s)", "re-test", "verdict"],
                              [[f"{r.rate:,.1f}", r.trial, r.verdict] for r in h.retests], "rrl"), ""]
    md += ["## Confirmation under open-loop traffic", ""]
    if result.confirmation is None:
        md += ["Not run (--no-confirm).", ""]
    else:
        md += [result.confirmation.text(), ""]
    md += ["## What was tried", "",
           "Every config the search considered, with its verdict and why (closed-loop exploration prunes; the finalists "
           "are ranked by open-loop capacity):", ""]
    rows = []
    order = {"winner": 0, "runner-up": 1, "default": 2}
    for t in sorted(outcome.trials, key=lambda t: order.get(t.verdict, 3)):
        c = f"{t.capacity.spread.text()}" if t.capacity is not None and t.capacity.spread is not None else ""
        best = f"{t.best.throughput:,.1f} @ c{t.best.concurrency}" if t.best is not None else ""
        rows.append([f"`{t.candidate.slug}`", t.verdict or t.status, c, best, (t.detail or t.reason)[:300]])
    md += [markdown_table(["config", "verdict", "open-loop capacity (inf/s)", "closed loop (inf/s @ concurrency)",
                           "why"], rows, "llrrl"), ""]
    formats = [f"{f.format}: " + ("verified" if not f.error else f"not usable - {f.error}") for f in searched.formats]
    md += ["Formats: " + "; ".join(formats) + ".", ""]
    md += ["## Inputs", "",
           (f"Measured with the user's samples ({result.data})." if result.data else
            "No --data-dir / --dataloader: measured with **random inputs** of the model's signature. A model whose "
            "speed depends on its input (sequence lengths, early exits, image content) can serve real traffic at "
            "another rate: plan on a run with your data before buying hardware."), ""]
    if plan.run.format.endswith("/python"):
        md += ["Served here by the embedded tritonserver's Python backend; the manifests use the NGC image, whose "
               "native backends need the repository configured for them (`config_model_on_triton.py --model-format "
               "onnx|ts-trace|trt`) and measure differently: confirm that deployment before buying.", ""]
    md += ["## Files", ""]
    files = [("search (every config, points, frontier)", searched.result_dir / "search.md"),
             ("the winner's closed-loop sweep", result.out_dir / "winner" / "online.csv")]
    files += [(f"sizing ({name})", path) for name, path in result.sizing_files.items() if name.endswith((".md", ".csv"))]
    if result.confirmation is not None:
        files.append(("confirmation points", result.out_dir / "confirm" / "confirm.csv"))
    files += [(f"Kubernetes: {name}", path) for name, path in result.manifests.items()]
    md += [f"- {what}: `{_rel(result, path)}`" for what, path in files]
    md += ["", "## Stages", "", result.steps.table(), ""]
    return "\n".join(md)


def write_report(result, demand, checks, deploy, command: str = "") -> dict[str, Path]:
    """plan.md, plan.html and the plan folder's run.json (the figures' record: demand, the pick, the plan)."""
    from dataclasses import asdict

    from ..results.run_folder import RunFolder

    md = plan_markdown(result, demand, checks, deploy, command)
    paths = {"plan.md": result.out_dir / "plan.md", "plan.html": result.out_dir / "plan.html"}
    atomic_write_text(paths["plan.md"], md)
    atomic_write_text(paths["plan.html"], plan_page(md, result.out_dir))
    plan, winner = result.plan, result.search.outcome.decision.winner
    folder = RunFolder(result.out_dir)
    folder.record({
        "kind": "fleet-plan", "command": command, "demand": asdict(demand), "checks": asdict(checks),
        "deploy": asdict(deploy), "model_name": result.search.model_name, "data": result.data or "random inputs",
        "winner": winner.candidate.to_dict(), "capacity_inf_s": winner.capacity.result.capacities,
        "capacity_held": result.holding.rate if result.holding is not None else None,
        "replica_capacity": plan.replica_capacity, "replicas": plan.replicas, "devices": plan.devices,
        "cost_h": plan.cost_h, "confirmed": result.confirmed, "steps": [r.to_dict() for r in result.steps.results]})
    paths["run.json"] = folder.run_json_path
    return paths


__all__ = ["plan_markdown", "write_report"]
