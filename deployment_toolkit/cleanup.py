"""What a run leaves behind, however it ends: child processes, shared-memory regions, the Python backend's folders.

Imports nothing of the package (server, perf and client all use it).

- Children die with us: `dying_with_parent` starts a command through a launcher that asks the kernel
  (PR_SET_PDEATHSIG) to SIGKILL it when the process that started it dies, SIGKILL included, when no handler runs. The
  server's own children (Python-backend stubs) are not ours to set that on: a `GroupWatchdog` (a small
  process holding the read end of a pipe from us) kills the server's whole process group when the pipe
  closes without a "done", which happens exactly when we die.
- Shared memory is named so it can be traced to its run: the Python backend's regions get the prefix
  `dtkpy_<pid>_<n>_` (`python_backend_shm_prefix`), the client's own regions `dtk_<pid>_...`; regions of a
  pid that no longer lives (a run that was SIGKILLed) are swept by the next run. Regions of other programs
  never match these names and are never touched.
- perf_analyzer names its regions after the tensors (no prefix option); a run records what it may create
  (`PerfShmRecord`) and removes what appeared during its run, and a later run clears the record of a dead one.
- The Python backend's empty /tmp/python_env_* folders, left by servers that were killed, are removed once no live
  tritonserver can own them (`sweep_python_env_dirs`, at each server's start and stop).
- Stop signals wait for a safe point: `signals_deferred` holds SIGINT/SIGTERM while a child is spawned (its handle
  must not be lost), while a server is stopped, and while a C-extension library is imported (a KeyboardInterrupt
  or SystemExit raised inside geventhttpclient's import once crashed `serve` with SIGSEGV).
"""
from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any, Iterable, Iterator, Sequence

SHM_DIR = Path("/dev/shm")
_server_ids = itertools.count(1)
# dtkpy_<pid>_<n>_...: Python-backend regions of a server started by <pid>; dtk_<pid>_...: the client's regions
OWNED_REGION = re.compile(r"^dtk(?:py)?_(\d+)_")


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def signals_deferred(signals: Sequence[int] = STOP_SIGNALS) -> Iterator[None]:
    """Run the body with SIGINT/SIGTERM only recorded, then deliver the first one recorded to the handler that
    was in place (KeyboardInterrupt, the SIGTERM handler's SystemExit) once the body is done.

    Swaps the Python handlers rather than masking the signals: a process-directed signal may be taken by any
    thread (gRPC's, a watchdog's) and Python still runs its handler in the main thread at the next bytecode,
    so a mask on the main thread alone lets the exception land in the middle of the body. Main thread only (the
    only one that may set handlers, and the only one the handlers interrupt); nests; an ignored signal stays
    ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def record(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)

    previous: dict[int, Any] = {}
    try:
        for sig in signals:
            handler = signal.getsignal(sig)
            if handler is not None and handler != signal.SIG_IGN:  # None: set outside Python, not ours to swap
                previous[sig] = handler
                signal.signal(sig, record)
        yield
    finally:
        _restore_handlers(list(previous.items()))
        if caught:
            signal.raise_signal(caught[0])  # runs the restored handler here, at a safe point


def _restore_handlers(handlers: list[tuple[int, Any]]) -> None:
    """Put every handler back even when one of them raises as soon as it is back (a signal arriving just then)."""
    if not handlers:
        return
    try:
        signal.signal(*handlers[0])
    finally:
        _restore_handlers(handlers[1:])


_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, int(sys.argv[2]), 0, 0, 0)\n"  # PR_SET_PDEATHSIG
    "signal.pthread_sigmask(signal.SIG_SETMASK, ())\n"  # start with no signal blocked, whatever the parent held
    "if os.getppid() != int(sys.argv[1]):\n"  # it died before the prctl: do not run parentless
    "    os._exit(1)\n"
    "os.execv(sys.argv[3], sys.argv[3:])\n"
)


def dying_with_parent(cmd: Sequence[str], death_signal: int = signal.SIGKILL) -> list[str]:
    """`cmd` started through a small launcher that asks the kernel (PR_SET_PDEATHSIG) to send it `death_signal`
    (SIGKILL unless told) when this process dies, then execs it: the child is the program itself, with no signal
    blocked (Linux; elsewhere `cmd`). A program that stops cleanly on a signal of its own (perf_analyzer on SIGINT:
    its in-flight requests finish and its shared-memory regions are unregistered) can be given that one.

    Not a `preexec_fn`: with one, Popen must fork() rather than vfork(), which runs every fork handler in the
    process, and in one that has tritonclient's gRPC loaded the fork deadlocked in the parent (a full test run
    sat in `_fork_exec` until killed). The program is looked up here, so a missing one is still Popen's
    FileNotFoundError. The kernel ties the signal to the thread that spawns: start long-lived children from the
    main thread."""
    if not sys.platform.startswith("linux") or not cmd:
        return list(cmd)
    program = shutil.which(cmd[0])
    if program is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), cmd[0])
    return [sys.executable, "-S", "-c", _LAUNCHER, str(os.getpid()), str(int(death_signal)), program, *cmd[1:]]


_WATCHDOG = (
    "import os, signal, sys\n"
    "if sys.stdin.buffer.read() != b'done':\n"  # EOF without 'done': the process that started us is gone
    "    try:\n"
    "        os.killpg(int(sys.argv[1]), signal.SIGKILL)\n"
    "    except OSError:\n"
    "        pass\n"
)


class GroupWatchdog:
    """Kills process group `pgid` when this process dies, however it dies (the kernel closes our end of the
    pipe); `release()` after a clean stop lets it exit without killing anything."""

    def __init__(self, pgid: int):
        self.proc: subprocess.Popen | None = subprocess.Popen(
            [sys.executable, "-S", "-c", _WATCHDOG, str(pgid)], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # no terminal Ctrl-C

    def release(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            proc.stdin.write(b"done")
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def python_backend_shm_prefix() -> str:
    """A prefix for one server's Python-backend regions (`--backend-config=python,shm-region-prefix-name=`)."""
    return f"dtkpy_{os.getpid()}_{next(_server_ids)}_"


def remove_regions(names: Iterable[str], shm_dir: Path = SHM_DIR) -> list[str]:
    """Unlink these regions (names in `shm_dir`) if they exist; returns those removed."""
    removed = []
    for name in names:
        try:
            (shm_dir / name).unlink()
            removed.append(name)
        except FileNotFoundError:
            pass
        except OSError:  # not ours to remove (another user's): leave it
            pass
    return removed


def regions_with_prefix(prefix: str, shm_dir: Path = SHM_DIR) -> list[str]:
    try:
        return sorted(p.name for p in shm_dir.iterdir() if p.name.startswith(prefix))
    except OSError:
        return []


def sweep_dead_runs(shm_dir: Path = SHM_DIR) -> list[str]:
    """Remove this toolkit's regions (OWNED_REGION names, this user's files) whose run's process is gone."""
    if not shm_dir.is_dir():
        return []
    dead = []
    uid = os.geteuid()
    for entry in shm_dir.iterdir():
        m = OWNED_REGION.match(entry.name)
        if not m or int(m.group(1)) == os.getpid():
            continue
        try:
            if entry.stat().st_uid != uid or pid_alive(int(m.group(1))):
                continue
        except OSError:
            continue
        dead.append(entry.name)
    return remove_regions(dead, shm_dir)


# ---- the Python backend's environment folders ----------------------------------------------------

# The Python backend makes /tmp/python_env_XXXXXX (a fixed path, not $TMPDIR) in every server that loads it and
# removes it on a clean exit only: a server killed (SIGKILL, a stop during its start-up) leaves it behind for good,
# one folder per such server.
PYTHON_ENV_DIR = Path("/tmp")
PYTHON_ENV_PREFIX = "python_env_"
RECENT_S = 1.0  # a folder this young at the scan may be a server's that started as we looked: left alone
START_SLACK_S = 2.0  # a live server's folder is never older than its start minus this (clock-tick rounding)


def live_processes(proc: Path = Path("/proc")) -> Iterator[tuple[int, str, list[str]]]:
    """(pid, comm, the stat fields after "pid (comm) ": state ppid pgrp ...) of every process but zombies, which
    hold nothing and only wait to be reaped. Nothing where there is no /proc."""
    if not proc.is_dir():
        return
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # exited while we looked
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if fields and fields[0] != "Z":
            yield int(entry.name), stat[stat.find("(") + 1:stat.rfind(")")], fields


def tritonserver_start_times(proc: Path = Path("/proc")) -> list[float] | None:
    """When each live tritonserver process started (epoch seconds, to a clock tick); None: no /proc to tell."""
    if not proc.is_dir() or not hasattr(time, "CLOCK_BOOTTIME"):
        return None
    # the clock the kernel counts start times on, read now beside the wall clock (not /proc/stat's btime: whole
    # seconds, and the wall clock drifts from it over an uptime)
    boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    ticks = os.sysconf("SC_CLK_TCK")
    # field 22 of stat: the start time in clock ticks after boot
    return [boot + int(fields[19]) / ticks for _, comm, fields in live_processes(proc)
            if comm == "tritonserver" and len(fields) > 19]


def sweep_python_env_dirs(tmp: Path = PYTHON_ENV_DIR, proc: Path = Path("/proc")) -> list[str]:
    """Remove this user's empty python_env_* folders that no live tritonserver can own.

    A server's folder is made after that server started, so one older than every live tritonserver (START_SLACK_S
    before it) is an orphan, and with none alive every folder is, but one younger than the scan (RECENT_S): a server
    starting while we look keeps its own. Only empty ones (rmdir): an environment a server extracted into is never
    touched."""
    started = time.time()
    starts = tritonserver_start_times(proc)
    if starts is None or not tmp.is_dir():
        return []
    cutoff = min([started - RECENT_S] + [t - START_SLACK_S for t in starts])
    removed, uid = [], os.geteuid()
    for entry in tmp.glob(PYTHON_ENV_PREFIX + "*"):
        try:
            st = entry.lstat()
            if not entry.is_dir() or entry.is_symlink() or st.st_uid != uid or st.st_mtime >= cutoff:
                continue
            entry.rmdir()
        except OSError:  # not empty, or gone already
            continue
        removed.append(entry.name)
    return removed


# ---- perf_analyzer's regions --------------------------------------------------------------------

def perf_region_pattern(inputs: Iterable[str], outputs: Iterable[str]) -> re.Pattern[str]:
    """Names perf_analyzer gives its system shared-memory regions: `<input>_<stream>_<step>` and `<output>`
    (checked with perf_analyzer 2.50: FI_IN -> FI_IN_0_0, FI_OUT -> FI_OUT; matched case-insensitively)."""
    alts = [re.escape(n) + r"_\d+_\d+" for n in inputs] + [re.escape(n) for n in outputs]
    return re.compile("^(?:" + "|".join(alts or ["(?!)"]) + ")$", re.I)


class PerfShmRecord:
    """A record (beside the machine-wide perf lock, held while it exists) of the regions one perf_analyzer run
    may create: the names that existed before it started are never removed; a later run clears the regions
    of a record whose owner died without cleaning up (SIGKILL)."""

    def __init__(self, path: Path, shm_dir: Path = SHM_DIR):
        self.path = Path(path)
        self.shm_dir = shm_dir

    def _listing(self) -> set[str]:
        try:
            return {p.name for p in self.shm_dir.iterdir()}
        except OSError:
            return set()

    def begin(self, pattern: re.Pattern[str]) -> set[str]:
        self.clear_dead()
        before = self._listing()
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps({"pid": os.getpid(), "pattern": pattern.pattern, "before": sorted(before)}))
            os.replace(tmp, self.path)
        except OSError:
            pass  # no record: cleanup on our own exit still works
        return before

    def end(self, pattern: re.Pattern[str], before: set[str]) -> list[str]:
        """Remove regions that match `pattern` and appeared since `begin`; drop the record."""
        new = [n for n in self._listing() - before if pattern.match(n)]
        removed = remove_regions(new, self.shm_dir)
        self.path.unlink(missing_ok=True)
        return removed

    def clear_dead(self) -> list[str]:
        try:
            rec = json.loads(self.path.read_text())
            pid, pattern, before = int(rec["pid"]), re.compile(rec["pattern"], re.I), set(rec["before"])
        except (OSError, ValueError, KeyError, TypeError, re.error):
            return []
        if pid == os.getpid() or pid_alive(pid):
            return []
        return self.end(pattern, before)
