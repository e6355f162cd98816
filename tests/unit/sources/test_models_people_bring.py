"""The models people bring, through `convert_model.py` as a user runs it: a Hugging Face model returning a
ModelOutput whose inputs come from a dataloader (int64 tokens, a dynamic sequence axis), a model.py importing
torchvision with an OrderedDict output, attention layers PyTorch fuses in eval, lazy modules, an exporter that
hangs and data that disagrees with itself. Each bad case ends in one line and exit 2."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.long]  # real exports or subprocesses: `make test` runs it, `make test-unit` does not

ROOT = Path(__file__).resolve().parents[3]
BROUGHT = ROOT / "tests" / "fixtures" / "brought"


def convert_cli(*args, timeout=300):
    return subprocess.run([sys.executable, str(ROOT / "triton" / "convert_model.py"), *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, timeout=timeout)


def one_error_line(proc):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr.strip()


@pytest.mark.parametrize("fmt", ["onnx", "ts-trace"])
def test_hugging_face_model_with_inputs_from_its_dataloader(tmp_path, fmt):
    proc = convert_cli("--input-path", BROUGHT / "text" / "model.py", "--dataloader", BROUGHT / "text" / "dataloader.py",
                       "--output-type", fmt, "--output-path", tmp_path)
    assert proc.returncode == 0 and "-> OK" in proc.stdout, proc.stdout + proc.stderr
    m = json.loads((tmp_path / "manifest.json").read_text())
    inputs = {t["name"]: t for t in m["signature"]["inputs"]}
    assert list(inputs) == ["input_ids", "attention_mask", "token_type_ids"]
    assert all(t["dtype"] == "int64" and t["shape"] == [-1] and t["example_shape"] == [12] for t in inputs.values())
    assert inputs["token_type_ids"]["value_range"] == [0, 2] and inputs["attention_mask"]["value_range"] == [0, 2]
    assert 1 <= inputs["input_ids"]["value_range"][0] and inputs["input_ids"]["value_range"][1] <= 120
    assert [t["name"] for t in m["signature"]["outputs"]] == ["logits"] and m["output_paths"] == {"logits": ["logits"]}
    v = m["verification"]
    assert v["passed"] and v["input_shapes"][1]["input_ids"] == [24] and v["samples_checked"] >= 4
    assert m["source"]["data_inputs"]["input_ids"]["shape"] == [-1]  # provenance: a rebuild needs no data


def test_script_failure_is_one_line_per_exporter_with_the_log_in_the_output_folder(tmp_path):
    proc = convert_cli("--input-path", BROUGHT / "text" / "model.py", "--dataloader", BROUGHT / "text" / "dataloader.py",
                       "--output-type", "ts-script", "--output-path", tmp_path)
    err = one_error_line(proc)
    assert "failed with every exporter tried" in err and "\n  script: failed in" in err
    assert (tmp_path / "export.log").is_file() and "Traceback" in (tmp_path / "export.log").read_text()
    assert not (tmp_path / "model.pt").exists()


@pytest.mark.parametrize("mismatch, says", [("dtype", "is int32, the first batch's was int64"),
                                            ("rank", "has per-sample rank 2 [1, 20], the first batch's had 1 [12]")])
def test_batches_that_disagree_are_refused_in_one_line(tmp_path, mismatch, says):
    proc = convert_cli("--input-path", BROUGHT / "text" / "model.py", "--dataloader", BROUGHT / "text" / "dataloader.py",
                       "--dataloader-arg", f"mismatch={mismatch}", "--output-type", "onnx", "--output-path", tmp_path)
    assert says in one_error_line(proc) and not (tmp_path / "manifest.json").exists()


def test_torchvision_model_py_with_an_ordered_dict_output_and_outputs_subset(tmp_path):
    seg = BROUGHT / "segmentation" / "model.py"
    proc = convert_cli("--input-path", seg, "--input-shape", "x=3,64,64", "--output-type", "onnx",
                       "--output-path", tmp_path / "all")
    assert proc.returncode == 0 and "-> OK" in proc.stdout, proc.stdout + proc.stderr
    assert "outputs: out [3, 64, 64] float32, aux [3, 64, 64] float32" in proc.stdout
    proc = convert_cli("--input-path", seg, "--input-shape", "x=3,64,64", "--outputs", "out", "--output-type",
                       "ts-trace", "--output-path", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [t["name"] for t in m["signature"]["outputs"]] == ["out"] and m["source"]["outputs"] == ["out"]
    proc = convert_cli("--input-path", seg, "--input-shape", "x=3,64,64", "--outputs", "logits", "--output-type",
                       "onnx", "--output-path", tmp_path / "bad")
    assert "--outputs names logits, which the model does not return; it returns out, aux" in one_error_line(proc)


def test_an_exporter_that_hangs_is_stopped_with_one_line(tmp_path):
    proc = convert_cli("--input-path", BROUGHT / "hangs" / "model.py", "--input-shape", "x=4", "--output-type",
                       "ts-trace", "--export-timeout", "3", "--output-path", tmp_path, timeout=120)
    err = one_error_line(proc)
    assert "ts-trace export with trace did not finish within 3 s (--export-timeout); stopped" in err
    assert "Current thread" in (tmp_path / "export.log").read_text() or "Thread" in (tmp_path / "export.log").read_text()
    assert not (tmp_path / "model.pt").exists() and not (tmp_path / "manifest.json").exists()


def test_fused_attention_and_lazy_modules_export_to_onnx_and_rebuild_identically(tmp_path):
    """nn.TransformerEncoder's eval fast path has no ONNX mapping; the fast path is off while exporting only. The
    lazy head gets its weights under the seed, so the framework rebuilt from the manifest answers as exported."""
    (tmp_path / "model.py").write_text(
        "import torch\n"
        "class Encoder(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.emb = torch.nn.Embedding(50, 32)\n"
        "        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)\n"
        "        self.enc = torch.nn.TransformerEncoder(layer, 2)\n"
        "        self.head = torch.nn.LazyLinear(5)\n"
        "    def forward(self, input_ids):\n"
        "        h = self.enc(self.emb(input_ids))\n"
        "        return {'pooled': self.head(h.mean(1)), 'tokens': h}\n"
        "def get_model():\n"
        "    return Encoder()\n")
    proc = convert_cli("--input-path", tmp_path / "model.py", "--input-shape", "input_ids=10:int64", "--dynamic-axis",
                       "input_ids:0", "--output-type", "onnx", "--output-path", tmp_path / "onnx")
    assert proc.returncode == 0 and "-> OK" in proc.stdout, proc.stdout + proc.stderr
    from deployment_toolkit.framework import framework_predictor

    ref, manifest, _ = framework_predictor(tmp_path / "onnx", "framework")
    art, _, _ = framework_predictor(tmp_path / "onnx", "onnxruntime")
    assert [t.name for t in manifest.outputs] == ["pooled", "tokens"] and manifest.outputs[1].shape == (-1, 32)
    x = {"input_ids": np.random.default_rng(1).integers(0, 50, size=(3, 7)).astype(np.int64)}
    for name in ("pooled", "tokens"):
        np.testing.assert_allclose(art(x)[name], ref(x)[name], atol=1e-4)
