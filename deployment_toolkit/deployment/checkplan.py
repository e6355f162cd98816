"""`check-plan PLAN_DIR --url HOST:PORT`: a written plan re-tested against any running Triton that serves its models.

Why: a plan was judged only by the planner's own confirmation, on the planner's host. Users need to check it where
it runs (the fleet behind its Service, or a server started by hand), after they deploy and again when traffic
changes, with a client that shares nothing with the planner's measuring (client/openloop.py, not perf_analyzer).
It needs the plan folder (run.json: each model's p99 SLO, each replica group's models and per-replica rates) and,
for pipelines, the user's raw samples; not the planner's workspace.

Each replica group is driven at its planned per-replica rates (x --scale): every model on its own seeded Poisson
schedule, all of a group's models at once from this one process over one gRPC channel (through a Kubernetes Service
one channel reaches one replica: the per-replica rate is the right load). Latency counts from the intended send
time. The rule (RULE, said in the output):
- a model holds in a round when its p99 <= its SLO, it had no errors, and it answered >= offered - 3 sqrt(offered)
  requests in the window (the Poisson tolerance of the count);
- a group holds in a round when all its models do; it holds when it did in a majority of its rounds (2 of 3);
- a round whose load generator used more than CLIENT_CPU_LIMIT of a core is void, not failed, and is run again once;
- a round in which the host's other processes took more than perf.neighbours' share of its cores is void too (their
  load is not the plan's), and is run again once the host is quiet, at most MAX_REMEASURES times. The server's own
  processes (the one listening on a loopback URL's port, with its backends) count as the measurement's; where they
  cannot be found (another user's, a container's port proxy) the host's load is recorded, not judged.
Exit 0: every group holds; 1: one does not (or could not be judged); 2: bad input, or the server lacks a model.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..client.openloop import StreamTrace
from ..client.url import ServerUrl
from ..config import Protocol, check_numbers, setting
from ..config.fields import MAX_LATENCY_MS
from ..errors import UserFileNotFoundError, UserInputError
from ..perf.neighbours import DISTURBED_SHARE, Disturbance
from ..results.runinfo import read_run_json

log = logging.getLogger(__name__)

CLIENT_CPU_LIMIT = 0.8  # cores: above it the load generator may be what held the rates back, and the round is void
POISSON_Z = 3.0  # the answered count may fall this many standard deviations (sqrt(offered)) short of the offered
WARMUP_S = 1.0  # each round first sends this long at its rates, not counted (at most a quarter of the window)
PLAN_KIND = "deployment-plan"  # run.json's config.kind where `deployment-toolkit plan` wrote it
RULE = (f"A model holds in a round when its p99 from the intended send time <= its SLO, it had no errors, and it "
        f"answered >= offered - {POISSON_Z:g}*sqrt(offered) requests in the window; a group holds in a round when all "
        f"its models do, and holds when it did in a majority of its rounds. A round whose load generator used more "
        f"than {CLIENT_CPU_LIMIT:g} of a core is void (run again once), not failed; so is one in which the host's other "
        f"processes took more than {DISTURBED_SHARE:.0%} of its cores (run again once the host is quiet).")


@dataclass(frozen=True)
class CheckSettings:
    """How a plan is re-tested; each field carries its flag (config.setting)."""

    url: tuple[str, ...] = setting((), flag="--url", action="append", metavar="[GROUP=]HOST:PORT",
                                   help="the gRPC endpoint serving the plan's models (Triton's default port 8001); "
                                        "GROUP=HOST:PORT for one group (its models joined by '-', as its manifests "
                                        "are named), repeatable; a bare one serves every other group")
    scale: float = setting(1.0, flag="--scale", low=0, low_open=True, high=100.0,
                           help="drive each group at this multiple of its planned per-replica rates")
    rounds: int = setting(3, flag="--rounds", low=1, high=20,
                          help="rounds per group; a group holds when it held in a majority of them")
    window_s: float = setting(5.0, flag="--window-s", unit="s", low=0.5, high=3600.0,
                              help="the counted window of each round (after a warm-up of up to 1 s)")
    seed: int = setting(0, flag="--seed", low=0, high=2**32 - 1, help="the seed of every Poisson schedule")
    samples: str | None = setting(None, flag="--samples", metavar="DIR",
                                  help="inputs per model: DIR/<model>/*.npz (an array per input name), or its raw "
                                       "files for a pipeline (required for models taking strings); default: seeded "
                                       "random data of each input's dtype, dynamic dims of 1")
    groups: tuple[str, ...] = setting((), flag="--group", action="append", metavar="GROUP",
                                      help="check only this group (its models joined by '-'); repeatable")
    timeout_s: float = setting(10.0, flag="--timeout-s", unit="s", low=0, low_open=True, high=MAX_LATENCY_MS / 1000,
                               help="each request's deadline; one not answered by then is an error")

    def __post_init__(self) -> None:
        check_numbers(self)

    @property
    def warmup_s(self) -> float:
        return min(WARMUP_S, self.window_s / 4)

    @property
    def needed(self) -> int:
        """The rounds a group must hold in: a majority."""
        return self.rounds // 2 + 1


# ---- the plan on file ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PlannedGroup:
    models: tuple[str, ...]
    replicas: int
    rates: Mapping[str, float]  # each model's planned rate per replica (inferences/s, headroom in): run.json's

    @property
    def label(self) -> str:
        """The group's name, as its manifests' folder is named (deployment.report.replica_sets)."""
        return "-".join(self.models)


@dataclass(frozen=True)
class PlanOnFile:
    folder: Path
    slo_ms: Mapping[str, float]  # each model's p99 SLO
    groups: tuple[PlannedGroup, ...]
    confirmed: bool | None  # what the planner's own confirmation said


def _number(value: Any, where: str, low: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < low:
        raise UserInputError(f"{where} must be a number >= {low:g}, got {value!r}")
    return float(value)


def _group(raw: Any, i: int, slo: Mapping[str, float], path: Path) -> PlannedGroup:
    where = f"{path}: config.groups[{i}]"
    if not isinstance(raw, dict) or not isinstance(raw.get("models"), list) or not raw["models"]:
        raise UserInputError(f"{where} is not a replica group (models, replicas, rates)")
    models = tuple(str(m) for m in raw["models"])
    unknown = [m for m in models if m not in slo]
    if unknown:
        raise UserInputError(f"{where} names model(s) {', '.join(unknown)} that config.models does not have")
    rates = raw.get("rates")
    if not isinstance(rates, dict) or any(m not in rates for m in models):
        raise UserInputError(f"{where} has no planned rate for every model (config.groups[].rates)")
    replicas = int(_number(raw.get("replicas"), f"{where}.replicas", 1))
    return PlannedGroup(models, replicas, {m: _number(rates[m], f"{where}.rates.{m}") for m in models})


def read_plan(folder: str | Path) -> PlanOnFile:
    """The plan `deployment-toolkit plan` wrote into `folder` (its run.json), or one line saying why it is not one."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserFileNotFoundError(f"{folder}: no such plan folder (give the folder `deployment-toolkit plan` wrote, "
                                    "e.g. results/plan-<name>)")
    path = folder / "run.json"
    inner = folder / "plan" / "run.json"
    hint = f" ({folder / 'plan'} holds one)" if inner.is_file() else ""
    if not path.is_file():
        raise UserFileNotFoundError(f"{folder} has no run.json: give the folder `deployment-toolkit plan` wrote "
                                    f"(results/plan-<name>){hint}")
    config = read_run_json(folder).get("config") or {}
    kind = config.get("kind") if isinstance(config, dict) else None
    if kind != PLAN_KIND:
        raise UserInputError(f"{path} records a {kind or 'run without a kind'}, not a deployment plan: give the folder "
                             f"`deployment-toolkit plan` wrote{hint}")
    models, groups = config.get("models"), config.get("groups")
    if not isinstance(models, dict) or not models:
        raise UserInputError(f"{path} records no models (config.models)")
    slo = {str(n): _number((m or {}).get("p99_ms") if isinstance(m, dict) else None,
                           f"{path}: config.models.{n}.p99_ms") for n, m in models.items()}
    if not isinstance(groups, list) or not groups:
        raise UserInputError(f"{path} records no replica groups (config.groups): it was written before plans recorded "
                             "them; plan it again")
    planned = tuple(_group(g, i, slo, path) for i, g in enumerate(groups))
    confirmed = config.get("confirmed")
    return PlanOnFile(folder, slo, planned, confirmed if isinstance(confirmed, bool) else None)


def chosen_groups(plan: PlanOnFile, labels: Sequence[str]) -> tuple[PlannedGroup, ...]:
    """The groups --group names (all where it names none); an unknown one is one line listing the plan's."""
    if not labels:
        return plan.groups
    have = {g.label: g for g in plan.groups}
    unknown = [label for label in labels if label not in have]
    if unknown:
        raise UserInputError(f"--group {', '.join(unknown)}: the plan has no such group; its groups are "
                             f"{', '.join(have)}")
    return tuple(have[label] for label in dict.fromkeys(labels))


def group_urls(groups: Sequence[PlannedGroup], given: Sequence[str]) -> dict[str, ServerUrl]:
    """Each group's gRPC endpoint: `GROUP=HOST:PORT` for that group, a bare HOST:PORT for the rest."""
    if not given:
        raise UserInputError("--url HOST:PORT is required: the gRPC endpoint of the server that serves the plan")
    default: ServerUrl | None = None
    by_group: dict[str, ServerUrl] = {}
    labels = {g.label for g in groups}
    for text in given:
        label, sep, url = text.partition("=")
        parsed = ServerUrl.parse(url if sep else text)
        if parsed.protocol != Protocol.GRPC:
            raise UserInputError(f"--url {text}: check-plan sends over gRPC; give the server's gRPC port (8001 by "
                                 "default), as HOST:PORT or grpc://HOST:PORT")
        if not sep:
            default = parsed
        elif label not in labels:
            raise UserInputError(f"--url {text}: the plan has no group {label!r} to check; its groups are "
                                 f"{', '.join(g.label for g in groups)}")
        else:
            by_group[label] = parsed
    lacking = [g.label for g in groups if g.label not in by_group and default is None]
    if lacking:
        raise UserInputError(f"no --url for group(s) {', '.join(lacking)}: give a bare --url HOST:PORT for them, or "
                             "--group to check only the groups given")
    return {g.label: by_group.get(g.label) or default for g in groups}  # type: ignore[misc]


# ---- judging -----------------------------------------------------------------------------------------------------

class Verdict(str, Enum):
    HOLDS = "holds"
    FAILS = "fails"
    VOID = "void"  # the load generator was too busy to say


@dataclass(frozen=True)
class ModelRound:
    """One model in one round: what was offered and answered in the counted window, and its latency."""

    model: str
    planned_rps: float  # the rate driven: planned per replica x --scale
    slo_ms: float
    window_s: float
    offered: int  # requests meant to go in the window
    answered: int  # answers that came in the window (throughput; warm-up requests answered in it included)
    errors: int  # requests meant to go in the window that failed or got no answer
    p50_ms: float | None  # from the intended send time, over the answered requests meant to go in the window
    p99_ms: float | None
    within_slo: float  # share of the offered answered within the SLO
    late_p99_ms: float  # how late the sender sent (p99): a busy load generator shows here first
    first_error: str = ""

    @property
    def tolerance(self) -> float:
        return POISSON_Z * math.sqrt(self.offered)

    def misses(self) -> list[str]:
        """Why the model does not hold in this round ([] where it does)."""
        out = []
        if self.p99_ms is not None and self.p99_ms > self.slo_ms:
            out.append(f"p99 {self.p99_ms:,.1f} ms > SLO {self.slo_ms:g} ms")
        if self.errors:
            out.append(f"{self.errors} error(s): {self.first_error}")
        if self.answered < self.offered - self.tolerance:
            out.append(f"answered {self.answered} < offered {self.offered} - {self.tolerance:.0f}")
        return out

    @property
    def holds(self) -> bool:
        return not self.misses()


def _percentile(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


def judge(trace: StreamTrace, planned_rps: float, slo_ms: float, start_ns: int, end_ns: int) -> ModelRound:
    """One model's round from its trace: the requests meant to go in [start_ns, end_ns) are judged."""
    counted = (trace.intended_ns >= start_ns) & (trace.intended_ns < end_ns)
    latency = trace.latency_ms()[counted & trace.ok]
    offered = int(counted.sum())
    answered = int((trace.ok & (trace.done_ns >= start_ns) & (trace.done_ns < end_ns)).sum())
    sent = counted & (trace.sent_ns >= 0)
    late = (trace.sent_ns[sent] - trace.intended_ns[sent]) / 1e6
    return ModelRound(trace.model, planned_rps, slo_ms, (end_ns - start_ns) / 1e9, offered, answered,
                      int((counted & ~trace.ok).sum()), _percentile(latency, 50), _percentile(latency, 99),
                      float((latency <= slo_ms).sum() / offered) if offered else 1.0,
                      _percentile(late, 99) or 0.0, trace.first_error)


@dataclass(frozen=True)
class GroupRound:
    index: int  # from 1
    attempt: int  # over 1: the round was run again after a void attempt
    models: tuple[ModelRound, ...]
    cpu_share: float  # the load generator's CPU over the window, in cores
    neighbours: Disturbance | None = None  # what the host's other processes took over the round
    judged: bool = False  # whether their load decides (the server's processes were told apart, policy remeasure)

    @property
    def disturbed(self) -> bool:
        """The host's other processes took more than the rule's share: the round says nothing of the plan."""
        return self.judged and self.neighbours is not None and self.neighbours.disturbed

    @property
    def verdict(self) -> Verdict:
        if self.cpu_share > CLIENT_CPU_LIMIT or self.disturbed:
            return Verdict.VOID
        return Verdict.HOLDS if all(m.holds for m in self.models) else Verdict.FAILS

    def void_text(self) -> str:
        """Why a void round does not count."""
        if self.disturbed:
            return f"the host's {self.neighbours.text()}"  # type: ignore[union-attr]
        return f"the load generator used {self.cpu_share:.2f} of a core (over {CLIENT_CPU_LIMIT:g})"


def group_verdict(outcomes: Sequence[Verdict], rounds: int) -> Verdict:
    """Holds when the group held in a majority of `rounds`; fails when the rounds it failed leave no majority; void
    when the void rounds decide it."""
    need = rounds // 2 + 1
    if outcomes.count(Verdict.HOLDS) >= need:
        return Verdict.HOLDS
    if outcomes.count(Verdict.FAILS) > rounds - need:
        return Verdict.FAILS
    return Verdict.VOID


@dataclass
class GroupCheck:
    group: PlannedGroup
    url: ServerUrl
    served: dict[str, str]  # the plan's model -> the name it is called by on the server
    data: dict[str, str]  # where each model's inputs came from
    rounds: list[GroupRound] = field(default_factory=list)
    server: str = ""  # how the server's processes were told from the host's others (said in check.md)

    def counted(self) -> list[GroupRound]:
        """Each round's last attempt (a void one run again counts by the last)."""
        last: dict[int, GroupRound] = {}
        for r in self.rounds:
            last[r.index] = r
        return [last[i] for i in sorted(last)]

    def verdict(self, rounds: int) -> Verdict:
        return group_verdict([r.verdict for r in self.counted()], rounds)


@dataclass
class PlanCheck:
    plan: PlanOnFile
    settings: CheckSettings
    groups: list[GroupCheck]
    folder: Path | None = None  # where check.json went

    @property
    def holds(self) -> bool:
        return all(g.verdict(self.settings.rounds) is Verdict.HOLDS for g in self.groups)

    @property
    def code(self) -> int:
        """The command's exit code: 0 every group holds, 1 one does not (or could not be judged)."""
        return 0 if self.holds else 1


__all__ = ["CLIENT_CPU_LIMIT", "CheckSettings", "GroupCheck", "GroupRound", "ModelRound", "POISSON_Z", "PlanCheck",
           "PlanOnFile", "PlannedGroup", "RULE", "Verdict", "chosen_groups", "group_urls", "group_verdict", "judge",
           "read_plan"]
