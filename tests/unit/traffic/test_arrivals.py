"""Issue 57, item 3 (the library only): send times that keep the traffic's bursts (a log's inter-arrivals scaled to
a rate; a seeded burst process with a given index of dispersion) and goodput counted from latencies."""
from __future__ import annotations

import numpy as np
import pytest

from deployment_toolkit.errors import UserInputError
from deployment_toolkit.traffic.arrivals import bursts, goodput, replay
from deployment_toolkit.traffic.series import Series, TimeKind
from deployment_toolkit.traffic.stats import counts


@pytest.mark.parametrize("target", [1.0, 4.0, 12.0])
def test_the_burst_process_has_the_dispersion_asked_for(target):
    sends = bursts(50.0, 4000.0, target, seed=7)
    per_s = counts(sends, 1.0)
    assert len(per_s) == 4000 and per_s.mean() == pytest.approx(50, rel=0.05)
    assert per_s.var(ddof=1) / per_s.mean() == pytest.approx(target, rel=0.1)
    assert np.all(np.diff(sends) >= 0) and sends.min() >= 0 and sends.max() < 4000


def test_the_burst_process_is_seeded_and_follows_a_rate_series():
    assert np.array_equal(bursts(20.0, 100.0, 3.0, seed=1), bursts(20.0, 100.0, 3.0, seed=1))
    assert not np.array_equal(bursts(20.0, 100.0, 3.0, seed=1), bursts(20.0, 100.0, 3.0, seed=2))
    day = Series((0.0, 500.0), (10.0, 100.0), TimeKind.SECONDS)
    per_s = counts(bursts(day, 1000.0, 2.0, seed=3), 1.0)
    assert per_s[:500].mean() == pytest.approx(10, rel=0.1) and per_s[500:].mean() == pytest.approx(100, rel=0.1)
    with pytest.raises(UserInputError, match="index of dispersion is >= 1"):
        bursts(10.0, 10.0, 0.5)


def test_a_replay_keeps_the_log_s_shape_at_the_planned_rate():
    rng = np.random.default_rng(0)
    log = 1_777_852_800 + np.sort(np.concatenate([rng.random(500) * 100, 40 + rng.random(500) * 0.5]))
    sends = replay(log, 200.0)
    assert sends[0] == 0 and (len(sends) - 1) / sends[-1] == pytest.approx(200.0)
    gaps, recorded = np.diff(sends), np.diff(log)
    assert np.allclose(gaps / gaps.sum(), recorded / recorded.sum())  # the same shape, only faster
    longer = replay(log, 200.0, duration_s=20.0)
    assert longer.max() < 20 and len(longer) == pytest.approx(4000, rel=0.01)  # the log again from its start
    with pytest.raises(UserInputError, match="at least two requests"):
        replay(np.asarray([1.0]), 10.0)


def test_goodput_counts_answers_within_the_slo_by_the_second_they_were_sent():
    sends = np.array([0.1, 0.5, 0.9, 1.2, 1.4, 2.5])
    latencies = np.array([0.01, 0.30, np.nan, 0.02, 0.05, 0.01])  # one too slow, one unanswered
    g = goodput(sends, latencies, slo_s=0.1)
    assert g.sent.tolist() == [3, 2, 1] and g.answered.tolist() == [2, 2, 1] and g.within.tolist() == [1, 2, 1]
    assert g.goodput == pytest.approx(4 / 3) and g.throughput == pytest.approx(5 / 3)
    assert g.worst_slice == pytest.approx(1 / 3)
    with pytest.raises(UserInputError, match="one latency per request"):
        goodput(sends, latencies[:2], slo_s=0.1)
