"""Open-loop capacity, its store, headroom and derating, without a server.

The bisection runs on recorded perf_analyzer outputs (tests/fixtures/openloop/: a Python-backend model
sleeping 10 ms per request, 700 ms windows, and the committed example's old synchronous confirmation run);
the derating and the unreachable SLO on points worked out by hand here.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from deployment_toolkit.perf.analyzer import PerfOptions, parse_csv
from deployment_toolkit.perf.openloop.capacity import OpenLoopCapacity, derated_capacity, derived_headroom, \
    repeat_search, search
from deployment_toolkit.perf.openloop.ratepoint import (
    ClientLimited,
    RatePoint,
    Target,
    open_loop_options,
    parse_open_loop_output,
    point_key,
    queue_growing,
    row_from_outputs,
)
from deployment_toolkit.perf.openloop.holding import Judged, hold
from deployment_toolkit.perf.openloop.ratestore import RateKey, RateStore, options_key

ROOT = Path(__file__).resolve().parents[4]
REC = ROOT / "tests" / "fixtures" / "openloop"
OPTS = options_key(open_loop_options(PerfOptions(), "poisson", 700, 50.0).measurement_fields())


def recorded(rate: float, config: str = "slow/online", trial: int = 1) -> RatePoint:
    """The point perf_analyzer's recorded CSV and console output give at `rate` (only recorded rates exist)."""
    name = f"r{rate:g}"
    log = (REC / f"{name}.log").read_text()
    csv_path = REC / f"{name}.csv"
    rows = [r for r in parse_csv(csv_path) if math.isclose(r["Request rate"], rate, rel_tol=1e-6)] \
        if csv_path.exists() else []
    row = row_from_outputs(rate, rows[0] if rows else {}, bool(rows), log)
    return RatePoint(RateKey(config, "poisson", rate, 1, OPTS, trial), row)


def synthetic(rate: float, limit: float, p99_at_limit: float = 50.0, trial: int = 1, window_ms: int = 3000,
              distribution: str = "constant") -> RatePoint:
    """A replica that answers everything up to `limit` requests/s (p99 rising towards p99_at_limit) and only
    `limit` above it, with a growing queue."""
    over = rate > limit
    row = {"answered": limit if over else rate, "p99_ms": p99_at_limit * (4 if over else rate / limit),
           "avg_ms": 5.0, "window_latency_ms": [5, 10, 20, 40] if over else [5, 5, 5], "send_rate": None,
           "queue_growing": over, "client_limited": False, "stable": True}
    opts = options_key({"measurement_interval_ms": window_ms})
    return RatePoint(RateKey("syn", distribution, rate, 1, opts, trial), row)


# ---- parsing perf_analyzer's open-loop output ----------------------------------------------------

def test_parse_windows_send_rate_and_delayed_share():
    win = parse_open_loop_output((REC / "sync_client_limited_r400.log").read_text())
    assert len(win.throughput) == 7 and win.latency_ms[0] == pytest.approx(12.797)
    assert win.send_rate == pytest.approx(356.13) and win.delayed_pct == pytest.approx(100.0)


def test_the_committed_fail_was_the_client():
    """The example's old confirmation (sync calls, perf_analyzer's default 4 threads at 400/s) sent 356/s with
    every request delayed: that is the client's limit, and a search stops there instead of blaming the server."""
    log = (REC / "sync_client_limited_r400.log").read_text()
    (values,) = parse_csv(REC / "sync_client_limited_r400.csv")
    p = RatePoint(RateKey("resnet18_i2/online", "constant", 400.0, 1, "{}", 1), row_from_outputs(400, values, True, log))
    assert p.client_limited and not p.passes(50.0)
    with pytest.raises(ClientLimited, match="could not generate 400.0 inferences/s: it sent 356.1/s .*client, not the"):
        search(lambda r: p, 400.0, 50.0)


def test_queue_growth_ignores_the_warm_up_window():
    assert queue_growing([70.8, 88.8, 162.8, 268.4, 398.4, 408.1])  # recorded at 89.63/s: clearly piling up
    assert not queue_growing([25.4, 21.2, 35.0, 35.9, 58.8, 27.3])  # recorded at 76.18/s: noisy, drained again
    assert not queue_growing([300.0, 10.0, 11.0])  # a slow first window (connection set-up) is not a queue
    assert not queue_growing([10.0, 11.0])
    assert not queue_growing([1.0, 1.2, 1.6, 2.4])  # sub-millisecond wobble is not a backlog


# ---- the bisection on recorded outputs ------------------------------------------------------------

def test_bisection_on_recorded_outputs():
    asked = []

    def at(rate):
        asked.append(rate)
        return recorded(rate)

    s = search(at, 89.63, slo_ms=200.0, resolution=0.1)
    # seed (the closed-loop figure) fails: queue growing, p99 491 ms; one step down (the server answered more
    # than 80% of it, so 0.8 x seed) passes; bisection: 80.66 fails (p99 257 ms), 76.18 passes; 5.9% <= 10%
    assert asked == [89.63, 71.7, 80.66, 76.18]
    assert s.capacity == pytest.approx(76.18) and s.bracket == (pytest.approx(76.18), pytest.approx(80.66))
    verdicts = {p.rate: p.verdict(200.0) for p in s.points}
    assert "queue growing" in verdicts[89.63] and "p99 491.0 ms > 200 ms" in verdicts[89.63]
    assert verdicts[71.7] == verdicts[76.18] == "pass"


def test_a_tighter_slo_moves_the_capacity_down():
    s = search(lambda r: synthetic(r, 100.0, p99_at_limit=50.0), 150.0, slo_ms=25.0, resolution=0.02)
    # p99 = 50 x rate / 100 <= 25 ms up to 50/s
    assert 49.0 <= s.capacity <= 50.0 and all(p.rate > 50 for p in s.points if not p.passes(25.0))


def test_an_slo_no_rate_meets(tmp_path):
    s = search(lambda r: synthetic(r, 100.0, p99_at_limit=10_000.0), 120.0, slo_ms=50.0)
    assert s.capacity is None and s.best is None
    assert len(s.points) == 10 and [p.rate for p in s.points] == sorted((p.rate for p in s.points), reverse=True)
    assert "no offered rate down to" in s.unreachable_text() and "p99" in s.unreachable_text()
    cap = OpenLoopCapacity("tiny/online", "constant", 50.0, [s], 200.0, "concurrency 4", 20.0)
    assert not cap.reachable and "no offered rate down to" in cap.unreachable_text()


# ---- repeats and headroom -------------------------------------------------------------------------

def test_headroom_from_the_spread_of_repeated_searches(tmp_path):
    limits = {1: 100.0, 2: 92.0, 3: 96.0}  # the same replica measured three times: a noisy boundary
    trials = repeat_search(lambda r, t: synthetic(r, limits[t], trial=t), 150.0, 1000.0, trials=3, resolution=0.02)
    caps = [t.capacity for t in trials]
    assert len(caps) == 3 and all(0.98 * limits[i + 1] <= c <= limits[i + 1] for i, c in enumerate(caps))
    ol = OpenLoopCapacity("tiny/online", "constant", 1000.0, trials, 150.0, "concurrency 8", 30.0)
    assert ol.capacity == sorted(caps)[1]  # the median
    assert ol.spread == pytest.approx((max(caps) - min(caps)) / min(caps)) and ol.headroom == ol.spread
    h, note = derived_headroom({"tiny/online": ol})
    assert h == ol.headroom and "spread" in note and "3 searches" in note
    # planned on the median with that headroom, the peak is carried even at the lowest capacity measured
    assert math.ceil(1000 * (1 + h) / ol.capacity) * min(caps) >= 1000
    # a single search has no spread: the search's resolution is the headroom
    one = OpenLoopCapacity("x", "constant", 1000.0, trials[:1])
    assert one.spread is None and one.headroom == pytest.approx(0.02)


def test_a_search_thrown_off_by_a_stall_does_not_drag_the_repeats_down():
    """A replica that keeps up to 100 req/s, on a host that stalls during the first search (its first two points
    below the boundary fail): each repeat starts again from the closed-loop seed, so the median is still the
    boundary, not the stalled search's low result."""
    stalled_at = []

    def at(rate, trial):
        p = synthetic(rate, 100.0, p99_at_limit=10.0, trial=trial)
        if trial == 1 and len(stalled_at) < 2 and rate < 100.0:
            stalled_at.append(rate)
            p.row["p99_ms"] = 400.0  # one stall: p99 far over the SLO at a rate the replica carries
        return p

    trials = repeat_search(at, 150.0, 50.0, trials=3, resolution=0.02)
    caps = [t.capacity for t in trials]
    assert stalled_at and caps[0] < 0.9 * 100.0, caps  # the first search was thrown off
    ol = OpenLoopCapacity("tiny/online", "constant", 50.0, trials)
    assert 0.96 * 100.0 <= ol.capacity <= 100.0, caps


def test_one_search_that_finds_no_rate_pulls_the_capacity_down_instead_of_voiding_it():
    """The committed example's resnet18_i1: two searches found 164.8 inf/s, the third ran into a stall of the
    host and found no rate with p99 within the SLO. Most searches found one, so the configuration is reachable
    and its capacity is the median counting the empty search as 0 (the lower of the other two); with two of
    three empty it is unreachable."""
    limits = {1: 100.0, 2: 92.0, 3: 96.0}
    found = repeat_search(lambda r, t: synthetic(r, limits[t], trial=t), 150.0, 1000.0, trials=3, resolution=0.02)
    stalled = repeat_search(lambda r, t: synthetic(r, limits[t], p99_at_limit=5000.0, trial=t), 150.0, 50.0,
                            trials=3, resolution=0.02)
    assert len(stalled) == 2 and all(t.capacity is None for t in stalled)  # two empty of three: no third
    ol = OpenLoopCapacity("tiny/online", "constant", 1000.0, [found[0], stalled[1], found[2]])
    assert ol.reachable and ol.capacity == min(found[0].capacity, found[2].capacity)
    assert ol.spread == pytest.approx(abs(found[0].capacity - found[2].capacity)
                                      / min(found[0].capacity, found[2].capacity))
    assert not OpenLoopCapacity("tiny/online", "constant", 1000.0, [found[0], stalled[0], stalled[1]]).reachable


def test_poisson_noise_allowance_only_without_a_send_rate():
    p = synthetic(100.0, 1000.0, window_ms=1000, distribution="poisson")
    p.row["answered"] = 90.0  # 300 requests expected over three windows: 2 sigma is 11.5%
    assert p.required == pytest.approx((0.97 - 2 / math.sqrt(300)) * 100) and p.kept_up
    p.row["send_rate"] = 100.0  # perf_analyzer said what it sent: no allowance
    assert p.required == pytest.approx(97.0) and not p.kept_up
    c = synthetic(100.0, 1000.0, window_ms=1000, distribution="constant")
    c.row["answered"] = 90.0
    assert not c.kept_up


# ---- latency from the intended send time ---------------------------------------------------------------

SCHED = ROOT / "tests" / "data" / "schedule_latency"


def _recorded_latency(name: str = "poisson_r40.profile.json"):
    from deployment_toolkit.perf.analyzer import read_profile_export, read_schedule, schedule_latency

    return schedule_latency(read_schedule(SCHED / "poisson_r40.intervals", 40.0), read_profile_export(SCHED / name))


def test_the_slo_is_checked_on_the_p99_from_the_intended_send():
    """A stalled sender (tests/data/schedule_latency): perf_analyzer's p99 33 ms meets a 100 ms SLO, the p99 from
    the intended send time (215 ms) does not; a row without it (measured before, or no export) keeps
    perf_analyzer's."""
    log = (SCHED / "poisson_r40.log").read_text()
    values = {"Inferences/second": 44.355, "P99 Latency": 35.624, "P50 Latency": 11.95, "Avg Latency": 15.555}
    stalled = row_from_outputs(40.0, values, True, log, _recorded_latency("poisson_r40_stalled.profile.json"))
    p = RatePoint(RateKey("slow/online", "poisson", 40.0, 1, OPTS, 1), stalled)
    assert p.perf_p99 == 35.624 and p.p99 == pytest.approx(stalled["sched_p99_ms"]) and p.p99 > 200.0
    assert p.late_pct == pytest.approx(25.0) and stalled["late_p99_ms"] > 100.0
    assert not p.passes(100.0) and "p99 214.9 ms > 100 ms" in p.verdict(100.0)
    calm = RatePoint(p.key, row_from_outputs(40.0, values, True, log, _recorded_latency()))
    assert calm.passes(100.0) and calm.late_pct == 0.0
    assert RatePoint(p.key, row_from_outputs(40.0, values, True, log)).p99 == 35.624
    # an unstable run has no p99 at all, from either send time
    unstable = row_from_outputs(40.0, {}, False, log, _recorded_latency())
    assert unstable["sched_p99_ms"] is None and math.isnan(RatePoint(p.key, unstable).p99)


def test_open_loop_points_are_driven_by_a_seeded_schedule_and_keyed_apart_from_the_old_ones():
    from deployment_toolkit.perf.analyzer import PerfTarget, Schedule, build_command
    from deployment_toolkit.perf.openloop.ratepoint import DRIVING, point_seed
    from deployment_toolkit.spec import ModelSignature, TensorSpec

    opts = open_loop_options(PerfOptions(protocol="grpc"), "poisson", 700, 50.0)
    assert "--request-distribution" not in opts.extra_args
    sig = ModelSignature(inputs=(TensorSpec("x", (4,)),), outputs=(TensorSpec("y", (4,)),))
    cmd = build_command(PerfTarget("m", "u", sig, binary="pa"), 1, Schedule("r40.intervals", 40.0), opts, "o.csv",
                        profile_export="r40.profile.json")
    assert cmd[cmd.index("--request-intervals") + 1] == "r40.intervals"
    assert cmd[cmd.index("--profile-export-file") + 1] == "r40.profile.json"
    assert "--request-rate-range" not in cmd and "--request-distribution" not in cmd  # perf_analyzer refuses both
    with pytest.raises(TypeError):  # a schedule file drives a nominal rate: the load value cannot lack it
        Schedule("r40.intervals")
    target = Target("m/online", "m", "", 1, sig, opts, "poisson")
    key = point_key(target, 40.0, 1)
    assert json.loads(key.options)["driving"] == DRIVING and json.loads(key.options)["schedule_seed"] == 0
    # a row measured with perf_analyzer's own --request-distribution is another measurement
    old = open_loop_options(PerfOptions(protocol="grpc"), "poisson", 700, 50.0)
    from dataclasses import replace

    old = replace(old, extra_args=("--request-distribution", "poisson"))
    assert options_key(old.measurement_fields()) != key.options
    assert point_key(replace(target, schedule_seed=1), 40.0, 1) != key
    # seeds: reproducible, one per (rate, trial), shared by configurations (compared on the same arrivals)
    assert point_seed(0, 40.0, 1) == point_seed(0, 40.0, 1) != point_seed(0, 40.0, 2)
    assert point_seed(0, 40.0, 1) != point_seed(0, 41.0, 1) and point_seed(0, 40.0, 1) != point_seed(1, 40.0, 1)


def test_an_automatic_window_holds_about_a_hundred_requests_within_its_bounds():
    from deployment_toolkit.search.capacity import rate_point_estimate
    from deployment_toolkit.perf.openloop.ratepoint import AUTO_WINDOW_MS, REQUESTS_PER_WINDOW, auto_window_ms

    assert auto_window_ms(400.0) == AUTO_WINDOW_MS[0] == 300  # a fast model: 120 requests a window, not 400
    assert auto_window_ms(250.0) == 400 and 250.0 * 0.4 == REQUESTS_PER_WINDOW
    assert auto_window_ms(130.0) == 800  # 769 ms rounded up to 50: at least 100 requests
    assert auto_window_ms(12.0) == AUTO_WINDOW_MS[1] == 1000  # a slow model keeps the full second
    assert auto_window_ms(0.0) == auto_window_ms(float("nan")) == 1000
    assert all(auto_window_ms(r) * r / 1000 >= REQUESTS_PER_WINDOW for r in (100.0, 150.0, 333.4))
    # the search's estimate before a rate is measured counts sized windows at their shortest (its clock takes the
    # closed-loop point's measured time when longer), an asked-for window at its length
    assert rate_point_estimate(None) == 5 * 0.3 + 2 < rate_point_estimate(1000) == 7.0


def test_profile_export_only_where_it_stays_small():
    from dataclasses import replace

    from deployment_toolkit.perf.openloop.ratepoint import export_wanted
    from deployment_toolkit.spec import ModelSignature, TensorSpec

    small = ModelSignature(inputs=(TensorSpec("x", (16,)),), outputs=(TensorSpec("y", (16,)),))
    image = ModelSignature(inputs=(TensorSpec("x", (3, 224, 224)),), outputs=(TensorSpec("y", (1000,)),))
    opts = open_loop_options(PerfOptions(protocol="grpc", shared_memory="none"), "poisson", 3000, 30.0)
    assert export_wanted(Target("a", "m", "", 1, small, opts, "poisson"), 500.0)
    # the export carries every input as JSON numbers: an image model at 100/s would write gigabytes
    assert not export_wanted(Target("a", "m", "", 1, image, opts, "poisson"), 100.0)
    shm = replace(opts, shared_memory="system")  # with shared memory each tensor is exported as one number
    assert export_wanted(Target("a", "m", "", 1, image, shm, "poisson"), 100.0)


# ---- the store --------------------------------------------------------------------------------------

def test_a_point_with_input_data_from_a_file_is_keyed_by_its_content_not_its_path(tmp_path):
    """A pipeline's inputs are written inside its result folder: keyed by their path, the folder moved (or a pod's
    folder gathered elsewhere) held no stored rate and its search measured all again."""
    from dataclasses import replace

    from deployment_toolkit.spec import ModelSignature, TensorSpec

    sig = ModelSignature(inputs=(TensorSpec("x", (4,)),), outputs=(TensorSpec("y", (4,)),))
    here, moved, other = tmp_path / "a" / "in.json", tmp_path / "b" / "in.json", tmp_path / "c" / "in.json"
    for path, text in ((here, '{"data": [1]}'), (moved, '{"data": [1]}'), (other, '{"data": [2]}')):
        path.parent.mkdir()
        path.write_text(text)
    base = Target("m/online", "m", "", 1, sig, open_loop_options(PerfOptions(protocol="grpc"), "poisson", 700, 50.0),
                  "poisson")
    key = {p: point_key(replace(base, options=replace(base.options, input_data=str(p))), 40.0, 1)
           for p in (here, moved, other)}
    assert key[here] == key[moved] != key[other]
    assert json.loads(key[here].options)["input_data"].startswith("sha256:")
    assert json.loads(point_key(base, 40.0, 1).options)["input_data"] == "random"  # generated data names itself


def test_a_mix_or_hold_window_at_a_low_rate_holds_enough_requests_to_settle():
    """A confirmation at 3 requests/s in 1-s windows (3 requests each) never settled; its window now holds
    SETTLING_REQUESTS requests, up to LONGEST_WINDOW_MS; a faster rate keeps the window it had."""
    from deployment_toolkit.deployment.mixed import windowed
    from deployment_toolkit.perf.openloop.ratepoint import LONGEST_WINDOW_MS, SETTLING_REQUESTS, settling_window_ms
    from deployment_toolkit.spec import ModelSignature, TensorSpec

    sig = ModelSignature(inputs=(TensorSpec("x", (4,)),), outputs=(TensorSpec("y", (4,)),))
    target = Target("m/online", "m", "", 1, sig, open_loop_options(PerfOptions(protocol="grpc"), "poisson", 1000),
                    "poisson")
    window = {r: windowed(target, r).options.measurement_interval_ms for r in (1.0, 3.0, 10.0, 45.0, 500.0)}
    assert window[1.0] == window[3.0] == LONGEST_WINDOW_MS and 3.0 * LONGEST_WINDOW_MS / 1000 >= 0.9 * SETTLING_REQUESTS
    assert window[10.0] == 2500 and window[10.0] * 10.0 / 1000 == SETTLING_REQUESTS
    assert window[45.0] == window[500.0] == 1000  # the window asked for, already long enough
    assert settling_window_ms(0.0) == LONGEST_WINDOW_MS


def test_a_low_rates_stability_band_covers_its_poisson_arrivals_and_its_key_holds_the_band():
    """perf_analyzer keeps three windows whose counts lie within +-band of their mean. At 25 requests a window a
    30 % band fails about one triple in six of a perfectly steady server (seeded draws below), so the band widens
    to what the arrivals need (POISSON_SIGMAS / sqrt(n), as our own generator's rule); a fast rate, constant
    arrivals and the toolkit's own generator keep theirs. The stored key holds the band the point ran with, so a
    replay (openloop._replay, search.triton.stored_rate) looks up what measure() stored."""
    import numpy as np

    from deployment_toolkit.perf.openloop.ratepoint import MULTISTREAM, arrival_band

    sig = None
    poisson = Target("m/online", "m", "", 1, sig, open_loop_options(PerfOptions(protocol="grpc"), "poisson", 1000))
    band = {r: arrival_band(poisson, r).options.stability_percentage for r in (25.0, 48.0, 100.0, 400.0)}
    assert band[25.0] == 60.0 and band[48.0] == pytest.approx(43.4) and band[100.0] == band[400.0] == 30.0
    constant = Target("m/online", "m", "", 1, sig, poisson.options, "constant")
    together = Target("m/online", "m", "", 1, sig, poisson.options, driving=MULTISTREAM)
    assert arrival_band(constant, 25.0) is constant and arrival_band(together, 25.0) is together
    draws = np.random.default_rng(7).poisson(25, (20000, 3))
    mean = draws.mean(axis=1, keepdims=True)
    settles = {b: float((np.abs(draws - mean) <= b / 100 * mean).all(axis=1).mean()) for b in (30.0, band[25.0])}
    assert settles[30.0] < 0.9 and settles[band[25.0]] > 0.995, settles
    assert point_key(poisson, 25.0) == point_key(arrival_band(poisson, 25.0), 25.0)
    assert json.loads(point_key(poisson, 25.0).options)["stability_percentage"] == 60.0
    assert json.loads(point_key(poisson, 400.0).options)["stability_percentage"] == 30.0


def test_store_roundtrip_keys_and_provenance(tmp_path):
    store = RateStore(tmp_path)
    key = RateKey("m/online", "poisson", 123.4, 1, OPTS, 1)
    row = {"offered": 123.4, "answered": 120.0, "p99_ms": 12.5, "window_latency_ms": [3.0, 4.5],
           "queue_growing": False, "client_limited": False, "stable": True, "timestamp": "2026-11-24T00:00:00+00:00",
           "command": "perf_analyzer -m m", "log": "x.log"}
    store.put(key, row)
    again = RateStore(tmp_path).get(key)
    assert again["answered"] == 120.0 and again["window_latency_ms"] == [3.0, 4.5] and again["stable"] is True
    assert again["timestamp"] and again["command"]
    for other in (RateKey("m/online", "constant", 123.4, 1, OPTS, 1), RateKey("m/online", "poisson", 123.4, 1, "{}", 1),
                  RateKey("m/online", "poisson", 123.4, 1, OPTS, 2), RateKey("n/online", "poisson", 123.4, 1, OPTS, 1)):
        assert RateStore(tmp_path).get(other) is None
    text = (tmp_path / "openloop.csv").read_text()
    assert text.count("\n") == 2 and not list(tmp_path.glob("*.tmp*"))
    assert math.isnan(again["sched_p99_ms"]) and again["schedule_seed"] is None  # not measured: empty, not 0
    store.put(key, {**row, "sched_p99_ms": 14.25, "late_pct": 2.5, "schedule_seed": 1903972876})
    again = RateStore(tmp_path).get(key)
    assert again["sched_p99_ms"] == 14.25 and again["late_pct"] == 2.5 and again["schedule_seed"] == 1903972876


def test_store_against_a_live_server_reuses_only_rows_of_its_identity(tmp_path, capsys):
    from deployment_toolkit.results import RunIdentity

    def ident(server: str) -> RunIdentity:
        return RunIdentity(host={"cpu_model": "c"}, server_version=server, model_config={"name": "m"},
                           artifact_digest=None, perf_options={}, input_data="random", toolkit_version="t")

    key = RateKey("m/online", "poisson", 100.0, 1, OPTS, 1)
    RateStore(tmp_path, identity=ident("2.51.0")).put(key, {"offered": 100.0, "answered": 99.0})
    assert RateStore(tmp_path, identity=ident("2.51.0")).get(key)["identity"] == ident("2.51.0").id
    assert RateStore(tmp_path).get(key) is not None, "planning from stored points replays them as they are"
    assert RateStore(tmp_path, identity=ident("2.52.0")).get(key) is None
    assert 'server_version: stored "2.51.0", now "2.52.0"' in capsys.readouterr().out
    assert len(list((tmp_path / "superseded").glob("*/openloop.csv"))) == 1, "kept aside, never deleted"


def test_a_replica_that_fell_behind_is_derated_to_what_it_answered_not_by_its_p99():
    """A queue that grows through the window gives a p99 many times the SLO (the window's length, not the
    service's); the replica still answered 180 of 190/s, so that is what it carried."""
    behind = synthetic(190.0, 180.0, p99_at_limit=250.0)  # p99 1000 ms against a 50 ms SLO
    assert behind.queue_growing and behind.p99 == 1000.0
    assert derated_capacity(behind, 50.0) == 180.0  # not 190 * 50 / 1000 = 9.5
    slow = synthetic(190.0, 1000.0, p99_at_limit=500.0)  # kept up, p99 95 ms: the ratio applies
    assert slow.kept_up and derated_capacity(slow, 50.0) == pytest.approx(190.0 * 50.0 / 95.0)
    assert derated_capacity(synthetic(190.0, 189.9), 50.0) == pytest.approx(190.0 * 0.97)  # always a step down

def test_a_window_in_which_no_request_finished_is_a_failing_point_not_a_crash(tmp_path, monkeypatch):
    """An overloaded server at an open-loop rate answers nothing within a window: perf_analyzer exits 3 with "No valid
    requests recorded". That is the rate's verdict (fail), stored like any point, so a bisection or a re-test goes on."""
    from deployment_toolkit.perf.analyzer import PerfOptions
    from deployment_toolkit.perf.analyzer.errors import PerfAnalyzerError
    from deployment_toolkit.perf.openloop import ratepoint
    from deployment_toolkit.perf.openloop.ratestore import RateStore

    def overloaded(target, batch, load, options, csv_path, **kwargs):
        Path(csv_path).with_suffix(".log").write_text(
            "  Pass [1] throughput: 50.0 infer/sec. Avg latency: 1396635 usec (std 55455 usec).\n"
            "No valid requests recorded within time interval. Please use a larger time window.\n")
        raise PerfAnalyzerError("perf_analyzer failed at batch 1, request rate 61.31/s (exit 3): No valid requests "
                                "recorded within time interval. Please use a larger time window.")

    monkeypatch.setattr(ratepoint, "run_point", overloaded)
    target = ratepoint.Target("cfg", "m", "127.0.0.1:1", 1, None, ratepoint.open_loop_options(PerfOptions()))
    store = RateStore(tmp_path)
    point = ratepoint.measure(target, 61.31, store, tmp_path)
    assert not point.passes(300.0) and "fail" in point.verdict(300.0)
    assert store.get(point.key) is not None  # stored: a rerun replays the verdict instead of crashing again

    def broken(*args, **kwargs):
        raise PerfAnalyzerError("perf_analyzer failed (exit 1): model 'm' is not ready")

    monkeypatch.setattr(ratepoint, "run_point", broken)
    with pytest.raises(PerfAnalyzerError, match="not ready"):
        ratepoint.measure(target, 70.0, store, tmp_path)


def test_a_rate_perf_analyzer_cannot_finish_is_a_failing_rate_not_the_end_of_the_plan(tmp_path, monkeypatch):
    """Issue 46: a pipeline re-tested at its network's 8,068 inf/s made perf_analyzer run past its time limit
    ("server hung?") and the whole plan ended. In open loop that rate failed: stored, stepped down from."""
    from deployment_toolkit.perf.analyzer import PerfOptions
    from deployment_toolkit.perf.analyzer.errors import PerfAnalyzerTimeout
    from deployment_toolkit.perf.openloop import ratepoint
    from deployment_toolkit.perf.openloop.ratestore import RateStore

    def hung(target, batch, load, options, csv_path, **kwargs):
        raise PerfAnalyzerTimeout("perf_analyzer did not finish within 114 s (server hung?). Command: perf_analyzer")

    monkeypatch.setattr(ratepoint, "run_point", hung)
    target = ratepoint.Target("cfg", "m", "127.0.0.1:1", 1, None, ratepoint.open_loop_options(PerfOptions()))
    store = RateStore(tmp_path)
    point = ratepoint.measure(target, 8068, store, tmp_path)
    assert not point.passes(300.0) and not point.kept_up and not point.client_limited
    assert store.get(point.key) is not None  # a rerun replays the verdict instead of waiting 114 s again


# ---- a tail the rate does not move ----------------------------------------------------------------

def flat_tail(rate: float, p99_ms: float = 100.0, trial: int = 1) -> RatePoint:
    """A replica that answers everything at any rate, its p99 the same (a slow neighbour, not the load)."""
    row = {"answered": rate, "p99_ms": p99_ms, "avg_ms": 5.0, "window_latency_ms": [5, 5, 5], "send_rate": None,
           "queue_growing": False, "client_limited": False, "stable": True}
    return RatePoint(RateKey("flat", "constant", rate, 1, options_key({"measurement_interval_ms": 3000}), trial), row)


def test_a_search_stops_stepping_down_when_a_lower_rate_twice_leaves_the_tail_as_it_was():
    """Twelve models: a group of five whose scorer missed its 10 ms beside a 30 ms classifier at every rate took
    ten points down to 5 % of its prediction, and its hold seven more (9 minutes); the load was not why it missed.
    A shared group's mix stops (mix=True); a model alone, whose points are cheap, steps to the floor as before
    (the rule stopped a 10 ms scorer's hold at 73 % of its rate where the floor is 53 %)."""
    s = search(flat_tail, 1000.0, slo_ms=50.0, mix=True)
    assert s.capacity is None and len(s.points) == 3 and "did not come down" in s.stopped
    noisy = iter([100.0, 97.0, 60.0, 58.0, 57.0])  # one step that changed nothing, then one that helped: go on
    s = search(lambda r: flat_tail(r, next(noisy)), 1000.0, slo_ms=50.0, mix=True)
    assert len(s.points) == 5 and s.capacity is None
    alone = search(flat_tail, 1000.0, slo_ms=50.0)  # a model alone: its points are cheap, it steps to the floor
    assert len(alone.points) == 10 and not alone.stopped


def test_a_hold_stops_stepping_down_when_a_lower_rate_twice_leaves_the_tail_as_it_was():
    held = hold(lambda rate, trial: Judged(flat_tail(rate, trial=trial), 50.0), 1000.0, k=1, until_stuck=True)
    assert held.rate is None and len(held.retests) == 3
    assert "the load is not why it misses" in held.text() and "did not hold" in held.text()
    falling = hold(lambda rate, trial: Judged(flat_tail(rate, 50.0 * rate / 700.0, trial), 50.0), 1000.0, k=1,
                   until_stuck=True)
    assert falling.rate is not None and falling.rate < 700.0  # a tail that follows the rate steps down to a pass
    alone = hold(lambda rate, trial: Judged(flat_tail(rate, trial=trial), 50.0), 1000.0, k=1)
    assert len(alone.retests) == 7 and not alone.stopped  # a model alone steps all the way


def starved_client(rate: float) -> RatePoint:
    """A replica on the client's host: above 600/s its runtimes take the cores and the client falls behind, sending
    half the rate; below, every request answered within 10 ms."""
    over = rate > 600.0
    row = {"answered": rate / 2 if over else rate, "p99_ms": 900.0 if over else 10.0, "avg_ms": 5.0,
           "window_latency_ms": [5, 5, 5], "send_rate": rate / 2 if over else None, "queue_growing": False,
           "client_limited": over, "stable": True}
    return RatePoint(RateKey("starved", "poisson", rate, 1, options_key({"measurement_interval_ms": 3000}), 1), row)


def test_a_mix_steps_down_from_a_rate_the_client_could_not_send_and_a_model_alone_stops():
    """Twelve models on 2 cores: a shared group's mix at its time-sharing prediction left the client behind at
    293 inf/s, and the whole plan ended (exit 2) after 19 minutes. A mix counts the point as failing and steps down
    (mix=True); a model alone still stops, the client being the limit of what it measured."""
    mix = search(starved_client, 1000.0, slo_ms=50.0, mix=True)
    assert mix.capacity is not None and 500.0 < mix.capacity <= 600.0 and mix.client_limit is not None
    with pytest.raises(ClientLimited):
        search(starved_client, 1000.0, slo_ms=50.0)
