"""The deployment-vs-Model-Analyzer report from typed results: every run's answer (a refusal as Model Analyzer said
it), each side's configs, each side laid out as it deploys (ours: the plan's groups; Model Analyzer's: every model on
every replica), p99 per round against each SLO, each group's mix capacity, the fleet's replicas and cost."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from deployment_toolkit.deployment.mixed import MixPoint
from deployment_toolkit_lab.versus.deployment import (DeploymentVersus, Judged, MARun, Side, VersusSettings, describe,
                                                      layouts, replicas_for)
from deployment_toolkit_lab.versus.deployment_report import versus_markdown
from deployment_toolkit_lab.versus.model_analyzer import MAPoint, MAResult, MARunConfig
from deployment_toolkit.steps import StepRunner


class Point:
    def __init__(self, p99: float):
        self.p99 = p99

    def passes(self, slo: float) -> bool:
        return self.p99 <= slo


def _plan():
    entry = lambda model, peak, slo: SimpleNamespace(model=model, peak_rps=peak, p99_ms=slo)  # noqa: E731
    models = {"classifier": SimpleNamespace(entry=entry("timm:resnet18", 40, 250), pipeline=object(), capacity=30.0),
              "mobile": SimpleNamespace(entry=entry("mobilenetv3_large_100", 30, 250), pipeline=None, capacity=60.0)}
    groups = (SimpleNamespace(models=("classifier",), replicas=2, rates={"classifier": 24.0}),
              SimpleNamespace(models=("mobile",), replicas=1, rates={"mobile": 36.0}))
    return SimpleNamespace(deployment=SimpleNamespace(name="shop", source=None), models=models, headroom=0.2,
                           price_per_replica=0.4, groups=groups, replicas=3, measured={})


def _mix(p99s: dict[str, float]) -> MixPoint:
    return MixPoint(84.0, {n: Point(v) for n, v in p99s.items()}, {"classifier": 250.0, "mobile": 250.0})


def test_the_report_says_each_runs_answer_and_judges_both_sides(tmp_path: Path):
    refused = MAResult(ran=True, wall_s=8.3, returncode=1,
                       error="Profiling of multiple models is not supported for ensemble models")
    ensemble = MAResult(ran=True, wall_s=205.0, returncode=0)
    pick = MARunConfig("classifier_pipeline_config_default",
                       {"classifier_pipeline": MAPoint(420.5, 28.0, 8)}, {})
    ensemble.run_configs = [pick]
    runs = [MARun("ensemble profiling of classifier_pipeline", ensemble, {"classifier_pipeline": 250.0}, pick),
            MARun("concurrent quick search of classifier_pipeline + mobile", refused, {})]
    plan = _plan()
    ours = Side("plan --deployment", tmp_path, {"classifier": "2 x CPU, max batch 8"}, [
        Judged(("classifier",), 2, {"classifier": 24.0}, 30.0, [_mix({"classifier": 40.0})] * 3, [30.0, 31.0, 29.0]),
        Judged(("mobile",), 1, {"mobile": 36.0}, 60.0, [_mix({"mobile": 30.0})] * 3, [60.0, 62.0, 58.0])])
    theirs = Side("Model Analyzer", tmp_path, {"classifier": "1 x CPU, max batch 8"}, [
        Judged(("classifier", "mobile"), 3, {"classifier": 16.0, "mobile": 12.0}, 40.0,
               [_mix({"classifier": 400.0, "mobile": 30.0})] * 3, [15.0, 14.0, 16.0])])
    versus = DeploymentVersus(plan, VersusSettings(rounds=3), tmp_path, ma_runs=runs, sides=[ours, theirs],
                              replicas=3, steps=StepRunner(tmp_path))
    for side in versus.sides:
        side.replicas = replicas_for(versus, side)
    assert (ours.replicas, theirs.replicas) == (2 + 1, 6)  # 48/30 -> 2, 36/60 -> 1; (48 + 36)/15 -> 6
    text = " ".join(versus_markdown(versus).split())  # table cells without their padding
    assert "Profiling of multiple models is not supported for ensemble models" in text
    assert "its pick classifier_pipeline_config_default: classifier_pipeline 420.5 inf/s p99 28.0 ms" in text
    assert "| plan --deployment | classifier (2) | classifier | 24.0 | 40.0, 40.0, 40.0 | 250 | 3 of 3 |" in text
    assert "| Model Analyzer | classifier + mobile (3) | classifier | 16.0 | 400.0, 400.0, 400.0 | 250 | 0 of 3 |" in text
    assert "| plan --deployment | mobile | 60.0, 62.0, 58.0 | 60.0 | 1 | |" in text
    assert "| Model Analyzer | classifier + mobile | 15.0, 14.0, 16.0 | 15.0 | 6 | |" in text
    assert "| plan --deployment | 3 | 1.20 | 6 of 6 |" in text and "| Model Analyzer | 6 | 2.40 | 3 of 6 |" in text
    assert "plan --deployment 3 replica(s), Model Analyzer 6 (2.00x ours)" in text
    assert "Both sides serve the same configs" not in text
    theirs.configs = dict(ours.configs)
    assert "Both sides serve the same configs" in versus_markdown(versus)


def test_a_served_config_is_described_in_a_few_words(tmp_path: Path):
    path = tmp_path / "config.pbtxt"
    path.write_text('name: "m"\nmax_batch_size: 8\ninstance_group { count: 2 kind: KIND_CPU }\n'
                    'dynamic_batching { max_queue_delay_microseconds: 500 }\n')
    assert describe(path) == "2 x CPU, max batch 8, dynamic batching (delay 500 us)"
    threaded = tmp_path / "threaded.pbtxt"  # the plan's classifier in the three-replica comparison: 2 threads
    threaded.write_text(path.read_text() + 'parameters { key: "intra_op_threads" value { string_value: "2" } }\n')
    assert describe(threaded) == "2 x CPU, 2 intra-op threads, max batch 8, dynamic batching (delay 500 us)"
    assert describe(threaded) != describe(path)  # not "the same configs" when only the threads differ
    one = tmp_path / "one.pbtxt"
    one.write_text(path.read_text() + 'parameters { key: "intra_op_thread_count" value { string_value: "1" } }\n')
    assert describe(one) == "2 x CPU, 1 intra-op thread, max batch 8, dynamic batching (delay 500 us)"


def test_each_side_is_laid_out_as_it_deploys_on_a_fleet_of_our_plans_size():
    """Ours: the plan's groups at the rates their confirmations drove; Model Analyzer's: every model on every one of
    the plan's replicas, each at its peak with the headroom over them."""
    ours, theirs = layouts(_plan())
    assert [(g.models, g.replicas, g.rates) for g in ours] == [(("classifier",), 2, {"classifier": 24.0}),
                                                                (("mobile",), 1, {"mobile": 36.0})]
    assert [(g.models, g.replicas) for g in theirs] == [(("classifier", "mobile"), 3)]
    assert theirs[0].rates == {"classifier": 40 * 1.2 / 3, "mobile": 30 * 1.2 / 3}
    assert [g.seed for g in ours] == [30.0, 60.0]  # each alone: its capacity held
    assert round(theirs[0].seed, 6) == round(1 / (40 / 70 / 30 + 30 / 70 / 60), 6)  # time sharing of the two
