"""A deployment checked whole, round 2 (issue 53): the files, YAML, names and flags people really write are each
refused in one line naming the key or flag, exit 2, no traceback, before any search starts, within seconds. Each
case runs `deployment-toolkit plan` as cli.run runs it (in process; the cases that would hang or eat memory if they
regressed run as a subprocess with a timeout)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deployment_toolkit import cli
from deployment_toolkit.commands import plan_fleet

ROOT = Path(__file__).resolve().parents[3]
SECONDS = 20  # the bound for a refusal

BASE = """name: shop
models:
  - name: scorer
    model: scorer.onnx
    peak_rps: 100
    p99_ms: 20
  - name: ranker
    model: ranker.onnx
    peak_rps: 50
    p99_ms: 50
limits:
  max_replicas: 10
"""


def _deployment(tmp_path: Path, text: str = BASE) -> Path:
    for name in ("scorer.onnx", "ranker.onnx"):
        (tmp_path / name).write_bytes(b"onnx")  # read on load only as a path; nothing is converted in a refusal
    path = tmp_path / "deployment.yaml"
    path.write_text(text)
    return path


def _refused(tmp_path: Path, capsys, *argv: str) -> str:
    """The one stderr line of a refused plan; asserts exit 2, one line, no traceback, no folder written, in time."""
    out = tmp_path / "out"
    start = time.monotonic()
    with pytest.raises(SystemExit) as exit_:
        cli.run(lambda: plan_fleet.main([*argv, "--result-path", str(out / "plan"), "--workspace", str(out / "ws")]))
    elapsed = time.monotonic() - start
    err = capsys.readouterr().err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert exit_.value.code == 2, err
    assert "Traceback" not in err and len(lines) <= 2, err  # argparse's usage errors add the --help pointer
    assert elapsed < SECONDS and not out.exists()
    return lines[0]


def _file_case(tmp_path: Path, capsys, text: str) -> str:
    return _refused(tmp_path, capsys, "--deployment", str(_deployment(tmp_path, text)))


# ---- files named by a deployment ------------------------------------------------------------------------------

@pytest.mark.parametrize(("target", "words"), [
    ("folder", "traffic: {path} is a folder, not a file"),
    ("loop", "traffic: {path} is a symlink loop"),
    ("pipe", "traffic: {path} is a named pipe, not a file"),
    ("/dev/zero", "traffic: /dev/zero is a device, not a file"),
    ("large", "MiB, over the 64 MiB a file here may be"),
])
def test_a_file_key_takes_only_a_regular_file_under_its_limit(tmp_path, capsys, target, words):
    path = tmp_path / target
    if target == "folder":
        path.mkdir()
    elif target == "loop":
        os.symlink(tmp_path / "loop2", path)
        os.symlink(path, tmp_path / "loop2")
    elif target == "pipe":
        os.mkfifo(path)
    elif target == "large":
        with open(path, "wb") as f:
            f.truncate(65 << 20)  # sparse: 65 MiB that take no disk
    else:
        path = Path(target)
    text = BASE.replace("    peak_rps: 50\n", f"    traffic: {path}\n")
    line = _file_case(tmp_path, capsys, text)
    assert "models[1] (ranker): " in line and words.format(path=path) in line, line


@pytest.mark.parametrize(("key", "target", "words"), [
    ("data", "/dev/zero", "data: /dev/zero is a device, not a file or a folder"),
    ("checkpoint", "pipe", "checkpoint: {path} is a named pipe, not a file or a folder"),
    ("preprocess", "folder", "preprocess: {path} is a folder, not a file"),
    ("raw_data", "file", "raw_data: {path} is a file, not a folder"),
    ("model", "pipe.onnx", "models[1].model: {path} is a named pipe, not a file or a folder"),
])
def test_every_path_key_is_checked_for_what_it_names(tmp_path, capsys, key, target, words):
    path = Path(target) if target.startswith("/") else tmp_path / target
    if target == "folder":
        path.mkdir()
    elif target.startswith("pipe"):
        os.mkfifo(path)
    elif target == "file":
        path.write_text("x")
    text = BASE.replace("model: ranker.onnx", f"model: {path}") if key == "model" else \
        BASE.replace("    peak_rps: 50\n", f"    peak_rps: 50\n    {key}: {path}\n")
    line = _file_case(tmp_path, capsys, text)
    assert words.format(path=path) in line, line


def test_a_named_pipe_deployment_file_does_not_hang(tmp_path):
    """The deployment file itself, a FIFO with no writer: refused, not read (a subprocess: a regression would hang)."""
    fifo = tmp_path / "deployment.yaml"
    os.mkfifo(fifo)
    out = subprocess.run([sys.executable, "-m", "deployment_toolkit", "plan", "--deployment", str(fifo)],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 2 and out.stderr.strip() == (f"error: --deployment: {fifo} is a named pipe, not a file: "
                                                          "give a file"), out.stderr


def test_peak_rps_beside_a_traffic_file_of_zeros_is_refused(tmp_path, capsys):
    (tmp_path / "zeros.csv").write_text("time,rate\n00:00,0\n12:00,0\n")
    line = _file_case(tmp_path, capsys, BASE.replace("    peak_rps: 50\n", "    peak_rps: 50\n    traffic: zeros.csv\n"))
    assert "models[1] (ranker): peak_rps 50 scales traffic" in line and "0 inferences/s throughout" in line, line


def test_a_rate_over_the_limit_in_a_traffic_file_names_the_file_and_row(tmp_path, capsys):
    (tmp_path / "day.csv").write_text("time,rate\n00:00,10\n12:00,5e9\n")
    line = _file_case(tmp_path, capsys, BASE.replace("    peak_rps: 50\n", "    traffic: day.csv\n"))
    assert f"{tmp_path / 'day.csv'} line 3: rate '5e9' is above 1e+09 inferences/s" in line, line
    assert "peak_rps" not in line


# ---- the YAML itself ------------------------------------------------------------------------------------------

def test_an_alias_bomb_is_refused_in_under_a_second(tmp_path, capsys):
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    text = "\n".join(levels) + "\n" + BASE
    start = time.monotonic()
    line = _file_case(tmp_path, capsys, text)
    assert time.monotonic() - start < 1.0
    assert "expands to more than 100,000 values" in line, line


@pytest.mark.parametrize(("change", "words"), [
    (("    peak_rps: 100\n", "    peak_rps: 10\n    p99_ms: 30\n    peak_rps: 10000\n"),
     "key 'peak_rps' is given twice in one mapping, at lines 5 and 7"),
    (("limits:", "models:\n  - {name: other, model: scorer.onnx, peak_rps: 1, p99_ms: 1}\nlimits:"),
     "key 'models' is given twice in one mapping, at lines 2 and 11"),
    (("max_replicas: 10", "max_replicas: 10\n  max_models: 2.5"), "limits.max_models must be a whole number, got 2.5"),
    (("max_replicas: 10", "max_replicas: 0"), "limits.max_replicas must be >= 1"),
])
def test_the_yaml_is_read_as_meant(tmp_path, capsys, change, words):
    line = _file_case(tmp_path, capsys, BASE.replace(*change))
    assert words in line, line


# ---- names ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("changes", "words"), [
    ([("name: shop", "name: p7/../../../escaped")], "name 'p7/../../../escaped' contains a path separator"),
    ([("name: shop", "name: p7-$(JOB_COMPLETION_INDEX)")], "name 'p7-$(JOB_COMPLETION_INDEX)' has '$', '(', ')'"),
    ([("name: scorer", "name: a b")], "models[0].name 'a b' has ' '"),
    ([("name: scorer", "name: '-m'")], "models[0].name '-m' starts with '-'"),
    ([("name: scorer", "name: x;rm -rf ~")], "models[0].name 'x;rm -rf ~' has ' ', ';', '~'"),
    ([("name: ranker", "name: Scorer")],
     "models[1] writes 'Scorer' and models[0] writes 'scorer', which become the same Kubernetes name 'scorer'"),
    ([("name: scorer", "name: fraud_eu"), ("name: ranker", "name: fraud-eu")],
     "models[1] writes 'fraud-eu' and models[0] writes 'fraud_eu', which become the same Kubernetes name"),
])
def test_names_follow_the_stated_rule(tmp_path, capsys, changes, words):
    text = BASE
    for change in changes:
        text = text.replace(*change)
    line = _file_case(tmp_path, capsys, text)
    assert words in line, line


@pytest.mark.parametrize(("model", "words"), [
    ("resnet1800", "models[0].model: unknown model 'resnet1800'. Did you mean"),
    ("'timm:resnet1800'", "models[0].model: timm does not know the architecture 'resnet1800'"),
])
def test_a_model_reference_is_resolved_on_read(tmp_path, capsys, model, words):
    line = _file_case(tmp_path, capsys, BASE.replace("model: scorer.onnx", f"model: {model}"))
    assert words in line, line


# ---- flags ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--deploy", "--result-pa", "--max-min"])
def test_abbreviated_flags_are_refused(tmp_path, capsys, flag):
    argv = {"--deploy": [flag, str(_deployment(tmp_path))],
            "--result-pa": ["--deployment", str(_deployment(tmp_path)), flag, "x"],
            "--max-min": ["--deployment", str(_deployment(tmp_path)), flag, "3"]}[flag]
    line = _refused(tmp_path, capsys, *argv)
    assert f"unrecognized arguments: {flag}" in line, line


@pytest.mark.parametrize(("extra", "words"), [
    (["--data-dir", "samples"], "--data-dir: --deployment names each model"),
    (["--dataloader", "dl.py"], "--dataloader: --deployment names each model"),
    (["--model-arg", "depth=3"], "--model-arg: --deployment names each model"),
    (["--num-classes", "10"], "--num-classes: --deployment names each model"),
    (["--input-type", "onnx"], "--input-type: --deployment names each model"),
])
def test_flags_a_deployment_would_ignore_are_refused(tmp_path, capsys, extra, words):
    line = _refused(tmp_path, capsys, "--deployment", str(_deployment(tmp_path)), *extra)
    assert words in line, line


@pytest.mark.slow
def test_timm_names_read_from_its_source_are_the_ones_it_registers():
    """The on-read check reads timm's architectures from its files (no torch import): the same set timm lists."""
    from deployment_toolkit.compat import import_timm
    from deployment_toolkit.sources.timm_source import _architectures

    names, deprecated = _architectures()
    timm = import_timm()
    assert set(names) == set(timm.list_models())
    assert deprecated and all(timm.is_model(name) for name in sorted(deprecated)[:20])
