"""The config search's logic against a fake server whose performance follows a simple model of a CPU host:
no tritonserver, no perf_analyzer, milliseconds per test."""
from __future__ import annotations

import csv
import hashlib
import math
from pathlib import Path

import pytest

from deployment_toolkit.search import (
    Candidate,
    CandidateRefused,
    FormatInfo,
    Gain,
    Point,
    Search,
    SearchSettings,
    SearchStore,
    Spread,
    StoreMismatch,
    SweepPolicy,
    default_candidate,
    instance_thread_pairs,
    sweep_concurrency,
    sweep_near,
)
from deployment_toolkit.search.engine import FINAL_SAMPLE
from deployment_toolkit.search.trials import config_problem
from deployment_toolkit.search.space import max_batch_ladder, preferred_options, queue_delay_ladder
from deployment_toolkit.spec import Manifest, ModelSignature, TensorSpec

CORES = 2


def manifest(max_batch=8):
    sig = ModelSignature(inputs=(TensorSpec("input__0", (3, 32, 32)),), outputs=(TensorSpec("output__0", (10,)),))
    return Manifest(model="toy", preset="small", family="timm", task="classification", metric="top1", format="onnx",
                    artifact="model.onnx", signature=sig, max_batch_size=max_batch)


def cpu_model(cand: Candidate, c: int, cores: int = CORES, base_ms: float = 40.0) -> tuple[float, float]:
    """Throughput and p99 of a CPU host: threads speed one request up sublinearly, instances add capacity
    until the cores are used, oversubscription costs, queue delay adds latency."""
    t = cand.threads or cores
    lat = base_ms * (cores / t) ** 0.9
    used = cand.instances * t
    cap = cand.instances * 1000.0 / lat * min(1.0, cores / used) ** 1.5
    thr = cap * c / (c + 0.3)
    p99 = 1000.0 * c / thr * 1.2 + cand.max_queue_delay_us / 1000.0
    return thr, p99


class FakeMeasurer:
    def __init__(self, perf=cpu_model, noise=0.0, refuse=()):
        self.perf = perf
        self.noise = noise
        self.refuse = set(refuse)
        self.loads: list[str] = []
        self.measured: list[tuple[str, int, int]] = []
        self.loaded: set[Candidate] = set()
        self.most_loaded = 0

    def load(self, cand):
        self.loads.append(cand.key)
        if cand.key in self.refuse:
            raise CandidateRefused("failed to load 'toy__x': out of memory (from the server log)")
        self.loaded.add(cand)
        self.most_loaded = max(self.most_loaded, len(self.loaded))

    def measure(self, cand, c, sample, key):
        assert cand in self.loaded, "measured a config that is not loaded"
        self.measured.append((cand.key, c, sample))
        thr, p99 = self.perf(cand, c)
        if self.noise:
            h = int(hashlib.sha1(f"{cand.key}{c}{sample}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
            thr *= 1 + self.noise * (2 * h - 1)
            p99 *= 1 - self.noise * (2 * h - 1)
        return Point(key, c, sample, thr, p99)

    def release(self, cand):
        self.loaded.discard(cand)


def run(tmp_path, measurer=None, budget=500.0, store=None, log=lambda m: None, **kw):
    measurer = measurer or FakeMeasurer()
    store = store or SearchStore(tmp_path, {"model": "toy"}).open()
    kw.setdefault("objective", "closed-loop")  # the closed-loop ranking; the capacity one has its own fakes
    kw.setdefault("max_minutes", None)
    settings = SearchSettings(budget_ms=budget, cores=kw.pop("cores", CORES), **kw)
    info = FormatInfo("onnx", manifest(), Path("."), "abc123")
    outcome = Search([info], measurer, store, settings, progress=False, log=log).run()
    return outcome, measurer, store


def trial(outcome, **fields):
    found = [t for t in outcome.trials
             if all(getattr(t.candidate, k) == v for k, v in fields.items())]
    assert found, f"no trial with {fields}"
    return found[0]


# ---- the space ------------------------------------------------------------------------------------

def test_thread_pairs_fit_the_cores_and_include_what_model_analyzer_tries():
    pairs = instance_thread_pairs(2)
    assert pairs[0] == (1, 0)  # the default first
    assert {(2, 1), (1, 2), (1, 1)} <= set(pairs)
    assert (2, 0) in pairs  # listed so the csv says why it was not measured
    eight = instance_thread_pairs(8)
    assert {(1, 8), (2, 4), (4, 2), (8, 1), (2, 2)} <= set(eight)
    assert all(i * t <= 8 for i, t in eight if t)


def test_oversubscription_counts_default_threads_as_all_cores():
    assert Candidate("onnx", instances=2, threads=0).oversubscription(2).startswith("oversubscribed: 2 instances")
    assert Candidate("onnx", instances=2, threads=1).oversubscription(2) is None
    assert Candidate("onnx", instances=1, threads=0).oversubscription(2) is None


def test_ladders():
    assert max_batch_ladder(8) == [4, 2, 1]
    assert preferred_options(8) == [(8,), (4, 8)]
    assert preferred_options(1) == []
    assert queue_delay_ladder(4.0) == [100, 500]  # at most a quarter of a 4 ms budget


def test_build_config_problems_are_caught_before_the_server():
    assert "outside 1..max_batch_size" in config_problem(manifest(), Candidate("onnx", max_batch_size=4,
                                                                               preferred_batch_sizes=(8,)))
    assert config_problem(manifest(), default_candidate("onnx", 8)) is None


# ---- one sweep ------------------------------------------------------------------------------------

def _linear(p99_per_c: float, thr=lambda c: 10.0 * c):
    calls = []

    def measure(c):
        calls.append(c)
        return Point("k", c, 0, thr(c), p99_per_c * c)
    return measure, calls


def test_sweep_steps_up_by_littles_law_and_stops_at_the_first_point_over_budget():
    measure, calls = _linear(100.0)  # p99 = 100 ms x concurrency
    result = sweep_concurrency(measure, SweepPolicy(budget_ms=550.0))
    # doubling while far from the budget; at 4 (400 ms) Little's law puts 550 ms / 1.02 (the noise floor) at
    # 5.4 -> 5 (510 ms with the noise: within); from 5 one more client: 6 (600 ms) is over -> stop, knee 5..6
    assert calls == [1, 2, 4, 5, 6]
    assert "p99 600.0 ms > budget 550 ms at concurrency 6" in result.stop_reason


def _power_law(scale: float, power: float):
    calls = []

    def measure(c):
        calls.append(c)
        return Point("k", c, 0, 100.0 * c ** 0.5, scale * c ** power)
    return measure, calls


@pytest.mark.parametrize("power", [1.0, 1.5, 2.0, 3.0])
@pytest.mark.parametrize("budget", [37.0, 95.0, 260.0, 777.0])
def test_the_knee_is_found_to_one_client(power, budget):
    """Whatever the shape of p99 against the clients, the sweep ends with the highest level within the budget
    measured, and the level one above it measured over the budget (Model Analyzer's powers of two miss it)."""
    policy = SweepPolicy(budget_ms=budget, max_concurrency=1024)
    measure, calls = _power_law(2.0, power)
    result = sweep_concurrency(measure, policy)
    knee = max(c for c in range(1, 1025) if 2.0 * c ** power * (1 + policy.p99_noise) <= budget)
    assert knee in calls and knee + 1 in calls, (knee, calls, result.stop_reason)
    from deployment_toolkit.search import best_point
    assert best_point(result.points, budget, "throughput", policy.p99_noise).concurrency == knee
    assert f"knee at {knee}..{knee + 1}" in result.stop_reason or calls[-2:] in ([knee, knee + 1], [knee + 1, knee])
    # a challenger starting elsewhere finds the same knee
    measure, calls = _power_law(2.0, power)
    result = sweep_near(measure, policy, start=max(2, knee // 3))
    assert best_point(result.points, budget, "throughput", policy.p99_noise).concurrency == knee, calls
    assert knee + 1 in calls


def test_sweep_stops_when_throughput_saturates():
    measure, calls = _linear(1.0, thr=lambda c: 20.0)  # flat throughput, tiny latency
    result = sweep_concurrency(measure, SweepPolicy(budget_ms=10_000.0))
    assert calls == [1, 2, 4]
    assert result.stop_reason.startswith("saturated")


def test_sweep_latency_objective_measures_concurrency_one_only():
    measure, calls = _linear(10.0)
    sweep_concurrency(measure, SweepPolicy(budget_ms=100.0, objective="latency"))
    assert calls == [1]



def test_challenger_sweep_starts_at_the_incumbents_best_and_steps_up_by_littles_law():
    measure, calls = _linear(30.0)  # throughput grows with the clients; p99 = 30 ms x concurrency
    result = sweep_near(measure, SweepPolicy(budget_ms=500.0), start=8)
    # 8: 240 ms, within budget; Little's law puts 500 ms at 16 (and never more than twice 8): 480 ms, within;
    # it then puts 500 ms at 16 again, so one more client: 17 is over -> stop (nothing to bisect in 16..17)
    assert calls == [8, 16, 17]
    assert "p99 510.0 ms > budget 500 ms at concurrency 17" in result.stop_reason


def test_challenger_sweep_stops_when_saturated_after_two_points():
    measure, calls = _linear(10.0, thr=lambda c: 40.0)  # flat throughput
    result = sweep_near(measure, SweepPolicy(budget_ms=500.0), start=8)
    assert calls == [8, 16]
    assert result.stop_reason.startswith("saturated")


def test_challenger_sweep_steps_down_when_over_budget_at_the_start():
    measure, calls = _linear(100.0)  # p99 = 100 ms x concurrency
    result = sweep_near(measure, SweepPolicy(budget_ms=550.0), start=8)
    assert calls[:2] == [8, 4]  # over at 8 -> down to the Little's-law level (5), at least halving -> 4
    assert calls[2:] == [5, 6]  # then the knee: where the p99 line 4..8 crosses the budget (5), then 6: 5..6
    assert "stepped down to 4" in result.stop_reason


def test_challenger_over_budget_and_behind_at_the_start_cannot_win():
    measure, calls = _linear(100.0, thr=lambda c: 10.0)
    reference = {8: Point("inc", 8, 0, 40.0, 300.0)}
    result = sweep_near(measure, SweepPolicy(budget_ms=500.0), start=8, reference=reference)
    assert calls == [8]
    assert result.stop_reason.startswith("cannot win: p99 800.0 ms > budget 500 ms at concurrency 8")
    assert result.behind


def test_challenger_sweep_dominated_at_the_start_measures_one_point():
    measure, calls = _linear(50.0, thr=lambda c: 10.0)
    reference = {8: Point("inc", 8, 0, 40.0, 300.0)}
    result = sweep_near(measure, SweepPolicy(budget_ms=500.0), start=8, reference=reference)
    assert calls == [8]
    assert result.stop_reason.startswith("dominated at the incumbent's best concurrency 8")


def test_sweep_stops_when_told_to_and_says_why():
    measure, calls = _linear(1.0)
    result = sweep_concurrency(measure, SweepPolicy(budget_ms=10_000.0),
                               should_stop=lambda: "out of time" if len(calls) >= 2 else "")
    assert calls == [1, 2] and result.stop_reason == "out of time"

# ---- stats ----------------------------------------------------------------------------------------

def test_gain_spread_and_noise():
    best, default = Spread.of([110, 112, 111]), Spread.of([100, 101, 99])
    g = Gain.between(best, default)
    assert math.isclose(g.median, 0.11, abs_tol=1e-9)
    assert g.low > 0 and g.real(0.05)
    overlapping = Gain.between(Spread.of([101, 104, 98]), default)
    assert not overlapping.real(0.02)


# ---- the search -----------------------------------------------------------------------------------

def test_search_finds_two_single_threaded_instances_and_never_oversubscribes(tmp_path):
    outcome, fake, _ = run(tmp_path)
    d = outcome.decision
    assert d.winner.candidate.instances == 2 and d.winner.candidate.threads == 1
    assert d.gain is not None and d.gain.median > 0.05 and not d.default_as_good
    over = trial(outcome, instances=2, threads=0)
    assert over.status == "oversubscribed" and "4 threads > 2 cores" in over.reason
    assert all(not k.startswith("onnx/i2/tdef") for k, _, _ in fake.measured)
    assert d.default.verdict == "default" and d.default.confirmation.throughput.n == 3
    assert not fake.loaded  # everything unloaded at the end
    # no sweep went past its first point over the budget
    for t in outcome.trials:
        over_budget = [p.concurrency for p in (t.sweep.points if t.sweep else []) if p.p99_ms > 500]
        if over_budget:  # the first point over the budget (in measuring order) is the highest load measured
            assert max(p.concurrency for p in t.sweep.points) == over_budget[0]


def _smaller_batches_cut_the_tail(cand: Candidate, c: int) -> tuple[float, float]:
    """A second good config that is not dominated: max batch 4 trades 2% of throughput for a shorter tail."""
    thr, p99 = cpu_model(cand, c)
    return (thr * 0.98, p99 * 0.6) if cand.max_batch_size == 4 else (thr, p99)


def test_finalists_are_remeasured_in_turns(tmp_path):
    outcome, fake, _ = run(tmp_path, FakeMeasurer(perf=_smaller_batches_cut_the_tail, noise=0.03))
    d = outcome.decision
    finalists = [t for t in (d.winner, d.runner_up, d.default) if t is not None]
    assert len(finalists) == 3 and all(t.confirmation.throughput.n == 3 for t in finalists)
    final = [k for k, _, s in fake.measured if s >= FINAL_SAMPLE]
    assert len(final) == 9, final  # fresh samples for all three, the default included (not its noise samples)
    assert final[:3] * 3 == final and len(set(final[:3])) == 3, final  # in turns: A B C A B C A B C
    assert fake.most_loaded == 3 and not fake.loaded  # the three finalists together, unloaded at the end


def test_allow_oversubscribe_measures_what_model_analyzer_would(tmp_path):
    outcome, fake, _ = run(tmp_path, allow_oversubscribe=True)
    assert trial(outcome, instances=2, threads=0).status == "measured"
    assert any(k.startswith("onnx/i2/tdef") for k, _, _ in fake.measured)


def test_gain_within_noise_keeps_the_default(tmp_path):
    flat = lambda cand, c: (25.0 * c / (c + 0.3), 1000.0 * c / (25.0 * c / (c + 0.3)) * 1.2)  # noqa: E731
    outcome, _, _ = run(tmp_path, FakeMeasurer(perf=flat, noise=0.01))
    d = outcome.decision
    assert d.winner is d.default
    assert "default" in d.message
    verdicts = {t.verdict for t in outcome.trials}
    assert "within noise" in verdicts
    notes = " ".join(outcome.notes)
    assert "stopped after" in notes  # a ladder stopped at its first step without a real gain


def test_refused_config_is_recorded_with_the_servers_reason_and_not_retried(tmp_path):
    refused = Candidate("onnx", instances=2, threads=1, max_batch_size=8).key
    outcome, fake, store = run(tmp_path, FakeMeasurer(refuse={refused}))
    t = trial(outcome, instances=2, threads=1)
    assert t.status == "refused" and "out of memory" in t.reason
    again, fake2, _ = run(tmp_path, FakeMeasurer(refuse=set()), store=SearchStore(tmp_path, {"model": "toy"}).open())
    t2 = trial(again, instances=2, threads=1)
    assert t2.status == "refused" and "from the checkpoint" in t2.reason
    assert refused not in fake2.loads


def test_interrupted_search_resumes_without_remeasuring(tmp_path):
    first, fake1, _ = run(tmp_path, max_configs=2)
    assert first.stopped.startswith("--max-configs 2")
    assert any(t.status == "skipped" for t in first.trials)
    done = set(fake1.measured)
    second, fake2, store = run(tmp_path, store=SearchStore(tmp_path, {"model": "toy"}).open(), max_configs=3)
    assert not done & set(fake2.measured), "a completed point was measured again"
    assert second.reused_points >= len({(k, c) for k, c, s in done if s == 0})
    assert store.reused_points == second.reused_points
    assert sum(t.status == "measured" for t in second.trials) == 3


def test_impossible_budget_names_the_best_p99_seen(tmp_path):
    outcome, fake, _ = run(tmp_path, budget=0.01)
    d = outcome.decision
    assert d.winner is None
    assert "no configuration meets p99 <= 0.01 ms" in d.message
    assert f"best p99 seen was {d.best_p99_seen.p99_ms:.2f} ms" in d.message
    assert all(c == 1 for _, c, _ in fake.measured)  # nothing above concurrency 1 is worth measuring
    assert any("batching dimensions not explored" in n for n in outcome.notes)


def test_time_limit_skips_configs_but_still_confirms(tmp_path):
    import deployment_toolkit.search.engine as engine

    clock = {"t": 0.0}

    class SlowFake(FakeMeasurer):
        def measure(self, cand, c, sample, key):
            clock["t"] += 20.0  # every point takes 20 s
            return super().measure(cand, c, sample, key)

    orig = engine.time.monotonic
    engine.time.monotonic = lambda: clock["t"]
    try:
        outcome, _, _ = run(tmp_path, SlowFake(), max_minutes=5)
    finally:
        engine.time.monotonic = orig
    assert outcome.stopped.startswith("--max-minutes 5")
    assert outcome.decision.winner is not None and outcome.decision.winner.confirmation is not None



def test_time_limit_bounds_the_whole_search_baseline_included(tmp_path, monkeypatch):
    import deployment_toolkit.search.engine as engine

    clock = {"t": 0.0}

    class SlowFake(FakeMeasurer):
        def measure(self, cand, c, sample, key):
            clock["t"] += 20.0
            return super().measure(cand, c, sample, key)

    monkeypatch.setattr(engine.time, "monotonic", lambda: clock["t"])
    outcome, fake, _ = run(tmp_path, SlowFake(perf=lambda cand, c: (10.0 * c, 1.0 * c)), budget=10_000.0,
                           max_minutes=2)
    assert clock["t"] <= 120.0, f"the search took {clock['t']:.0f} s of a 120 s limit"
    base = outcome.decision.default
    assert base.sweep.stop_reason.startswith("--max-minutes 2: stopped")
    assert base.confirmation is not None and outcome.decision.winner is base

def test_store_never_reuses_points_measured_under_another_identity(tmp_path, capsys):
    SearchStore(tmp_path, {"model": "toy", "usable_cores": 2}).open().put(Point("k", 1, 0, 10.0, 5.0))
    same = SearchStore(tmp_path, {"model": "toy", "usable_cores": 2}).open()
    assert list(same.points) == ["k|c1|s0"] and same.points["k|c1|s0"].identity == same.identity.id
    assert same.points["k|c1|s0"].measured_at.endswith("+00:00")
    with pytest.raises(StoreMismatch, match="extra.usable_cores: stored 2, now 4"):
        SearchStore(tmp_path, {"model": "toy", "usable_cores": 4}).open(policy="resume")
    other = SearchStore(tmp_path, {"model": "toy", "usable_cores": 4}).open()
    assert not other.points and "extra.usable_cores" in capsys.readouterr().out
    kept = list((tmp_path / "superseded").glob("*/search_points.json"))
    assert len(kept) == 1 and "k|c1|s0" in kept[0].read_text(), "the old checkpoint is kept aside"
    other.put(Point("k", 1, 0, 11.0, 5.0))
    fresh = SearchStore(tmp_path, {"model": "toy", "usable_cores": 4}).open(fresh=True)
    assert not fresh.points and len(list((tmp_path / "superseded").glob("*/search_points.json"))) == 2


def test_outputs_list_every_config_with_a_reason(tmp_path):
    from deployment_toolkit.search.output import plot_frontier, write_csvs, write_markdown

    outcome, _, store = run(tmp_path)
    csv_path, points = write_csvs(outcome, store, tmp_path)
    rows = list(csv.DictReader(open(csv_path)))
    assert rows[0]["verdict"] == "winner"
    assert {r["config"] for r in rows} == {t.candidate.slug for t in outcome.trials}
    for r in rows:
        assert r["verdict"], r
        if r["verdict"] not in ("winner",):
            assert r["reason"], f"{r['config']} has no reason"
    assert "oversubscribed" in {r["verdict"] for r in rows}
    png = plot_frontier(outcome, tmp_path / "search_frontier.png", "toy on 2 cores")
    assert png.stat().st_size > 10_000
    md = write_markdown(outcome, tmp_path, title="t", host="2 cores", command="x", written=None, plot=png).read_text()
    assert "Winner:" in md and "search_frontier.png" in md and "Gain over the default" in md
    assert len(list(csv.DictReader(open(points)))) == len(store.points)


class FlakyFake(FakeMeasurer):
    """Fails `fails` measurements of one config (after its first `after` points), like a server killed from
    outside; `why` is what the measurer says."""

    def __init__(self, key, fails, after=0, why="the server died", **kw):
        super().__init__(**kw)
        self.key, self.fails, self.after, self.why = key, fails, after, why

    def measure(self, cand, c, sample, key):
        if cand.key == self.key and self.fails > 0:
            if self.after > 0:
                self.after -= 1
            else:
                self.fails -= 1
                from deployment_toolkit.search import CandidateFailed

                raise CandidateFailed(f"{self.why} at concurrency {c}")
        return super().measure(cand, c, sample, key)


def test_a_failure_is_retried_once_without_remeasuring(tmp_path):
    base = default_candidate("onnx", 8).key
    outcome, fake, _ = run(tmp_path, FlakyFake(base, fails=1))
    assert outcome.decision.default.status == "measured"
    assert len(fake.measured) == len(set(fake.measured)), "a point was measured twice"


def test_a_config_failing_twice_is_recorded_and_skipped(tmp_path):
    two = Candidate("onnx", instances=2, threads=1, max_batch_size=8)
    outcome, _, store = run(tmp_path, FlakyFake(two.key, fails=2))
    t = trial(outcome, instances=2, threads=1)
    assert t.status == "failed" and "failed twice" in t.reason
    assert store.failures[t.key] == {"kind": "failed", "reason": t.reason, "cause": "environment"}


def test_a_failure_from_the_environment_is_measured_again_on_the_next_run(tmp_path):
    """Issue 38: the server died (killed twice) under one config; the rerun on a healthy host measures it again
    instead of replaying "failed twice" from the checkpoint, and reuses the points kept from before the failure."""
    two = Candidate("onnx", instances=2, threads=1, max_batch_size=8)
    first, _, store = run(tmp_path, FlakyFake(two.key, fails=2, after=1))
    t = trial(first, instances=2, threads=1)
    assert t.status == "failed" and "the server died" in t.reason
    kept = [(k.split(":", 1)[1], p.concurrency, p.sample) for k, p in store.points.items() if two.key in k]
    assert len(kept) == 1, "the point measured before the server died is kept"
    said = []
    again, healthy, store2 = run(tmp_path, FakeMeasurer(), store=SearchStore(tmp_path, {"model": "toy"}).open(),
                                 log=said.append)
    t2 = trial(again, instances=2, threads=1)
    assert t2.status == "measured" and "from the checkpoint" not in t2.reason
    assert two.key in healthy.loads and not set(kept) & set(healthy.measured), "a kept point was measured again"
    assert t.key not in store2.failures and store2.reused_failures == 0
    retried = [line for line in said if "measured again" in line]
    assert len(retried) == 1 and "came from the environment" in retried[0] and "the server died" in retried[0]
    assert "\n" not in retried[0]


def test_an_old_checkpoints_server_death_is_retried_and_its_own_failure_replayed(tmp_path):
    """A checkpoint written before causes were stored: the cause is read from the recorded reason."""
    import json

    two = Candidate("onnx", instances=2, threads=1, max_batch_size=8)
    one = Candidate("onnx", instances=1, threads=1, max_batch_size=8)
    first, _, store = run(tmp_path, FakeMeasurer(refuse={one.key}))
    doc = json.loads(store.path.read_text())
    refused = trial(first, instances=1, threads=1).key
    doc["failures"] = {trial(first, instances=2, threads=1).key: {"kind": "failed", "reason": "failed twice: the "
                                                                  "server died at concurrency 4: killed"},
                       refused: {k: v for k, v in doc["failures"][refused].items() if k != "cause"}}
    store.path.write_text(json.dumps(doc))
    again, fake, _ = run(tmp_path, FakeMeasurer(), store=SearchStore(tmp_path, {"model": "toy"}).open())
    assert trial(again, instances=2, threads=1).status == "measured"
    own = trial(again, instances=1, threads=1)
    assert own.status == "refused" and "from the checkpoint" in own.reason and one.key not in fake.loads


@pytest.mark.parametrize("reason, cause", [
    ("failed twice: the server died at concurrency 4: perf_analyzer lost the connection", "environment"),
    ("failed twice: perf_analyzer failed at concurrency 2: [Errno 28] No space left on device", "environment"),
    ("the server refused it: failed to bind port 8001: address already in use", "environment"),
    ("the server refused it: failed to load 'toy__x': out of memory (from the server log)", "config"),
    ("the server refused it: build_config: unsupported preferred batch size 16", "config"),
    ("failed twice: perf_analyzer failed at concurrency 2: model returned an error: SCALE must be 3", "config"),
])
def test_the_cause_of_a_failure_is_read_from_how_it_is_recorded(reason, cause):
    from deployment_toolkit.search.store import failure_cause

    assert failure_cause(reason) == cause


def test_latency_objective_picks_the_lowest_p99_at_one_request(tmp_path):
    outcome, fake, _ = run(tmp_path, objective="latency")
    assert {c for _, c, _ in fake.measured} == {1}
    w = outcome.decision.winner
    assert w.candidate.threads_used(CORES) == CORES  # all cores on one request (default or 2 threads)
    assert any("latency objective" in n for n in outcome.notes)


class LaterSamples(FakeMeasurer):
    """Every sample after a level's first has `field` scaled by `factor` (the host changed after the sweep)."""

    def __init__(self, field, factor, **kw):
        super().__init__(**kw)
        self.field, self.factor = field, factor

    def measure(self, cand, c, sample, key):
        p = super().measure(cand, c, sample, key)
        if sample > 0:
            setattr(p, self.field, getattr(p, self.field) * self.factor)
        return p


def DriftingFake():
    """The host gets busier after the sweep: repeated samples have a 60% higher p99."""
    return LaterSamples("p99_ms", 1.6)


def test_a_finalist_over_budget_when_remeasured_steps_down_a_level(tmp_path):
    outcome, fake, _ = run(tmp_path, DriftingFake(), budget=500.0, noise_repeats=0)
    d = outcome.decision
    assert d.winner is not None and d.winner.confirmation.p99.median <= 500.0
    levels = {}
    for key, c, s in fake.measured:
        if s > 0:
            levels.setdefault(key, set()).add(c)
    assert any(len(v) > 1 for v in levels.values()), levels  # re-measured at a lower level after going over



class OneBadSampleFake(FakeMeasurer):
    """The third sample of every level has a 60% higher p99: the median stays where it was."""

    def measure(self, cand, c, sample, key):
        p = super().measure(cand, c, sample, key)
        if sample == 2:
            p.p99_ms *= 1.6
        return p


def test_a_finalist_over_budget_in_one_remeasurement_of_three_steps_down(tmp_path):
    outcome, fake, _ = run(tmp_path, OneBadSampleFake(), budget=500.0)
    d = outcome.decision
    assert d.winner is not None and d.winner.confirmation.p99.high <= 500.0, d.winner.confirmation
    stepped = {key for key, c, s in fake.measured if s == 2 and c < max(cc for k, cc, _ in fake.measured if k == key)}
    assert stepped, "no finalist was re-measured below its first level"


def test_no_step_down_when_the_time_limit_has_no_room_for_it(tmp_path, monkeypatch):
    import deployment_toolkit.search.engine as engine

    clock = {"t": 0.0}

    class SlowOneBad(OneBadSampleFake):
        def measure(self, cand, c, sample, key):
            clock["t"] += 20.0
            return super().measure(cand, c, sample, key)

    monkeypatch.setattr(engine.time, "monotonic", lambda: clock["t"])
    outcome, fake, _ = run(tmp_path, SlowOneBad(), budget=500.0, max_minutes=3)
    assert clock["t"] <= 180.0
    assert outcome.decision.winner is not None

def test_an_unavailable_format_is_listed_with_its_reason(tmp_path):
    store = SearchStore(tmp_path, {"model": "toy"}).open()
    infos = [FormatInfo("trt", error="format unavailable on this host: no GPU"),
             FormatInfo("onnx", manifest(), Path("."), "abc123")]
    settings = SearchSettings(budget_ms=500.0, cores=CORES, objective="closed-loop")
    outcome = Search(infos, FakeMeasurer(), store, settings, progress=False, log=lambda m: None).run()
    trt = trial(outcome, format="trt")
    assert trt.verdict == "unavailable" and "no GPU" in trt.detail
    assert outcome.decision.winner.candidate.format == "onnx"


# ---- a recommendation that holds its budget (issue 22) ---------------------------------------------

class NoisyP99Fake(FakeMeasurer):
    """p99 varies by up to +-`spread` between measurements of the same level (seeded: a given seed, config,
    level and sample always give the same figure), like a busy host's tail; throughput by a third of that."""

    def __init__(self, seed: int, spread: float = 0.15, **kw):
        super().__init__(**kw)
        self.seed, self.spread = seed, spread

    def _u(self, *parts) -> float:
        h = hashlib.sha1("/".join(map(str, (self.seed, *parts))).encode()).hexdigest()
        return int(h[:8], 16) / 0xFFFFFFFF * 2 - 1  # -1..1

    def measure(self, cand, c, sample, key):
        p = super().measure(cand, c, sample, key)
        p.p99_ms *= 1 + self.spread * self._u(cand.key, c, sample, "p99")
        p.throughput *= 1 + self.spread / 3 * self._u(cand.key, c, sample, "thr")
        return p


def _remeasure(fake: NoisyP99Fake, trial, rounds: int = 3) -> list[float]:
    """The winner measured again after the search, as the Model Analyzer head-to-head does: new samples."""
    fake.loaded.add(trial.candidate)
    return [fake.measure(trial.candidate, trial.confirmation.concurrency, 1000 + r, "after").p99_ms
            for r in range(rounds)]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("budget", [200.0, 300.0])
def test_a_noisy_p99_near_the_budget_never_yields_a_pick_that_breaks_it_when_remeasured(tmp_path, seed, budget):
    """The default's p99 is 48 ms x (clients + 0.3), so one more client adds 10-25% near these budgets, and
    every measurement varies by up to 15%. Whatever the seed, the named level holds the budget in 3 more
    measurements of it. (With the median alone judged against the budget, 2 of these 16 break.)"""
    fake = NoisyP99Fake(seed)
    outcome, fake, _ = run(tmp_path, fake, budget=budget)
    d = outcome.decision
    assert d.winner is not None, d.message
    after = _remeasure(fake, d.winner)
    assert max(after) <= budget, (d.winner.candidate.slug, d.winner.confirmation, after, outcome.noise)


def test_a_single_sample_under_the_budget_by_less_than_the_noise_is_not_within_it():
    from deployment_toolkit.search.stats import holds_budget

    assert not holds_budget([43.2], 50.0, 0.171)  # the failure of issue 22: 43.2 ms, 17.1% noise, 50 ms
    assert holds_budget([42.0], 50.0, 0.171)
    assert not holds_budget([40.0, 41.0, 50.5], 50.0, 0.02), "a sample over the budget"
    assert not holds_budget([44.0, 45.0, 46.0], 50.0, 0.171), "the median without room for the noise"


def test_the_final_remeasurement_is_reserved_and_never_squeezed_out_by_the_time_limit(tmp_path, monkeypatch):
    """Points take 20 s and the limit is 4 min: the exploration stops early enough that every finalist gets
    its fresh samples (and a step down fits) inside the limit."""
    import deployment_toolkit.search.engine as engine

    clock = {"t": 0.0}

    class Slow(FakeMeasurer):  # the last fresh sample of the first final level 60% higher: it must step down
        def measure(self, cand, c, sample, key):
            clock["t"] += 20.0
            p = super().measure(cand, c, sample, key)
            if sample == FINAL_SAMPLE + 2 and not any(s >= FINAL_SAMPLE and k == cand.key and cc != c
                                                      for k, cc, s in self.measured):
                p.p99_ms *= 1.6
            return p

    monkeypatch.setattr(engine.time, "monotonic", lambda: clock["t"])
    outcome, fake, _ = run(tmp_path, Slow(), budget=500.0, max_minutes=4)
    assert clock["t"] <= 240.0, f"the search took {clock['t']:.0f} s of a 240 s limit"
    assert outcome.stopped.startswith("--max-minutes 4")
    finals = [(k, c) for k, c, s in fake.measured if s >= FINAL_SAMPLE]
    d = outcome.decision
    assert d.winner is not None and d.winner.confirmation.holds, d.message
    # the default was re-measured with 3 fresh samples at a level, then stepped down and measured 3 more times
    assert len({c for k, c in finals if k == d.default.candidate.key}) == 2, finals
    assert d.winner.confirmation.p99.high <= 500.0


def test_a_finalist_that_breaks_the_budget_is_not_named_when_no_step_down_fits(tmp_path):
    """Level 1 cannot step down: a finalist over the budget there is not named, whatever else."""
    over_at_final = lambda cand, c: (10.0, 400.0)  # noqa: E731

    class BreaksWhenRemeasured(FakeMeasurer):
        def measure(self, cand, c, sample, key):
            p = super().measure(cand, c, sample, key)
            if sample >= FINAL_SAMPLE:
                p.p99_ms = 520.0
            return p

    outcome, _, _ = run(tmp_path, BreaksWhenRemeasured(perf=over_at_final), budget=500.0, objective="latency")
    assert outcome.decision.winner is None
    assert "held p99 <= 500 ms when re-measured" in outcome.decision.message


def test_no_level_with_room_for_the_noise_is_named_as_such(tmp_path):
    """p99 within the budget, but a host so noisy that the next measurement may put it over: no pick, and
    the message says that the noise, not the model, is the problem."""
    class Noisy(FakeMeasurer):
        def measure(self, cand, c, sample, key):
            p = super().measure(cand, c, sample, key)
            p.p99_ms *= (1.0, 3.0, 1.5)[sample % 3]
            return p

    outcome, _, _ = run(tmp_path, Noisy(perf=lambda cand, c: (10.0 * c, 40.0 * c)), budget=50.0)
    d = outcome.decision
    assert d.winner is None
    assert "no configuration holds p99 <= 50 ms with room for the p99 noise measured on this host (133%)" \
        in d.message, d.message
    assert "Run on a quiet host" in d.message


def test_the_baselines_knee_is_narrowed_again_once_the_p99_noise_is_known(tmp_path):
    """p99 = 40 ms x clients, budget 500 ms: the sweep (2% noise floor) ends at the knee 12..13. The repeated
    samples at 12 then vary by 18%, so 12 no longer holds: the knee is narrowed again below it, to 10..11."""
    class Repeats(FakeMeasurer):
        def measure(self, cand, c, sample, key):
            p = super().measure(cand, c, sample, key)
            p.p99_ms *= (1.0, 1.2, 1.1)[sample % 3]
            return p

    outcome, fake, _ = run(tmp_path, Repeats(perf=lambda cand, c: (10.0 * c, 40.0 * c)), budget=500.0,
                           max_configs=1)
    base = outcome.decision.default
    assert [c for k, c, s in fake.measured if s == 0 and k == base.candidate.key] == [1, 2, 4, 8, 12, 13, 9, 10, 11]
    assert "knee at 10..11" in base.sweep.stop_reason
    w = outcome.decision.winner
    assert w is base and w.confirmation.holds and w.confirmation.concurrency <= 10


def _clocked(monkeypatch, seconds_per_point: float):
    """A fake whose every point takes `seconds_per_point` of a fake clock that the engine reads."""
    import deployment_toolkit.search.engine as engine

    clock = {"t": 0.0}

    class Clocked(FakeMeasurer):
        def measure(self, cand, c, sample, key):
            clock["t"] += seconds_per_point
            return super().measure(cand, c, sample, key)

    monkeypatch.setattr(engine.time, "monotonic", lambda: clock["t"])
    return clock, Clocked


def test_a_short_limit_on_a_fast_model_still_climbs_the_baseline_to_its_knee(tmp_path, monkeypatch):
    """Issue 22's resnet18 run: a limit of about 15 points, a knee far above concurrency 1. Holding the
    step-down of the final re-measurement back from the start stopped the baseline at concurrency 1 (a third
    less throughput than the knee); a level far under the budget cannot need a step-down, so the baseline
    climbs, and the final re-measurement still fits inside the limit."""
    clock, Clocked = _clocked(monkeypatch, 5.0)
    # resnet18 small on the 2-core host: 330 inf/s and p99 6 ms at 1 client, 450 inf/s and 27 ms at 8
    fast = lambda cand, c: (480.0 * c / (c + 0.45), 3.0 * (c + 1.0))  # noqa: E731
    outcome, fake, _ = run(tmp_path, Clocked(perf=fast), budget=50.0, max_minutes=0.9)
    assert clock["t"] <= 54.0, f"the search took {clock['t']:.0f} s of a 54 s limit"
    w = outcome.decision.winner
    assert w is not None and w.confirmation is not None and w.confirmation.holds, outcome.decision.message
    assert w.confirmation.concurrency >= 8, (w.confirmation.concurrency, w.sweep.stop_reason)
    assert w.confirmation.throughput.median >= 1.3 * fast(None, 1)[0]


def test_the_step_down_is_still_reserved_near_the_budget(tmp_path, monkeypatch):
    """The same limit, a model whose first level already sits near the budget: the reserve keeps the
    step-down, so a finalist that breaks the budget when re-measured steps down inside the limit."""
    clock, Clocked = _clocked(monkeypatch, 5.0)

    class BreaksOnce(Clocked):
        def measure(self, cand, c, sample, key):
            p = super().measure(cand, c, sample, key)
            if sample == FINAL_SAMPLE and not any(s >= FINAL_SAMPLE and cc != c for _, cc, s in self.measured):
                p.p99_ms = 55.0  # the first fresh sample at the first final level is over the budget
            return p

    near = lambda cand, c: (100.0 * c / (c + 0.3), 9.0 * c + 12.0)  # noqa: E731
    outcome, fake, _ = run(tmp_path, BreaksOnce(perf=near), budget=50.0, max_minutes=0.9)
    assert clock["t"] <= 54.0, f"the search took {clock['t']:.0f} s of a 54 s limit"
    d = outcome.decision
    assert d.winner is not None and d.winner.confirmation.holds, d.message
    finals = {c for _, c, s in fake.measured if s >= FINAL_SAMPLE}
    assert len(finals) == 2, finals  # stepped down once, inside the limit


def _slow_finals_over_the_budget_once(monkeypatch, final_sample_s: float):
    """A clocked fake (5 s a sweep point) whose fresh samples of the final re-measurement take `final_sample_s`,
    more than the reserve was sized from, and are over the budget at the first final level."""
    clock, Clocked = _clocked(monkeypatch, 5.0)

    class SlowFinalsBreakOnce(Clocked):
        def measure(self, cand, c, sample, key):
            p = super().measure(cand, c, sample, key)
            if sample >= FINAL_SAMPLE:
                clock["t"] += final_sample_s - 5.0
                if not any(s >= FINAL_SAMPLE and cc != c for _, cc, s in self.measured):
                    p.p99_ms = 55.0  # over the budget at the first final level
            return p

    return clock, SlowFinalsBreakOnce


def test_a_search_that_finishes_past_its_limit_says_why(tmp_path, monkeypatch):
    """issue 22's resnet50 rerun: the finalist stepped down in the final re-measurement, and the search finished
    past --max-minutes with nothing in its notes to say so; the comparison's time target was missed unexplained."""
    clock, SlowFinalsBreakOnce = _slow_finals_over_the_budget_once(monkeypatch, 15.0)
    near = lambda cand, c: (100.0 * c / (c + 0.3), 9.0 * c + 12.0)  # noqa: E731
    outcome, fake, _ = run(tmp_path, SlowFinalsBreakOnce(perf=near), budget=50.0, max_minutes=1.75, max_configs=1)
    assert outcome.decision.winner is not None and clock["t"] > 105.0, (clock["t"], outcome.decision.message)
    (note,) = [n for n in outcome.notes if "past --max-minutes" in n]
    finals = sorted({c for _, c, s in fake.measured if s >= FINAL_SAMPLE}, reverse=True)
    assert note.startswith(f"finished {clock['t'] - 105.0:.0f} s past --max-minutes 1.75: the final re-measurement "
                           f"and its step-down(s) (") and f" {finals[0]} -> {finals[1]})" in note, note


def test_a_search_whose_finalists_all_break_steps_down_past_the_limit_rather_than_name_nothing(tmp_path,
                                                                                                monkeypatch):
    """The CI failure of the worked example: the fresh samples took longer than the sweep's points, so no time
    was left to step down, and the only finalist, over the budget at its level, left no recommendation. With no
    finalist holding, the best one steps down past the limit, and the notes say so."""
    clock, SlowFinalsBreakOnce = _slow_finals_over_the_budget_once(monkeypatch, 30.0)
    near = lambda cand, c: (100.0 * c / (c + 0.3), 9.0 * c + 12.0)  # noqa: E731
    outcome, fake, _ = run(tmp_path, SlowFinalsBreakOnce(perf=near), budget=50.0, max_minutes=0.9, max_configs=1)
    d = outcome.decision
    assert d.winner is not None and d.winner.confirmation.holds, d.message
    finals = sorted({c for _, c, s in fake.measured if s >= FINAL_SAMPLE}, reverse=True)
    assert len(finals) == 2 and d.winner.confirmation.concurrency == finals[1], finals
    assert clock["t"] > 54.0, "the step-down ran past the limit (the case under test)"
    assert any("stepped down 1 time(s) past the limit" in n for n in outcome.notes), outcome.notes


# ---- --objective capacity: the finalists ranked by open-loop capacity --------------------------------------

def open_loop_model(closed_loop_share: dict[str, float]):
    """An open-loop replica: capacity = closed-loop capacity x a per-config share (bursts queue more in some
    configs than others), p99 rising as the offered rate nears it (M/M/1-like)."""
    from deployment_toolkit.perf.openloop.ratepoint import RatePoint
    from deployment_toolkit.perf.openloop.ratestore import RateKey

    def rate_point(cand, rate, trial, key):
        thr, p99_1 = cpu_model(cand, 1)
        cap = cpu_model(cand, 64)[0] * closed_loop_share.get(cand.key, 0.6)
        rho = rate / cap
        answered = min(rate, cap * 0.99)
        p99 = p99_1 * (1.0 + 4.0 * rho / max(1e-3, 1.0 - rho)) if rho < 1 else 10_000.0
        row = {"answered": answered, "p99_ms": p99, "queue_growing": rho >= 1, "client_limited": False,
               "stable": True, "send_rate": rate}
        return RatePoint(RateKey(key, "poisson", rate, 1, "{}", trial), row)

    return rate_point


class OpenLoopFake(FakeMeasurer):
    def __init__(self, share, **kw):
        super().__init__(**kw)
        self._rate = open_loop_model(share)
        self.rates: list[tuple[str, float, int]] = []

    def rate_point(self, cand, rate, trial, key):
        assert cand in self.loaded, "an open-loop rate on a config that is not loaded"
        self.rates.append((cand.key, rate, trial))
        return self._rate(cand, rate, trial, key)


def test_capacity_ranks_the_finalists_by_open_loop_capacity(tmp_path):
    """The closed-loop best loses once open-loop capacity is measured: the ranking follows the traffic the plan
    gets, the searches are taken in turns, and every finalist gets its capacity with a spread."""
    closed, _, _ = run(tmp_path / "closed")
    closed_top = closed.decision.winner
    share = {closed_top.candidate.key: 0.3}  # the closed-loop winner queues badly under Poisson arrivals
    outcome, fake, _ = run(tmp_path / "open", measurer=OpenLoopFake(share), objective="capacity", capacity_trials=2)
    winner = outcome.decision.winner
    assert winner is not None and winner.candidate != closed_top.candidate
    assert winner.capacity.spread.median > closed_top.capacity.spread.median if closed_top.capacity else True
    measured = [t for t in outcome.trials if t.capacity is not None]
    assert 2 <= len(measured) <= 4 and all(t.capacity.result.trials for t in measured)
    order = [(k, n) for k, _, n in fake.rates]
    first_of_trial_2 = next(i for i, (_, n) in enumerate(order) if n == 2)
    assert {k for k, n in order[:first_of_trial_2]} == {t.candidate.key for t in measured}, "in turns"
    assert "open-loop" in outcome.decision.message or "open loop" in outcome.decision.message


def test_a_coarser_capacity_resolution_measures_fewer_rates_and_widens_the_headroom(tmp_path):
    """--capacity-resolution reaches every open-loop search: its bisection stops at that bracket, and the capacity's
    headroom (what a plan adds on top of the peak) is never narrower than it."""
    share = {}
    fine, fine_fake, _ = run(tmp_path / "fine", measurer=OpenLoopFake(share), objective="capacity",
                             capacity_trials=1)
    coarse, coarse_fake, _ = run(tmp_path / "coarse", measurer=OpenLoopFake(share), objective="capacity",
                                 capacity_trials=1, capacity_resolution=0.25)
    fine_caps = [t.capacity.result for t in fine.trials if t.capacity is not None]
    coarse_caps = [t.capacity.result for t in coarse.trials if t.capacity is not None]
    assert fine_caps and coarse_caps
    assert {s.resolution for c in fine_caps for s in c.trials} == {0.05}
    assert {s.resolution for c in coarse_caps for s in c.trials} == {0.25}
    assert all(c.headroom >= 0.25 for c in coarse_caps)
    assert len(coarse_fake.rates) < len(fine_fake.rates)


def test_capacity_with_a_budget_no_rate_meets_names_the_closest(tmp_path):
    outcome, _, _ = run(tmp_path, measurer=OpenLoopFake({}, perf=lambda c, n: (100.0, 30.0 + n)), budget=40.0,
                        objective="capacity", capacity_trials=1)
    assert outcome.decision.winner is None
    assert "no configuration sustains an open-loop rate with p99 <= 40 ms: the closest" in outcome.decision.message


def test_capacity_needs_a_measurer_of_rates(tmp_path):
    from deployment_toolkit.search import SearchError

    with pytest.raises(SearchError, match="open-loop rates"):
        run(tmp_path, objective="capacity")


def test_capacity_stage_is_planned_within_half_the_limit_and_keeps_at_least_one_search():
    """Issue 28: the capacity stage's reserve was every trial of every finalist up front (6 min of an 8-min plan,
    4 of 15 configs explored); now it is planned within CAPACITY_SHARE of --max-minutes, trials dropped first, never
    below one search per config, and all of them without a limit."""
    from deployment_toolkit.search import capacity
    from deployment_toolkit.search.clock import SearchClock
    from deployment_toolkit.search.trials import SearchSettings

    def clock(minutes, rate_s=8.0):
        c = SearchClock(SearchSettings(budget_ms=50, max_minutes=minutes, capacity_trials=3, rate_point_s=rate_s))
        c.start()
        return c

    assert capacity.planned_trials(clock(None), 4) == 3
    assert capacity.planned_trials(clock(60), 4) == 3  # 4 x 3 x 6 x 8 s = 9.6 min, within 30
    assert capacity.planned_trials(clock(8), 4) == 1  # 4 x 6 x 8 s = 3.2 min of 4: one search each
    assert capacity.reserve_s(clock(8), 4) == 4 * capacity.POINTS_PER_SEARCH * 8.0
    assert capacity.planned_trials(clock(2), 4) == 1  # even one does not fit in half: still one, never zero
    measured = clock(8)
    measured.record_rate(2.0)  # a measured rate replaces the estimate
    assert capacity.planned_trials(measured, 4) == 3


def test_a_rate_is_estimated_from_the_closed_loop_points_and_searches_shrink_to_fit_the_limit():
    """Issue 28: on resnet50 full a rate took ~8 s where the estimate said 7 and the searches took 7-8 rates, so the
    capacity stage ran 0.9 min past --max-minutes. Before any rate is measured, a rate costs at least what a
    closed-loop point cost; a search that would not fit gets fewer rates (never fewer than MIN_POINTS)."""
    from deployment_toolkit.search import capacity
    from deployment_toolkit.search.clock import SearchClock
    from deployment_toolkit.search.trials import SearchSettings

    clock = SearchClock(SearchSettings(budget_ms=500, max_minutes=10, rate_point_s=7.0))
    clock.start()
    assert clock.rate_point_s() == 7.0
    clock.record(12.0)  # a slow model's closed-loop point
    assert clock.rate_point_s() == 12.0
    clock.record_rate(9.0)  # measured rates win
    assert clock.rate_point_s() == 9.0
    assert capacity.points_that_fit(clock, 4) == capacity.MAX_POINTS  # 600 s left, 4 x 9 s a rate
    clock.started -= 600 - 4 * 5 * 9.0 - 1  # 4 searches of 5 rates left in the limit
    assert capacity.points_that_fit(clock, 4) == 5
    clock.started -= 1000
    assert capacity.points_that_fit(clock, 4) == capacity.MIN_POINTS
    unlimited = SearchClock(SearchSettings(budget_ms=500, max_minutes=None))
    unlimited.start()
    assert capacity.points_that_fit(unlimited, 4) == capacity.MAX_POINTS


def test_a_short_limit_takes_fewer_finalists_into_the_capacity_stage():
    """Issue 28: three challengers and the default at one search each cost 4 x 7 rates; where that exceeds half of
    --max-minutes, fewer challengers go to the capacity stage (at least one) and the exploration keeps its time."""
    from deployment_toolkit.search import capacity
    from deployment_toolkit.search.clock import SearchClock
    from deployment_toolkit.search.trials import SearchSettings

    def clock(minutes, rate_s):
        c = SearchClock(SearchSettings(budget_ms=500, max_minutes=minutes, rate_point_s=rate_s))
        c.start()
        return c

    assert capacity.planned_finalists(clock(None, 8.0)) == capacity.CAPACITY_FINALISTS
    assert capacity.planned_finalists(clock(8, 8.0)) == 3  # 240 s of share, 56 s a search: 4 fit
    assert capacity.planned_finalists(clock(6.5, 10.0)) == 1  # 195 s, 70 s a search: the best and the default
    assert capacity.planned_finalists(clock(1, 10.0)) == 1


def test_the_rates_windows_are_counted_once_the_default_throughput_is_known():
    """efficientnet_b0 here (about 60 inf/s, 2026-11-25): rates sized to the rate take 1-s windows (100 requests
    need more than a second), so counting them at the shortest window (3.5 s a rate) put its capacity stage 0.2 min
    past the limit. Once the default's closed-loop throughput is known the window follows from the seed rate."""
    from deployment_toolkit.search import capacity
    from deployment_toolkit.search.clock import SearchClock
    from deployment_toolkit.search.trials import SearchSettings

    def _point(throughput: float) -> Point:
        return Point("default", 2, 0, throughput, 46.8)

    auto = SearchSettings(budget_ms=150, max_minutes=2.31, rate_point_s=capacity.rate_point_estimate(None))
    clock = SearchClock(auto)
    clock.record(3.0)  # a closed-loop point
    assert clock.rate_point_s() == 3.5
    capacity.expect_rates(clock, None)  # the default not measured yet
    assert clock.rate_point_s() == 3.5
    capacity.expect_rates(clock, _point(63.8))  # seed 51 requests/s: a 1-s window
    assert clock.rate_point_s() == capacity.rate_point_estimate(1000) == 7.0
    capacity.expect_rates(clock, _point(600.0))  # a fast model: 300-ms windows
    assert clock.rate_point_s() == 3.5
    fixed = SearchClock(SearchSettings(budget_ms=150, rate_point_s=4.5, open_loop_window_ms=500))
    capacity.expect_rates(fixed, _point(63.8))  # an asked-for window is the window
    assert fixed.rate_point_s() == 4.5
    fixed.record_rate(6.0)  # measured rates win
    assert fixed.rate_point_s() == 6.0
