"""The one in-process timer (runtimes.timing): warm-up first, then the callables take turns call by call; a number
of calls or a time budget; percentiles; and the four loops that use it keep what they measured."""
from __future__ import annotations

import time

import numpy as np
import pytest

from deployment_toolkit.runtimes.timing import Budget, Timing, percentile, time_call, time_calls


def test_warm_up_then_hook_then_calls_take_turns():
    order: list[str] = []
    timed = time_calls({"a": lambda: order.append("a"), "b": lambda: order.append("b")},
                       Budget(warmup=2, iterations=3), after_warmup=lambda: order.append("|"))
    assert order == ["a", "a", "b", "b", "|"] + ["a", "b"] * 3
    assert [len(t.seconds) for t in timed.values()] == [3, 3]
    assert all(t.background_cpu == -1.0 or 0.0 <= t.background_cpu <= 1.0 for t in timed.values())


def test_a_time_budget_stops_after_the_minimum_number_of_calls():
    timing = time_call(lambda: time.sleep(0.01), Budget.for_seconds(0.005, min_iterations=3))
    assert len(timing.seconds) == 3 and min(timing.seconds) >= 0.009
    assert len(time_call(lambda: None, Budget(iterations=7)).seconds) == 7


def test_without_the_background_probe_the_share_is_unknown():
    assert time_call(lambda: None, Budget(iterations=2, background=False)).background_cpu == -1.0


def test_percentiles_match_numpy():
    values = [0.3, 0.1, 0.9, 0.5, 0.7, 0.2]
    for q in (0, 50, 95, 100):
        assert percentile(values, q) == pytest.approx(np.percentile(values, q))
    assert Timing(values, 0.0).median == pytest.approx(np.median(values))
    with pytest.raises(ValueError):
        percentile([], 50)


def test_bad_counts_are_refused():
    with pytest.raises(ValueError):
        time_call(lambda: None, Budget(iterations=0))
    with pytest.raises(ValueError):
        time_call(lambda: None, Budget(warmup=-1))


def test_the_loops_that_time_in_process_all_use_it():
    """The lab's runtime-speed, overhead and framework benchmarks and diffusion/latency time through runtimes.timing,
    not a loop of their own (issue 37: one in-process timer). The lab's files are read, not imported."""
    from pathlib import Path

    import deployment_toolkit

    root = Path(deployment_toolkit.__file__).parent
    for rel in ("../deployment_toolkit_lab/runtime_speed.py", "../deployment_toolkit_lab/overhead/bench.py",
                "../deployment_toolkit_lab/framework_bench/measuring.py", "diffusion/latency.py"):
        text = (root / rel).read_text()
        assert "runtimes.timing import" in text, rel
        assert "time.perf_counter() - " not in text.replace("exported in {time.perf_counter() - t0", ""), rel
        assert "for _ in range(" not in text, rel  # no warm-up or timed loop of its own
