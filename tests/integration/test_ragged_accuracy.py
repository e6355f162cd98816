"""Accuracy on real data whose samples differ in length (issue 35): a Hugging Face token classifier (BERT from its
config class, random weights) whose logits have one row per token, taking an attention mask, fed a folder of token-id samples of 6..63
tokens (examples/token_classifier). Served by the real tritonserver and run in the framework, both dumps hold one output per sample of that
sample's own length (sent padded in shared requests, cut back per sample), pair by id, and calculate_metrics scores them sample by sample; the user's calc_sample gets
each sample alone, a whole-dump calc is refused in one line."""
from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_script as script

from deployment_toolkit.data.dump import load_dump
from deployment_toolkit.server import LocalTritonServer, ServerConfig

pytestmark = [pytest.mark.integration, pytest.mark.long]  # long: collected first (conftest)
ROOT = Path(__file__).resolve().parents[2]
TOKENS = ROOT / "examples" / "token_classifier"
FIXTURES = ROOT / "tests" / "fixtures" / "brought" / "tokens"
N = 24


def write_samples(folder: Path) -> dict[str, int]:
    """The example's data maker: one .npz per sample (no batch axis), token ids and attention mask, 6..63 tokens."""
    spec = importlib.util.spec_from_file_location("make_data", TOKENS / "make_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write_samples(folder, N)


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    base = tmp_path_factory.mktemp("ragged")
    data, art, repo = base / "data", base / "onnx", base / "repo"
    lengths = write_samples(data)
    script("convert_model.py", "--input-path", TOKENS / "model.py", "--input-type", "pyt", "--data-dir", data,
           "--output-type", "onnx", "--output-path", art)
    script("config_model_on_triton.py", "--model-repository", repo, "--model-path", art, "--model-name", "tok",
           "--max-batch-size", 8)
    with LocalTritonServer(ServerConfig(repo, log_dir=base / "logs")) as server:
        server.require_models(["tok"])
        script("run_inference_on_triton.py", "--server-url", server.grpc_url, "--model-name", "tok", "--manifest",
               art / "manifest.json", "--data-dir", data, "--batch-size", 4, "--shared-memory", "system",
               "--output-dir", base / "triton", "--dump-inputs")
    script("run_inference_on_fw.py", "--model-path", art, "--data-dir", data, "--batch-size", 8,
           "--output-dir", base / "fw")
    return base, lengths


def test_dumps_hold_each_sample_at_its_own_length(dumps):
    base, lengths = dumps
    for run in ("triton", "fw"):
        dump = load_dump(base / run)
        got = {sid: out.shape for sid, out in zip(dump.ids.tolist(), dump.outputs["logits"])}
        assert got == {sid: (n, 5) for sid, n in lengths.items()}
        meta = json.loads((base / run / "dump.json").read_text())
        assert meta["tensors"]["outputs"]["logits"] == {"shape": [-1, 5], "dtype": "float32", "ragged": True}
        # the model takes an attention mask: samples of different lengths share padded requests, checked once
        assert meta["batching"]["padded"] is True and "attention_mask" in meta["batching"]["mode"]
        assert "padded vs alone: max abs err" in meta["batching"]["reason"]
        assert meta["batching"]["batches"] == -(-N // (4 if run == "triton" else 8))


def test_metrics_compare_sample_by_sample(dumps):
    base, lengths = dumps
    out = script("calculate_metrics.py", "--dump-dir", base / "triton", "--reference-dir", base / "fw",
                 "--csv", base / "m.csv", "--threshold", "cosine_min>=0.9999", "--threshold", "max_abs_err<=1e-4",
                 "--metrics", TOKENS / "metrics.py")
    row = next(csv.DictReader((base / "m.csv").open()))
    assert float(row["num_samples"]) == N and float(row["near_zero_samples"]) == 0, out.stdout
    assert float(row["tokens"]) == pytest.approx(np.mean(list(lengths.values())))
    refused = script("calculate_metrics.py", "--dump-dir", base / "triton", "--reference-dir", base / "fw",
                     "--csv", base / "w.csv", "--metrics", FIXTURES / "whole_metrics.py", check=False)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    line = refused.stderr.strip().splitlines()[-1]
    assert "output 'logits': samples differ in shape" in line and "calc_sample" in line, refused.stderr
