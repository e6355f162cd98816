"""Models the toolkit has never seen, served on the real embedded tritonserver: a model.py (tests/fixtures)
with checkpoints the test saves (safetensors; a torch state dict under 'state_dict' with 'module.' keys), a
timm architecture the zoo does not list, an ONNX file exported by plain torch.onnx.export (with and without a
batch axis) and a TorchScript file saved outside the toolkit. Each served answer must match the framework
model rebuilt from the manifest's provenance record, and the user model's must match the checkpoint's
weights loaded independently (random init would not)."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from deployment_toolkit.client import TritonClient
from deployment_toolkit.export import ConvertOptions, convert
from deployment_toolkit.export.verify import TOLERANCES
from deployment_toolkit.sources.outputs import torch_callable
from deployment_toolkit.framework import framework_predictor
from deployment_toolkit.repository import ConfigOptions, write_model
from deployment_toolkit.server import LocalTritonServer, ServerConfig
from deployment_toolkit.sources import parse_reference

pytestmark = [pytest.mark.integration, pytest.mark.long]  # long: collected first (conftest)
ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "user_model" / "model.py"


def fixture_model(width=8):
    import importlib.util

    spec = importlib.util.spec_from_file_location("user_model_fixture", FIXTURE)
    fixture = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixture)
    return fixture.get_model(width=width)


def convert_cli(*args):
    proc = subprocess.run([sys.executable, str(ROOT / "triton" / "convert_model.py"), *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, f"convert_model.py failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    assert "-> OK" in proc.stdout, proc.stdout


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("user-models")
    torch.manual_seed(7)
    trained = fixture_model(width=6).eval()
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    state = trained.state_dict()
    save_file({k: v.contiguous() for k, v in state.items()}, base / "weights.safetensors")
    torch.save({"state_dict": {f"module.{k}": v for k, v in state.items()}, "epoch": 1}, base / "weights.pt")

    plain = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Tanh()).eval()
    for name, axes in (("plain_batched", {"features": {0: "n"}, "scores": {0: "n"}}), ("plain_fixed", None)):
        torch.onnx.export(plain, (torch.randn(3, 6),), str(base / f"{name}.onnx"), input_names=["features"],
                          output_names=["scores"], dynamic_axes=axes, dynamo=False)
    torch.jit.trace(fixture_model(width=4).eval(), torch.randn(2, 3, 16, 16)).save(str(base / "elsewhere.pt"))

    art = base / "artifacts"
    # the seed's form through the script: model.py + --model-arg + checkpoint
    convert_cli("--input-path", FIXTURE, "--input-type", "pyt", "--model-arg", "width=6", "--checkpoint",
                base / "weights.safetensors", "--output-type", "onnx", "--output-path", art / "user_onnx")
    convert_cli("--input-path", FIXTURE, "--model-arg", "width=6", "--checkpoint-dir", base / "weights.pt",
                "--output-type", "ts-trace", "--output-path", art / "user_ts")
    convert_cli("--model", "timm:test_resnet", "--input-size", "32", "--num-classes", "10", "--output-type", "onnx",
                "--output-path", art / "timm_onnx")
    sources = {
        "plain_batched": parse_reference(str(base / "plain_batched.onnx")),
        "plain_fixed": parse_reference(str(base / "plain_fixed.onnx")),
        "ts_elsewhere": parse_reference(str(base / "elsewhere.pt"), input_shapes={"image": [3, 16, 16]}),
    }
    for name, source in sources.items():
        fmt = "ts-trace" if source.kind == "ts" else "onnx"
        assert convert(source, fmt, art / name, ConvertOptions()).verification["passed"]
    repo = base / "repo"
    names = ["user_onnx", "user_ts", "timm_onnx", *sources]
    for name in names:
        write_model(repo, art / name, ConfigOptions(model_name=name, host_has_gpu=False))
    with LocalTritonServer(ServerConfig(repo, log_dir=base / "logs")) as server:
        server.require_models(names)
        with TritonClient(server.grpc_url) as client:
            yield client, art, trained, base


def close(ref, got, what):
    atol, rtol = TOLERANCES["fp32"]
    ref, got = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    scale = float(np.max(np.abs(ref)))
    assert scale > 0, f"{what}: all-zero reference proves nothing"
    assert float(np.max(np.abs(ref - got))) <= atol + rtol * scale, what


@pytest.mark.parametrize("name", ["user_onnx", "user_ts", "timm_onnx", "plain_batched", "plain_fixed",
                                  "ts_elsewhere"])
def test_served_answer_matches_the_framework_model_rebuilt_from_provenance(served, name):
    client, art, _, _ = served
    predict, manifest, _ = framework_predictor(art / name, "framework")
    batch = 0 if manifest.max_batch_size == 0 else 3
    inputs = manifest.signature.examples(batch, seed=11)
    got = client.infer(name, inputs, [t.name for t in manifest.outputs])
    ref = predict(inputs)
    for spec in manifest.outputs:
        close(ref[spec.name], got[spec.name], f"{name}.{spec.name}")


def test_user_model_serves_the_checkpoint_weights(served):
    client, art, trained, _ = served
    for name in ("user_onnx", "user_ts"):
        manifest = json.loads((art / name / "manifest.json").read_text())
        assert manifest["source"]["kind"] == "python" and manifest["source"]["kwargs"] == {"width": 6}
        assert manifest["source"]["checkpoint_sha256"]
        inputs = {"image": np.random.default_rng(3).standard_normal((4, 3, 16, 16)).astype(np.float32)}
        expected = torch_callable(trained, ["image"], ["logits"])(inputs)["logits"]
        close(expected, client.infer(name, inputs, ["logits"])["logits"], name)
        untrained = torch_callable(fixture_model(width=6).eval(), ["image"], ["logits"])(inputs)["logits"]
        assert not np.allclose(untrained, expected, atol=1e-3)  # the weights made a difference


def test_artifacts_without_a_batch_axis_are_served_with_max_batch_size_0(served):
    client, art, _, _ = served
    cfg = client.config("plain_fixed")  # the typed ModelConfig the server loaded
    assert cfg.max_batch_size == 0 and list(cfg.input[0].dims) == [3, 6]
    cfg = client.config("plain_batched")
    assert cfg.max_batch_size > 0 and list(cfg.input[0].dims) == [6]


def test_timm_manifest_records_the_arch_and_overrides(served):
    _, art, _, _ = served
    rec = json.loads((art / "timm_onnx" / "manifest.json").read_text())
    assert rec["model"] == "timm:test_resnet" and rec["source"]["kind"] == "timm"
    assert rec["source"]["kwargs"] == {"num_classes": 10, "input_size": 32} and "timm" in rec["versions"]
    assert rec["signature"]["inputs"][0]["shape"] == [3, 32, 32]
