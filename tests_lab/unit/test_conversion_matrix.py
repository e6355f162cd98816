"""The conversion matrix: rows per model x format, skips, failures that do not stop the sweep, resume."""
import csv
import json
import os

import pytest

from deployment_toolkit.export import ConversionError, FormatUnavailable, VerificationError
from deployment_toolkit_lab.matrix import COLUMNS, MatrixRow, MatrixSettings, read_rows, run_matrix, write_rows
from deployment_toolkit.spec import Manifest

pytestmark = pytest.mark.slow  # real exports or subprocesses: `make test` runs it, `make test-unit` does not

FORMATS = ["onnx", "ts-trace", "trt"]


def _csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _settings(models, formats, out, **kw) -> MatrixSettings:
    return MatrixSettings(models=models, formats=formats, output_csv=out, progress=False, **kw)


def _never(*_args):
    raise AssertionError("a row already in the CSV was converted again")


@pytest.fixture(scope="module")
def resnet18_matrix(tmp_path_factory):
    out = tmp_path_factory.mktemp("matrix") / "conversion_matrix.csv"
    return run_matrix(_settings(["resnet18"], FORMATS, out))


def test_one_row_per_format_with_errors_agreement_and_skip(resnet18_matrix, table_rows):
    res = resnet18_matrix
    rows = _csv(res.csv_path)
    assert list(rows[0]) == COLUMNS
    assert [(r["model"], r["preset"], r["format"]) for r in rows] == [("resnet18", "small", f) for f in FORMATS]
    by_fmt = {r["format"]: r for r in rows}
    for fmt in ("onnx", "ts-trace"):
        r = by_fmt[fmt]
        assert r["status"] == "ok" and r["reason"] == "" and r["family"] == "timm"
        assert float(r["max_abs_err"]) < 1e-4 and float(r["max_rel_err"]) < 1e-4
        assert r["agreement"] == "top1_agreement=1.0000"
        assert float(r["export_seconds"]) > 0
    trt = by_fmt["trt"]
    assert trt["status"] == "skipped" and "TensorRT" in trt["reason"]  # CPU host: the FormatUnavailable reason
    assert res.counts() == {"ok": 2, "failed": 0, "skipped": 1}
    assert (res.new, res.resumed) == (3, 0)
    md = res.markdown_path.read_text()
    assert res.markdown_path == res.csv_path.with_suffix(".md")
    assert ["timm", "resnet18", "small", "ok", "ok", "skipped"] in table_rows(md)
    meta = json.loads(res.run_json_path.read_text())
    assert meta["config"]["state"] == "complete" and meta["config"]["counts"]["ok"] == 2
    assert meta["config"]["formats"] == FORMATS and "hardware" in meta and "versions" in meta


def test_rerun_skips_rows_already_present(resnet18_matrix, tmp_path, capsys):
    copy = tmp_path / "m.csv"
    copy.write_text(resnet18_matrix.csv_path.read_text())
    res = run_matrix(_settings(["resnet18"], FORMATS, copy, run_json=False), converter=_never)
    assert (res.new, res.resumed) == (0, 3)
    assert "3 of 3 rows already present" in capsys.readouterr().err
    assert copy.read_text() == resnet18_matrix.csv_path.read_text()

    # an interrupted sweep: only the missing row is done on the rerun, appended after the others
    rows = read_rows(copy)
    write_rows(copy, [r for r in rows if r.format != "ts-trace"])
    calls = []

    def fake(model, fmt, out_dir, opts):
        calls.append((model, fmt, opts.preset))
        raise FormatUnavailable("pretend")

    res = run_matrix(_settings(["resnet18"], FORMATS, copy, run_json=False), converter=fake)
    assert calls == [("resnet18", "ts-trace", "small")] and (res.new, res.resumed) == (1, 2)
    assert [r.format for r in read_rows(copy)] == ["onnx", "trt", "ts-trace"]


def test_failure_is_recorded_with_its_cause_and_the_sweep_goes_on(tmp_path):
    out = tmp_path / "fail.csv"
    res = run_matrix(_settings(["sd_unet", "resnet18"], ["ts-script"], out, run_json=False))
    sd, r18 = read_rows(out)
    assert sd.model == "sd_unet" and sd.status == "failed"
    assert "torch.jit.script failed" in sd.reason and "not supported" in sd.reason  # names the cause
    assert "\n" not in sd.reason and len(sd.reason) <= 400
    assert sd.max_abs_err == "" and float(sd.export_seconds) > 0
    assert r18.model == "resnet18" and r18.status == "ok"  # the sweep went on
    assert res.counts() == {"ok": 1, "failed": 1, "skipped": 0}
    assert "**FAILED**" in res.markdown_path.read_text()


def test_verification_error_is_failed_with_measured_errors(tmp_path):
    def disagrees(model, fmt, out_dir, opts):
        from deployment_toolkit.models import get_model

        entry = get_model(model)
        m = Manifest(model=model, preset=opts.preset, family=entry.family, task=entry.task, metric=entry.metric,
                     format=fmt, artifact="model.onnx", signature=entry.signature(opts.preset), max_batch_size=8,
                     export_options={"export_seconds": 1.25},
                     verification={"passed": False, "max_abs_err": 0.5, "max_rel_err": 0.02,
                                   "agreement": {"top1_agreement": 0.5}})
        m.save(out_dir)
        raise VerificationError(f"{model} as {fmt}: verification failed: output__0 at batch 2: max abs err 0.5 > ...")

    def crashes(model, fmt, out_dir, opts):
        raise ConversionError(f"ONNX export failed (opset 17): RuntimeError: unsupported op\nline two of {fmt}")

    out = tmp_path / "v.csv"
    run_matrix(_settings(["resnet18"], ["onnx"], out, run_json=False), converter=disagrees)
    run_matrix(_settings(["resnet18"], ["ts-trace"], out, run_json=False), converter=crashes)
    v, c = read_rows(out)
    assert (v.status, v.max_abs_err, v.max_rel_err, v.agreement, v.export_seconds) == (
        "failed", "0.5", "0.02", "top1_agreement=0.5000", "1.25")
    assert "verification failed" in v.reason
    assert c.status == "failed" and c.reason == "ONNX export failed (opset 17): RuntimeError: unsupported op | line two of ts-trace"


def _dies(model, fmt, out_dir, opts):  # module level: picklable for the isolated worker
    os._exit(9)


def test_isolated_cell_that_dies_is_a_failed_row(tmp_path):
    out = tmp_path / "iso.csv"
    res = run_matrix(_settings(["resnet18"], ["onnx"], out, isolate=True, run_json=False), converter=_dies)
    (row,) = res.rows
    assert row.status == "failed" and "process died" in row.reason


def test_bad_arguments_fail_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="unknown format"):
        run_matrix(_settings(["resnet18"], ["tflite"], tmp_path / "x.csv"))
    with pytest.raises(KeyError, match="resnet19"):
        run_matrix(_settings(["resnet19"], ["onnx"], tmp_path / "x.csv"))
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a conversion-matrix CSV"):
        run_matrix(_settings(["resnet18"], ["onnx"], tmp_path / "other.csv"), converter=_never)
    assert not (tmp_path / "x.csv").exists()


def test_row_key_and_columns():
    row = MatrixRow("timm", "resnet18", "small", "onnx", "ok")
    assert row.key == ("resnet18", "small", "onnx")
    assert COLUMNS == ["family", "model", "preset", "format", "status", "reason", "max_abs_err", "max_rel_err",
                       "agreement", "export_seconds", "measured_at", "identity"]


def test_rows_made_under_another_identity_are_moved_aside_and_redone(resnet18_matrix, tmp_path, capsys):
    from deployment_toolkit.export import ConvertOptions

    copy = tmp_path / "m.csv"
    copy.write_text(resnet18_matrix.csv_path.read_text())
    (tmp_path / "run.json").write_text(resnet18_matrix.run_json_path.read_text())  # resolves the rows' identity
    calls = []

    def fake(model, fmt, out_dir, opts):
        calls.append((model, fmt, opts.opset))
        raise FormatUnavailable("pretend")

    res = run_matrix(_settings(["resnet18"], ["onnx"], copy, run_json=False, options=ConvertOptions(opset=18)),
                     converter=fake)
    assert calls == [("resnet18", "onnx", 18)] and (res.new, res.resumed) == (1, 0)
    assert "convert_options.opset: stored 17, now 18" in capsys.readouterr().err
    (kept,) = (tmp_path / "superseded").glob("*/m.csv")
    assert kept.read_text() == resnet18_matrix.csv_path.read_text(), "the old rows are kept aside, unchanged"
    assert {r.identity for r in read_rows(copy)} == {res.rows[0].identity} != {""}


# --------------------------------------------------------------------------- speed figures (same issue)

def test_speed_plan_and_interleaved_timing():
    from deployment_toolkit_lab.runtime_speed import SpeedPlan, time_interleaved

    assert SpeedPlan.parse("nnunet3d:1") == SpeedPlan("nnunet3d", (1,))
    assert SpeedPlan.parse("resnet50") == SpeedPlan("resnet50", ())
    with pytest.raises(ValueError, match="MODEL:B1,B2"):
        SpeedPlan.parse("resnet50:x")
    order = []
    times = time_interleaved({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, warmup=1,
                             iterations=4)
    assert order == ["a", "b"] + ["a", "b"] * 4  # warm-up each, then interleaved rounds
    assert [len(t.seconds) for t in times.values()] == [4, 4]
    assert all(0.0 <= t.background_cpu <= 1.0 or t.background_cpu == -1.0 for t in times.values())
    slow = time_interleaved({"s": lambda: __import__("time").sleep(0.02)}, 0, 50, min_iterations=3, max_seconds=0.01)
    assert len(slow["s"].seconds) == 3  # the time budget stops it, but never before min_iterations


def test_speed_table_has_the_ratio(table_rows):
    from deployment_toolkit_lab.runtime_speed import EAGER, ORT, SpeedRow, to_csv, to_markdown

    common = dict(model="m", preset="full", batch_size=8, threads="2", warmup=1, iterations=3, min_s=0.0,
                  max_s=0.0, unit="images/s", max_abs_err_vs_eager=0.0, background_cpu=0.0)
    rows = [SpeedRow(runtime=EAGER, median_s=0.8, throughput=10.0, ratio_vs_eager=1.0, **common),
            SpeedRow(runtime=ORT, median_s=0.5, throughput=16.0, ratio_vs_eager=1.6, **common)]
    assert ["m", "full", "8", "10.00", "16.00", "1.60x", "images/s", "3", "0%"] in table_rows(to_markdown(rows))
    assert to_csv(rows).splitlines()[0].startswith("model,preset,batch_size,runtime,")
