"""The search space: one serving configuration (`Candidate`), the host's cores, and the values each
dimension takes.

Thread accounting is what keeps the search from oversubscribing a small host: every Python-backend
instance is its own process with its own runtime thread pool, so `instances x threads` must fit in the
cores this process may use. A runtime's default thread count (0) is one thread per core, so it counts as
all cores: two instances with default threads on two cores is oversubscribed (Model Analyzer's mistake).
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..repository.config import ConfigOptions

DEFAULT_QUEUE_DELAYS_US = (100, 500, 2000, 10000)


def host_cores() -> int:
    """Cores this process may run on (the affinity mask, not the machine's count: containers and taskset)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Candidate:
    """One serving configuration. `threads=0` means the runtime's default (one per core)."""

    format: str
    instances: int = 1
    threads: int = 0
    max_batch_size: int = 8
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "preferred_batch_sizes", tuple(int(b) for b in self.preferred_batch_sizes))

    @property
    def key(self) -> str:
        """Stable identity used in the checkpoint (the artifact digest is added by the store)."""
        pref = "-".join(map(str, self.preferred_batch_sizes)) or "none"
        return (f"{self.format}/i{self.instances}/t{self.threads or 'def'}/b{self.max_batch_size}/p{pref}"
                f"/q{self.max_queue_delay_us}")

    @property
    def slug(self) -> str:
        """Usable as a Triton model name and a file name."""
        return self.key.replace("/", "_")

    def label(self) -> str:
        threads = "default threads" if self.threads == 0 else f"{self.threads} thread{'s' * (self.threads > 1)}"
        pref = ",".join(map(str, self.preferred_batch_sizes)) or "-"
        return (f"{self.format}, {self.instances} inst x {threads}, max batch {self.max_batch_size}, "
                f"preferred {pref}, delay {self.max_queue_delay_us} us")

    def threads_used(self, cores: int) -> int:
        return self.instances * (self.threads or cores)

    def oversubscription(self, cores: int) -> str | None:
        """None when the candidate fits the host, else why it does not."""
        used = self.threads_used(cores)
        if used <= cores:
            return None
        per = "default (= all cores)" if self.threads == 0 else str(self.threads)
        return f"oversubscribed: {self.instances} instances x {per} threads = {used} threads > {cores} cores"

    def config_options(self, model_name: str) -> ConfigOptions:
        return ConfigOptions(
            model_name=model_name, runtime="python", max_batch_size=self.max_batch_size,
            dynamic_batching=self.max_batch_size > 0, preferred_batch_sizes=self.preferred_batch_sizes,
            max_queue_delay_us=self.max_queue_delay_us, instances=self.instances, instance_kind="cpu",
            intra_op_threads=self.threads, host_has_gpu=False,
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["preferred_batch_sizes"] = list(self.preferred_batch_sizes)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Candidate":
        return cls(**{**d, "preferred_batch_sizes": tuple(d.get("preferred_batch_sizes", ()))})

    def with_(self, **changes: Any) -> "Candidate":
        return replace(self, **changes)


def default_candidate(fmt: str, manifest_max_batch: int) -> Candidate:
    """The config `config_model_on_triton.py` writes by default: the yardstick every gain is measured against."""
    return Candidate(format=fmt, max_batch_size=manifest_max_batch)


def _powers_of_two_upto(n: int) -> list[int]:
    out, v = [], 1
    while v <= n:
        out.append(v)
        v *= 2
    if out and out[-1] != n:
        out.append(n)
    return out


def instance_thread_pairs(cores: int, allow_oversubscribe: bool = False) -> list[tuple[int, int]]:
    """(instances, threads) worth trying, most informative first; threads 0 = runtime default.

    After the default (one instance, default threads): more instances each with its share of the cores, then
    with half of it (room for the server's own threads and the client), then one instance with explicit
    threads (close to the default), then N instances with default threads - oversubscribed, so only listed
    with the reason unless `allow_oversubscribe` (what Model Analyzer tries).
    """
    pairs: list[tuple[int, int]] = [(1, 0)]
    levels = _powers_of_two_upto(cores)
    pairs += [(i, cores // i) for i in levels[1:]]
    pairs += [(i, cores // i // 2) for i in levels if cores // i // 2 >= 1]
    pairs.append((1, cores))
    for i in levels[1:]:
        pairs.append((i, 0))
        if allow_oversubscribe:
            pairs.append((i, cores))
    return list(dict.fromkeys(pairs))


def max_batch_ladder(manifest_max: int) -> list[int]:
    """Smaller max batch sizes, from the manifest's down: a smaller cap can cut the p99 tail."""
    return [b for b in reversed(_powers_of_two_upto(manifest_max)) if b < manifest_max]


def preferred_options(max_batch: int) -> list[tuple[int, ...]]:
    """Preferred batch sizes to try: the max, then half and max. Empty when batching is off."""
    if max_batch < 2:
        return []
    opts = [(max_batch,)]
    if max_batch // 2 >= 2:
        opts.append((max_batch // 2, max_batch))
    return opts


def queue_delay_ladder(budget_ms: float, values: tuple[int, ...] = DEFAULT_QUEUE_DELAYS_US) -> list[int]:
    """Queue delays (us) worth trying: each must be a small part (<= 1/4) of the latency budget."""
    limit = budget_ms * 1000.0 / 4.0
    return [v for v in values if v <= limit]


@dataclass
class Dimension:
    """A dimension of the search. `ladder=True`: values are ordered, stop at the first step that gains
    nothing beyond noise; `ladder=False`: try every value (few, unordered)."""

    name: str
    candidates: list[Candidate] = field(default_factory=list)
    ladder: bool = True
