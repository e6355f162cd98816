"""Issue 38: the shared-memory perf lock waits fairly. Real processes contend for one lock file (each a run of
`shared_memory_guard`, as a sweep's points are): waiters are served in arrival order, a sweep taking point after
point does not starve a waiter, the wait restarts when the lock changes hands and gives up only on one holder that
keeps it past the deadline, naming it; a killed holder or waiter never blocks the queue. Short deadlines."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import wait_until

from deployment_toolkit.perf.analyzer.shm_lock import TicketQueue

pytestmark = pytest.mark.slow  # real exports or subprocesses: `make test` runs it, `make test-unit` does not

ROOT = Path(__file__).resolve().parents[3]
# One run: `points` times, log "<name> <i> asks", take the lock, log "<name> <i> start", hold it (until `release`
# exists, or `hold_s`: the perf_analyzer call a point would make), log "<name> <i> end", let go.
# Exit 3 with the error when it gives up.
RUN = """
import sys, time
from pathlib import Path
from deployment_toolkit.perf.analyzer import shm_lock
from deployment_toolkit.perf.analyzer.errors import PerfAnalyzerError

lock, name, wait_s, hold, points, log = sys.argv[1:7]
shm_lock.running_shm_runs = lambda: []  # this host's other perf_analyzer runs are not this test's business
for i in range(int(points)):
    with open(log, "a") as fh:
        fh.write(f"{name} {i} asks\\n")
    try:
        with shm_lock.shared_memory_guard("system", "127.0.0.1:1", float(wait_s), lock_path=Path(lock)):
            with open(log, "a") as fh:
                fh.write(f"{name} {i} start\\n")
            if hold.startswith("until:"):
                while not Path(hold[6:]).exists():
                    time.sleep(0.02)  # polling for the test's go-ahead
            else:
                time.sleep(float(hold))  # the point's own work
            with open(log, "a") as fh:
                fh.write(f"{name} {i} end\\n")
    except PerfAnalyzerError as err:
        print(err, flush=True)
        sys.exit(3)
"""


class Runs:
    """The contending processes of one test, on one lock in tmp_path."""

    def __init__(self, tmp_path: Path):
        self.lock = tmp_path / "perf.lock"
        self.log = tmp_path / "order.log"
        self.release = tmp_path / "release"
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, wait_s: float = 60.0, hold: str = "0", points: int = 1) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", RUN, str(self.lock), name, str(wait_s), hold, str(points),
                                 str(self.log)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs[name] = proc
        return proc

    def tickets(self) -> list[str]:
        folder = TicketQueue(self.lock).dir
        return sorted(n for n in os.listdir(folder) if not n.startswith(".")) if folder.is_dir() else []

    def queued(self, n: int) -> None:
        """Wait until `n` runs hold tickets (waiting or holding)."""
        wait_until(lambda: len(self.tickets()) == n, 60, f"{n} runs never queued: {self.tickets()}")

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def logged(self, line: str) -> None:
        wait_until(lambda: line in self.lines(), 60, f"{line!r} never logged: {self.lines()}")

    def finish(self, name: str) -> tuple[int, str]:
        out, err = self.procs[name].communicate(timeout=120)
        return self.procs[name].returncode, out + err

    def stop_all(self) -> None:
        self.release.touch()
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


@pytest.fixture()
def runs(tmp_path):
    r = Runs(tmp_path)
    yield r
    r.stop_all()


def test_waiters_are_served_in_arrival_order(runs):
    runs.start("holder", hold=f"until:{runs.release}")
    runs.logged("holder 0 start")
    for i, name in enumerate(("w1", "w2", "w3", "w4")):
        runs.start(name)
        runs.queued(i + 2)  # each has its ticket before the next arrives
    runs.release.touch()
    for name in ("holder", "w1", "w2", "w3", "w4"):
        assert runs.finish(name)[0] == 0
    starts = [line.split()[0] for line in runs.lines() if line.endswith("start")]
    assert starts == ["holder", "w1", "w2", "w3", "w4"]
    assert runs.tickets() == [], "a run left its ticket behind"


def test_a_sweep_taking_point_after_point_does_not_starve_a_waiter(runs):
    """Before: the sweep let go and took the lock again within microseconds, the waiter polled every 0.2 s and
    gave up after its one deadline while the sweep went on; now it asks again at the back of the queue. Counted
    from the moment the waiter asks (its interpreter's start can take seconds on a loaded host), not from its
    launch: the sweep is long enough to still be going then."""
    runs.start("sweep", hold="0.25", points=60)
    runs.logged("sweep 0 start")
    runs.start("waiter", wait_s=1.5)
    rc, out = runs.finish("waiter")
    assert rc == 0, out
    runs.logged("waiter 0 end")
    sweep_starts = [line for line in runs.lines() if line.startswith("sweep") and line.endswith("start")]
    runs.logged(f"sweep {len(sweep_starts)} start")  # the sweep went on after the waiter: it was contended
    lines = runs.lines()
    asked, served = lines.index("waiter 0 asks"), lines.index("waiter 0 start")
    between = [line for line in lines[asked:served] if line.startswith("sweep") and line.endswith("start")]
    assert len(between) <= 1, lines  # served after at most the one point that took its ticket first


def test_the_wait_restarts_when_the_lock_changes_hands(runs):
    """Three holders of 2.5 s each in front: 7.5 s in all, more than the waiter's 6 s deadline, but none of them
    keeps the lock past it. (Each hold outlasts the next run's start, an interpreter importing the toolkit: the
    three are queued together.)"""
    for i, name in enumerate(("a", "b", "c")):
        runs.start(name, hold="2.5")
        runs.queued(i + 1)
    t0 = time.monotonic()
    runs.start("waiter", wait_s=6.0)
    rc, out = runs.finish("waiter")
    assert rc == 0, out
    assert time.monotonic() - t0 > 2.5, "the waiter did not wait behind the last holder"  # the order: below
    assert [line.split()[0] for line in runs.lines() if line.endswith("start")] == ["a", "b", "c", "waiter"]


def test_one_holder_past_the_deadline_is_named_and_the_waiter_leaves_the_queue(runs):
    holder = runs.start("holder", hold=f"until:{runs.release}")
    runs.logged("holder 0 start")
    t0 = time.monotonic()
    runs.start("waiter", wait_s=1.0)
    rc, out = runs.finish("waiter")
    assert rc == 3 and time.monotonic() - t0 >= 1.0
    assert f"another perf_analyzer run of this toolkit (pid {holder.pid}) has held {runs.lock} for more than 1 s" in out
    assert len(runs.tickets()) == 1, "the waiter that gave up is still queued"


@pytest.mark.parametrize("killed", ["holder", "waiter"])
def test_a_killed_run_never_blocks_the_queue(runs, killed):
    runs.start("holder", hold=f"until:{runs.release}")
    runs.logged("holder 0 start")
    runs.start("waiter")
    runs.queued(2)
    runs.start("next", wait_s=5.0)
    runs.queued(3)
    runs.procs[killed].send_signal(signal.SIGKILL)  # no finally, no cleanup: its ticket stays on disk
    runs.procs[killed].wait()
    runs.release.touch()
    rc, out = runs.finish("next")
    assert rc == 0, out
    assert "next 0 start" in runs.lines() and runs.tickets() == []
