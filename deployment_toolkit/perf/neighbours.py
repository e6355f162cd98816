"""What the host did besides the measurement: a window in which other processes took a share of the cores is
*disturbed*, and its figures are the neighbour's as much as the model's.

A measuring window reads the CPU the host spent on its usable cores (`/proc/stat`, the cores this process may run
on; inside a container with a CPU limit, the cgroup's own `cpu.stat`) and the CPU our own processes spent (this
process, every descendant: the embedded tritonserver and its Python-backend stubs, perf_analyzer, the load
generator; reaped children included), before and after. The rest is the neighbours'. On a 2-core host a neighbour
that busy-loops one core takes half of it; the p99s of a 15 ms model measured beside it read 33-288 ms.

The rule (one place): a window whose neighbours took more than DISTURBED_SHARE of the usable cores is disturbed.
Callers never take a disturbed window as a model's capacity nor as the reason a rate fails: they wait for the host
to be quiet (wait_quiet, bounded) and measure again, at most MAX_REMEASURES times, then give up on that measurement
(HostDisturbed) naming what the neighbours took. Every window is counted in LEDGER, so a report can say how many
windows of each step were disturbed and measured again.

`DEPLOYMENT_TOOLKIT_NEIGHBOURS=record` keeps the figures and the counts but measures nothing again: for a host
that is shared on purpose (the test suite's first phase runs two workers side by side and checks correctness, not
capacity). Unset or `remeasure`: the rule above."""
from __future__ import annotations

import logging
import os
import resource
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from ..errors import ToolkitError

log = logging.getLogger(__name__)

DISTURBED_SHARE = 0.25  # of the usable cores: a neighbour busy-looping one core of two takes 0.5
MAX_REMEASURES = 3  # a disturbed window is measured again at most this many times
QUIET_WAIT_S = 60.0  # how long to wait for a quiet second before each re-measurement
QUIET_PROBE_S = 1.0
POLICY_ENV = "DEPLOYMENT_TOOLKIT_NEIGHBOURS"
_TICK = os.sysconf("SC_CLK_TCK")


class Policy(str, Enum):
    """What a disturbed window leads to."""

    REMEASURE = "remeasure"  # wait for quiet and measure again (the default)
    RECORD = "record"  # count it and keep its figures (a host shared on purpose)


def policy() -> Policy:
    """The policy from POLICY_ENV (default REMEASURE); an unknown value is refused in one line."""
    value = os.environ.get(POLICY_ENV, Policy.REMEASURE.value).strip().lower() or Policy.REMEASURE.value
    try:
        return Policy(value)
    except ValueError:
        from ..errors import UserInputError

        raise UserInputError(f"{POLICY_ENV}={value!r}: use {' or '.join(p.value for p in Policy)}") from None


class HostDisturbed(ToolkitError):
    """No quiet window could be had: the measurement is not the model's, so nothing is concluded from it."""


@dataclass(frozen=True)
class Reading:
    """CPU-seconds at one moment: the host's busy time on the usable cores and our own processes' time."""

    at: float  # time.monotonic()
    host_busy_s: float
    own_s: float
    cores: float
    source: str


@dataclass(frozen=True)
class Disturbance:
    """What others took during one window."""

    seconds: float
    others_cores: float  # average cores used by processes that are not ours
    cores: float  # usable cores
    source: str

    @property
    def share(self) -> float:
        return self.others_cores / self.cores if self.cores else 0.0

    @property
    def disturbed(self) -> bool:
        return self.share > DISTURBED_SHARE

    def text(self) -> str:
        return (f"other processes took {self.others_cores:.2f} of {self.cores:g} cores ({self.share:.0%}) for "
                f"{self.seconds:.1f} s ({self.source})")

    def row(self) -> dict[str, float | bool | str]:
        """The window's figures as a stored row keeps them."""
        return {"others_cores": round(self.others_cores, 3), "others_share": round(self.share, 3),
                "disturbed": self.disturbed, "neighbours_source": self.source}


def _usable_cpus() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def usable_cores() -> int:
    """The cores this process may run on (its affinity): what a CPU replica's threads and pods are sized by."""
    return len(_usable_cpus())


def _proc_stat_busy(cpus: set[int]) -> float:
    """Busy seconds (user, nice, system, irq, softirq, steal) summed over `cpus`, from /proc/stat."""
    total = 0
    for line in Path("/proc/stat").read_text().splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        v = [int(x) for x in rest.split()]
        total += v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)
    return total / _TICK


def _cgroup_limit() -> tuple[Path, float] | None:
    """(this cgroup v2 folder, its CPU limit in cores) when the process runs in one with a limit (a container)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    path = next((ln.split(":", 2)[2] for ln in lines if ln.startswith("0::")), None)
    if not path or path == "/":
        return None
    folder = Path("/sys/fs/cgroup") / path.lstrip("/")
    try:
        quota, period = (folder / "cpu.max").read_text().split()
    except (OSError, ValueError):
        return None
    return None if quota == "max" else (folder, int(quota) / int(period))


def _cgroup_busy(folder: Path) -> float:
    for line in (folder / "cpu.stat").read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) / 1e6
    return 0.0


def _descendants(root: int) -> list[int]:
    """Every live process below `root` (by parent pid, from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, []))
    return out


def _process_seconds(pid: int) -> float:
    """A live process's time and its reaped children's (utime, stime, cutime, cstime); 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return sum(int(x) for x in fields[11:15]) / _TICK


def _own_seconds(also: Sequence[int] = ()) -> float:
    """This process and its reaped children (resource), plus each live descendant's time and its reaped children's:
    a child that exits within a window moves from one sum to the other, whole. `also`: processes that are not our
    children but are part of the measurement (the server a check drives), with theirs."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    total = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    mine = set(_descendants(os.getpid()))
    for root in also:
        if root != os.getpid() and root not in mine:
            mine |= {root, *_descendants(root)}
    return total + sum(_process_seconds(pid) for pid in mine)


def read(also: Sequence[int] = ()) -> Reading:
    """The host's and our own CPU-seconds now (`also`: processes counted as ours, with their descendants)."""
    limit = _cgroup_limit()
    if limit is not None:
        folder, cores = limit
        return Reading(time.monotonic(), _cgroup_busy(folder), _own_seconds(also), cores, "cgroup cpu.stat")
    cpus = _usable_cpus()
    return Reading(time.monotonic(), _proc_stat_busy(cpus), _own_seconds(also), float(len(cpus)), "/proc/stat")


def listening(port: int) -> list[int]:
    """The processes on this host listening on TCP `port` (/proc/net/tcp and tcp6, state LISTEN, matched to their
    sockets through /proc/<pid>/fd); empty where none is, or where they are another user's and cannot be read."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{cols[9]}]")
    pids = []
    for entry in os.scandir("/proc") if inodes else ():
        if not entry.name.isdigit():
            continue
        try:
            with os.scandir(f"/proc/{entry.name}/fd") as fds:
                if any(os.readlink(fd.path) in inodes for fd in fds):
                    pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def between(before: Reading, after: Reading) -> Disturbance:
    seconds = max(after.at - before.at, 1e-6)
    others = max(0.0, (after.host_busy_s - before.host_busy_s) - (after.own_s - before.own_s)) / seconds
    return Disturbance(seconds, min(others, after.cores), after.cores, after.source)


@dataclass
class Ledger:
    """Windows measured, disturbed and measured again, by label (a step's name, or the kind of window); thread
    safe, as a mix measures its models from several threads."""

    windows: Counter = field(default_factory=Counter)
    disturbed: Counter = field(default_factory=Counter)
    remeasured: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, label: str, disturbance: Disturbance, again: bool) -> None:
        with self.lock:
            self.windows[label] += 1
            self.disturbed[label] += disturbance.disturbed
            self.remeasured[label] += again

    def totals(self) -> tuple[int, int, int]:
        with self.lock:
            return sum(self.windows.values()), sum(self.disturbed.values()), sum(self.remeasured.values())


LEDGER = Ledger()
T = TypeVar("T")


def wait_quiet(limit_s: float = QUIET_WAIT_S, also: Sequence[int] = ()) -> Disturbance:
    """Wait, one probe second at a time, for a second in which the neighbours are under the rule's share; returns
    the last probe (disturbed if none was quiet within `limit_s`). `also`: as for `read`."""
    deadline = time.monotonic() + limit_s
    while True:
        start = read(also)
        time.sleep(QUIET_PROBE_S)
        probe = between(start, read(also))
        if not probe.disturbed or time.monotonic() >= deadline:
            return probe


def until_quiet(run: Callable[[], T], what: str, label: str, remeasure: bool = True,
                on_window: Callable[[T, Disturbance], None] | None = None,
                measured: Callable[[Disturbance], bool] = lambda d: True) -> T:
    """The one rule for every caller: `run()` measures a window; a disturbed one is measured again once the host is
    quiet (REMEASURE policy and `remeasure`), at most MAX_REMEASURES times, then HostDisturbed naming `what`. Each
    window is counted under `label` and handed to `on_window` (its figures onto the row); `measured` says whether
    the window measured anything (a replay from a store does not, and is neither counted nor judged)."""
    rule = policy()
    for attempt in range(MAX_REMEASURES + 1):
        before = read()
        value = run()
        disturbance = between(before, read())
        if not measured(disturbance):
            return value
        again = disturbance.disturbed and rule is Policy.REMEASURE and remeasure
        LEDGER.count(label, disturbance, again)
        if on_window is not None:
            on_window(value, disturbance)
        if not again:
            return value
        if attempt == MAX_REMEASURES:
            raise HostDisturbed(f"{what}: no quiet window in {attempt + 1} tries ({disturbance.text()})")
        log.warning(f"warning: {what}: window disturbed ({disturbance.text()}); measuring again once the host is "
                    "quiet")
        wait_quiet()
    raise AssertionError("not reached")


__all__ = ["DISTURBED_SHARE", "Disturbance", "HostDisturbed", "LEDGER", "Ledger", "MAX_REMEASURES", "POLICY_ENV",
           "Policy", "Reading", "between", "listening", "policy", "read", "until_quiet", "wait_quiet"]
