"""A deployment's pipelines are checked whole before the first search (issue 53): `plan --deployment` on a file whose
first entry is a plain ONNX model and whose second is a model.py with two outputs behind a postprocess whose one
parameter matches neither is refused in seconds, in one `error:` line naming the entry and the parameter (exit 2, no
traceback), before any model is converted or searched: no search folder, nothing in the workspace."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

from deployment_toolkit.deployment.fanout import search_dir

pytestmark = pytest.mark.integration  # a refused plan starts no server; one that went on would search with it
ROOT = Path(__file__).resolve().parents[2]
TWO_OUTPUTS = '''
import torch


class Scores(torch.nn.Module):
    """Logits and their softmax: two outputs, output__0 and output__1 once exported."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 3)

    def forward(self, x):
        logits = self.fc(x)
        return logits, logits.softmax(-1)


def get_model():
    return Scores()


def get_signature():
    return {"inputs": [{"name": "x", "shape": [8]}],
            "outputs": [{"name": "output__0", "shape": [3]}, {"name": "output__1", "shape": [3]}]}
'''
POSTPROCESS = '''
import numpy as np


def postprocess(scores):
    return {"label": np.argmax(scores, axis=1)}
'''


def _onnx(path: Path) -> Path:
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(torch.nn.Linear(16, 4).eval(), (torch.randn(2, 16),), str(path), input_names=["features"],
                          output_names=["score"], dynamic_axes={"features": {0: "batch"}, "score": {0: "batch"}},
                          dynamo=False)
    return path


def _deployment(base: Path) -> Path:
    (base / "scores").mkdir()
    (base / "scores" / "model.py").write_text(textwrap.dedent(TWO_OUTPUTS))
    (base / "scores" / "postprocess.py").write_text(textwrap.dedent(POSTPROCESS))
    raw = base / "scores" / "raw"
    raw.mkdir()
    for i in range(3):
        np.save(raw / f"sample_{i}.npy", np.random.default_rng(i).random(8, dtype=np.float32))
    path = base / "deployment.yaml"
    path.write_text(yaml.safe_dump({"name": "checked", "models": [
        {"name": "plain", "model": str(_onnx(base / "plain.onnx")), "peak_rps": 10, "p99_ms": 100},
        {"name": "scores", "model": "scores/model.py", "postprocess": "scores/postprocess.py", "raw_data": "scores/raw",
         "peak_rps": 10, "p99_ms": 100}]}, sort_keys=False))
    return path


def test_an_entry_that_cannot_be_wired_is_refused_before_any_search(tmp_path):
    deployment = _deployment(tmp_path)
    out, ws = tmp_path / "plan", tmp_path / "ws"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "deployment_toolkit", "plan", "--deployment", str(deployment),
                           "--result-path", str(out), "--workspace", str(ws), "--preset", "small", "--formats", "onnx",
                           "--max-minutes", "1", "--no-progress"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    line = errors[0]
    assert "models[1] (scores)" in line and "postprocess.py" in line and "'scores'" in line, line
    assert "'output__0'" in line and "'output__1'" in line, line  # the outputs it could have taken
    assert elapsed < 60, f"refused after {elapsed:.0f} s"
    assert not any(search_dir(out, name).exists() for name in ("plain", "scores")), "a search started"
    assert not ws.exists() or not any(ws.iterdir()), f"something was converted: {list(ws.rglob('*'))[:5]}"
    assert "convert, verify and search" not in proc.stdout + proc.stderr, "the first entry's search step began"
