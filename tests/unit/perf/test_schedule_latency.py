"""Latency from the intended send time, on a recorded perf_analyzer profile export.

tests/data/schedule_latency/ holds a real run: perf_analyzer 2.50 (tritonclient 2.50.0) against the embedded
tritonserver, a Python-backend model sleeping 10 ms per request, async, system shared memory, driven by
`--request-intervals poisson_r40.intervals` (a seeded 40 requests/s Poisson schedule written by write_schedule),
three 300 ms windows with the stability check off; its console output is poisson_r40.log. The export is as
perf_analyzer wrote it (48 requests). poisson_r40_stalled.profile.json is the same run with a sender that stalls
for STALL_MS (made by `stalled()` below; a test checks the committed file is exactly that).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from deployment_toolkit.perf.analyzer.schedule import (
    intended_send_ns,
    make_schedule,
    read_profile_export,
    read_schedule,
    schedule_latency,
    trim_profile_export,
    write_schedule,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "schedule_latency"
RECORDED = DATA / "poisson_r40.profile.json"
STALLED = DATA / "poisson_r40_stalled.profile.json"
STALL_MS = 200.0
STALL_AT = 16  # the stall starts when this request (in send order) was due: mid-run, inside the counted windows


def stalled(raw: dict, at: int = STALL_AT, stall_ms: float = STALL_MS) -> dict:
    """The run as if perf_analyzer's sender had frozen for `stall_ms` when request `at` was due: every request due
    during the stall goes out when it ends, back to back 50 µs apart, and is answered as much later (its latency
    from the actual send unchanged). perf_analyzer's schedule is absolute, so the requests due after the stall go
    out on time again. The intended times stay those of the schedule."""
    out = json.loads(json.dumps(raw))
    requests = sorted(out["experiments"][0]["requests"], key=lambda r: r["timestamp"])
    start = requests[at]["timestamp"]
    end = start + int(stall_ms * 1e6)
    held = [r for r in requests if start <= r["timestamp"] < end]
    for j, req in enumerate(held):
        shift = end + j * 50_000 - req["timestamp"]
        req["timestamp"] += shift
        req["response_timestamps"] = [t + shift for t in req["response_timestamps"]]
    out["experiments"][0]["requests"] = requests
    return out


def _log_value(name: str) -> float:
    """A figure of the log's "Client:" summary (not a "Pass [n]" line), in ms."""
    text = (DATA / "poisson_r40.log").read_text().split("Client:", 1)[1]
    return float(re.search(rf"{name}: (\d+) usec", text).group(1)) / 1000.0


# ---- the recorded export --------------------------------------------------------------------------------------

def test_the_recorded_export_is_read_as_perf_analyzer_counts_it():
    """Its structure (checked against the real run), and the requests counted: perf_analyzer's own count and
    average latency come out exactly (requests whose last response falls within the last three windows)."""
    raw = json.loads(RECORDED.read_text())
    (exp,) = raw["experiments"]
    assert exp["experiment"] == {"mode": "request_rate", "value": 40.0}
    assert len(exp["window_boundaries"]) == 4 and len(exp["requests"]) == 48
    assert set(exp["requests"][0]) == {"timestamp", "request_inputs", "response_timestamps", "response_outputs"}
    export = read_profile_export(RECORDED)
    assert (np.diff(export.send_ns) >= 0).all() and (export.end_ns > export.send_ns).all()
    lat = schedule_latency(read_schedule(DATA / "poisson_r40.intervals", 40.0), export)
    assert lat.requests == 48 and lat.unanswered == 0  # "Request count: 48"
    mean_ms = float(np.mean(export.end_ns - export.send_ns)) / 1e6
    assert mean_ms == pytest.approx(_log_value("Avg latency"), abs=0.002)
    assert lat.p99_ms == pytest.approx(_log_value("p99 latency"), rel=0.10)  # numpy's percentile vs perf_analyzer's


def test_the_schedule_starts_at_the_first_window_boundary():
    """Request i went out at boundary[0] + the first i + 1 intervals (about 0.1 ms late at most, never early):
    matching in send order against the schedule file holds for every request of the recorded run."""
    sched = read_schedule(DATA / "poisson_r40.intervals", 40.0)
    export = read_profile_export(RECORDED)
    intended = intended_send_ns(sched, export)
    assert abs(intended[0] - sched.offsets_ns(1)[0] - export.window_boundaries_ns[0]) < 0.2e6
    late_ms = (export.send_ns - intended) / 1e6
    assert late_ms.min() == 0 and np.median(late_ms) < 0.2


def test_unstalled_run_schedule_and_send_latency_agree():
    lat = schedule_latency(read_schedule(DATA / "poisson_r40.intervals", 40.0), read_profile_export(RECORDED))
    assert lat.sched_p99_ms == pytest.approx(lat.p99_ms, abs=2.0)
    assert lat.sched_p50_ms == pytest.approx(lat.p50_ms, abs=1.0)
    assert lat.late_pct < 10.0 and lat.late_max_ms < 5.0


def test_a_stalled_sender_shows_in_the_schedule_relative_p99_only():
    sched = read_schedule(DATA / "poisson_r40.intervals", 40.0)
    calm = schedule_latency(sched, read_profile_export(RECORDED))
    stall = schedule_latency(sched, read_profile_export(STALLED))
    assert stall.requests == calm.requests
    # from the actual send nothing changed: perf_analyzer's view hides the stall
    assert stall.p99_ms == pytest.approx(calm.p99_ms) and stall.p50_ms == pytest.approx(calm.p50_ms)
    # from the intended send the stall is there: the first request due in it waited the whole STALL_MS
    assert stall.sched_p99_ms > calm.sched_p99_ms + 100.0 and stall.sched_p99_ms > stall.p99_ms + 100.0
    assert stall.late_pct > 5.0 and stall.late_pct > calm.late_pct
    assert stall.late_max_ms == pytest.approx(STALL_MS, abs=1.0) and stall.late_p99_ms > 100.0
    row = stall.row()
    assert set(row) == {"sched_p50_ms", "sched_p90_ms", "sched_p99_ms", "late_pct", "late_p99_ms", "late_max_ms"}


def test_the_committed_stalled_fixture_is_the_recorded_run_stalled():
    expected = stalled(json.loads(RECORDED.read_text()))
    assert json.loads(STALLED.read_text()) == expected


def test_trimming_keeps_the_times_and_drops_the_tensors(tmp_path):
    out = trim_profile_export(RECORDED, tmp_path / "trimmed.json")
    (exp,) = json.loads(out.read_text())["experiments"]
    assert set(exp["requests"][0]) == {"timestamp", "response_timestamps"}
    a, b = read_profile_export(RECORDED), read_profile_export(out)
    assert (a.send_ns == b.send_ns).all() and (a.end_ns == b.end_ns).all()
    assert (a.window_boundaries_ns == b.window_boundaries_ns).all()


def test_a_schedule_shorter_than_the_run_is_cycled_as_perf_analyzer_does():
    sched = make_schedule(100.0, 0.05, "constant")  # 5 intervals of 10 ms
    assert sched.intervals_us.tolist() == [10_000] * 5
    assert sched.offsets_ns(7).tolist() == [k * 10_000_000 for k in range(1, 8)]


# ---- the schedule writer ----------------------------------------------------------------------------------------

def test_a_seeded_schedule_is_the_same_file_every_time(tmp_path):
    a = write_schedule(tmp_path / "a.intervals", 250.0, 20.0, "poisson", seed=7)
    b = write_schedule(tmp_path / "b.intervals", 250.0, 20.0, "poisson", seed=7)
    c = write_schedule(tmp_path / "c.intervals", 250.0, 20.0, "poisson", seed=8)
    assert a.path.read_bytes() == b.path.read_bytes() != c.path.read_bytes()
    assert a.seed == 7 and a.rate == 250.0 and a.path == tmp_path / "a.intervals"
    lines = a.path.read_text().splitlines()
    assert all(re.fullmatch(r"[1-9]\d*", x) for x in lines)  # integer microseconds, one per line
    back = read_schedule(a.path)
    assert back.intervals_us.tolist() == a.intervals_us.tolist()


def test_mean_interval_is_one_over_the_rate():
    for rate in (5.0, 40.0, 250.0, 3000.0):
        s = make_schedule(rate, 60.0, "poisson", seed=1)
        n = len(s.intervals_us)
        assert n == pytest.approx(rate * 60.0, rel=0.01)
        # exponential gaps: the sample mean is within 4 standard errors of 1/R
        assert s.intervals_us.mean() == pytest.approx(1e6 / rate, rel=4 / np.sqrt(n))
        assert 0.8 < np.std(s.intervals_us) / np.mean(s.intervals_us) < 1.2  # Poisson: cv ~ 1
    c = make_schedule(3000.0, 10.0, "constant")
    assert c.mean_rate == pytest.approx(3000.0, rel=1e-4)  # rounding to µs never drifts (333 or 334 µs)
    assert set(c.intervals_us.tolist()) <= {333, 334}


def test_bad_schedules_are_refused():
    with pytest.raises(ValueError, match="distribution"):
        make_schedule(10.0, 1.0, "bursty")
    with pytest.raises(ValueError, match="positive"):
        make_schedule(0.0, 1.0)


def test_an_empty_export_leaves_the_point_on_perf_analyzers_p99(tmp_path, monkeypatch):
    """perf_analyzer left a 0-byte export on a short burst run: the point keeps perf_analyzer's own figures."""
    from deployment_toolkit.perf.analyzer import PerfOptions, PointResult
    from deployment_toolkit.perf.openloop import ratepoint
    from deployment_toolkit.perf.openloop.ratestore import RateStore

    def fake_run_point(*args, profile_export=None, **kw):
        Path(profile_export).write_text("")
        return PointResult(1, None, {"Inferences/second": 10.0, "P99 Latency": 12.0, "P50 Latency": 5.0,
                                     "Avg Latency": 6.0}, True, 1, request_rate=10.0, profile_export=Path(profile_export))

    monkeypatch.setattr(ratepoint, "run_point", fake_run_point)
    target = ratepoint.Target("cfg", "m", "127.0.0.1:1", 1, None,
                              ratepoint.open_loop_options(PerfOptions(shared_memory="system")))
    point = ratepoint.measure(target, 10.0, RateStore(tmp_path), tmp_path)
    assert point.p99 == 12.0 and point.row.get("sched_p99_ms") is None
