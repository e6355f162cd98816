"""plan.md / plan.html of a deployment (per model and for the fleet: replicas, which models share, cost, each SLO
held or not) and the Kubernetes manifests of each replica group (one Deployment per group, its server loading only
the group's models from the shared repository)."""
from __future__ import annotations

import logging
import math
import os
import shutil
from dataclasses import asdict
from pathlib import Path

from ..report.sections import plan_page
from ..results.run_folder import RunFolder
from ..results.runinfo import hardware, invocation
from ..kube.manifests import FleetSpec, dns_name, fleet_manifests, validate_all, write_manifests as write_k8s
from ..kube.replicas import ReplicaSet
from ..spec import atomic_write_text
from ..tables import markdown_table
from .groups import batch_ms, bound_by_sharing, slow_neighbours

log = logging.getLogger(__name__)

# every section plan.md has, in the order it writes them; True: in every plan. A committed plan is held to it
# (tests_lab/unit/test_committed_plans.py), so a plan written by an older planner is found and regenerated.
SECTIONS = (("The fleet", True), ("The packing", False), ("Left out of the plan", False),
            ("Not confirmed: no quiet window", False), ("Per model", True),
            ("Confirmation under mixed open-loop traffic", False), ("What was tried", True), ("Kubernetes", False),
            ("Measuring windows and the host's other processes", False), ("Stages", True))


def sections_problem(headings: list[str]) -> str | None:
    """Why a plan.md's `## ` headings are not what this writer writes (None: they are): one it does not write, one
    out of order, or one it always writes missing."""
    order = [name for name, _ in SECTIONS]
    unknown = [h for h in headings if h not in order]
    if unknown:
        return f"sections this planner no longer writes: {unknown}"
    if headings != sorted(headings, key=order.index):
        return f"sections out of the writer's order: {headings}"
    missing = [name for name, always in SECTIONS if always and name not in headings]
    return f"sections every plan has are missing: {missing}" if missing else None


def _ms(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:,.1f}"


def _memory(plan, name: str) -> str:
    prints = plan.memory
    return "-" if prints is None or name not in prints.models else f"{prints.models[name] / 1e9:.2f}"


def _rel(plan, path: Path | str) -> str:
    try:
        return str(Path(path).resolve().relative_to(plan.out_dir.resolve()))
    except ValueError:
        return str(path)


def _fleet(plan) -> list[str]:
    d, packing = plan.deployment, plan.packing
    cost = f", **${plan.cost_per_hour:,.2f}/h**" if plan.cost_per_hour is not None else ""
    verdict = {True: "**confirmed**: every replica group held every model's SLO (derated first where it had to be)",
               False: "**not confirmed**: a group missed an SLO in its last round (below)",
               None: "not confirmed (--no-confirm)"}[plan.confirmed]
    md = ["## The fleet", "", f"**{plan.replicas} replica(s)**{cost} on {plan.device or 'this host'}; {verdict}.", ""]
    rows = [[" + ".join(g.models), "shared" if g.shared else "alone", g.replicas,
             ", ".join(f"{m} {r:,.1f}" for m, r in g.rates.items()),
             ", ".join(f"{m} {plan.margin(m):.0%}" for m in g.models),
             f"{g.peak_of_sum_rps:,.1f} / {g.sum_of_peaks_rps:,.1f}" if g.shared else f"{g.peak_of_sum_rps:,.1f}"]
            for g in plan.groups]
    md += [markdown_table(["models on a replica", "", "replicas", "planned per replica at the worst time slice "
                           "(inf/s, headroom in)", "headroom (each model's own)",
                           "peak of the sum / sum of the peaks (inf/s)"], rows, "llrlll"), "",
           plan.headroom_note + (f" ({d.limits.key('headroom')})" if d.limits.headroom is not None else ""), ""]
    if plan.margins and d.limits.headroom is None:
        md += [markdown_table(["model", "headroom", "from"], [[n, f"{h:.1%}", why] for n, (h, why)
                                                               in plan.margins.items() if n in plan.models], "lrl"), ""]
    if packing is not None:
        gap = packing.gap
        md += ["## The packing", "",
               f"Which models share a replica and how many replicas each group needs is a MILP solved by HiGHS on "
               f"each model's held capacity, memory and traffic over {packing.slices} time slice(s): "
               f"{packing.replicas} replica(s) ({packing.status.value}, {packing.seconds:.2f} s, {packing.solves} "
               f"solve(s)); no packing of these models needs fewer than **{packing.lower_bound}** "
               f"({packing.bound_source.value}), a gap of {gap:.1%}."
               + (f" Sized by the sum of their peaks instead of the peak of their summed traffic, the same groups "
                  f"would need {packing.replicas_by_peaks} replica(s)." if packing.replicas_by_peaks != packing.replicas
                  else ""), ""]
        perfect, measured = bound_by_sharing(plan)
        md += [f"Bound with perfect time sharing (every sharing factor 1): **{perfect}** replica(s); with the sharing "
               f"factors measured ({plan.sharing.text(list(plan.models))}; between and past the sizes measured, "
               f"each co-runner costing the same): **{measured}**; the fleet: **{plan.replicas}**. What lies between "
               "the first two is what sharing a replica really costs on this host (the shared groups measured "
               "below); what lies above the second is the packing's and the confirmation's.", ""]
        shared = [m for m in plan.measured.values()]
        md += [f"Packings: {len(plan.packings)}, each the cheapest over the group sizes the factors change at (a "
               "factor measured in a group of k models holds for groups of k or more, not fewer); shared groups "
               f"measured: {len(shared)}, shared groups in the final packing: {sum(g.shared for g in packing.groups)}."
               + (" " + "; ".join(m.text() for m in shared) + "." if shared else "")
               + (f" After a group held no rate, later packings put at most {plan.most_shared} model(s) on a "
                  "replica" + (f", and {len(plan.unmeasured)} group(s) of more were not measured"
                               if plan.unmeasured else "") + "." if plan.most_shared else ""), ""]
        if pairs := slow_neighbours(plan):
            md += ["Kept from sharing a replica, one model's full batch (its max batch over its held capacity) taking "
                   "the other's whole SLO or more, so the other waits behind it at any rate: " + "; ".join(
                       _slow_pair(plan, a, b) for a, b in pairs) + ".", ""]
        if plan.splits:
            md += [f"After the confirmation: {len(plan.splits)} group(s) that missed an SLO were packed again with the "
                   f"models that missed apart (below); the fleet is {plan.replicas} replica(s), "
                   f"{(plan.replicas - packing.lower_bound) / plan.replicas:.1%} over the bound.", ""]
    return md


def _slow_pair(plan, a: str, b: str) -> str:
    took = {n: batch_ms(plan, n) or 0.0 for n in (a, b)}
    slow, tight = (b, a) if took[b] >= took[a] else (a, b)
    slo = plan.deployment.model(tight).p99_ms
    return f"{tight} / {slow} ({slow}'s batch {took[slow]:.1f} ms, {tight}'s SLO {slo:g} ms)"


def plan_markdown(plan) -> str:
    d = plan.deployment
    title = (f"# Fleet plan: deployment {d.name} ({len(d.models)} models)" if len(d.models) > 1 else
             f"# Fleet plan: {d.models[0].name}, peak {d.models[0].peak_rps:,.6g} inf/s at p99 <= "
             f"{d.models[0].p99_ms:g} ms")
    md = [title, ""]
    command = plan.steps.folder and invocation()  # this run's, as run.json records it (not the folder's last run's)
    if command:
        md += [f"Command: `{command}`", ""]
    md += _fleet(plan) + _unplanned(plan) + _per_model(plan) + _confirmation(plan) + _searches(plan)
    if plan.manifests:
        md += ["## Kubernetes", ""] + [f"- `{_rel(plan, p)}`" for p in plan.manifests.values()] + [""]
    md += _windows(plan)
    md += ["## Stages", "", plan.steps.table(), ""]
    return "\n".join(md)


def _per_model(plan) -> list[str]:
    """One row per planned model: its config, peak, SLO, capacity alone, hold, confirmation and memory."""
    rows = []
    confirmations = {n: c for c in plan.confirmations for n in c.models}
    for name, m in plan.models.items():
        c = confirmations.get(name)
        cap = m.search.outcome.decision.winner.capacity
        rows.append([name + (f" (`{m.pipeline.ensemble}`)" if m.pipeline is not None else ""), f"`{m.config}`",
                     f"{m.entry.peak_rps:,.6g}" + (" (traffic)" if m.entry.traffic is not None else ""),
                     f"{m.entry.p99_ms:g}", cap.spread.text() if cap.spread is not None else f"{m.found:,.1f}",
                     m.holding.text() if m.holding else "-",
                     " / ".join(_ms(p.points[name].p99) for p in c.points) if c else "-",
                     f"{c.passed_of(name)} of {len(c.points)}" if c else "-", _memory(plan, name)])
    md = ["## Per model", "",
          markdown_table(["model", "config", "peak (inf/s)", "SLO p99 (ms)", "capacity found alone (inf/s)",
                          "re-tested at the rate itself", "confirmation p99, last round (ms)", "SLO held",
                          "memory (GB)"], rows, "llrrrlllr"), "",
          "The capacity a packing uses is the re-tested one: a rate passes k of k re-tests (independent arrivals, "
          f"{plan.settings.checks.window_ms} ms windows) before it is used, else it steps down 10 % and is "
          "re-tested.", ""]
    if plan.memory is not None:
        key = plan.deployment.limits.key("host_memory_gb")
        budget = (f"; a replica has {plan.memory.budget_gb:g} GB ({key})" if plan.memory.budget_gb
                  else f"; no memory limit given ({key}), so no grouping was refused for memory")
        md += [f"Memory: each model's resident memory as it loaded, beside the server's own "
               f"{plan.memory.server / 1e9:.2f} GB{budget}.", ""]
    if any(m.pipeline is not None for m in plan.models.values()):
        md += ["A model with pre/post-processing is measured as its clients call it: its ensemble, fed the raw "
               "samples, so its capacity counts the steps around the network (its search found the network's alone). "
               + " ".join(f"{n}: served against in-process, {m.pipeline.verification.summary()}."
                          for n, m in plan.models.items() if m.pipeline is not None and m.pipeline.verification), ""]
    return md


def _confirmation(plan) -> list[str]:
    """Each group's confirmation: its trials, its margin and where it came from, its split, client and burst."""
    md = ["## Confirmation under mixed open-loop traffic", ""]
    if not plan.confirmations:
        return md + ["Not run (--no-confirm).", ""]
    checks = plan.settings.checks
    md += [f"Each replica group driven at its planned per-replica rates at its worst time slice, all its models at "
           f"once (one seeded Poisson schedule and one perf_analyzer per model, network transfer), p99 from the "
           f"intended send time. A round runs all its trials (up to {checks.trials}) unless most have failed; it "
           "passes when most of them pass. A failed round derates the group to what its replica carried and confirms "
           "again; a round that passed with a trial that failed is a thin margin, sized from that trial and "
           f"confirmed once more (at most {checks.rounds} rounds in all).", ""]
    cores = len(os.sched_getaffinity(0))
    for c in plan.confirmations:
        md += [f"**{c.summary()}**", "", c.table(), "", c.margin_text(), ""]
        if split := plan.split_of(c.models):
            md += [split.text() + ".", ""]
        if said := c.client_text(cores):
            md += [said, ""]
        if c.burst is not None:
            md += [c.burst.text(), ""]
    return md


def _unplanned(plan) -> list[str]:
    """The models left out (their search, verification or hold failed) and why, and the groups whose confirmation
    got no quiet window: the fleet above carries the others."""
    unmeasured = [c for c in plan.confirmations if c.unmeasured]
    md = []
    if plan.unplanned:
        rows = [[name, why] for name, why in plan.unplanned.items()]
        md += ["## Left out of the plan", "",
               f"**{len(plan.unplanned)} model(s) could not be planned** (the command exits 1); the fleet above "
               "carries the others. Rerunning the same command measures only what is missing.", "",
               markdown_table(["model", "why"], rows, "ll"), ""]
    if unmeasured:
        md += ["## Not confirmed: no quiet window", "",
               f"**{len(unmeasured)} group(s) could not be measured** on this host (other processes kept it busy; the "
               "command exits 1): their replicas are planned but not confirmed. Confirm them on a quieter host, or "
               "with `deployment-toolkit check-plan` where they run.", "",
               markdown_table(["models", "why"], [[" + ".join(c.models), c.unmeasured] for c in unmeasured], "ll"),
               ""]
    return md


def _windows(plan) -> list[str]:
    """Each measuring step's windows and how many other processes disturbed (perf.neighbours)."""
    from ..perf.neighbours import DISTURBED_SHARE, MAX_REMEASURES

    if not plan.windows:
        return []
    total, disturbed, again = plan.disturbed
    rows = [[name, w, d, a] for name, (w, d, a) in plan.windows.items()]
    return ["## Measuring windows and the host's other processes", "",
            f"{total} window(s) measured, **{disturbed} disturbed** (other processes took more than "
            f"{DISTURBED_SHARE:.0%} of the usable cores), {again} measured again once the host was quiet (at most "
            f"{MAX_REMEASURES} times each); a disturbed window is never a capacity nor the reason a rate failed.", "",
            markdown_table(["step", "windows", "disturbed", "measured again"], rows, "lrrr"), ""]


def _searches(plan) -> list[str]:
    """What each search tried, with its verdict and why, and where each model's inputs came from."""
    md = ["## What was tried", ""]
    for name, m in plan.models.items():
        outcome = m.search.outcome
        rows = []
        order = {"winner": 0, "runner-up": 1, "default": 2}
        skipped = [t for t in outcome.trials if t.status == "skipped"]
        for t in sorted((t for t in outcome.trials if t.status != "skipped"), key=lambda t: order.get(t.verdict, 3)):
            c = f"{t.capacity.spread.text()}" if t.capacity is not None and t.capacity.spread is not None else ""
            best = f"{t.best.throughput:,.1f} @ c{t.best.concurrency}" if t.best is not None else ""
            rows.append([f"`{t.candidate.slug}`", t.verdict or t.status, c, best, (t.detail or t.reason)[:300]])
        formats = "; ".join(f"{f.format}: " + ("verified" if not f.error else f"not usable - {f.error}")
                            for f in m.search.formats)
        data = m.data
        md += [f"**{name}** (`{_rel(plan, m.search.result_dir / 'search.md')}`): {outcome.decision.message}. "
               f"Formats: {formats}." + (f" Measured with the user's samples ({data})." if data else ""), "",
               markdown_table(["config", "verdict", "open-loop capacity (inf/s)", "closed loop (inf/s @ concurrency)",
                               "why"], rows, "llrrl"), ""]
        if skipped:
            reasons = sorted({t.detail or t.reason for t in skipped})
            md += [f"{len(skipped)} other config(s) not measured: {'; '.join(reasons)[:300]}.", ""]
        if not data and not m.entry.has_pipeline:
            md += [f"{name}: no samples given, measured with **random inputs** of the model's signature. A model "
                   "whose speed depends on its input (sequence lengths, early exits, image content) can serve real "
                   "traffic at another rate: plan with your data before buying hardware.", ""]
    return md


def queue_and_compute(plan, models: tuple[str, ...]) -> tuple[float, float]:
    """The server's queue and compute time per request (ms) over the group's confirmation at its planned rates, as
    Triton's metrics counted them (nv_inference_queue_duration_us, nv_inference_compute_infer_duration_us: what a
    queue-ratio autoscaler divides), weighted by each model's answered rate; NaN where none was scraped."""
    confirmation = next((c for c in plan.confirmations if c.models == models and c.rounds), None)
    queue = compute = weight = 0.0
    for mix in confirmation.points if confirmation is not None else ():
        for point in mix.points.values():
            q, c, a = (point.row.get(k) for k in ("server_queue_us", "server_compute_us", "answered"))
            if all(isinstance(v, (int, float)) and math.isfinite(v) for v in (q, c, a)) and c > 0 and a > 0:
                queue, compute, weight = queue + q * a, compute + c * a, weight + a
    if not weight:
        return math.nan, math.nan
    return queue / weight / 1000, compute / weight / 1000


def replica_sets(plan) -> dict[tuple[str, ...], ReplicaSet]:
    """Each replica group of the plan as the manifests read it: its replicas, what one carries, its tightest SLO,
    and the server's queue over compute time at its confirmed rates (for a queue-ratio autoscaler)."""
    from ..repository.config import host_has_gpu

    cores = (hardware().get("cpu") or {}).get("usable_cores")
    return {g.models: ReplicaSet("-".join(g.models), str(plan.out_dir), g.replicas, sum(g.rates.values()),
                                 min(plan.deployment.model(m).p99_ms for m in g.models),
                                 max(plan.margin(m) for m in g.models),
                                 ("mix capacity" if g.shared else "capacity") + " held k of k, confirmed",
                                 gpu=host_has_gpu(), device=plan.device, usable_cores=cores,
                                 queue_ms=(qc := queue_and_compute(plan, g.models))[0], compute_ms=qc[1],
                                 level="the group's confirmed per-replica rates")
            for g in plan.groups}


def _autoscale_on(plan, replicas: ReplicaSet) -> str:
    """--autoscale-on as asked, except queue-ratio for a group whose confirmation scraped no queue and compute time
    (--no-confirm, or no metrics endpoint): that group scales on requests, and the log says so."""
    asked = plan.settings.deploy.autoscale_on
    if asked == "queue-ratio" and not math.isfinite(replicas.queue_ms):
        log.warning(f"warning: {replicas.label}: no queue and compute time was measured at its confirmed rates "
                    "(confirmation off, or the server's metrics not scraped); its autoscaler scales on requests")
        return "requests"
    return asked


def write_manifests(plan) -> dict[str, Path]:
    """One Deployment (+ Service, autoscaler) per group, each server loading its group's models only from the
    shared repository (Deploy: --pvc, --image, --namespace, --autoscale-on); a plan of one group writes k8s/."""
    deploy, served = plan.settings.deploy, plan.served()
    groups = replica_sets(plan)
    files: dict[str, Path] = {}
    # k8s/ holds this plan's manifests only: a group an earlier plan wrote into the same folder would be deployed
    # beside the new ones by `kubectl apply -R` (found on a rerun of the twelve-model plan: 3 stale groups of 5)
    shutil.rmtree(plan.out_dir / "k8s", ignore_errors=True)
    for models, replicas in groups.items():
        name = plan.deployment.name if len(groups) == 1 else f"{plan.deployment.name}-{replicas.label}"
        spec = FleetSpec(name=dns_name(f"triton-{name}"), pvc=deploy.pvc, namespace=deploy.namespace,
                         autoscale=_autoscale_on(plan, replicas),
                         extra_args=["--model-control-mode=explicit", *[f"--load-model={n}" for m in models
                                                                         for n in served[m]]],
                         **({"image": deploy.image} if deploy.image else {}))
        documents = fleet_manifests(replicas, spec)
        validate_all(documents)
        folder = plan.out_dir / "k8s" / (replicas.label if len(groups) > 1 else "")
        for file, path in write_k8s(documents, folder).items():
            files[f"{replicas.label}/{file}"] = path
    return files


def write_report(plan) -> dict[str, Path]:
    md = plan_markdown(plan)
    paths = {"plan.md": plan.out_dir / "plan.md", "plan.html": plan.out_dir / "plan.html"}
    atomic_write_text(paths["plan.md"], md)
    atomic_write_text(paths["plan.html"], plan_page(md, plan.out_dir))
    packing = plan.packing
    RunFolder(plan.out_dir).record({
        "kind": "deployment-plan", "deployment": str(plan.deployment.source or plan.deployment.name),
        "settings": asdict(plan.settings), "headroom": plan.headroom,
        "margins": {n: {"headroom": h, "from": why} for n, (h, why) in plan.margins.items()},
        "models": {n: {"reference": m.entry.model, "peak_rps": m.entry.peak_rps, "p99_ms": m.entry.p99_ms,
                       "traffic": str(m.entry.traffic) if m.entry.traffic else None, "config": m.config,
                       "capacity_found": m.found, "capacity_held": m.capacity,
                       "sharing": {str(k): f for k, f in plan.sharing.measured.get(n, {}).items()}}  # by group size
                   for n, m in plan.models.items()},
        "groups": [{"models": list(g.models), "replicas": g.replicas, "rates": dict(g.rates),
                    "peak_of_sum_rps": g.peak_of_sum_rps, "sum_of_peaks_rps": g.sum_of_peaks_rps}
                   for g in plan.groups],
        "packing": None if packing is None else {
            "groups": [list(g.models) for g in packing.groups],  # the solver's, before any confirmation split one
            "replicas": packing.replicas, "lower_bound": packing.lower_bound, "bound": packing.bound_source.value,
            "gap": packing.gap, "status": packing.status.value, "seconds": packing.seconds, "slices": packing.slices,
            "packings": len(plan.packings), "measured_groups": [list(g) for g in plan.measured],
            "unmeasured_groups": [list(g) for g in plan.unmeasured],
            "bound_perfect_sharing": bound_by_sharing(plan)[0], "bound_measured_sharing": bound_by_sharing(plan)[1],
            "sharing_factors": {n: {str(k): f for k, f in by_size.items()}  # by group size
                                for n, by_size in plan.sharing.lowered().items() if n in plan.models},
            "group_settings": [{"models": list(g), "kept": m.setting.text() if m.setting else "as searched alone",
                                "tried": [{"setting": t.setting.name, "threads": dict(t.setting.threads),
                                           "predicted": t.predicted, "held": t.held, "below": t.below,
                                           "sharing_factor": t.factor}
                                          for t in m.tried]}
                               for g, m in plan.measured.items() if m.tried]},
        "splits": [{"models": list(s.models), "missed": list(s.missed), "parts": [list(g.models) for g in s.parts]}
                   for s in plan.splits],
        "confirmations": [{"models": list(c.models), "replicas": c.replicas, "passed": c.passed,
                           "rounds": len(c.rounds), "stuck": c.stuck, "unmeasured": c.unmeasured,
                           "bursts": list(c.bursts), "poisson_replicas": c.poisson_replicas,
                           "trials": [[p.passes() for p in r.points] for r in c.rounds],
                           "rates": c.rates, "margins": c.margins, "margin_round": c.margin_round,
                           "margin": c.margin_text(), "client_cores_max": c.client_cores,
                           "client_processes": max((p.processes for p in c.points), default=None),
                           "client_shared_models": max((p.shared for p in c.points), default=None)}
                          for c in plan.confirmations],
        "replicas": plan.replicas, "cost_h": plan.cost_per_hour, "confirmed": plan.confirmed,
        "unplanned": dict(plan.unplanned),
        "windows": {name: {"measured": w, "disturbed": d, "measured_again": a}
                    for name, (w, d, a) in plan.windows.items()},
        "steps": [r.to_dict() for r in plan.steps.results]})
    paths["run.json"] = plan.out_dir / "run.json"
    return paths


__all__ = ["plan_markdown", "write_manifests", "write_report"]
