"""The lab's tools take any model source the toolkit takes (issue 45 moved them out of tests/unit/sources/): the
zoo against timm, the runtime-speed bench and the overhead benchmark's repository on a user's model.py, and
`bench-corpus --list` read by a reader that goes away."""
from __future__ import annotations

import json
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "user_model" / "model.py"
SCRIPTS = ROOT / "deployment_toolkit_lab" / "scripts"


def _run_script(monkeypatch, capsys, script, *argv):
    monkeypatch.setattr(sys, "argv", [str(script), *map(str, argv)])
    with pytest.raises(SystemExit) as exc:
        runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_benchmark_sources_prints_the_ratio(monkeypatch, capsys, tmp_path):
    script = SCRIPTS / "benchmark_sources.py"
    code, out, err = _run_script(monkeypatch, capsys, script, "--zoo-model", "resnet18", "--repeats", "1",
                                 "--no-verify", "--json", tmp_path / "run.json")
    assert code == 0, err
    assert "timm/zoo time ratio" in out
    rec = json.loads((tmp_path / "run.json").read_text())
    assert rec["sides"] == {"zoo": "resnet18", "timm": "timm:resnet18"} and rec["ratio_timm_over_zoo"] > 0
    code, _, err = _run_script(monkeypatch, capsys, script, "--zoo-model", "unet2d",
                               "--timm-arch", "resnet18")
    assert code == 2 and "different signatures" in err


def test_runtime_speed_and_overhead_repository_take_a_model_py(tmp_path):
    from deployment_toolkit_lab.runtime_speed import TimingOptions, measure_model
    from deployment_toolkit_lab.overhead.bench import OverheadOptions, Variant, prepare_repository

    rows = measure_model(str(FIXTURE), "small", (2,), TimingOptions(warmup=0, iterations=1, min_iterations=1),
                         log=lambda m: None)
    assert {r.runtime for r in rows} == {"pytorch-eager", "onnxruntime"} and all(r.model == str(FIXTURE) for r in rows)
    assert max(r.max_abs_err_vs_eager for r in rows) < 1e-4  # the ONNX came from the same model.py

    opts = OverheadOptions(model=str(FIXTURE), preset="small", batch_sizes=(2,), variants=(Variant(1, 1),),
                           workspace=tmp_path / "ws")
    onnx_dir, repo, manifest = prepare_repository(opts, lambda m: None)
    assert onnx_dir.name == "user_model-small-onnx" and manifest.source["kind"] == "python"
    assert (repo / "user_model_i1_t1" / "config.pbtxt").exists()


def test_a_reader_that_goes_away_is_not_an_error():
    """`deployment-toolkit-lab bench-corpus --list | head -1` once ended in a BrokenPipeError traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "deployment_toolkit_lab", "bench-corpus", "--list"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader is gone before the command writes (stdout to a pipe is flushed at exit)
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0 and "Traceback" not in err, err
