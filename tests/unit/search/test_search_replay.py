"""Issue 44 (item 3): a rerun of the same search into the same folder measures nothing. The points and open-loop
rates were already stored; what made a rerun measure again was the clock: replayed points take ~0 s, so a
time-limited rerun saw --max-minutes untouched and explored (and bisected) further than the first run. The clock's
answers are kept in the checkpoint and replayed under the same settings. Fakes on a fake clock: milliseconds."""
from __future__ import annotations

import json

import pytest

from deployment_toolkit.search import SearchStore
from deployment_toolkit.search.clock import ELAPSED, SearchClock, settings_key
from deployment_toolkit.search.store import POINTS_FILE, search_complete
from deployment_toolkit.search.trials import SearchSettings

from test_search import FakeMeasurer, LaterSamples, OpenLoopFake, run  # noqa: E402  (the same fakes)


@pytest.fixture
def fake_clock(monkeypatch):
    """time.monotonic as a counter the fakes advance: each measured point costs `point_s`, each rate `rate_s`."""
    import deployment_toolkit.search.engine as engine

    now = {"t": 0.0}
    monkeypatch.setattr(engine.time, "monotonic", lambda: now["t"])
    return now


def _slow(now, base, point_s=5.0, rate_s=6.0):
    class Slow(base):
        def measure(self, cand, c, sample, key):
            now["t"] += point_s
            return super().measure(cand, c, sample, key)

        def rate_point(self, cand, rate, trial, key):
            now["t"] += rate_s
            return super().rate_point(cand, rate, trial, key)

    return Slow


class StoringOpenLoop(OpenLoopFake):
    """Open-loop rates kept as the real measurer keeps them (search_openloop.csv): `stored_rate` answers from
    them without loading the config."""

    def __init__(self, share, stored=None, **kw):
        super().__init__(share, **kw)
        self.stored = {} if stored is None else stored

    def stored_rate(self, cand, rate, trial, key):
        return self.stored.get((key, round(rate, 6), trial))

    def rate_point(self, cand, rate, trial, key):
        point = super().rate_point(cand, rate, trial, key)
        self.stored[(key, round(rate, 6), trial)] = point
        return point


def _store(tmp_path):
    return SearchStore(tmp_path, {"model": "toy"}).open()


def _answers(folder):
    """The clock's answers the checkpoint in `folder` keeps (the last run's)."""
    return json.loads((folder / POINTS_FILE).read_text())["clock"]["answers"]


def _capacity(outcome):
    w = outcome.decision.winner
    return w.candidate.key, w.capacity.result.capacity


def test_a_time_limited_search_rerun_measures_nothing_and_names_the_same_winner(tmp_path, fake_clock):
    """The closed-loop ranking under --max-minutes: the first run stops exploring for time; its rerun, whose
    points all replay in no time, used to go on exploring until the limit. Now it replays the first run's clock."""
    first, fake1, _ = run(tmp_path, _slow(fake_clock, FakeMeasurer)(), max_minutes=1.5)
    assert first.stopped.startswith("--max-minutes"), first.stopped  # the limit shaped the first run
    assert fake1.measured
    asked = _answers(tmp_path)
    second, fake2, store = run(tmp_path, _slow(fake_clock, FakeMeasurer)(), store=_store(tmp_path), max_minutes=1.5)
    # the rerun asked the clock exactly what the first run asked, in order: every answer replayed, none live (a
    # challenger already in the checkpoint once skipped a question, and the replay went on one answer astray)
    assert _answers(tmp_path) == asked and second.replayed_answers == len(asked)
    assert fake2.measured == [] and fake2.loads == [] and second.measured_points == 0
    assert second.replayed_answers > 0 and store.reused_points == second.reused_points == len(set(fake1.measured))
    assert second.decision.winner.candidate == first.decision.winner.candidate
    assert second.stopped == first.stopped
    assert search_complete(tmp_path) == (False, "measured, but its outputs were not written (a rerun writes them "
                                                "without measuring)")  # run.json is the orchestration's


def test_a_capacity_search_rerun_measures_no_rate_and_keeps_its_capacity(tmp_path, fake_clock):
    """--objective capacity under a limit: each open-loop search gets as many rates as fit (points_that_fit);
    the rerun used to get more (its rates replay in no time) and bisect further, measuring new rates."""
    stored: dict = {}
    kw = dict(objective="capacity", capacity_trials=1, max_minutes=1.0, max_configs=2)
    first, fake1, _ = run(tmp_path, _slow(fake_clock, StoringOpenLoop)({}, stored), **kw)
    assert fake1.rates and first.measured_rates == len(fake1.rates)
    assert any("got as few as" in n for n in first.notes), first.notes  # the limit cut its bisection short
    asked = _answers(tmp_path)
    second, fake2, _ = run(tmp_path, _slow(fake_clock, StoringOpenLoop)({}, stored), store=_store(tmp_path), **kw)
    assert _answers(tmp_path) == asked and second.replayed_answers == len(asked)  # the same questions, all replayed
    assert fake2.rates == [] and fake2.measured == [] and fake2.loads == []
    assert second.measured_rates == 0 and second.reused_rates == len(fake1.rates)
    assert _capacity(second) == _capacity(first)


@pytest.mark.parametrize("objective,max_minutes", [("closed-loop", 2.0), ("capacity", 3.0)])
def test_a_rerun_with_challengers_in_the_checkpoint_asks_the_clock_what_the_first_run_asked(tmp_path, fake_clock,
                                                                                             objective, max_minutes):
    """The three-replica comparison's plan, rerun, went live at answer 12 of 78 and measured 17 open-loop rates
    again: a challenger whose first point was in the checkpoint skipped the clock's question of what a config takes
    (its estimate is 0 then), so every later answer was taken for the wrong question. Here challengers are measured
    before the limit stops the first run; the rerun asks the same questions and replays every answer."""
    capacity = objective == "capacity"
    stored: dict = {}
    measurer = (lambda: _slow(fake_clock, StoringOpenLoop)({}, stored)) if capacity else \
        (lambda: _slow(fake_clock, FakeMeasurer)())
    kw = dict(objective=objective, capacity_trials=1, max_minutes=max_minutes)
    first, _, _ = run(tmp_path, measurer(), **kw)
    assert sum(t.status == "measured" for t in first.trials) > 1 and first.stopped.startswith("--max-minutes")
    asked = _answers(tmp_path)
    second, fake2, _ = run(tmp_path, measurer(), store=_store(tmp_path), **kw)
    assert _answers(tmp_path) == asked and second.replayed_answers == len(asked)
    assert second.measured_points == 0 and second.measured_rates == 0 and fake2.loads == []
    assert second.decision.winner.candidate == first.decision.winner.candidate


def test_other_settings_are_not_replayed_and_measure_only_what_is_missing(tmp_path, fake_clock):
    """A longer --max-minutes asks other questions: the clock answers live, the stored points are still reused,
    and the search goes further than the first run did."""
    first, fake1, _ = run(tmp_path, _slow(fake_clock, FakeMeasurer)(), max_minutes=1.5)
    second, fake2, _ = run(tmp_path, _slow(fake_clock, FakeMeasurer)(), store=_store(tmp_path), max_minutes=4)
    assert second.replayed_answers == 0
    assert not set(fake1.measured) & set(fake2.measured), "a stored point was measured again"
    assert sum(t.status == "measured" for t in second.trials) > sum(t.status == "measured" for t in first.trials)


def test_an_interrupted_search_replays_what_it_decided_then_goes_on_live(tmp_path, fake_clock):
    """Stopped halfway (Ctrl-C): the checkpoint keeps the clock's answers up to there, not marked complete. The
    rerun replays them, answers live from there on (its elapsed time going on from the replayed one), and
    measures only the points the first run never reached."""
    Slow = _slow(fake_clock, FakeMeasurer)

    class Interrupted(Slow):
        def measure(self, cand, c, sample, key):
            if len(self.measured) == 8:
                raise KeyboardInterrupt
            return super().measure(cand, c, sample, key)

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, Interrupted(), max_minutes=2)
    doc = json.loads((tmp_path / POINTS_FILE).read_text())
    assert doc["clock"]["answers"] and doc["clock"]["complete"] is False
    assert search_complete(tmp_path)[0] is False
    done = {(k, c, s) for k, c, s in (p.split("|") for p in doc["points"])}
    second, fake2, _ = run(tmp_path, Slow(), store=_store(tmp_path), max_minutes=2)
    assert second.replayed_answers > 0 and second.reused_points == len(done) == 8
    assert fake2.measured and not {(f"abc123:{k}", f"c{c}", f"s{s}") for k, c, s in fake2.measured} & done
    assert json.loads((tmp_path / POINTS_FILE).read_text())["clock"]["complete"] is True
    # the replayed run took the time the first one had; live, it goes on from there, within the limit
    assert fake_clock["t"] - 8 * 5.0 <= 2 * 60.0


def test_the_clock_replays_answers_of_the_same_kind_and_then_answers_live(monkeypatch):
    import deployment_toolkit.search.clock as clock_module

    now = {"t": 100.0}
    monkeypatch.setattr(clock_module.time, "monotonic", lambda: now["t"])
    settings = SearchSettings(budget_ms=50, max_minutes=1)
    clock = SearchClock(settings, replay=[[ELAPSED, 30.0], ["point", 4.0]])
    clock.start()
    assert clock.elapsed_s() == 30.0 and clock.point_s() == 4.0 and clock.replaying
    now["t"] += 2.0
    assert clock.elapsed_s() == 30.0 and not clock.replaying  # live: on from the last replayed elapsed time
    now["t"] += 2.0
    assert clock.elapsed_s() == 32.0
    assert clock.answers == [[ELAPSED, 30.0], ["point", 4.0], [ELAPSED, 30.0], [ELAPSED, 32.0]] and clock.replayed == 2
    assert clock.diverged == ""  # the replay ran to its end: nothing to say
    diverged = SearchClock(settings, replay=[["point", 4.0]])
    diverged.start()
    assert diverged.elapsed_s() == 0.0 and not diverged.replaying  # another question: live from the first one
    # a rerun that measures what the first run did not says where its decisions left the first run's
    assert diverged.diverged == ("answer 1 of 1: this run asked for the time elapsed where the first run had asked "
                                 "for the time a point takes")
    assert settings_key(settings) != settings_key(SearchSettings(budget_ms=50, max_minutes=2))


def test_search_complete_needs_a_finished_checkpoint_and_the_written_outputs(tmp_path):
    assert search_complete(tmp_path / "none") == (False, "never started")
    run(tmp_path, max_configs=1)
    assert search_complete(tmp_path)[0] is False  # run.json not yet written by the orchestration
    (tmp_path / "run.json").write_text(json.dumps({"config": {"kind": "search"}}))
    assert search_complete(tmp_path) == (True, "")


def test_settings_of_the_same_value_replay_whatever_their_type(tmp_path):
    """200 from Python and 200.0 from a flag are one budget: the API resumes what the command recorded."""
    from deployment_toolkit.search.clock import settings_key
    from deployment_toolkit.search.store import SearchStore
    from deployment_toolkit.search.trials import SearchSettings

    store = SearchStore.__new__(SearchStore)
    store.clock_log = {"settings": settings_key(SearchSettings(budget_ms=200.0)), "answers": [["elapsed", 1.0]]}
    assert store.clock_replay(settings_key(SearchSettings(budget_ms=200))) == [["elapsed", 1.0]]
    assert store.clock_replay(settings_key(SearchSettings(budget_ms=201))) is None


def LaterSampleLower():
    """The baseline's top level measures high first and low in its later (noise) sample: judged with both samples,
    a lower level is best; judged with the first alone (as the first run did when it chose where to take the noise),
    the top one is."""
    return LaterSamples("throughput", 0.4)


def test_a_rerun_judges_a_level_only_by_the_samples_the_first_run_had_at_that_moment(tmp_path):
    """Caught by the integration rerun on a loaded host: the checkpoint holds every sample, including the noise
    sample the first run took after choosing its best level; judging with it, the rerun chose another level, took
    its noise there and measured again."""
    first, fake1, _ = run(tmp_path, LaterSampleLower(), noise_repeats=1, max_concurrency=8, max_configs=1)
    assert any(s > 0 for _, _, s in fake1.measured), "the fake needs a noise sample to be taken"
    store = _store(tmp_path)
    assert store.samples(first.trials[0].key, 1) == [], "a sample the rerun has not asked for is not judged"
    second, fake2, _ = run(tmp_path, LaterSampleLower(), store=store, noise_repeats=1, max_concurrency=8,
                           max_configs=1)
    assert fake2.measured == [], fake2.measured
    assert second.decision.winner.candidate == first.decision.winner.candidate
