"""Metrics with hand-computed expectations, metric selection per task, thresholds, and the CLI's exit codes."""
from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from deployment_toolkit.data.dump import DumpMismatchError, DumpWriter, load_dump
from deployment_toolkit.data.ragged import RaggedError, from_samples
from deployment_toolkit.metrics import (
    MetricInputError,
    MetricOptions,
    MetricsError,
    Threshold,
    ThresholdsFailed,
    ThresholdSyntaxError,
    UnknownMetricError,
    calculate_metrics,
    check_thresholds,
    compute_metrics,
    cosine_per_sample,
    dice_scores,
    error_stats,
    format_table,
    load_thresholds,
    parse_threshold,
    psnr_metrics,
    top1_agreement,
    topk_accuracy,
    topk_overlap,
)

REPO = Path(__file__).resolve().parents[3]
ERROR_STATS = ["max_abs_err", "mean_abs_err", "max_rel_err", "rmse", "cosine_mean", "cosine_min", "near_zero_samples"]

# ---------------------------------------------------------------- classification

SCORES = np.array(
    [
        [0.1, 0.9, 0.0, 0.2, 0.3, 0.4],  # argmax 1
        [0.5, 0.1, 0.2, 0.3, 0.4, 0.6],  # argmax 5, top5 = all but class 1
        [0.9, 0.8, 0.7, 0.6, 0.5, 0.4],  # argmax 0, top5 = 0..4
        [0.1, 0.2, 1.0, 0.3, 0.4, 0.5],  # argmax 2
    ]
)
LABELS = np.array([1, 0, 5, 2])  # top1 hits: 0, 3 -> 0.5; top5 hits: 0, 1, 3 -> 0.75


def test_topk_accuracy_by_hand():
    assert topk_accuracy(SCORES, LABELS, 1) == 0.5
    assert topk_accuracy(SCORES, LABELS, 5) == 0.75
    assert topk_accuracy(SCORES[:, :, None, None], LABELS[:, None], 1) == 0.5  # conv head + (N, 1) labels
    assert topk_accuracy(SCORES, np.eye(6)[LABELS], 5) == 0.75  # one-hot labels
    assert topk_accuracy(SCORES[:, :3], np.array([1, 0, 2, 2]), 5) == 1.0  # k clamped to 3 classes


def test_agreement_and_overlap_by_hand():
    ref = SCORES.copy()
    ref[1] = [0.9, 0, 0, 0, 0, 0.1]  # argmax 0 (differs)
    ref[3] = [0, 0, 0.1, 0, 0, 0.9]  # argmax 5 (differs)
    assert top1_agreement(SCORES, ref) == 0.5
    a = np.array([[3.0, 2, 1, 0], [0, 1, 2, 3]])
    b = np.array([[3.0, 0, 2, 1], [0, 1, 2, 3]])  # top2 {0,1} vs {0,2}: 1/2; second sample 2/2
    assert topk_overlap(a, b, k=2) == 0.75


def test_classification_input_errors():
    with pytest.raises(MetricInputError, match="integral class indices"):
        topk_accuracy(SCORES, LABELS + 0.5)
    with pytest.raises(MetricInputError, match="3 labels for 4 samples"):
        topk_accuracy(SCORES, LABELS[:3])
    with pytest.raises(MetricInputError, match="differs from reference"):
        top1_agreement(SCORES, SCORES[:, :5])


# ---------------------------------------------------------------- segmentation

PRED_MASK = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 0, 0], [2, 2, 0, 0]])
TRUE_MASK = np.array([[0, 1, 1, 1], [0, 0, 1, 1], [0, 2, 2, 0], [0, 0, 0, 0]])
# class 0: |P|=8 |T|=9 |P∩T|=6 -> 12/17; class 1: 4, 5, 4 -> 8/9; class 2: 4, 2, 1 -> 1/3
HAND_DICE = [12 / 17, 8 / 9, 1 / 3]


def _logits(mask: np.ndarray, classes: int = 3) -> np.ndarray:
    """(H, W) mask -> (1, C, H, W) one-hot float logits."""
    return np.moveaxis(np.eye(classes, dtype=np.float32)[mask], -1, 0)[None]


def test_dice_4x4_by_hand():
    r = dice_scores(PRED_MASK[None], TRUE_MASK[None])
    np.testing.assert_allclose(r.per_class, HAND_DICE)
    assert r.mean == pytest.approx((8 / 9 + 1 / 3) / 2)  # background excluded by default
    assert r.mean_classes == [1, 2]
    with_bg = dice_scores(PRED_MASK[None], TRUE_MASK[None], include_background=True)
    assert with_bg.mean == pytest.approx(sum(HAND_DICE) / 3)
    metrics = r.as_metrics()
    assert list(metrics) == ["dice_mean", "dice_class_0", "dice_class_1", "dice_class_2"]
    assert metrics["dice_class_1"] == pytest.approx(8 / 9)  # class index, no off-by-one


def test_dice_from_logits_matches_masks_and_labels_with_channel_axis():
    r = dice_scores(_logits(PRED_MASK), TRUE_MASK[None, None])  # (N, C, H, W) logits vs (N, 1, H, W) labels
    np.testing.assert_allclose(r.per_class, HAND_DICE)
    onehot = dice_scores(_logits(PRED_MASK), _logits(TRUE_MASK))  # one-hot labels
    np.testing.assert_allclose(onehot.per_class, HAND_DICE)
    ref = dice_scores(_logits(PRED_MASK), _logits(TRUE_MASK), target_is_prediction=True)
    np.testing.assert_allclose(ref.per_class, HAND_DICE)


def test_dice_absent_class_scores_one_and_averages_per_sample():
    r = dice_scores(PRED_MASK[None], TRUE_MASK[None], num_classes=4)
    assert r.per_class[3] == 1.0  # absent in both prediction and target
    assert r.mean == pytest.approx((8 / 9 + 1 / 3 + 1.0) / 3)
    perfect = np.where(TRUE_MASK == 2, 0, TRUE_MASK)  # second sample: exact, has no class 2
    two = dice_scores(np.stack([PRED_MASK, perfect]), np.stack([TRUE_MASK, perfect]))
    np.testing.assert_allclose(two.per_sample[1], [1.0, 1.0, 1.0])
    assert two.per_class[2] == pytest.approx((1 / 3 + 1.0) / 2)


def test_dice_binary_single_channel_logit():
    logit = np.array([[[[-1.0, 2.0], [3.0, -4.0]]]])  # (1, 1, 2, 2) -> mask [[0, 1], [1, 0]]
    r = dice_scores(logit, np.array([[[0, 1], [0, 0]]]))
    assert r.num_classes == 2
    assert r.mean == pytest.approx(2 / 3)  # class 1: |P|=2, |T|=1, overlap 1


def test_dice_input_errors():
    with pytest.raises(MetricInputError, match="class 3 outside 0..2"):
        dice_scores(_logits(PRED_MASK), np.full((1, 4, 4), 3))
    with pytest.raises(MetricInputError, match="does not match"):
        dice_scores(_logits(PRED_MASK), np.zeros((1, 4, 5), np.int64))
    with pytest.raises(MetricInputError, match="different class counts"):
        dice_scores(_logits(PRED_MASK), _logits(TRUE_MASK, 4), target_is_prediction=True)


# ---------------------------------------------------------------- error stats, PSNR


def test_error_stats_by_hand():
    s = error_stats(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[1.0, 2.0], [3.0, 5.0]]))
    assert s["max_abs_err"] == 1.0
    assert s["mean_abs_err"] == 0.25
    assert s["max_rel_err"] == pytest.approx(0.2)
    assert s["rmse"] == pytest.approx(0.5)
    cos1 = 29 / (5 * math.sqrt(34))
    assert s["cosine_min"] == pytest.approx(cos1)
    assert s["cosine_mean"] == pytest.approx((1 + cos1) / 2)
    # |a - r| / max(|r|, 1e-6): a zero reference is measured against eps, a tiny one against itself
    assert error_stats(np.array([[1e-7]]), np.array([[0.0]]))["max_rel_err"] == pytest.approx(0.1)
    assert error_stats(np.array([[2e-6]]), np.array([[1e-6]]))["max_rel_err"] == pytest.approx(1.0)


def test_near_zero_outputs_agree_by_the_absolute_rule():
    """Random-weight logits that underflow: ~1e-45 in one runtime, flushed to 0 in the other, are one answer."""
    tiny = np.full((1, 4), 1.4e-45, dtype=np.float32)
    s = error_stats(tiny, np.zeros((1, 4), np.float32))
    assert (s["cosine_min"], s["near_zero_samples"]) == (1.0, 1.0)
    assert check_thresholds(s, {"cosine_min": ">=0.999"}) == []
    real = error_stats(np.array([[1e-3, 0.0]]), np.array([[0.0, 0.0]]))  # a real value against zero is no match
    assert (real["cosine_min"], real["near_zero_samples"]) == (0.0, 0.0)
    loose = error_stats(np.array([[1e-9, 0.0]]), np.array([[0.0, 2e-9]]), atol=1e-8)
    assert (loose["cosine_min"], loose["near_zero_samples"]) == (1.0, 1.0)
    assert error_stats(np.array([[1e-9, 0.0]]), np.array([[0.0, 2e-9]]))["cosine_min"] == 0.0


def test_error_stats_go_sample_by_sample_over_ragged_samples():
    a = from_samples([np.array([[1.0, 2.0]]), np.array([[3.0, 4.0], [5.0, 6.0]])])
    b = from_samples([np.array([[1.0, 2.0]]), np.array([[3.0, 4.0], [5.0, 7.0]])])
    s = error_stats(a, b)
    flat = error_stats(np.array([1.0, 2, 3, 4, 5, 6])[None], np.array([1.0, 2, 3, 4, 5, 7])[None])
    for key in ("max_abs_err", "mean_abs_err", "max_rel_err", "rmse"):
        assert s[key] == pytest.approx(flat[key])
    assert s["cosine_min"] < 1.0 and s["cosine_mean"] == pytest.approx((1.0 + s["cosine_min"]) / 2)
    with pytest.raises(MetricInputError, match=r"sample 1 has shape \(2, 2\), \(1, 2\) in the reference"):
        error_stats(a, from_samples([np.zeros((1, 2)), np.zeros((1, 2))]))


def test_task_metrics_on_ragged_samples_say_which_differ(tmp_path):
    with DumpWriter(tmp_path / "d2", {"model": "m", "task": "classification", "source": "triton"}) as w:
        w.write([0], {"logits": np.zeros((1, 3, 5))})
        w.write([1], {"logits": np.ones((1, 4, 5))})
    with DumpWriter(tmp_path / "r2", {"model": "m", "task": "classification", "source": "torch"}) as w:
        w.write([1], {"logits": np.ones((1, 4, 5))})
        w.write([0], {"logits": np.zeros((1, 3, 5))})
    with pytest.raises(RaggedError, match=r"output logits: samples differ in shape \(\(3, 5\) for sample 0, "
                                          r"\(4, 5\) for sample 1\); the classification metrics need one shape"):
        compute_metrics(load_dump(tmp_path / "d2"), load_dump(tmp_path / "r2"))
    m = compute_metrics(load_dump(tmp_path / "d2"), load_dump(tmp_path / "r2"), task="generic")
    assert (m["num_samples"], m["max_abs_err"], m["near_zero_samples"]) == (2.0, 0.0, 1.0)
    assert m["cosine_min"] == pytest.approx(1.0)


def test_cosine_zero_vectors_and_nan_propagation():
    np.testing.assert_array_equal(cosine_per_sample(np.zeros((2, 3)), np.array([[0, 0, 0], [1, 0, 0]])), [1.0, 0.0])
    s = error_stats(np.array([[np.nan, 1.0]]), np.array([[1.0, 1.0]]))
    assert math.isnan(s["max_abs_err"]) and math.isnan(s["cosine_min"])
    assert check_thresholds(s, {"max_abs_err": "<=1"}) == ["max_abs_err = nan fails <= 1"]


def test_psnr_by_hand():
    ref = np.array([[0.0, 1.0, 0.0, 1.0], [0.0, 2.0, 0.0, 2.0]])
    pred = ref + np.array([[0.1], [0.0]])  # sample 0: MSE 0.01, range 1 -> 20 dB; sample 1 exact -> inf
    m = psnr_metrics(pred, ref)
    assert m["psnr_min"] == pytest.approx(20.0)
    assert m["psnr_mean"] == math.inf
    fixed = psnr_metrics(pred[:1], ref[:1], data_range=2.0)
    assert fixed["psnr_mean"] == pytest.approx(10 * math.log10(4 / 0.01))
    assert list(psnr_metrics(pred, ref, prefix="label_psnr")) == ["label_psnr_mean", "label_psnr_min"]


# ---------------------------------------------------------------- thresholds


def test_threshold_parsing_and_checks():
    assert parse_threshold("dice_mean>=0.9") == Threshold("dice_mean", ">=", 0.9)
    assert parse_threshold(" max_abs_err[aux] <= 1e-4 ") == Threshold("max_abs_err[aux]", "<=", 1e-4)
    metrics = {"dice_mean": 0.85, "max_abs_err": 2e-5}
    assert check_thresholds(metrics, {"dice_mean": ">=0.8", "max_abs_err": "<=1e-4"}) == []
    assert check_thresholds(metrics, {"dice_mean": ">=0.9", "max_abs_err": "<1e-5"}) == [
        "dice_mean = 0.85 fails >= 0.9",
        "max_abs_err = 2e-05 fails < 1e-05",
    ]
    assert check_thresholds(metrics, ["dice_mean>0.85"]) == ["dice_mean = 0.85 fails > 0.85"]
    assert check_thresholds(metrics, {"dice_mean": {"min": 0.5, "max": 0.8}}) == ["dice_mean = 0.85 fails <= 0.8"]


def test_unknown_metric_and_bad_syntax_are_errors():
    with pytest.raises(UnknownMetricError, match=r"'dice_mena' \(did you mean dice_mean\?\)"):
        check_thresholds({"dice_mean": 1.0}, {"dice_mena": ">=0.9"})
    with pytest.raises(ThresholdSyntaxError, match="cannot read"):
        parse_threshold("dice_mean~0.9")
    with pytest.raises(ThresholdSyntaxError, match="ambiguous"):
        check_thresholds({"dice_mean": 1.0}, {"dice_mean": 0.9})
    with pytest.raises(ThresholdSyntaxError, match="not a number"):
        parse_threshold("dice_mean>=high")


def test_yaml_thresholds(tmp_path):
    good = tmp_path / "t.yaml"
    good.write_text('thresholds:\n  top1_agreement: ">=0.99"\n  max_abs_err: ["<=1e-3", ">=0"]\n')
    assert load_thresholds(good) == [
        Threshold("top1_agreement", ">=", 0.99),
        Threshold("max_abs_err", "<=", 1e-3),
        Threshold("max_abs_err", ">=", 0.0),
    ]
    bad = tmp_path / "bad.yaml"
    bad.write_text("top1_agreement: >=0.99\n")  # unquoted: YAML reads '>' as a block scalar
    with pytest.raises(ThresholdSyntaxError, match="quote bounds"):
        load_thresholds(bad)


def test_format_table_marks_failures():
    lines = format_table({"a": 1.0, "b": 0.5}, [Threshold("b", ">=", 0.9), Threshold("a", ">", 0)]).splitlines()
    assert lines[0].split() == ["metric", "value", "bound", "status"]
    assert lines[2].split() == ["a", "1", ">", "0", "ok"]
    assert lines[3].split() == ["b", "0.5", ">=", "0.9", "FAIL"]


# ---------------------------------------------------------------- metric selection over dumps


def _dump(path, ids, outputs, labels=None, task="classification", source="triton"):
    with DumpWriter(path, {"model": "m", "task": task, "source": source}) as w:
        w.write(ids, outputs, labels=labels)
    return path


def test_classification_dump_metrics_pair_by_id(tmp_path):
    ids = [10, 11, 12, 13]
    d = _dump(tmp_path / "triton", ids, {"logits": SCORES}, {"label": LABELS})
    r = _dump(tmp_path / "torch", ids[::-1], {"logits": SCORES[::-1]}, source="torch")  # same data, other order
    m = compute_metrics(load_dump(d), load_dump(r))
    assert list(m) == ["num_samples", "top1_accuracy", "top5_accuracy", "top1_agreement", "top5_overlap", *ERROR_STATS]
    assert (m["num_samples"], m["top1_accuracy"], m["top5_accuracy"]) == (4, 0.5, 0.75)
    assert m["top1_agreement"] == 1.0 and m["max_abs_err"] == 0.0 and m["cosine_min"] == pytest.approx(1.0)


def test_segmentation_dump_metrics(tmp_path):
    logits = np.concatenate([_logits(PRED_MASK), _logits(TRUE_MASK)])
    labels = np.stack([TRUE_MASK, TRUE_MASK])[:, None]
    d = _dump(tmp_path / "d", ["a", "b"], {"seg": logits}, {"mask": labels}, task="segmentation")
    r = _dump(tmp_path / "r", ["b", "a"], {"seg": np.concatenate([_logits(TRUE_MASK)] * 2)}, task="segmentation")
    m = compute_metrics(load_dump(d), load_dump(r))
    dice_keys = ["dice_mean", "dice_class_0", "dice_class_1", "dice_class_2"]
    agreement_keys = [k.replace("dice", "dice_agreement") for k in dice_keys]
    assert list(m) == ["num_samples", *dice_keys, *agreement_keys, *ERROR_STATS]
    # sample a scores the hand values, sample b is exact
    assert m["dice_class_2"] == pytest.approx((1 / 3 + 1) / 2)
    assert m["dice_agreement_class_1"] == pytest.approx((8 / 9 + 1) / 2)
    assert m["dice_mean"] == pytest.approx(((8 / 9 + 1) / 2 + (1 / 3 + 1) / 2) / 2)
    bg = compute_metrics(load_dump(d), task="segmentation", options=MetricOptions(include_background=True))
    assert bg["dice_mean"] == pytest.approx(np.mean([(h + 1) / 2 for h in HAND_DICE]))


def test_denoising_embedding_and_secondary_outputs(tmp_path):
    ref = np.array([[0.0, 1.0, 0.0, 1.0]])
    d = _dump(tmp_path / "d", [0], {"eps": ref + 0.1, "aux": np.ones((1, 2))}, {"clean": ref}, task="denoising")
    r = _dump(tmp_path / "r", [0], {"eps": ref, "aux": np.ones((1, 2)) * 3}, task="denoising")
    m = compute_metrics(load_dump(d), load_dump(r))
    assert m["label_psnr_mean"] == pytest.approx(20.0) and m["psnr_min"] == pytest.approx(20.0)
    assert m["max_abs_err"] == pytest.approx(0.1)
    assert m["max_abs_err[aux]"] == 2.0 and "rmse[aux]" in m
    emb = compute_metrics(load_dump(d), load_dump(r), task="embedding")
    assert "label_psnr_mean" not in emb and "psnr_mean" not in emb and emb["cosine_min"] < 1.0
    with pytest.raises(MetricsError, match="nothing to compute: the embedding task has no label metrics"):
        compute_metrics(load_dump(d), task="embedding")


def test_labels_come_from_reference_when_the_dump_has_none(tmp_path):
    d = _dump(tmp_path / "d", [1, 2, 3, 4], {"logits": SCORES})
    r = _dump(tmp_path / "r", [4, 3, 2, 1], {"logits": SCORES[::-1]}, {"label": LABELS[::-1]})
    assert compute_metrics(load_dump(d), load_dump(r))["top1_accuracy"] == 0.5


def test_selection_errors(tmp_path):
    d = load_dump(_dump(tmp_path / "d", [0, 1], {"logits": SCORES[:2]}))
    other_task = load_dump(_dump(tmp_path / "s", [0, 1], {"logits": SCORES[:2]}, task="embedding"))
    with pytest.raises(DumpMismatchError, match="different tasks"):
        compute_metrics(d, other_task)
    with pytest.raises(MetricsError, match="has no labels"):
        compute_metrics(d)
    with pytest.raises(MetricsError, match="unknown task 'detection'"):
        compute_metrics(d, task="detection")
    with pytest.raises(MetricsError, match="output 'probs' is not in"):
        compute_metrics(d, d, options=MetricOptions(output="probs"))
    fewer = load_dump(_dump(tmp_path / "f", [0], {"logits": SCORES[:1]}))
    with pytest.raises(DumpMismatchError, match="1 ids of .* missing"):
        compute_metrics(d, fewer)


def test_calculate_metrics_raises_on_missed_threshold(tmp_path):
    d = _dump(tmp_path / "d", [0, 1, 2, 3], {"logits": SCORES}, {"label": LABELS})
    assert calculate_metrics(d, thresholds={"top1_accuracy": ">=0.5"})["top5_accuracy"] == 0.75
    with pytest.raises(ThresholdsFailed) as err:
        calculate_metrics(d, thresholds={"top1_accuracy": ">=0.9", "top5_accuracy": ">=0.7"})
    assert err.value.failures == ["top1_accuracy = 0.5 fails >= 0.9"]
    assert err.value.metrics["top1_accuracy"] == 0.5
    with pytest.raises(UnknownMetricError):
        calculate_metrics(d, thresholds=["top1_agreement>=0.9"])  # no reference: not computed


# ---------------------------------------------------------------- CLI


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "triton/calculate_metrics.py", *map(str, args)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )


def test_cli_exit_codes(tmp_path):
    d = _dump(tmp_path / "d", [0, 1, 2, 3], {"logits": SCORES}, {"label": LABELS})
    r = _dump(tmp_path / "r", [3, 2, 1, 0], {"logits": SCORES[::-1]}, source="torch")
    out = tmp_path / "m.csv"

    ok = _cli("--dump-dir", d, "--reference-dir", r, "--csv", out, "--threshold", "top1_agreement>=0.99")
    assert ok.returncode == 0, ok.stderr
    header, row = list(csv.reader(out.open()))
    assert header[:5] == ["num_samples", "top1_accuracy", "top5_accuracy", "top1_agreement", "top5_overlap"]
    assert dict(zip(header, map(float, row)))["top1_accuracy"] == 0.5
    assert "top1_agreement" in ok.stdout and "ok" in ok.stdout

    thresholds = tmp_path / "t.yaml"
    thresholds.write_text('top1_accuracy: ">=0.9"\ntop5_accuracy: ">=0.7"\n')
    failed = _cli("--dump-dir", d, "--csv", out, "--thresholds", thresholds)
    assert failed.returncode == 1
    assert "FAIL top1_accuracy = 0.5 fails >= 0.9" in failed.stderr and "top5_accuracy" not in failed.stderr
    assert out.exists()  # the CSV is written even when a bound fails

    fewer = _dump(tmp_path / "fewer", [0, 1, 2], {"logits": SCORES[:3]})
    mismatch = _cli("--dump-dir", d, "--reference-dir", fewer, "--csv", tmp_path / "x.csv")
    assert mismatch.returncode == 2
    assert "cannot be compared" in mismatch.stderr and "1 ids of" in mismatch.stderr and "e.g. 3" in mismatch.stderr
    assert not (tmp_path / "x.csv").exists()

    unknown = _cli("--dump-dir", d, "--csv", out, "--threshold", "top1_acc>=0.5")
    assert unknown.returncode == 2 and "top1_acc" in unknown.stderr and "did you mean" in unknown.stderr

    (tmp_path / "empty").mkdir()
    empty = _cli("--dump-dir", tmp_path / "empty", "--csv", out)
    assert empty.returncode == 2 and "is empty" in empty.stderr


def test_cli_help_has_an_example():
    helped = _cli("--help")
    assert helped.returncode == 0
    epilog = helped.stdout.split("example:", 1)[1]
    assert "deployment-toolkit metrics \\\n      --dump-dir" in epilog  # raw formatting kept
