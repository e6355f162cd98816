"""The deployment-vs-Model-Analyzer report from typed results: every run's answer (a refusal as Model Analyzer said
it), each side's configs, p99 per round against each SLO, mix capacity, replicas and cost."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from deployment_toolkit.deployment.mixed import MixPoint
from deployment_toolkit_lab.versus.deployment import MARun, Side, VersusSettings, DeploymentVersus, describe
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
    models = {"classifier": SimpleNamespace(entry=entry("timm:resnet18", 40, 250), pipeline=object()),
              "mobile": SimpleNamespace(entry=entry("mobilenetv3_large_100", 30, 250), pipeline=None)}
    groups = (SimpleNamespace(models=("classifier", "mobile"), replicas=1),)
    return SimpleNamespace(deployment=SimpleNamespace(name="shop", source=None), models=models, headroom=0.2,
                           price_per_replica=0.4, groups=groups, replicas=1)


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
    ours = Side("plan --deployment", tmp_path, {"classifier": "2 x CPU, max batch 8"},
                [_mix({"classifier": 40.0, "mobile": 30.0})] * 3, [300.0, 310.0, 290.0], replicas=1)
    theirs = Side("Model Analyzer", tmp_path, {"classifier": "1 x CPU, max batch 8"},
                  [_mix({"classifier": 400.0, "mobile": 30.0})] * 3, [150.0, 140.0, 160.0], replicas=2)
    versus = DeploymentVersus(_plan(), VersusSettings(rounds=3), tmp_path, ma_runs=runs, sides=[ours, theirs],
                              rates={"classifier": 48.0, "mobile": 36.0}, replicas=1, steps=StepRunner(tmp_path))
    text = " ".join(versus_markdown(versus).split())  # table cells without their padding
    assert "Profiling of multiple models is not supported for ensemble models" in text
    assert "its pick classifier_pipeline_config_default: classifier_pipeline 420.5 inf/s p99 28.0 ms" in text
    assert "| plan --deployment | classifier | 40.0, 40.0, 40.0 | 250 | 3 of 3 |" in text
    assert "| Model Analyzer | classifier | 400.0, 400.0, 400.0 | 250 | 0 of 3 |" in text
    assert "plan --deployment / Model Analyzer, median mix capacity: 2.00x" in text
    assert "| plan --deployment | 300.0, 310.0, 290.0 | 300.0 | 1 | 0.40 |" in text
    assert "| Model Analyzer | 150.0, 140.0, 160.0 | 150.0 | 2 | 0.80 |" in text  # 2 replicas at $0.40/h
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
