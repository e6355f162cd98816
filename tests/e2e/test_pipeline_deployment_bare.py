"""A three-model deployment written bare is planned (issue 53's Done-when): a text network behind a tokenizer
preprocess (the `tokenizers` library, its tokenizer.json built locally) in a model.py with get_model() and no
get_signature; an image network whose only output the exporter names `output__0`, behind the image preprocess and a
postprocess whose parameter is `logits` (fused into one model); and an ONNX file. Every pipeline is checked in process
before the first search, the image one wired by position (said in the log), and the written fused model maps
`output__0` to `logits`; the plan exits 0 on the real embedded tritonserver and perf_analyzer, kept short."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import yaml

# one at a time under xdist (conftest); three searches, two pipelines' capacities and a shared group measured: about 7
# minutes here, more on a busy host
pytestmark = [pytest.mark.integration, pytest.mark.exclusive, pytest.mark.timeout(1800)]
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FAST = ["--preset", "small", "--formats", "onnx", "--max-minutes", "1", "--measurement-mode", "time_windows",
        "--measurement-interval", "500", "--stability-percentage", "100", "--max-trials", "3", "--max-attempts", "1",
        "--noise-repeats", "1", "--refine-steps", "0", "--max-concurrency", "4", "--max-configs", "1",
        "--capacity-trials", "1", "--capacity-resolution", "0.2", "--open-loop-window-ms", "500", "--retests", "0",
        "--no-confirm", "--no-progress"]
TEXT_MODEL = '''
"""Token embeddings averaged under the attention mask, then a linear layer; returns {"logits": ...}. No
get_signature: its inputs are what the tokenizer preprocess gives."""
import torch


class Reviews(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(256, 16)
        self.head = torch.nn.Linear(16, 3)

    def forward(self, input_ids, attention_mask):
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (self.embed(input_ids) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return {"logits": self.head(pooled)}


def get_model():
    return Reviews()
'''
IMAGE_MODEL = '''
"""A tiny image classifier returning one bare tensor (exported as output__0). No get_signature."""
import torch


def get_model():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                               torch.nn.Flatten(), torch.nn.Linear(8, 10))
'''
IMAGE_POSTPROCESS = '''
"""Logits -> the best class and its probability; the model's only output (output__0) feeds `logits` by position."""
import numpy as np


def postprocess(logits):
    shifted = logits - logits.max(axis=1, keepdims=True)
    probs = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    best = probs.argmax(axis=1)
    return {"label": best.astype(np.int64), "probability": probs[np.arange(len(best)), best].astype(np.float32)}
'''


def _onnx(path: Path) -> Path:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1), torch.nn.Sigmoid())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.eval(), (torch.randn(2, 16),), str(path), input_names=["features"],
                          output_names=["score"], dynamic_axes={"features": {0: "batch"}, "score": {0: "batch"}},
                          dynamo=False)
    return path


def _deployment(base: Path) -> Path:
    sys.path[:0] = [str(EXAMPLES / "image_pipeline"), str(EXAMPLES / "text_pipeline")]
    try:
        from make_images import write_images
        from make_texts import write_texts
    finally:
        del sys.path[:2]
    write_images(base / "images")
    write_texts(base / "reviews")
    for name, text in (("text_model.py", TEXT_MODEL), ("image_model.py", IMAGE_MODEL),
                       ("image_postprocess.py", IMAGE_POSTPROCESS)):
        (base / name).write_text(textwrap.dedent(text))
    path = base / "three.yaml"
    path.write_text(yaml.safe_dump({"name": "three", "models": [
        {"name": "fraud", "model": str(_onnx(base / "fraud.onnx")), "peak_rps": 40, "p99_ms": 100},
        {"name": "reviews", "model": "text_model.py", "preprocess": str(EXAMPLES / "text_pipeline" / "preprocess.py"),
         "raw_data": "reviews", "peak_rps": 10, "p99_ms": 300},
        {"name": "photos", "model": "image_model.py", "preprocess": str(EXAMPLES / "image_pipeline" / "preprocess.py"),
         "postprocess": "image_postprocess.py", "raw_data": "images", "layout": "fused", "peak_rps": 5,
         "p99_ms": 300}], "costs": {"host_hour": 0.4}}, sort_keys=False))
    return path


def test_a_bare_three_model_deployment_is_planned(tmp_path):
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2 as mc

    out, ws = tmp_path / "plan", tmp_path / "ws"
    proc = subprocess.run([sys.executable, "-m", "deployment_toolkit", "plan", "--deployment",
                           str(_deployment(tmp_path)), *FAST, "--result-path", str(out), "--workspace", str(ws)],
                          capture_output=True, text=True, cwd=ROOT, timeout=1700)
    logs = proc.stdout + proc.stderr
    # alone, as make test-e2e runs this module (exclusive), the plan exits 0; on a host busy with other work a model
    # may be left out for its disturbed windows ("no quiet window", exit 1): run it alone
    assert proc.returncode == 0, logs[-6000:]
    steps = json.loads((out / "steps.json").read_text())
    assert steps[0]["name"] == "pipelines checked in process before any search" and steps[0]["status"] == "ok"
    status = {s["name"]: s["status"] for s in steps}
    for name in ("reviews", "photos"):  # written, then served and equal to the steps in-process (fused: logits)
        assert status[f"{name}: pre/post-processing checked on its raw samples, as an ensemble"] == "ok"
        assert status[f"{name}: the served pipeline against its steps in-process"] == "ok"
    assert "photos: 'image' bytes [] -> " in logs and "wired by position: output__0 → logits" in logs, logs[-6000:]
    assert "reviews: 'text' text [] -> 'logits' float32 [3]" in logs  # a dict output keeps its key
    cfg = text_format.Parse((ws / "model_repository" / "photos_pipeline" / "config.pbtxt").read_text(),
                            mc.ModelConfig())
    graph = json.loads(cfg.parameters["graph"].string_value)
    network, post = graph["steps"][1], graph["steps"][2]
    assert network["kind"] == "network" and network["outputs"] == {"output__0": "model__output__0"}
    assert post["inputs"] == {"logits": "model__output__0"}
    assert (out / "plan.md").is_file()
