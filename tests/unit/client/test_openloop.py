"""check-plan's own open-loop sender (client/openloop.py), with no server: its seeded Poisson schedule, and latency
counted from the intended send time, so a late send adds its delay to the latency instead of hiding it."""
from __future__ import annotations

import asyncio
import math
import time

import numpy as np
import pytest

from deployment_toolkit.client.openloop import drive, poisson_schedule


def test_the_schedule_is_seeded_ascending_and_within_the_window():
    a, b = poisson_schedule(200.0, 5.0, [0, 1]), poisson_schedule(200.0, 5.0, [0, 1])
    assert (a == b).all() and a.dtype == np.int64
    assert not np.array_equal(a, poisson_schedule(200.0, 5.0, [0, 2]))  # another round: other arrivals
    assert (np.diff(a) >= 0).all() and a[0] > 0 and a[-1] < 5e9
    assert poisson_schedule(0.0, 5.0, 0).size == 0


@pytest.mark.parametrize("seed", range(5))
def test_the_schedule_offers_the_rate_within_its_poisson_tolerance(seed):
    rate, seconds = 300.0, 10.0
    times = poisson_schedule(rate, seconds, seed)
    expected = rate * seconds
    assert abs(len(times) - expected) <= 3 * math.sqrt(expected), len(times)
    gaps = np.diff(times) / 1e9
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.1)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.1)  # exponential: its spread is its mean


def test_a_rate_far_above_the_first_draw_still_covers_the_whole_window():
    times = poisson_schedule(5.0, 1000.0, 3)  # few arrivals: the generator's first draw may fall short of 1000 s
    assert times[-1] > 990e9 and abs(len(times) - 5000) <= 3 * math.sqrt(5000)


def test_latency_counts_from_the_intended_time_so_a_late_send_adds_its_delay():
    """Each send holds the sender 10 ms (a slow load generator), the schedule asks for one every 2 ms: sends go out
    later and later, and every latency includes that lateness."""
    async def slow_sender(model: str, j: int) -> None:
        time.sleep(0.010)  # blocks the loop: the next sends are late
        await asyncio.sleep(0.001)

    schedule = np.arange(1, 31, dtype=np.int64) * 2_000_000
    trace = asyncio.run(drive({"m": schedule}, slow_sender, 0.0, 0.062, 5.0)).streams["m"]
    late_ms = (trace.sent_ns - trace.intended_ns) / 1e6
    latency = trace.latency_ms()
    assert trace.ok.all() and (late_ms >= 0).all()  # never early
    assert late_ms[-1] > 29 * 8 * 0.9  # each send falls another ~8 ms behind
    assert (latency >= late_ms + 1.0).all()  # the wait before a late send is part of its latency
    from_send = (trace.done_ns - trace.sent_ns) / 1e6
    assert latency[-1] - from_send[-1] == pytest.approx(late_ms[-1], abs=0.01)


def test_a_slow_answer_does_not_hold_back_the_next_send():
    """Open loop: answers taking 80 ms do not delay sends meant every 10 ms (a closed loop would send 8x fewer)."""
    async def slow_server(model: str, j: int) -> None:
        await asyncio.sleep(0.080)

    schedule = np.arange(1, 41, dtype=np.int64) * 10_000_000
    result = asyncio.run(drive({"m": schedule}, slow_server, 0.1, 0.41, 5.0))
    trace = result.streams["m"]
    assert trace.ok.all()
    assert np.median((trace.sent_ns - trace.intended_ns) / 1e6) < 5.0
    assert np.nanmin(trace.latency_ms()) >= 80.0
    assert result.wall_s == pytest.approx(0.31, abs=0.1) and result.cpu_s >= 0.0


def test_failed_requests_are_counted_with_their_first_reason_and_several_models_go_at_once():
    async def send(model: str, j: int) -> None:
        if model == "bad" and j % 2:
            raise RuntimeError("refused\nsecond line")
        await asyncio.sleep(0.001)

    schedules = {"good": np.arange(1, 11, dtype=np.int64) * 5_000_000,
                 "bad": np.arange(1, 11, dtype=np.int64) * 5_000_000 + 1}
    streams = asyncio.run(drive(schedules, send, 0.0, 0.06, 5.0)).streams
    assert streams["good"].ok.all() and streams["good"].errors == 0
    assert streams["bad"].errors == 5 and streams["bad"].first_error == "refused"
    assert np.isnan(streams["bad"].latency_ms()[1::2]).all() and (streams["bad"].done_ns[1::2] == -1).all()


def test_requests_meant_after_the_window_are_not_sent_and_unanswered_ones_are_cut_off():
    async def hangs(model: str, j: int) -> None:
        await asyncio.sleep(10 if j == 0 else 0)

    schedule = np.array([1_000_000, 2_000_000, 900_000_000], dtype=np.int64)
    started = time.monotonic()
    trace = asyncio.run(drive({"m": schedule}, hangs, 0.0, 0.05, 0.2)).streams["m"]
    assert time.monotonic() - started < 3.0
    assert len(trace.intended_ns) == 2  # the one meant at 900 ms is past the 50 ms round
    assert trace.ok.tolist() == [False, True] and trace.first_error == "no answer before the round ended"
