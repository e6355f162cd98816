"""Shared memory: one perf_analyzer at a time. It names its regions after the tensors and unregisters every region
of its server when it starts, so two runs with shared memory at once corrupt each other (one dies of SIGBUS);
runs here take a host-wide lock and refuse to start next to a foreign run.

The lock is fair: waiters queue in arrival order (`TicketQueue`), so a sweep that asks again after each of its
points goes to the back of the line instead of winning every race against the runs waiting; and a waiter gives up
only when one holder keeps the lock past its deadline (the wait starts again whenever the lock changes hands)."""
from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from ...binaries import PERF_ANALYZER
from ...cleanup import PerfShmRecord, perf_region_pattern
from ...client import TritonClient
from ...config import SharedMemory
from .command import HasSignature
from .errors import PerfAnalyzerError

log = logging.getLogger(__name__)


SHM_LOCK_NAME = "deployment_toolkit-perf_analyzer-shm.lock"
SHM_DIR = Path("/dev/shm")


@dataclass(frozen=True)
class ShmRun:
    """A running perf_analyzer that uses shared memory, read from its command line."""

    pid: int
    shared_memory: str  # system | cuda
    url: str
    model: str

    def describe(self) -> str:
        return f"pid {self.pid}: perf_analyzer -m {self.model} -u {self.url} --shared-memory {self.shared_memory}"


def _flag_value(argv: Sequence[str], *names: str) -> str | None:
    """The value of an option in any spelling getopt accepts: `-u X`, `-uX`, `--url X`, `--url=X`."""
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if name.startswith("--") and arg.startswith(name + "="):
                return arg[len(name) + 1:]
            if not name.startswith("--") and arg.startswith(name) and len(arg) > len(name):
                return arg[len(name):]
    return None


def parse_shm_run(pid: int, argv: Sequence[str]) -> ShmRun | None:
    """A perf_analyzer command line -> its shared-memory use; None for other programs and for runs without."""
    if not argv or Path(argv[0]).name != PERF_ANALYZER:
        return None
    shm = _flag_value(argv, "--shared-memory")
    if shm not in ("system", "cuda"):
        return None
    url = _flag_value(argv, "-u", "--url") or "localhost:8000"  # perf_analyzer's own default
    return ShmRun(pid, shm, url, _flag_value(argv, "-m", "--model-name") or "?")


def running_shm_runs(proc: Path = Path("/proc")) -> list[ShmRun]:
    """Every perf_analyzer on this host (this PID namespace) that uses shared memory, from /proc."""
    runs = []
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:  # exited while we looked, or not ours to read
            continue
        run = parse_shm_run(int(entry.name), [a for a in argv if a])
        if run is not None:
            runs.append(run)
    return runs


def _same_server(a: str, b: str) -> bool:
    def norm(url: str) -> str:
        url = url.split("://", 1)[-1].rstrip("/")
        return url.replace("localhost", "127.0.0.1")

    return norm(a) == norm(b)


def conflicting_runs(shared_memory: SharedMemory | str, url: str, runs: Iterable[ShmRun] | None = None) -> list[ShmRun]:
    """The runs a new one with `shared_memory` against `url` would corrupt, or be corrupted by.

    System shared memory: any other system-shm run (region names are tensor names, the same for every
    zoo model: input__0, output__0). Any shared memory: a run against the same server (each start
    unregisters all of the server's regions).
    """
    if shared_memory == "none":
        return []
    runs = running_shm_runs() if runs is None else runs
    return [r for r in runs if (shared_memory == "system" and r.shared_memory == "system") or _same_server(r.url, url)]


def concurrent_message(runs: Sequence[ShmRun]) -> str:
    listed = "\n".join(f"  {r.describe()}" for r in runs)
    return (
        f"another perf_analyzer is using shared memory on this host:\n{listed}\n"
        "perf_analyzer names its shared-memory regions after the model's tensors (/dev/shm/input__0_0_0, "
        "/dev/shm/output__0, ...) with no per-run prefix, and unregisters all of a server's regions when it "
        "starts, so two runs at once corrupt each other (one dies of SIGBUS). Wait for it to finish (or stop "
        f"it: kill {' '.join(str(r.pid) for r in runs)}), or measure with --shared-memory none."
    )


def shm_free_bytes(path: Path = SHM_DIR) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def sigbus_message(shared_memory: SharedMemory | str, where: str, runs: Sequence[ShmRun],
                   free_bytes: int | None) -> str:
    """Why perf_analyzer died of SIGBUS (exit -7) and what to do: the two causes are a region resized or
    removed by another run, and a full /dev/shm (Docker's default is 64 MiB)."""
    if shared_memory == "none":
        return (f"perf_analyzer was killed by SIGBUS (bus error) at {where}, with no shared memory in use: "
                "see its output in the log and check the host's memory")
    lines = [f"perf_analyzer was killed by SIGBUS (bus error) at {where}: a shared-memory region it had "
             "mapped was shrunk or removed under it, or /dev/shm ran out of space."]
    if runs:
        lines.append(concurrent_message(runs))
    elif shared_memory == "system":
        lines.append("No other perf_analyzer with shared memory is running now; one that ran at the same time "
                     "(perf_analyzer names regions after the tensors, with no per-run prefix) resizes and removes "
                     "the same /dev/shm files. Run one perf_analyzer with --shared-memory system at a time.")
    if free_bytes is not None:
        lines.append(f"{SHM_DIR} has {free_bytes / 2**20:.0f} MiB free; in a container, start it with "
                     "--shm-size=1g (or --ipc=host) if that is less than the inputs and outputs of a batch.")
    lines.append("Or measure with --shared-memory none.")
    return "\n".join(lines)


def shm_lock_path() -> Path:
    """One lock per shared-memory namespace: /dev/shm itself where it exists."""
    return (SHM_DIR if SHM_DIR.is_dir() else Path(tempfile.gettempdir())) / SHM_LOCK_NAME


def _open_lock(path: Path) -> int | None:
    """A descriptor to flock (read-only: a lock file another user created is fine); None if impossible."""
    for flags in (os.O_RDONLY, os.O_RDONLY | os.O_CREAT):
        try:
            return os.open(path, flags, 0o666)
        except FileNotFoundError:
            continue
        except OSError:  # no permission: fall back to detecting other runs only
            return None
    return None


def _note_once(said: set[str], what: str) -> None:
    """Say once per wait why nothing happens (a sweep otherwise looks hung)."""
    if what not in said:
        said.add(what)
        log.warning(f"waiting for {what} to finish: perf_analyzer runs with shared memory cannot overlap")


QUEUE_POLL_S = 0.05  # how often a waiter looks at the head of the queue (a check, not a fixed wait)
_TICKET = re.compile(r"(\d{12})-(\d+)")  # arrival number, owner's pid


class TicketQueue:
    """The runs waiting for the lock at `lock`, in arrival order: each takes a numbered ticket, a file in
    `<lock>.queue/` that its owner keeps flocked for as long as it lives, and the oldest live ticket goes next.
    A ticket whose owner died is free to flock: it is skipped and removed, so a killed run never blocks the queue.
    Tickets are numbered one at a time under a lock on the folder, so two never tie."""

    def __init__(self, lock: Path):
        self.dir = lock.with_name(lock.name + ".queue")
        self.name = ""  # this run's ticket while it waits or holds the lock
        self._fd: int | None = None

    def join(self) -> bool:
        """Take a ticket at the back; False where the folder cannot be used (waiting falls back to first come)."""
        try:
            if not self.dir.is_dir():
                self.dir.mkdir(exist_ok=True)
                os.chmod(self.dir, 0o1777)  # like /tmp: every user's runs queue here, each removes only its own
            folder = os.open(self.dir, os.O_RDONLY)
        except OSError:
            return False
        new = self.dir / f".new-{os.getpid()}-{id(self)}"
        try:
            fcntl.flock(folder, fcntl.LOCK_EX)  # held for microseconds: numbering, not waiting
            numbers = [int(m.group(1)) for m in map(_TICKET.fullmatch, os.listdir(self.dir)) if m]
            fd = os.open(new, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o666)
            fcntl.flock(fd, fcntl.LOCK_EX)  # alive before it is visible: renamed under its final name once locked
            self.name = f"{max(numbers, default=0) + 1:012d}-{os.getpid()}"
            os.rename(new, self.dir / self.name)
            self._fd = fd
            return True
        except OSError:
            new.unlink(missing_ok=True)
            self.name = ""
            return False
        finally:
            os.close(folder)

    def head(self) -> str | None:
        """The oldest live ticket (this run's own when it is next); None without a queue."""
        if self._fd is None:
            return None
        try:
            names = sorted(n for n in os.listdir(self.dir) if _TICKET.fullmatch(n))
        except OSError:
            return self.name
        return next((n for n in names if n == self.name or self._alive(n)), self.name)

    def _alive(self, name: str) -> bool:
        path = self.dir / name
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return False  # its owner left
        except OSError:
            return True  # cannot look: its owner is taken to be alive
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True  # flocked: its owner lives
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                path.unlink()  # its owner died (SIGKILL) without leaving the queue
        except OSError:
            pass
        finally:
            os.close(fd)
        return False

    def leave(self) -> None:
        if self._fd is not None:
            (self.dir / self.name).unlink(missing_ok=True)  # gone before it is free: nobody takes it for dead
            os.close(self._fd)
            self._fd, self.name = None, ""


def holder_text(ticket: str | None) -> str:
    m = _TICKET.fullmatch(ticket or "")
    return f"pid {m.group(2)}" if m else "a run that did not queue"


def _acquire(fd: int, queue: TicketQueue, wait_s: float, said: set[str], path: Path) -> str:
    """Take the lock when this run's ticket is the oldest live one; '' once held. Gives up, returning who held it,
    only when one holder keeps it more than `wait_s`: the wait starts again each time the lock changes hands."""
    queue.join()
    holder, since = "", time.monotonic()
    while True:
        head = queue.head()
        if head is None or head == queue.name:  # next (or no queue to wait in: first come, first served)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return ""
            except BlockingIOError:
                head = "unqueued"  # held by a run without a ticket (an older toolkit, or one that could not queue)
        now = time.monotonic()
        if head != holder:
            holder, since = head, now
        elif now - since > wait_s:
            return holder_text(holder)
        _note_once(said, f"another perf_analyzer run of this toolkit (lock {path})")
        time.sleep(QUEUE_POLL_S)


@contextlib.contextmanager
def perf_regions_removed(shared_memory: SharedMemory | str, signature: HasSignature,
                         url: str | None = None, protocol: str = "grpc") -> Iterator[None]:
    """Remove the system shared-memory regions perf_analyzer created, however it ended: killed (our SIGTERM,
    Ctrl-C, a timeout) it never unlinks them. Only names that match its tensor-named regions and appeared
    during the run are removed (the run holds the shared-memory lock); a record beside the lock lets the
    next run clear what a SIGKILLed one left. With `url`, the regions of those names still registered on the
    server are unregistered too (a killed run never unregisters them, and the next run's registration fails)."""
    if shared_memory != "system" or not SHM_DIR.is_dir():
        yield
        return
    pattern = perf_region_pattern([t.name for t in signature.inputs], [t.name for t in signature.outputs])
    record = PerfShmRecord(shm_lock_path().with_name(SHM_LOCK_NAME.replace(".lock", ".regions.json")))
    before = record.begin(pattern)
    try:
        yield
    finally:
        record.end(pattern, before)
        if url:
            _unregister_left(url, protocol, pattern)


def _unregister_left(url: str, protocol: str, pattern: re.Pattern[str]) -> None:
    """Unregister on the server the regions of perf_analyzer's names it left registered (none after a run that
    ended well: it unregisters its own); a server that cannot be asked is left as it is."""
    try:
        with TritonClient(url, protocol) as client:
            gone = client.unregister_system_regions(lambda name: bool(pattern.match(name)))
    except Exception as err:  # noqa: BLE001 - cleanup: the run's own outcome is what the caller reports
        log.debug(f"shared-memory regions on {url} not checked: {err}")
        return
    if gone:
        log.info(f"unregistered {len(gone)} shared-memory region(s) a stopped perf_analyzer left on {url}: "
                 + ", ".join(gone))


@contextlib.contextmanager
def shared_memory_guard(shared_memory: SharedMemory | str, url: str, wait_s: float,
                        lock_path: Path | None = None) -> Iterator[None]:
    """Run the body alone among perf_analyzer runs with shared memory on this host.

    Runs of this toolkit queue on a lock in arrival order (two sweeps at once interleave point by point instead
    of crashing); a holder that keeps it more than `wait_s`, or a foreign perf_analyzer still running after
    `wait_s`, is a PerfAnalyzerError that names it.
    """
    if shared_memory == "none":
        yield
        return
    path = lock_path or shm_lock_path()
    fd = _open_lock(path)
    queue = TicketQueue(path)
    said: set[str] = set()
    try:
        if fd is not None and (held_by := _acquire(fd, queue, wait_s, said, path)):
            raise PerfAnalyzerError(
                f"another perf_analyzer run of this toolkit ({held_by}) has held {path} for more than {wait_s:g} s: "
                "wait for it to finish (`fuser -v` on that file names it), or measure with --shared-memory none")
        deadline = time.monotonic() + wait_s
        while runs := conflicting_runs(shared_memory, url):
            if time.monotonic() > deadline:
                raise PerfAnalyzerError(concurrent_message(runs))
            listed = "; ".join(r.describe() for r in runs)
            _note_once(said, f"another perf_analyzer using shared memory ({listed})")
            time.sleep(0.5)  # polling interval, not a fixed wait
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock ...
        queue.leave()  # ... before the next in line sees its turn
