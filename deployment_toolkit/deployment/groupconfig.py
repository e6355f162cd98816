"""A shared group's serving settings searched for the group (issue 55), starting from each model's solo winner.

Why: each model's search picks its config alone, with the host to itself. ONNX Runtime's and LibTorch's default
intra-op threads are one per core (and ORT's idle pool threads spin), so five models on one 2-core replica run ten
threads that fight over two cores: the mix holds a fraction of what time sharing predicts. Triton's ONNX Runtime
backend has no model-config key for ORT's spinning (its README lists intra_op_thread_count, inter_op_thread_count,
execution_mode, the arena and the graph level), but a session with one intra-op thread runs its operators on the
calling thread and has no pool to spin: splitting the threads is how spinning is turned off through Triton.

The settings tried for a group of n models on c usable cores: "as searched alone" (each model's winner), then
"intra-op threads split" (each member that takes a thread count and had more than max(1, c // n), or the runtime's
default, gets max(1, c // n)). Each is measured as the group runs (its mixed traffic, held k of k); the split is kept
only where its held capacity beats the solo winners' by more than the search's resolution (moving only where the mix
gains). Where the solo winners run SPLIT_FIRST_AT times the replica's cores in intra-op threads or more, the split is
measured first and the solo winners only re-tested k times at the rate it held less the resolution: holding it, they
are kept (at that rate); not holding it, the split gains by more than the resolution: the same rule, with one bisection
instead of two (groups.py). A setting lives in the one repository: it is applied (config.pbtxt rewritten, model reloaded) before the
group is measured or confirmed, and each model's own winner is put back for any group it is in without a setting."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..repository.config import parse_text, to_text
from ..perf.neighbours import usable_cores

log = logging.getLogger(__name__)
SOLO = "as searched alone"
SPLIT = "intra-op threads split"
# the solo winners' intra-op threads over the replica's cores from which the split is measured first (issue 55: a
# fleet of twelve spent 3 minutes a shared group bisecting the solo winners of groups running 4x their cores)
SPLIT_FIRST_AT = 2.0
THREAD_KEYS = {"onnxruntime": "intra_op_thread_count", "pytorch": "INTRA_OP_THREAD_COUNT",
               "python": "intra_op_threads"}  # each backend's intra-op thread parameter (repository.config)


@dataclass(frozen=True)
class GroupSetting:
    """A name and each member's intra-op threads (a model not named keeps its own winner's)."""

    name: str
    threads: Mapping[str, int] = field(default_factory=dict)

    def text(self) -> str:
        if not self.threads:
            return self.name
        return f"{self.name} (" + ", ".join(f"{n} {t}" for n, t in self.threads.items()) + ")"


@dataclass(frozen=True)
class SettingTried:
    """What a setting held as a group, against what time sharing predicted."""

    setting: GroupSetting
    predicted: float
    held: float | None
    reason: str = ""
    below: float | None = None  # not bisected: it did not hold this rate (the split's, less the resolution)
    measured: bool = True  # False: other processes kept it from being measured (reason says so)

    @property
    def factor(self) -> float | None:
        return self.held / self.predicted if self.held is not None and self.predicted > 0 else None

    def text(self) -> str:
        if not self.measured:
            return f"{self.setting.text()}: not measured ({self.reason})"
        if self.held is None and self.below is not None:
            return f"{self.setting.text()}: below {self.below:,.1f} inf/s ({self.reason})"
        if self.held is None:
            return f"{self.setting.text()}: held no rate ({self.reason})"
        return f"{self.setting.text()}: {self.held:,.1f} inf/s held, sharing factor x {self.factor:.2f}"


def _config_path(plan: Any, name: str) -> Path:
    return Path(plan.repository) / plan.models[name].search.model_name / "config.pbtxt"


def _backend(cfg: Any) -> str:
    platform = {"onnxruntime_onnx": "onnxruntime", "pytorch_libtorch": "pytorch"}.get(cfg.platform, "")
    return cfg.backend or platform


def _own_threads(plan: Any, name: str) -> int:
    """The model's winner's intra-op threads (0: the runtime's default, one per core)."""
    return int(plan.models[name].search.outcome.decision.winner.candidate.threads)


def oversubscription(plan: Any, models: tuple[str, ...], cores: int | None = None) -> float:
    """The intra-op threads the group's solo winners run (instances x threads, a default counted as one per core)
    over the replica's cores."""
    cores = cores or usable_cores()
    used = sum(plan.models[n].search.outcome.decision.winner.candidate.threads_used(cores) for n in models)
    return used / cores


def split_setting(plan: Any, models: tuple[str, ...], cores: int | None = None) -> GroupSetting | None:
    """Threads split between the group's models, or None where no member would change (each already runs as few
    threads as its share, or takes no thread count)."""
    share = max(1, (cores or usable_cores()) // len(models))
    threads = {}
    for n in models:
        cfg = parse_text(_config_path(plan, n).read_text())
        own = _own_threads(plan, n)
        if _backend(cfg) in THREAD_KEYS and (own == 0 or own > share):
            threads[n] = share
    return GroupSetting(SPLIT, threads) if threads else None


def apply(plan: Any, server: Any, models: tuple[str, ...], setting: GroupSetting | None) -> None:
    """Each of `models` served with `setting`'s threads (its own winner's where the setting names it not), its
    config rewritten and the model reloaded where that changes what it serves."""
    chosen = setting.threads if setting is not None else {}
    for n in models:
        path = _config_path(plan, n)
        cfg = parse_text(path.read_text())
        key = THREAD_KEYS.get(_backend(cfg))
        if key is None:
            continue
        want = chosen.get(n, _own_threads(plan, n))
        have = int(cfg.parameters[key].string_value or 0) if key in cfg.parameters else 0
        if want == have:
            continue
        if want:
            cfg.parameters[key].string_value = str(want)
        else:
            del cfg.parameters[key]
        path.write_text(to_text(cfg))
        server.load_model(plan.models[n].search.model_name)  # explicit mode: a load of a loaded model reloads it
        log.info(f"{n}: intra-op threads {want or 'default'} (was {have or 'default'}), reloaded")


def kept(tried: list[SettingTried], resolution: float) -> SettingTried:
    """The solo winners unless a later setting held more by more than the search's resolution."""
    best = tried[0]
    for t in tried[1:]:
        if t.held is not None and (best.held is None or t.held > best.held * (1 + resolution)):
            best = t
    return best


__all__ = ["GroupSetting", "SOLO", "SPLIT", "SPLIT_FIRST_AT", "SettingTried", "apply", "kept", "oversubscription",
           "split_setting"]
