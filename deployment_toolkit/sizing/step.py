"""The fleet sizing as one step: `size_fleet(SizeRequest) -> SizeResult`. Measured runs -> memory budget ->
open-loop capacity per run -> headroom -> plans and their ranking -> confirmation (derating on failure) -> N
replicas behind nginx -> sizing.md/csv/png and run.json -> Kubernetes manifests and their autoscaling section.

`deployment-toolkit size` parses flags into the request and calls this; so can a composite step or a Python
caller. The step prints nothing itself: every line the command shows is logged (`deployment_toolkit.sizing.step`:
INFO, and WARNING for what went to stderr) as it is produced, and kept as a `Line` in the result (also handed to
`echo`, where given), so the command shows what it showed before, in the same order, even when a later stage stops
with an error. Bad input raises a UserError (one line, exit 2) where the command always found it: what the request
and the runs alone show, before anything is measured. The result says whether the plan is met; the command maps
that to its exit code."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..committed import refuse_committed
from ..errors import UserInputError
from .memory import MemoryBudget
from .plan import Demand, Plan, Sizing, size
from .request import SizeRequest
from .runs import Run, load_runs

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # the measuring modules load when a stage needs them
    from ..perf.analyzer import PerfOptions
    from .capacity import OpenLoopCapacity
    from .confirm import Confirmation
    from .fleet import FleetCheck
    from .fleetplan import CapacityPlan
    from .frontier import FrontierStep


@dataclass(frozen=True)
class Line:
    """One line of the command's console output: stdout, or stderr where `err`."""

    text: str
    err: bool = False


Echo = Callable[[Line], None]


@dataclass
class SizeResult:
    runs: list[Run]
    sizing: Sizing
    capacities: dict[str, OpenLoopCapacity | None]  # per run name; a run whose memory does not fit is absent
    headroom: float
    headroom_note: str | None
    steps: list[FrontierStep]  # the cost frontier across SLOs
    out_dir: Path
    confirmation: Confirmation | None = None
    fleet: FleetCheck | None = None
    fleet_skipped: str = ""  # why the fleet check asked for was not run (the command exits 2)
    files: dict[str, Path] = field(default_factory=dict)  # sizing.md/csv/png and run.json
    k8s_plan: Plan | None = None
    manifests: dict[str, dict[str, Any]] = field(default_factory=dict)
    manifest_files: dict[str, Path] = field(default_factory=dict)
    lines: list[Line] = field(default_factory=list)  # the console output, in order

    @property
    def recommendation(self) -> Plan | None:
        return self.sizing.recommendation

    @property
    def met(self) -> bool:
        """A plan meets the SLO, and held under open-loop traffic where it was confirmed."""
        return self.recommendation is not None and (self.confirmation is None or self.confirmation.passed)


class _Console:
    """say(text[, err]): logs the line (a warning where it went to stderr), keeps it in the result and hands it to
    echo at once (progress stays live)."""

    def __init__(self, lines: list[Line], echo: Echo | None) -> None:
        self.lines, self.echo = lines, echo

    def __call__(self, text: str, err: bool = False) -> None:
        line = Line(text, err)
        self.lines.append(line)
        log.log(logging.WARNING if err else logging.INFO, text)
        if self.echo is not None:
            self.echo(line)


def confirm_input_data(flag: str | None, run_config: dict) -> str:
    """The confirmation sends what the plan's run measured with: its real-sample JSON when the run used one
    (and it is still there), unless --confirm-input-data says otherwise."""
    if flag:
        return flag
    for section in (run_config.get("sweeps") or {}).values():
        path = (section.get("perf_options") or {}).get("input_data")
        if path and path not in ("random", "zero") and Path(path).is_file():
            return str(path)
    return "random"


def pick(plans: Sequence[Plan], which: str | None, sizing: Sizing, what: str) -> Plan:
    """The plan a flag names (a run folder, its name or path), else the recommendation; a UserInputError names
    why there is none."""
    if which is None:
        if sizing.recommendation is None:
            raise UserInputError(f"no configuration meets the SLO, nothing to {what}")
        return sizing.recommendation
    target = Path(which).resolve()
    for p in plans:
        if p.run.path.resolve() == target or p.run.name == which or str(p.run.path) == which:
            if p.rejected:
                raise UserInputError(f"nothing to {what}: {p.rejected}")
            return p
    raise UserInputError(f"{which!r} is not one of the given runs ({', '.join(p.run.name for p in plans)})")


def reachable(url: str, protocol: str, model: str, what: str) -> None:
    """One line and exit 2 when nothing answers at `url` (before any perf_analyzer run)."""
    from ..client import TritonClient

    with TritonClient(url, protocol) as client:
        reason = client.health_reason(model)
    if reason is not None:
        raise UserInputError(f"{what} {url}: {reason.splitlines()[0]} - start the server (or fix the URL) first")


def _options(distribution: str, protocol: str, shared_memory: str, window_ms: int, stability: float,
             input_data: str = "random") -> PerfOptions:
    from ..perf.analyzer import PerfOptions
    from .ratepoint import open_loop_options

    return open_loop_options(PerfOptions(protocol=protocol, shared_memory=shared_memory, input_data=input_data),
                             distribution, window_ms, stability)


def _input_data(request: SizeRequest, plan_or_run: Any) -> str:
    run = getattr(plan_or_run, "run", plan_or_run)
    return confirm_input_data(request.confirm.input_data, run.meta.get("config") or {})


def ranking_lines(sizing: Sizing, budget: MemoryBudget) -> list[str]:
    """The reason, each ranked plan (and its memory), the rejected and unreachable ones and the notes."""
    lines = [sizing.reason]
    for plan in sizing.ranked:
        s = plan.sustainable
        cost = f", ${plan.cost_h:,.2f}/h" if plan.cost_h is not None else ""
        closed = "" if plan.open_loop is None else f"; closed loop {s.throughput:.1f}"
        lines.append(f"  #{plan.rank} {plan.run.name}: {plan.replica_capacity:.1f} inf/s per replica ({plan.basis}, "
                     f"{s.point.level}{closed}) -> {plan.replicas} replicas, {plan.devices} {plan.run.unit}(s), "
                     f"{plan.nodes} node(s){cost}")
        if plan.memory is not None and (budget or plan.memory.reading is not None):
            lines.append(f"     memory: {plan.memory.brief()}")
    lines += [f"  rejected: {text}" for text in sizing.rejected]
    lines += [f"  {text}" for text in sizing.unreachable]
    lines += [f"  note: {text}" for text in sizing.notes]
    return lines


def _capacities(request: SizeRequest, runs: list[Run], too_big: set[str], slo_ms: float,
                say: _Console) -> dict[str, OpenLoopCapacity | None]:
    """Each run's open-loop capacity: searched against --capacity, else replayed from its openloop.csv."""
    from .openloop import Settings, open_loop_capacity

    cap, capacities = request.capacity, {}
    for run in runs:
        if run.name in too_big:
            say(f"open-loop capacity of {run.name}: not measured, its memory does not fit the device")
            continue
        cfg = run.meta.get("config") or {}
        protocol = cap.protocol or cfg.get("protocol") or "grpc"
        if cap.url:
            reachable(cap.url, protocol, cfg.get("model_name") or run.model, "--capacity")
        settings = Settings(_options(request.distribution, protocol, cap.shared_memory, cap.window_ms,
                                     cap.stability_percentage, _input_data(request, run)),
                            request.distribution, cap.trials, cap.resolution, cap.max_points)
        capacities[run.name] = c = open_loop_capacity(run, slo_ms, settings, cap.url,
                                                      request.demand.include_unreliable)
        if c is not None:
            got = "none (no rate met the SLO)" if c.capacity is None else f"{c.capacity:.1f} inf/s"
            say(f"open-loop capacity of {run.name}: {got} ({len(c.trials)} search(es), closed loop "
                f"{c.closed_loop:.1f} inf/s)")
    return capacities


def _served(request: SizeRequest, plan: Plan) -> tuple[str, str | None, int]:
    cfg = plan.run.meta.get("config") or {}
    return (request.confirm.protocol or cfg.get("protocol") or "grpc",
            request.confirm.model_name or cfg.get("model_name"), plan.sustainable.point.batch)


def _confirm(request: SizeRequest, sizing: Sizing, out_dir: Path, say: _Console) -> Confirmation:
    """The plan in open loop at its per-replica rate, derated and confirmed again on failure."""
    from .confirm import server_instances, target_for
    from .fleetplan import confirm_step

    c = request.confirm
    plan = pick(sizing.plans, c.run, sizing, "confirm")
    protocol, model, batch = _served(request, plan)
    reachable(c.url, protocol, model, "--confirm")
    have = server_instances(c.url, protocol, model)
    if have is not None and have != plan.run.instances:
        say(f"warning: {model} on {c.url} has {have} instance(s), the plan was measured with "
            f"{plan.run.instances}", err=True)
    options = _options(request.distribution, protocol, c.shared_memory, c.interval_ms, c.stability_percentage,
                       _input_data(request, plan))
    target = target_for(plan.run, c.url, options, request.distribution, batch, model_name=model)
    if c.trials < 1:
        raise UserInputError(f"--confirm-trials {c.trials}: at least 1 (3 lets one stall of the host pass)")
    result = confirm_step(sizing, plan, target, out_dir, c)
    say(result.summary())
    return result


def _fleet(request: SizeRequest, plan: Plan, slo_ms: float, out_dir: Path) -> FleetCheck:
    """`replicas` embedded servers behind nginx, against `replicas` x one replica."""
    from .confirm import target_for
    from .fleet import check_fleet

    f = request.fleet
    protocol, model, batch = _served(request, plan)
    if protocol != "grpc":
        raise UserInputError("--confirm-fleet balances gRPC (nginx grpc_pass): use a gRPC run or "
                             "--confirm-protocol grpc")
    options = _options(request.distribution, protocol, "none", f.window_ms, request.capacity.stability_percentage,
                       _input_data(request, plan))
    target = target_for(plan.run, "", options, request.distribution, batch, model_name=model)
    seed = (plan.replica_capacity or plan.sustainable.throughput) / batch
    return check_fleet(f, target, seed, slo_ms, out_dir / "fleet", request.capacity.resolution)


def _k8s(request: SizeRequest, sizing: Sizing, out_dir: Path, result: SizeResult, say: _Console) -> None:
    """The manifests of the chosen plan, validated and written; the HPA's metric added to sizing.md."""
    from .fleetplan import manifests_for

    k = request.k8s
    plan = pick(sizing.plans, k.run, sizing, "deploy")
    emitted = manifests_for(plan, k)
    result.k8s_plan, result.manifests = plan, emitted.documents
    for line in emitted.checks:
        say(f"  {line}")
    result.manifest_files = written = emitted.files
    say(f"wrote {len(written)} manifests to {k.out_dir} ({plan.replicas} replicas of {plan.run.label})")
    reason = result.manifests['prometheus-adapter-rules.yaml']['autoscaling']['reason']
    say(f"the HPA scales on {reason}")
    other = ("--autoscale-on queue-ratio scales on Triton's queue-to-compute time ratio instead (NVIDIA's practice)"
             if k.autoscale_on == "requests" else "--autoscale-on requests scales on requests/s per pod instead")
    sizing_md = out_dir / "sizing.md"
    if sizing_md.exists():
        from ..spec import atomic_write_text

        atomic_write_text(sizing_md, sizing_md.read_text().rstrip() + "\n\n## Autoscaling\n\n"
                          f"The HPA (`{Path(k.out_dir) / 'hpa.yaml'}`) scales on {reason}. Its metric comes "
                          f"from the prometheus-adapter rule in `{Path(k.out_dir) / 'prometheus-adapter-rules.yaml'}`."
                          f" {other}.\n")
    if plan.run.format.endswith("/python"):
        say("note: this run used the embedded server's Python backend; the repository on the PVC must be "
            "configured for the NGC image's native backends (config_model_on_triton.py --model-format "
            "onnx|ts-trace|trt) and its numbers will differ: measure that deployment before trusting the plan")


def _check_input(request: SizeRequest) -> None:
    """What can be refused from the request alone, before any run is read."""
    if request.fleet.replicas is not None and not request.fleet.model_repository:
        raise UserInputError("--confirm-fleet needs --fleet-model-repository DIR (the repository the replicas serve)")
    if request.fleet.replicas is not None:
        from .fleet import find_nginx

        find_nginx(request.fleet.nginx)  # nginx missing: say so before measuring anything


def size_fleet(request: SizeRequest, echo: Echo | None = None) -> SizeResult:
    """Size the fleet the request describes; each console line is logged as it is produced (and handed to `echo`,
    where given). Raises a UserError for bad input (before measuring) and lets perf_analyzer errors through."""
    _check_input(request)
    runs = [r for path in request.runs for r in load_runs(path)]
    probe, budget, too_big = _memory_fit(request, runs)
    lines: list[Line] = []
    say = _Console(lines, echo)
    capacities = _capacities(request, runs, too_big, probe.slo_ms, say)
    planned = _plan(request, runs, capacities, budget, say)
    sizing = planned.sizing
    out_dir = Path(request.output) if request.output else runs[0].path
    refuse_committed(out_dir, "--output" if request.output else "the first RUN, where sizing goes without --output")
    result = SizeResult(runs, sizing, capacities, planned.demand.headroom, planned.headroom_note, planned.frontier,
                        out_dir, lines=lines)
    for text in ranking_lines(sizing, budget):
        say(text)

    confirm_url, emit_k8s, fleet_n = request.confirm.url, request.k8s.out_dir, request.fleet.replicas
    if sizing.recommendation is None and (confirm_url or emit_k8s or fleet_n):
        say("no configuration meets the SLO: nothing to confirm or deploy", err=True)
        confirm_url = emit_k8s = fleet_n = None
    confirmation = None  # its markdown, taken before the fleet check (as sizing.md shows it)
    if confirm_url:
        result.confirmation = _confirm(request, sizing, out_dir, say)
        confirmation = result.confirmation.text()
    sections = _fleet_sections(request, result, fleet_n, planned.demand.slo_ms, say)
    _write(request, result, confirmation, sections, (confirm_url, fleet_n), say)
    if emit_k8s:
        _k8s(request, sizing, out_dir, result, say)
    return result


def _memory_fit(request: SizeRequest, runs: list[Run]) -> tuple[Demand, MemoryBudget, set[str]]:
    """The demand checked, the memory budget, and the runs whose memory does not fit the device: memory is read at
    the closed-loop point, so a config that does not fit is known (and refused) before anything is measured."""
    from .fleetplan import memory_budget

    d = request.demand
    probe = Demand(d.peak_rps, d.p99_ms, d.headroom if d.headroom is not None else 0.0,
                   d.gpus_per_node)  # validates the demand before anything is measured
    budget = memory_budget(request.memory, runs)
    closed_loop = size(runs, probe, memory_budget=budget, include_unreliable=d.include_unreliable) if budget else None
    if closed_loop is not None and closed_loop.recommendation is None and closed_loop.rejected:
        raise UserInputError(closed_loop.reason)
    too_big = {p.run.name for p in closed_loop.plans if p.rejected} if closed_loop else set()
    return probe, budget, too_big


def _plan(request: SizeRequest, runs: list[Run], capacities: dict[str, OpenLoopCapacity | None],
          budget: MemoryBudget, say: _Console) -> CapacityPlan:
    """The plans on the measured capacities (closed-loop points, said as a warning, where none was measured);
    refused when what meets the SLO does not fit the device."""
    from .fleetplan import plan_on_capacities, prices_of

    measured = {k: v for k, v in capacities.items() if v is not None}
    if not measured:
        say("warning: no open-loop capacity measured (--capacity URL): planning on closed-loop points, which "
            "overstate what a replica sustains under real traffic", err=True)
    planned = plan_on_capacities(runs, request.demand, prices_of(request.costs), measured, budget,
                                 request.coverage.gsd_m, request.coverage.area_km2)
    if planned.sizing.recommendation is None and planned.sizing.rejected:
        raise UserInputError(planned.sizing.reason)  # what meets the SLO does not fit the device
    return planned


def _fleet_sections(request: SizeRequest, result: SizeResult, fleet_n: int | None, slo_ms: float,
                    say: _Console) -> list[tuple[str, str]]:
    """The fleet check behind nginx where asked for, as sizing.md's section; a plan that meets no rate is not
    put behind a balancer (known only after the capacity searches: the report is still written, exit 2)."""
    sections: list[tuple[str, str]] = []
    sizing = result.sizing
    plan = pick(sizing.plans, request.fleet.run or request.confirm.run, sizing, "put behind a balancer") \
        if fleet_n else None
    if plan is not None and not plan.reachable:
        result.fleet_skipped = (f"{plan.run.name} meets no rate within the SLO: nothing to put behind a balancer; "
                                "pass --fleet-run with a configuration that does")
        sections.append((f"{fleet_n} replicas behind a load balancer", f"**Not run**: {result.fleet_skipped}."))
    if plan is not None and not result.fleet_skipped:
        result.fleet = _fleet(request, plan, slo_ms, result.out_dir)
        sections.append((f"{fleet_n} replicas behind a load balancer", result.fleet.text()))
        say(result.fleet.text().replace("**", "").replace("  \n", "\n"))
    return sections


def _write(request: SizeRequest, result: SizeResult, confirmation: str | None, sections: list[tuple[str, str]],
           checks: tuple[str | None, int | None], say: _Console) -> None:
    """sizing.md/csv/png, and run.json where the output is not a run folder (which keeps its own); `checks`: the
    confirmation URL and the fleet's replicas as run (None where skipped)."""
    from .output import write_outputs

    runs, out_dir, d = result.runs, result.out_dir, request.demand
    confirm_url, fleet_n = checks
    result.files = write_outputs(result.sizing, runs, result.steps, out_dir, confirmation, command=request.command,
                                 headroom_note=result.headroom_note, sections=sections)
    if all(out_dir.resolve() != Path(r.path).resolve() for r in runs):  # a run folder keeps its own run.json
        from ..results.run_folder import RunFolder

        folder = RunFolder(out_dir)
        folder.record({
            "kind": "fleet-sizing", "runs": [str(r.path) for r in runs], "peak_rps": d.peak_rps,
            "p99_ms": d.p99_ms, "headroom": result.headroom, "headroom_given": d.headroom is not None,
            "capacity": request.capacity.url, "distribution": request.distribution, "confirm": confirm_url,
            "confirm_fleet": fleet_n, "passed": result.met})
        result.files["run.json"] = folder.run_json_path
    say("wrote " + ", ".join(str(p) for p in result.files.values()))
    if result.fleet_skipped:
        say(f"error: {result.fleet_skipped}", err=True)


__all__ = ["Line", "SizeResult", "confirm_input_data", "pick", "ranking_lines", "reachable", "size_fleet"]
