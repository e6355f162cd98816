"""Export fixes: ONNX external data travels with the artifact, TensorRT is checked before any export, and
verification tries a second size of dynamic axes."""
import importlib
import json
import os
import shutil

import numpy as np
import pytest
import torch
from torch import nn

import deployment_toolkit.export.onnx as onnx_mod
from deployment_toolkit.export import ConvertOptions, FormatUnavailable, VerificationError, convert, copy_artifact
from deployment_toolkit.export.verify import verify
from deployment_toolkit.sources.outputs import torch_callable
from deployment_toolkit.models.registry import ModelEntry, Preset
from deployment_toolkit.repository import ConfigOptions, write_model
from deployment_toolkit.runtimes.artifact import OnnxRuntime
from deployment_toolkit.spec import Manifest, ModelSignature, SpecError, TensorSpec

pytestmark = pytest.mark.slow  # real exports or subprocesses: `make test` runs it, `make test-unit` does not

convert_mod = importlib.import_module("deployment_toolkit.export.convert")  # the package rebinds `convert`
zoo_source = importlib.import_module("deployment_toolkit.sources.zoo")


def _entry(builder, signature: ModelSignature, name: str = "tiny") -> ModelEntry:
    return ModelEntry(name=name, family="test", task="embedding", metric="cosine", builder=builder,
                      presets={"small": Preset("small", signature, {}, max_batch_size=4)})


@pytest.fixture
def register(monkeypatch):
    """Serve a test model to convert() without touching the global registry."""
    def use(entry: ModelEntry) -> ModelEntry:
        monkeypatch.setattr(zoo_source, "get_model", lambda name: entry)  # the zoo resolver's lookup
        return entry

    return use


# ------------------------------------------------------------------ 1. ONNX external data


class TinyMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8))  # 8 KB weights: external

    def forward(self, x):
        return self.net(x)


MLP_SIGNATURE = ModelSignature(inputs=(TensorSpec("x", (64,)),), outputs=(TensorSpec("y", (8,)),))


def _onnx_output(path, x: np.ndarray) -> np.ndarray:
    return OnnxRuntime(str(path))({"x": x})["y"]


def test_external_data_is_one_file_listed_in_the_manifest_and_copied_into_the_repository(register, tmp_path):
    register(_entry(TinyMLP, MLP_SIGNATURE))
    src = tmp_path / "onnx"
    manifest = convert("tiny", "onnx", src, ConvertOptions(onnx_external_data_threshold=0))
    assert manifest.artifact_files == ["model.onnx", "model.onnx.data"]
    assert manifest.export_options["external_data"] == ["model.onnx.data"]
    assert sorted(p.name for p in src.iterdir()) == ["manifest.json", "model.onnx", "model.onnx.data"]
    assert json.loads((src / "manifest.json").read_text())["artifact_files"] == manifest.artifact_files
    x = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
    expected = _onnx_output(src / "model.onnx", x)

    model_dir = write_model(tmp_path / "repo", src, ConfigOptions(model_name="tiny", host_has_gpu=False))
    version = model_dir / "1"
    assert (version / "model.onnx.data").stat().st_ino != (src / "model.onnx.data").stat().st_ino  # own copy
    shutil.rmtree(src)  # the repository copy must stand alone
    np.testing.assert_array_equal(_onnx_output(version / "model.onnx", x), expected)
    assert Manifest.load(version).artifact_files == ["model.onnx", "model.onnx.data"]


def test_small_models_stay_one_file_and_a_stale_data_file_is_removed(register, tmp_path):
    register(_entry(TinyMLP, MLP_SIGNATURE))
    convert("tiny", "onnx", tmp_path, ConvertOptions(onnx_external_data_threshold=0, verify=False))
    manifest = convert("tiny", "onnx", tmp_path, ConvertOptions(verify=False))  # default threshold: 2 GB
    assert manifest.artifact_files == ["model.onnx"] and manifest.export_options["external_data"] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "model.onnx"]


def test_torch_per_tensor_files_are_gathered_into_one(monkeypatch, tmp_path):
    """Past 2 GB torch writes one file per tensor beside the model; the artifact gets one data file instead."""
    import onnx

    real = onnx_mod._torch_export

    def torch_like(model, signature, example_args, path, opset, dynamic_axes, *rest):
        real(model, signature, example_args, path, opset, dynamic_axes, *rest)
        proto = onnx.load(str(path))
        onnx.save(proto, str(path), save_as_external_data=True, all_tensors_to_one_file=False, size_threshold=0)

    monkeypatch.setattr(onnx_mod, "_torch_export", torch_like)
    model = TinyMLP().eval()
    x = torch.randn(2, 64)
    options = onnx_mod.export_onnx(model, MLP_SIGNATURE, (x,), tmp_path / "model.onnx")  # default threshold
    assert options["external_data"] == ["model.onnx.data"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "model.onnx.data"]
    with torch.no_grad():
        np.testing.assert_allclose(_onnx_output(tmp_path / "model.onnx", x.numpy()), model(x).numpy(), atol=1e-5)


def test_old_manifest_without_artifact_files_still_loads_and_copies_its_external_data(tmp_path):
    """Compat: a manifest written before `artifact_files`, next to an ONNX model with external data."""
    import onnx

    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    model = TinyMLP().eval()
    x = torch.randn(2, 64)
    onnx_mod.export_onnx(model, MLP_SIGNATURE, (x,), src / "model.onnx")
    onnx.save(onnx.load(str(src / "model.onnx")), str(src / "model.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=False, size_threshold=0)  # like an export before this fix
    m = Manifest(model="tiny", preset="small", family="test", task="embedding", metric="cosine", format="onnx",
                 artifact="model.onnx", signature=MLP_SIGNATURE, max_batch_size=4)
    d = m.to_dict()
    del d["artifact_files"]
    (src / "manifest.json").write_text(json.dumps(d))
    old = Manifest.load(src)
    assert old.artifact_files == [] and old.files == ["model.onnx"]
    copy_artifact(src, dst)
    assert len(list(dst.iterdir())) == len(list(src.iterdir())) > 3
    with torch.no_grad():
        np.testing.assert_allclose(_onnx_output(dst / "model.onnx", x.numpy()), model(x).numpy(), atol=1e-5)


def test_copy_falls_back_when_hard_links_fail(register, tmp_path, monkeypatch):
    register(_entry(TinyMLP, MLP_SIGNATURE))
    convert("tiny", "onnx", tmp_path / "a", ConvertOptions(onnx_external_data_threshold=0, verify=False))

    def no_links(src, dst):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_links)
    copy_artifact(tmp_path / "a", tmp_path / "b")
    for name in ("model.onnx", "model.onnx.data"):
        a, b = tmp_path / "a" / name, tmp_path / "b" / name
        assert a.stat().st_ino != b.stat().st_ino and a.read_bytes() == b.read_bytes()


def test_missing_listed_file_is_a_clear_error(register, tmp_path):
    register(_entry(TinyMLP, MLP_SIGNATURE))
    convert("tiny", "onnx", tmp_path / "a", ConvertOptions(onnx_external_data_threshold=0, verify=False))
    (tmp_path / "a" / "model.onnx.data").unlink()
    with pytest.raises(FileNotFoundError, match=r"model\.onnx\.data.*reconvert"):
        copy_artifact(tmp_path / "a", tmp_path / "b")


def test_artifact_files_must_start_with_the_artifact_and_stay_inside(tmp_path):
    base = dict(model="m", preset="small", family="f", task="embedding", metric="cosine", format="onnx",
                artifact="model.onnx", signature=MLP_SIGNATURE, max_batch_size=8)
    with pytest.raises(SpecError, match="start with the artifact"):
        Manifest(**base, artifact_files=["model.onnx.data"])
    with pytest.raises(SpecError, match="relative"):
        Manifest(**base, artifact_files=["model.onnx", "../elsewhere.data"])
    m = Manifest(**base, artifact_files=["model.onnx", "model.onnx.data"])
    m.save(tmp_path)
    assert Manifest.load(tmp_path) == m and m.files == ["model.onnx", "model.onnx.data"]


def test_diffusion_pipeline_denoiser_gets_its_external_data(tmp_path):
    from deployment_toolkit.diffusion.pipeline import PipelineOptions, read_pipeline, write_diffusion_pipeline

    src = tmp_path / "onnx"
    convert("sd_unet", "onnx", src, ConvertOptions(onnx_external_data_threshold=0, verify=False))
    write_diffusion_pipeline(tmp_path / "repo", src, "sd", PipelineOptions(
        denoiser_options=ConfigOptions("sd_denoiser", host_has_gpu=False)))
    _, version_dir = read_pipeline(tmp_path / "repo", "sd")
    assert (version_dir / "model.onnx.data").is_file()
    shutil.rmtree(src)
    import onnxruntime as ort

    ort.InferenceSession(str(version_dir / "model.onnx"), providers=["CPUExecutionProvider"])


# ------------------------------------------------------------------ 2. TensorRT checked first


def test_trt_unavailable_is_raised_before_any_export(register, monkeypatch, tmp_path):
    built = []
    register(_entry(lambda: built.append(1) or TinyMLP(), MLP_SIGNATURE))

    def never(*_args, **_kwargs):
        raise AssertionError("exported ONNX although TensorRT is unavailable")

    monkeypatch.setattr(convert_mod, "tensorrt_available", lambda: (False, "no TensorRT here (test)"), raising=False)
    monkeypatch.setattr("deployment_toolkit.export.tensorrt.tensorrt_available", lambda: (False, "no TensorRT here (test)"))
    monkeypatch.setattr("deployment_toolkit.export.routes.export_onnx", never)
    with pytest.raises(FormatUnavailable, match=r"no TensorRT here \(test\)"):
        convert("tiny", "trt", tmp_path / "trt")
    assert built == [] and not (tmp_path / "trt").exists()


# ------------------------------------------------------------------ 3. second size of dynamic axes


class SumsRows(nn.Module):
    """(B, 4, W) -> (B, 4): fine at any width."""

    def forward(self, x):
        return x.sum(-1)


class BakesWidth(nn.Module):
    """Same in eager mode, but a Python int from the shape becomes a constant in the exported graph: the
    ONNX model keeps summing the example width's columns only."""

    def forward(self, x):
        width = int(x.shape[-1])
        return x[..., :width].sum(-1)


class FixedWidth(nn.Module):
    """Marked dynamic but only runs at width 6: the framework model itself fails at the second size."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 1)

    def forward(self, x):
        return self.proj(x)[..., 0]


DYNAMIC = ModelSignature(inputs=(TensorSpec("x", (4, -1), example_shape=(4, 6)),), outputs=(TensorSpec("y", (4,)),))


def test_alternate_signature_doubles_dynamic_axes_and_repeats_fixed_values():
    from deployment_toolkit.export.verify import alternate_signature

    sig = ModelSignature(
        inputs=(TensorSpec("img", (-1, 8, 8), example_shape=(3, 8, 8)),
                TensorSpec("waves", (-1,), example_shape=(3,), value=[0.4, 0.5, 0.6])),
        outputs=(TensorSpec("y", (5,)),),
    )
    alt = alternate_signature(sig)
    assert [t.concrete_shape for t in alt.inputs] == [(6, 8, 8), (6,)]
    assert alt.inputs[1].value == [0.4, 0.5, 0.6, 0.4, 0.5, 0.6]
    assert alt.examples(2)["img"].shape == (2, 6, 8, 8) and alt.outputs == sig.outputs
    assert alternate_signature(MLP_SIGNATURE) is None


def test_dynamic_model_is_verified_at_two_sizes(register, tmp_path):
    register(_entry(SumsRows, DYNAMIC))
    v = convert("tiny", "onnx", tmp_path).verification
    assert v["passed"] and v["input_shapes"] == [{"x": [4, 6]}, {"x": [4, 12]}] and v["unchecked_shapes"] == []
    assert Manifest.load(tmp_path).verification["input_shapes"] == v["input_shapes"]


@pytest.mark.parametrize("fmt", ["onnx", "ts-trace"])
def test_export_that_baked_in_the_example_size_fails_verification(register, tmp_path, fmt):
    register(_entry(BakesWidth, DYNAMIC))
    options = ConvertOptions(onnx_exporter="torchscript")
    with pytest.raises(VerificationError, match=r"input shapes \{'x': \[4, 12\]\}"):
        convert("tiny", fmt, tmp_path, options)
    v = Manifest.load(tmp_path).verification
    assert not v["passed"] and v["input_shapes"] == [{"x": [4, 6]}, {"x": [4, 12]}]


def test_auto_falls_back_to_the_next_exporter_when_the_first_does_not_verify(register, tmp_path):
    """The TorchScript-based exporter bakes the traced width into a reshape; torch.export keeps it symbolic."""
    register(_entry(BakesWidth, DYNAMIC))
    manifest = convert("tiny", "onnx", tmp_path)
    attempts = manifest.export_options["attempts"]
    assert [(a["exporter"], a["outcome"]) for a in attempts] == [("torchscript", "failed verification"),
                                                                  ("dynamo", "ok")]
    assert "[4, 12]" in attempts[0]["error"] and manifest.export_options["exporter"] == "dynamo"
    assert manifest.verification["passed"] and Manifest.load(tmp_path).export_options["attempts"] == attempts


def test_converted_model_that_rejects_the_second_size_fails_instead_of_crashing():
    reference = torch_callable(SumsRows(), ["x"], ["y"])

    def example_width_only(inputs):
        if inputs["x"].shape[-1] != 6:
            raise RuntimeError("Got invalid dimensions for input: x\nmore detail")
        return reference(inputs)

    result = verify(reference, example_width_only, DYNAMIC, "embedding")
    assert not result.passed
    assert "the converted model failed: RuntimeError: Got invalid dimensions for input: x" in result.message


def test_second_size_the_framework_cannot_run_is_recorded_not_failed():
    model = FixedWidth().eval()
    run = torch_callable(model, ["x"], ["y"])
    result = verify(run, run, DYNAMIC, "embedding")
    assert result.passed and result.input_shapes == [{"x": [4, 6]}]
    assert result.unchecked_shapes[0]["input_shapes"] == {"x": [4, 12]}
    assert "framework model fails there" in result.unchecked_shapes[0]["reason"] and "not checked" in result.message


def test_artifact_files_and_manifest_are_readable_by_other_users(register, tmp_path):
    """A server in a container often runs as another user: nothing may be written 0600."""
    import stat

    from deployment_toolkit.spec import default_file_mode

    register(_entry(TinyMLP, MLP_SIGNATURE))
    convert("tiny", "onnx", tmp_path, ConvertOptions(onnx_external_data_threshold=0, verify=False))
    for name in ("model.onnx", "model.onnx.data", "manifest.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == default_file_mode(), name


# ------------------------------------------------------------------ ONNX at fp16 (the GPU acceptance converts it)


def test_onnx_fp16_has_half_weights_float_io_and_is_verified_with_fp16_tolerances(register, tmp_path):
    import onnx

    register(_entry(TinyMLP, MLP_SIGNATURE))
    manifest = convert("tiny", "onnx", tmp_path, ConvertOptions(precision="fp16"))
    proto = onnx.load(str(tmp_path / "model.onnx"))
    weights = {init.data_type for init in proto.graph.initializer if len(init.dims) == 2}
    assert weights == {onnx.TensorProto.FLOAT16}  # the weights really are half, not a relabelled fp32 file
    io_types = {v.type.tensor_type.elem_type for v in (*proto.graph.input, *proto.graph.output)}
    assert io_types == {onnx.TensorProto.FLOAT}  # clients and perf_analyzer keep sending float32
    v = manifest.verification
    assert v["passed"] and v["device"] == "cpu" and (v["atol"], v["rtol"]) == (1e-2, 1e-2)
    assert manifest.export_options["float16"]
    x = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
    assert _onnx_output(tmp_path / "model.onnx", x).dtype == np.float32


# ------------------------------------------------------------------ every attempt that fails falls through


class Positions(nn.Module):
    """Token positions from a uint8 padding mask: the TorchScript-based exporter writes a CumSum on uint8, a
    file ONNX Runtime refuses to load; the torch.export-based one casts first."""

    def forward(self, mask):
        return mask.cumsum(1) * mask


class Int16Relu(nn.Module):
    """ONNX Runtime has no int16 Relu kernel: whatever exporter writes it, the file does not load."""

    def forward(self, x):
        return torch.relu(x)


MASK = ModelSignature(inputs=(TensorSpec("mask", (6,), "uint8", value_range=(0, 2)),),
                      outputs=(TensorSpec("pos", (6,), "int64"),))


def test_an_onnx_file_onnx_runtime_cannot_load_falls_through_to_the_next_exporter(register, tmp_path):
    register(_entry(Positions, MASK))
    manifest = convert("tiny", "onnx", tmp_path)
    attempts = manifest.export_options["attempts"]
    assert [(a["exporter"], a["outcome"]) for a in attempts] == [("torchscript", "failed to load"), ("dynamo", "ok")]
    assert "INVALID_GRAPH" in attempts[0]["error"] and "CumSum" in attempts[0]["error"]
    assert manifest.verification["passed"] and Manifest.load(tmp_path).artifact_sha256 == manifest.artifact_sha256
    assert (tmp_path / "export.log").is_file()  # an attempt failed: its whole error is kept


def test_every_exporter_writing_a_file_that_does_not_load_is_one_line_each_and_exit_2(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    (tmp_path / "model.py").write_text("import torch\n\n\nclass Relu(torch.nn.Module):\n    def forward(self, x):\n"
                                       "        return torch.relu(x)\n\n\ndef get_model():\n    return Relu()\n")
    proc = subprocess.run([sys.executable, str(root / "triton" / "convert_model.py"), "--input-path",
                           str(tmp_path / "model.py"), "--input-shape", "x=6:int16", "--output-type", "onnx",
                           "--output-path", str(tmp_path / "out")], capture_output=True, text=True, cwd=root, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert "failed with every exporter tried" in lines[0] and len(lines) == 3, proc.stderr
    assert lines[1].startswith("  torchscript: failed to load") and lines[2].startswith("  dynamo: failed to load")
    assert all("Could not find an implementation for Relu" in ln for ln in lines[1:])
    assert not (tmp_path / "out" / "model.onnx").exists() and not (tmp_path / "out" / "manifest.json").exists()


def test_an_unverified_artifact_is_kept_when_a_later_exporter_writes_one_that_does_not_load(register, tmp_path,
                                                                                            monkeypatch):
    """The manifest written for the failed verification must describe the file on disk, not the later one."""
    register(_entry(TinyMLP, MLP_SIGNATURE))
    routes = importlib.import_module("deployment_toolkit.export.routes")
    artifact = tmp_path / "model.onnx"

    def other_weights():  # runs and loads, but is not this model
        torch.manual_seed(123)
        return onnx_mod.export_onnx(TinyMLP().eval(), MLP_SIGNATURE, (torch.zeros(2, 64),), artifact)

    def not_onnx():
        artifact.write_bytes(b"not an onnx file")
        return {"exporter": "garbage", "external_data": []}

    monkeypatch.setattr(convert_mod, "export_routes", lambda *a: [("torchscript", other_weights), ("garbage", not_onnx)])
    with pytest.raises(VerificationError, match=r"y at batch 1: max abs err .*garbage: failed to load"):
        convert("tiny", "onnx", tmp_path)
    m = Manifest.load(tmp_path)
    assert [a["outcome"] for a in m.export_options["attempts"]] == ["failed verification", "failed to load"]
    from deployment_toolkit.sources import sha256_file

    assert sha256_file(artifact) == m.artifact_sha256 and not (tmp_path / ".unverified").exists()
    assert routes.ExportExample  # the real routes module is untouched


class FailsAlone(nn.Module):
    """Runs at the export's batch of 2, fails at batch 1."""

    def forward(self, x):
        if x.shape[0] < 2:
            raise ValueError("this model compares samples, give it at least two")
        return x * 2


def test_a_framework_model_failing_at_a_verification_batch_is_one_line(register, tmp_path):
    from deployment_toolkit.export import ConversionError

    register(_entry(FailsAlone, ModelSignature(inputs=(TensorSpec("x", (4,)),), outputs=(TensorSpec("y", (4,)),))))
    with pytest.raises(ConversionError, match=r"^the framework model itself fails on its example inputs at batch 1: "
                                              r"ValueError: this model compares samples"):
        convert("tiny", "ts-trace", tmp_path)


def test_verification_names_the_torchscript_cause_and_why_only_the_second_size_fails():
    reference = torch_callable(SumsRows(), ["x"], ["y"])

    def interpreter_error(inputs):
        if inputs["x"].shape[-1] != 6:
            raise RuntimeError("The following operation failed in the TorchScript interpreter.\nTraceback of "
                               "TorchScript (most recent call last):\n  graph(...)\nRuntimeError: The size of tensor a "
                               "(6) must match the size of tensor b (12) at non-singleton dimension 2\n")
        return reference(inputs)

    result = verify(reference, interpreter_error, DYNAMIC, "embedding")
    assert "the converted model failed: RuntimeError: The size of tensor a (6) must match" in result.message
    assert "it matches at the example shapes {'x': [4, 6]} only" in result.message
    assert "--input-shape without --dynamic-axis" in result.message
