"""The user's metrics file (calculate_metrics.py --metrics, the DLE MetricsCalculator form), its errors, and
the --task choices for models outside the zoo (regression, generic)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from deployment_toolkit.data.dump import DumpWriter, load_dump
from deployment_toolkit.metrics import MetricsError, compute_metrics
from deployment_toolkit.metrics.user import MetricsFileError, load_metrics_file, user_metrics

ROOT = Path(__file__).resolve().parents[3]
FIXTURE_METRICS = ROOT / "tests" / "fixtures" / "user_data" / "metrics.py"


def make_dump(folder: Path, task: str | None = "classification", labels: bool = True) -> Path:
    logits = np.zeros((4, 1000), np.float32)
    logits[np.arange(4), [1, 2, 3, 4]] = 1.0
    meta = {"model": "m", **({"task": task} if task else {})}
    with DumpWriter(folder, meta) as writer:
        writer.write(np.arange(4), {"output__0": logits},
                     labels={"labels": np.array([1, 2, 0, 0])} if labels else None)
    return folder


def cli(*args):
    return subprocess.run([sys.executable, str(ROOT / "triton" / "calculate_metrics.py"), *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT)


def test_the_seed_form_runs_beside_the_built_in_metrics(tmp_path):
    dump = load_dump(make_dump(tmp_path / "d"))
    metrics = compute_metrics(dump, user_fn=load_metrics_file(FIXTURE_METRICS))
    assert metrics["fixture_top1"] == 0.5 and metrics["top1_accuracy"] == 0.5
    assert metrics["fixture_ids"] == 4 and metrics["fixture_label_sum"] == 3


def test_a_function_calc_may_take_only_what_it_uses_and_needs_no_task(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def calc(*, y_pred, ids):\n    return {'n': len(ids), 'peak': y_pred['output__0'].max()}\n")
    metrics = compute_metrics(load_dump(make_dump(tmp_path / "d", task=None)), user_fn=load_metrics_file(f))
    assert metrics == {"num_samples": 4.0, "n": 4.0, "peak": 1.0}


@pytest.mark.parametrize("body, message", [
    ("def calc(:\n", "failed to import: SyntaxError"),
    ("from triton.deployment_toolkit.core import BaseMetricsCalculator\n", "failed to import"),
    ("x = 1\n", "defines neither class MetricsCalculator"),
    ("def calc(*, ids):\n    return {'a': 1 / 0}\n", "calc raised ZeroDivisionError: division by zero (m.py:2)"),
    ("def calc(*, ids):\n    return {'a': 'high'}\n", "metric 'a' is str 'high', not a number"),
    ("def calc(*, ids):\n    return [1]\n", "returned list"),
    ("def calc(*, ids, model):\n    return {}\n", "asks for ['model']"),
    ("class MetricsCalculator:\n    def __init__(self, path):\n        pass\n", "MetricsCalculator() raised TypeError"),
])
def test_a_bad_metrics_file_is_one_line(tmp_path, body, message):
    f = tmp_path / "m.py"
    f.write_text(body)
    dump = load_dump(make_dump(tmp_path / "d"))
    with pytest.raises(MetricsFileError) as err:
        user_metrics(load_metrics_file(f), dump)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_name_taken_by_a_built_in_metric_is_refused(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def calc(**kw):\n    return {'top1_accuracy': 1.0}\n")
    with pytest.raises(MetricsError, match=r"\['top1_accuracy'\]"):
        compute_metrics(load_dump(make_dump(tmp_path / "d")), user_fn=load_metrics_file(f))


def test_cli_exit_codes_for_the_user_metric(tmp_path):
    dump = make_dump(tmp_path / "d")
    ok = cli("--dump-dir", dump, "--csv", tmp_path / "m.csv", "--metrics", FIXTURE_METRICS,
             "--threshold", "fixture_top1>=0.5")
    assert ok.returncode == 0, ok.stderr
    header, row = (tmp_path / "m.csv").read_text().splitlines()
    assert dict(zip(header.split(","), map(float, row.split(","))))["fixture_top1"] == 0.5
    missed = cli("--dump-dir", dump, "--csv", tmp_path / "m.csv", "--metrics", FIXTURE_METRICS,
                 "--threshold", "fixture_top1>=0.9")
    assert missed.returncode == 1 and "fixture_top1 = 0.5 fails >= 0.9" in missed.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("def calc(*, y_real):\n    return {'a': y_real['nope']}\n")
    broken = cli("--dump-dir", dump, "--csv", tmp_path / "b.csv", "--metrics", bad)
    assert broken.returncode == 2 and broken.stderr.count("\n") == 1 and "KeyError: 'nope'" in broken.stderr
    assert not (tmp_path / "b.csv").exists()
    missing = cli("--dump-dir", dump, "--csv", tmp_path / "b.csv", "--metrics", tmp_path / "none.py")
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_regression_and_generic_tasks_score_against_labels(tmp_path):
    pred = np.array([[1.0], [2.0], [3.0], [5.0]], np.float32)
    with DumpWriter(tmp_path / "r", {"model": "mine"}) as writer:
        writer.write(np.arange(4), {"value": pred}, labels={"target": np.array([1.0, 2.0, 3.0, 4.0])})
    dump = load_dump(tmp_path / "r")
    reg = compute_metrics(dump, task="regression")
    assert reg["mae"] == pytest.approx(0.25) and reg["max_abs_err"] == pytest.approx(1.0)
    assert reg["rmse"] == pytest.approx(0.5) and reg["r2"] == pytest.approx(1 - 1.0 / 5.0)
    gen = compute_metrics(dump, task="generic")
    assert gen["label_max_abs_err"] == pytest.approx(1.0) and "label_cosine_min" in gen
    with pytest.raises(MetricsError, match="names no task; pass --task"):
        compute_metrics(dump)


def test_the_worked_example_dataloader_and_metrics_fit_together(tmp_path):
    """examples/my_model: samples written by its dataloader, read through the toolkit's validation, scored by
    its metrics file (perfect logits score 1.0; shifting them by one class scores 0)."""
    from deployment_toolkit.data.user import UserData
    from deployment_toolkit.spec import ModelSignature, TensorSpec

    sys.path.insert(0, str(ROOT / "examples" / "my_model"))
    try:
        import dataloader as example  # noqa: PLC0415
    finally:
        sys.path.pop(0)
    example.write_samples(tmp_path / "data", 10)
    sig = ModelSignature(inputs=(TensorSpec("image", (3, 32, 32)),), outputs=(TensorSpec("logits", (4,)),))
    data = UserData(sig, data_dir=str(tmp_path / "data"), dataloader=str(ROOT / "examples/my_model/dataloader.py"))
    batches = list(data.batches(4))
    labels = np.concatenate([b[2]["labels"] for b in batches])
    assert len(labels) == 10 and batches[0][1]["image"].shape == (4, 3, 32, 32)
    fn = load_metrics_file(ROOT / "examples" / "my_model" / "metrics.py")
    for shift, expected in ((0, 1.0), (1, 0.0)):
        with DumpWriter(tmp_path / f"d{shift}", {"model": "my_model", "task": "classification"}) as writer:
            writer.write(np.concatenate([b[0] for b in batches]), {"logits": np.eye(4)[(labels + shift) % 4]},
                         labels={"labels": labels})
        metrics = compute_metrics(load_dump(tmp_path / f"d{shift}"), user_fn=fn)
        assert metrics["accuracy"] == expected and metrics["balanced_accuracy"] == expected
        assert metrics["top1_accuracy"] == expected
