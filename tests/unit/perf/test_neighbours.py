"""A measuring window knows its neighbours (issue 54, item 1): CPU that processes other than ours took on the usable
cores makes the window disturbed; our own children (the server, perf_analyzer) never do; a disturbed point is
measured again once the host is quiet, never stored as the model's, and given up on (HostDisturbed) when no quiet
window comes."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from deployment_toolkit.perf import neighbours

BUSY = "import time\nend = time.time() + {s}\nwhile time.time() < end:\n    pass\n"


def _window(seconds: float) -> neighbours.Disturbance:
    before = neighbours.read()
    time.sleep(seconds)
    return neighbours.between(before, neighbours.read())


def _neighbour(seconds: float) -> None:
    """A busy loop that is not our descendant: started by a shell that exits at once (re-parented to init)."""
    subprocess.run(["sh", "-c", f'"{sys.executable}" -c "$0" &', BUSY.format(s=seconds)], check=True)


@pytest.mark.slow
def test_a_neighbour_busy_looping_a_core_disturbs_the_window():
    _neighbour(3.0)
    time.sleep(0.3)
    window = _window(1.5)
    assert window.disturbed and window.others_cores > 0.6, window.text()
    assert "other processes took" in window.text()


@pytest.mark.slow
def test_our_own_children_are_counted_as_ours():
    """A busy child's CPU is in our own seconds, so it never reads as a neighbour (whatever else the host runs)."""
    child = subprocess.Popen([sys.executable, "-c", BUSY.format(s=2.5)])
    try:
        time.sleep(0.3)
        before = neighbours.read()
        child_before = _cpu_of(child.pid)
        time.sleep(1.5)
        after = neighbours.read()
        child_cpu = _cpu_of(child.pid) - child_before
    finally:
        child.wait()
    assert child_cpu > 0.2 and after.own_s - before.own_s >= child_cpu * 0.95


def _cpu_of(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_the_rule_is_a_share_of_the_usable_cores():
    quiet = neighbours.Disturbance(2.0, 0.1, 2.0, "/proc/stat")
    busy = neighbours.Disturbance(2.0, 1.0, 2.0, "/proc/stat")
    assert not quiet.disturbed and busy.disturbed and busy.share == 0.5
    assert busy.row() == {"others_cores": 1.0, "others_share": 0.5, "disturbed": True,
                          "neighbours_source": "/proc/stat"}


def test_the_policy_comes_from_its_variable(monkeypatch):
    monkeypatch.delenv(neighbours.POLICY_ENV, raising=False)
    assert neighbours.policy() is neighbours.Policy.REMEASURE
    monkeypatch.setenv(neighbours.POLICY_ENV, "record")
    assert neighbours.policy() is neighbours.Policy.RECORD
    monkeypatch.setenv(neighbours.POLICY_ENV, "sometimes")
    with pytest.raises(Exception, match="DEPLOYMENT_TOOLKIT_NEIGHBOURS='sometimes': use remeasure or record"):
        neighbours.policy()


class _Windows:
    """What the host did in each of a point's windows, in order (the measurement itself is the stub's)."""

    def __init__(self, shares):
        self.shares = list(shares)
        self.reads = 0

    def read(self):
        self.reads += 1
        return neighbours.Reading(float(self.reads), 0.0, 0.0, 2.0, "test")

    def between(self, before, after):
        return neighbours.Disturbance(1.0, self.shares.pop(0) * 2.0, 2.0, "test")


def _point(monkeypatch, shares, tmp_path):
    from deployment_toolkit.perf.openloop import ratepoint
    from deployment_toolkit.perf.openloop.ratestore import RateStore

    windows = _Windows(shares)
    measured = []
    monkeypatch.setattr(neighbours, "read", windows.read)
    monkeypatch.setattr(neighbours, "between", windows.between)
    monkeypatch.setattr(neighbours, "wait_quiet", lambda limit_s=0: None)
    monkeypatch.setattr(ratepoint, "_measure_once",
                        lambda *a, **k: measured.append(1) or {"answered": 10.0, "p99_ms": 5.0, "stable": True})
    monkeypatch.delenv(neighbours.POLICY_ENV, raising=False)
    target = ratepoint.Target("cfg", "m", "127.0.0.1:1", 1, None, _options())
    store = RateStore(tmp_path)
    return (lambda: ratepoint.measure(target, 10.0, store, tmp_path)), measured, store


def _options():
    from deployment_toolkit.search.request import DEFAULT_PERF_OPTIONS
    from deployment_toolkit.perf.openloop.ratepoint import open_loop_options

    return open_loop_options(DEFAULT_PERF_OPTIONS)


def test_a_disturbed_point_is_measured_again_and_only_the_quiet_one_is_kept(monkeypatch, tmp_path):
    measure, measured, store = _point(monkeypatch, [0.5, 0.45, 0.05], tmp_path)
    point = measure()
    assert len(measured) == 3 and point.row["disturbed"] is False and point.row["others_share"] == 0.05
    again = measure()  # a rerun replays the quiet point
    assert len(measured) == 3 and again.row["others_share"] == 0.05


def test_no_quiet_window_gives_up_on_the_point_and_stores_nothing(monkeypatch, tmp_path):
    measure, measured, store = _point(monkeypatch, [0.5] * (neighbours.MAX_REMEASURES + 1), tmp_path)
    with pytest.raises(neighbours.HostDisturbed, match=r"cfg at 10 requests/s: no quiet window in 4 tries \(other "
                                                       r"processes took 1.00 of 2 cores \(50%\)"):
        measure()
    assert len(measured) == neighbours.MAX_REMEASURES + 1 and not store.rows()


def test_a_shared_host_on_purpose_records_the_window_and_goes_on(monkeypatch, tmp_path):
    measure, measured, store = _point(monkeypatch, [0.5], tmp_path)
    monkeypatch.setenv(neighbours.POLICY_ENV, "record")
    point = measure()
    assert len(measured) == 1 and point.row["disturbed"] is True
