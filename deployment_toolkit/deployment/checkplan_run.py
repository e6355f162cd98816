"""check-plan's steps: read the plan, check everything that can be wrong before any load (the folder, the URLs, the
server answering, every model served, its inputs, one request each), then drive each group round by round and judge
it (checkplan.py: the rule), and keep the result (checkplan_report.py)."""
from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..client import TritonClient
from ..client.openloop import Requests, poisson_schedule, probe, run_round
from ..client.url import ServerUrl
from ..committed import refuse_committed, tracked_files
from ..errors import UserInputError
from ..perf import neighbours
from . import checkplan_inputs as inputs
from . import checkplan_report as report
from .checkplan import (CLIENT_CPU_LIMIT, RULE, CheckSettings, GroupCheck, GroupRound, PlanCheck, PlanOnFile,
                        PlannedGroup, Verdict, chosen_groups, group_urls, judge, read_plan)

log = logging.getLogger(__name__)
LOCAL_RUNS = Path("results") / "local"  # git-ignored: where a check of a committed plan goes


@dataclass
class _Target:
    """A group ready to drive: where, what each model is called there, its SLO and its requests."""

    check: GroupCheck
    slo_ms: dict[str, float]
    requests: dict[str, Requests]  # the plan's model -> its requests (named as the server calls it)
    server_pids: tuple[int, ...] = ()  # the server's processes on this host, counted as the measurement's
    judged: bool = False  # whether the host's other processes' load voids a round


LOOPBACK = ("localhost", "::1", "0.0.0.0")


def server_processes(url: ServerUrl) -> tuple[tuple[int, ...], bool, str]:
    """The server's processes on this host, whether the host's other load can be judged, and how that was decided:
    on a loopback URL the process listening on its port (tritonserver, with its backends below it) is the
    measurement's; a port held by something else (a container's proxy) or by another user's process cannot be told
    from a neighbour, so the load is recorded only; a server elsewhere leaves this host's load to the client."""
    if not (url.host in LOOPBACK or url.host.startswith("127.")):
        return (), True, f"the server at {url} runs elsewhere: this host's other processes are judged as the client's"
    pids = tuple(neighbours.listening(url.port))
    names = {pid: _name(pid) for pid in pids}
    if any(name == "tritonserver" for name in names.values()):
        return pids, True, (f"the server's processes (pid {', '.join(map(str, pids))}, tritonserver, and those below "
                            "it) count as the measurement's; the host's others are judged")
    held = f"held by {', '.join(f'{n} (pid {p})' for p, n in names.items())}" if pids else "not readable here"
    return (), False, (f"port {url.port} is {held}, not a tritonserver process this user can read: the host's other "
                       "load is recorded, not judged (run check-plan as the server's user to judge it)")


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def result_folder(plan: PlanOnFile, result_path: str | Path | None) -> Path:
    """--result-path (refused where git tracks it, unless --update-committed), else PLAN_DIR/check-<UTC time>, or
    results/local/check-<plan>-<UTC time> for a plan folder git tracks (a committed example stays as it was)."""
    if result_path is not None:
        refuse_committed(result_path, "--result-path")
        return Path(result_path)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    if tracked_files(plan.folder):
        return LOCAL_RUNS / f"check-{plan.folder.resolve().name}-{stamp}"
    return plan.folder / f"check-{stamp}"


def _connect(url: ServerUrl, timeout_s: float) -> TritonClient:
    client = TritonClient(url, timeout_s=timeout_s)
    if not client.live():
        client.close()
        raise UserInputError(f"nothing answers over gRPC at {url}: start the server, or give its gRPC port (Triton's "
                             "default is 8001; 8000 is its HTTP port)")
    return client


def _served(groups: Sequence[PlannedGroup], urls: dict[str, ServerUrl], timeout_s: float) -> dict[str, dict[str, str]]:
    """Each group's models as the server calls them; every model missing on any server is one line naming it."""
    served: dict[str, dict[str, str]] = {}
    missing: dict[ServerUrl, list[str]] = {}
    have: dict[ServerUrl, list[str]] = {}
    for url in dict.fromkeys(urls.values()):
        client = _connect(url, timeout_s)
        try:
            for g in (g for g in groups if urls[g.label] == url):
                names = {m: inputs.served_name(client, m) for m in g.models}
                missing.setdefault(url, []).extend(m for m, s in names.items() if s is None)
                served[g.label] = {m: s for m, s in names.items() if s is not None}
            if missing.get(url):
                have[url] = inputs.ready_models(client)
        finally:
            client.close()
    lines = [f"{url} does not serve the plan's model(s) {', '.join(dict.fromkeys(names))} (nor a pipeline "
             f"`<name>{inputs.PIPELINE_SUFFIX}`); it has {', '.join(have[url]) or 'no ready model'}"
             for url, names in missing.items() if names]
    if lines:
        raise UserInputError("; ".join(lines))
    return served


def _targets(plan: PlanOnFile, groups: Sequence[PlannedGroup], urls: dict[str, ServerUrl],
             settings: CheckSettings) -> list[_Target]:
    """Everything that can be refused, refused before any load: the models, their inputs, one request each."""
    served = _served(groups, urls, settings.timeout_s)
    samples = Path(settings.samples) if settings.samples else None
    targets = []
    for g in groups:
        with TritonClient(urls[g.label], timeout_s=settings.timeout_s) as client:
            models = inputs.describe_all(client, served[g.label])
        inputs.refuse_strings_without_samples(list(models.values()), samples)
        requests = {m: inputs.requests_for(models[m], samples, settings.seed) for m in g.models}
        refused = probe(urls[g.label].address, list(requests.values()), settings.timeout_s)
        if refused:
            raise UserInputError("; ".join(f"{model} refused a test request before any load: {why}"
                                           for model, why in refused.items())
                                 + (" (give its inputs with --samples DIR)" if samples is None else ""))
        data = {m: inputs.data_text(models[m], samples, requests[m]) for m in g.models}
        pids, judged, how = server_processes(urls[g.label])
        judged = judged and neighbours.policy() is neighbours.Policy.REMEASURE
        targets.append(_Target(GroupCheck(g, urls[g.label], served[g.label], data, server=how),
                               {m: plan.slo_ms[m] for m in g.models}, requests, pids, judged))
    return targets


def _round(target: _Target, settings: CheckSettings, group_index: int, index: int, attempt: int) -> GroupRound:
    """One round of one group: every model on its own seeded schedule at once, each judged on the counted window."""
    check = target.check
    g = check.group
    start, end = settings.warmup_s, settings.warmup_s + settings.window_s
    rates = {m: g.rates[m] * settings.scale for m in g.models}
    driven = [m for m in g.models if rates[m] > 0]  # a model with no traffic at the group's worst slice: none
    schedules = {check.served[m]: poisson_schedule(rates[m], end, [settings.seed, group_index, index, attempt, k])
                 for k, m in enumerate(driven)}
    before = neighbours.read(target.server_pids)
    trace = run_round(check.url.address, [target.requests[m] for m in driven], schedules, start, end,
                      settings.timeout_s)
    host = neighbours.between(before, neighbours.read(target.server_pids))
    models = tuple(dataclasses.replace(judge(trace.streams[check.served[m]], rates[m], target.slo_ms[m],
                                             trace.start_ns, trace.end_ns), model=m) for m in driven)
    return GroupRound(index, attempt, models, trace.cpu_share, host, target.judged)


def _again(result: GroupRound, attempt: int, target: _Target) -> bool:
    """Whether a round is run again: a void one once for a busy load generator; a disturbed one once the host is
    quiet, at most MAX_REMEASURES times."""
    if result.verdict is not Verdict.VOID:
        return False
    if result.disturbed:
        if attempt > neighbours.MAX_REMEASURES:
            return False
        log.warning(f"warning: {target.check.group.label}: round {result.index} void, {result.void_text()}; run "
                    "again once the host is quiet")
        neighbours.wait_quiet(also=target.server_pids)
        return True
    return attempt == 1


def _drive(target: _Target, settings: CheckSettings, group_index: int) -> GroupCheck:
    """Every round of one group; a void round is run again (_again)."""
    check = target.check
    for index in range(1, settings.rounds + 1):
        attempt = 1
        while True:
            result = _round(target, settings, group_index, index, attempt)
            check.rounds.append(result)
            log.info(f"{check.group.label}: round {index}{' (again)' if attempt > 1 else ''}: {result.verdict.value}"
                     f" (load generator {result.cpu_share:.2f} cores"
                     + (f"; {result.neighbours.text()}" if result.neighbours else "") + ")"
                     + "".join(f"; {m.model}: {', '.join(m.misses())}" for m in result.models if not m.holds))
            if not _again(result, attempt, target):
                break
            attempt += 1
    return check


def check_plan(plan_dir: str | Path, settings: CheckSettings, result_path: str | Path | None = None) -> PlanCheck:
    """Re-test the plan in `plan_dir` against the servers `settings.url` names; writes check.json, check.md and
    run.json into the result folder and returns the PlanCheck (`.code`: the command's exit code)."""
    plan = read_plan(plan_dir)
    groups = chosen_groups(plan, settings.groups)
    urls = group_urls(groups, settings.url)
    folder = result_folder(plan, result_path)
    targets = _targets(plan, groups, urls, settings)
    seconds = len(targets) * settings.rounds * (settings.warmup_s + settings.window_s + 0.5)
    log.info(f"checking {len(targets)} group(s) of {plan.folder}: {settings.rounds} round(s) each, about "
             f"{seconds:,.0f} s. {RULE}")
    result = PlanCheck(plan, settings, [_drive(t, settings, i) for i, t in enumerate(targets)], folder)
    for check in result.groups:
        log.info("\n".join(report.group_text(check, settings.rounds, settings.scale)))
    report.write(result, folder)
    log.info(f"written to {folder}/check.md and check.json")
    log.info(report.summary_line(result))
    return result


__all__ = ["CLIENT_CPU_LIMIT", "check_plan", "result_folder", "server_processes"]
