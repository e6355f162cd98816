"""Model sources: every kind resolves to a signature and a framework model, convert() records the source as
provenance, later stages rebuild the model from that record (not from the zoo), and bad sources end with
one line, exit code 2 and nothing written."""
import json
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from deployment_toolkit.export import ConvertOptions, convert
from deployment_toolkit.sources.outputs import torch_callable
from deployment_toolkit.framework import framework_model, framework_predictor
from deployment_toolkit.sources import (ModelSource, SourceError, create_model, parse_reference, rebuild, resolve,
                                        sha256_file)
from deployment_toolkit.sources.checkpoint import read_state_dict
from deployment_toolkit.spec import Manifest

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "user_model" / "model.py"
CONVERT = ROOT / "triton" / "convert_model.py"


def _fixture_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("user_model_fixture", FIXTURE)
    fixture = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixture)
    return fixture


def trained_state(width=8, seed=3):
    """A state dict that differs from the factory's random init (so loading it is observable)."""
    torch.manual_seed(seed)
    model = _fixture_module().get_model(width=width)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5)
    return model.state_dict()


def run_cli(monkeypatch, capsys, *argv):
    """triton/convert_model.py in-process: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", [str(CONVERT), *map(str, argv)])
    with pytest.raises(SystemExit) as exc:
        runpy.run_path(str(CONVERT), run_name="__main__")
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


# ------------------------------------------------------------------ references


@pytest.mark.parametrize("ref, kind", [
    ("resnet50", "zoo"), ("timm:regnety_040", "timm"), ("x/model.py", "python"), ("pkg.mod:build", "python"),
    ("a/model.onnx", "onnx"), ("a/model.pt", "ts"), ("a/model.plan", "trt"),
])
def test_reference_kinds(ref, kind):
    source = parse_reference(ref)
    assert source.kind == kind
    if kind in ("python", "onnx", "ts", "trt") and ":" not in ref:
        assert Path(source.ref).is_absolute()


def test_zoo_source_is_the_registry_model():
    r = resolve("resnet18")
    assert (r.name, r.family, r.max_batch_size, r.signature.inputs[0].shape) == ("resnet18", "timm", 8, (3, 64, 64))


def test_timm_arch_outside_the_zoo_with_overrides():
    r = resolve("timm:test_resnet", kwargs={"num_classes": 7, "in_chans": 1, "input_size": 32})
    assert r.name == "timm:test_resnet" and r.signature.inputs[0].shape == (1, 32, 32)
    assert r.signature.outputs[0].shape == (7,)
    out = r.build(0)(torch.zeros(2, 1, 32, 32))
    assert out.shape == (2, 7)
    with pytest.raises(SourceError, match="timm does not know"):
        resolve("timm:resnet_5o")


def test_model_py_kwargs_reach_factory_and_signature():
    r = resolve(str(FIXTURE), kwargs={"width": 4, "num_classes": 3})
    assert r.signature.outputs[0].shape == (3,) and r.max_batch_size == 4 and r.task == "classification"
    assert r.build(0).head.in_features == 4
    assert r.source.sha256 == sha256_file(FIXTURE)


def test_module_function_reference(monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURE.parent.parent))
    r = resolve("user_model.model:get_model", input_shapes={"x": [3, 8, 8]})
    assert r.signature.inputs[0].name == "x" and r.signature.outputs[0].shape == (5,)


def test_model_py_without_signature_uses_input_shape(tmp_path):
    f = tmp_path / "model.py"
    f.write_text("from torch import nn\ndef get_model():\n    return nn.Linear(6, 2)\n")
    with pytest.raises(SourceError, match="--input-shape"):
        resolve(str(f))
    r = resolve(str(f), input_shapes={"x": [6]})
    assert r.signature.outputs[0].shape == (2,) and r.signature.outputs[0].name == "output__0"


def test_unknown_model_arg_fails_unless_ignored():
    with pytest.raises(SourceError, match=r"takes no parameter depth .*--ignore-unknown-parameters"):
        resolve(str(FIXTURE), kwargs={"depth": 3})
    r = resolve(str(FIXTURE), kwargs={"depth": 3, "width": 4}, ignore_unknown_parameters=True)
    assert r.build(0).head.in_features == 4


# ------------------------------------------------------------------ checkpoints


def test_safetensors_and_wrapped_module_prefixed_state_dicts_load(tmp_path):
    state = trained_state()
    save_file({k: v.contiguous() for k, v in state.items()}, tmp_path / "w.safetensors")
    torch.save({"state_dict": {f"module.{k}": v for k, v in state.items()}, "epoch": 3}, tmp_path / "w.pt")
    x = torch.randn(2, 3, 16, 16)
    ref = _fixture_module().get_model()
    ref.load_state_dict(state)
    ref.eval()
    for ckpt in ("w.safetensors", "w.pt"):
        model = create_model(str(FIXTURE), checkpoint_path=str(tmp_path / ckpt))
        torch.testing.assert_close(model(x), ref(x))
    assert not torch.allclose(create_model(str(FIXTURE))(x), ref(x))  # random init differs: loading is observable


def test_model_wrapper_key_is_unwrapped(tmp_path):
    torch.save({"model": trained_state(), "optimizer": {}}, tmp_path / "ckpt.pth")
    assert "head.weight" in read_state_dict(tmp_path / "ckpt.pth")


# ------------------------------------------------------------------ provenance


def test_manifest_records_the_source_and_stages_rebuild_from_it(tmp_path, monkeypatch):
    save_file({k: v.contiguous() for k, v in trained_state().items()}, tmp_path / "w.safetensors")
    source = parse_reference(str(FIXTURE), kwargs={"width": 8}, checkpoint=str(tmp_path / "w.safetensors"))
    manifest = convert(source, "onnx", tmp_path / "onnx")
    assert manifest.verification["passed"]
    rec = json.loads((tmp_path / "onnx" / "manifest.json").read_text())
    assert rec["source"]["kind"] == "python" and rec["source"]["ref"] == str(FIXTURE)
    assert rec["source"]["sha256"] == sha256_file(FIXTURE)
    assert rec["source"]["checkpoint_sha256"] == sha256_file(tmp_path / "w.safetensors")
    assert rec["source"]["kwargs"] == {"width": 8}
    assert rec["artifact_sha256"] == sha256_file(tmp_path / "onnx" / "model.onnx")
    assert {"torch", "onnx", "python"} <= set(rec["versions"])

    import deployment_toolkit.models as models  # no stage may look the model up in the zoo

    monkeypatch.setattr(models, "get_model", lambda name: pytest.fail(f"zoo lookup of {name}"))
    loaded = Manifest.load(tmp_path / "onnx")
    predict, _, _ = framework_predictor(tmp_path / "onnx", "framework")
    x = loaded.signature.examples(2, seed=5)
    expected = torch_callable(create_model(str(FIXTURE), checkpoint_path=str(tmp_path / "w.safetensors")),
                              ["image"], ["logits"])(x)
    np.testing.assert_allclose(predict(x)["logits"], expected["logits"], rtol=1e-6, atol=1e-6)

    (tmp_path / "w.safetensors").write_bytes(b"changed")  # the record pins the bytes it was made from
    with pytest.raises(SourceError, match="changed since the artifact was made"):
        framework_model(loaded, tmp_path / "onnx")


def test_old_manifests_without_provenance_load_as_zoo(converted):
    directory, manifest = converted["onnx"]
    d = manifest.to_dict()
    d.pop("source")
    d.pop("artifact_sha256")
    old = Manifest.from_dict(d)
    assert old.source == {} and rebuild(old).source == ModelSource("zoo", "resnet18", preset="small",
                                                                   max_batch_size=None)


# ------------------------------------------------------------------ artifacts made elsewhere


def _plain_onnx(path, batch_axis: bool):
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Tanh()).eval()
    kwargs = {"dynamic_axes": {"features": {0: "n"}, "scores": {0: "n"}}} if batch_axis else {}
    torch.onnx.export(model, (torch.randn(2, 6),), str(path), input_names=["features"], output_names=["scores"],
                      dynamo=False, **kwargs)
    return model


@pytest.mark.parametrize("batch_axis", [True, False])
def test_plain_onnx_signature_is_read_from_the_file(tmp_path, batch_axis):
    _plain_onnx(tmp_path / "plain.onnx", batch_axis)
    r = resolve(str(tmp_path / "plain.onnx"))
    assert [t.name for t in r.signature.inputs] == ["features"] and r.signature.outputs[0].name == "scores"
    if batch_axis:
        assert r.max_batch_size == 8 and r.signature.inputs[0].shape == (6,)
    else:
        assert r.max_batch_size == 0 and r.signature.inputs[0].shape == (2, 6)
    manifest = convert(r, "onnx", tmp_path / "out")
    assert manifest.verification["passed"] and manifest.max_batch_size == r.max_batch_size
    assert manifest.export_options["copied_from"] == str(tmp_path / "plain.onnx")
    assert sha256_file(tmp_path / "out" / "model.onnx") == sha256_file(tmp_path / "plain.onnx")


def test_onnx_cannot_become_torchscript(tmp_path):
    _plain_onnx(tmp_path / "plain.onnx", True)
    from deployment_toolkit.export import ConversionError

    with pytest.raises(ConversionError, match="no conversion to ts-trace"):
        convert(str(tmp_path / "plain.onnx"), "ts-trace", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_torchscript_file_made_elsewhere(tmp_path):
    traced = torch.jit.trace(_fixture_module().get_model().eval(), torch.randn(2, 3, 16, 16))
    traced.save(str(tmp_path / "scripted.pt"))
    with pytest.raises(SourceError, match="--input-shape NAME"):
        resolve(str(tmp_path / "scripted.pt"))
    r = resolve(str(tmp_path / "scripted.pt"), input_shapes={"image": [3, 16, 16]})
    assert r.signature.outputs[0].shape == (5,)
    manifest = convert(r, "ts-trace", tmp_path / "out")
    assert manifest.verification["passed"] and manifest.source["kind"] == "ts"


# ------------------------------------------------------------------ bad input through the CLI


def _bad(monkeypatch, capsys, tmp_path, *argv):
    out = tmp_path / "out"
    code, _, err = run_cli(monkeypatch, capsys, *argv, "--output-type", "onnx", "--output-path", out)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert not out.exists(), "nothing may be written for a bad source"
    return lines[0]


def test_model_py_that_fails_to_import(monkeypatch, capsys, tmp_path):
    f = tmp_path / "model.py"
    f.write_text("import no_such_package_xyz\n")
    line = _bad(monkeypatch, capsys, tmp_path, "--input-path", f, "--input-type", "pyt")
    assert "failed to import" in line and "no_such_package_xyz" in line


def test_model_py_without_get_model(monkeypatch, capsys, tmp_path):
    f = tmp_path / "model.py"
    f.write_text("def build():\n    pass\n")
    assert "defines no get_model" in _bad(monkeypatch, capsys, tmp_path, "--input-path", f)


def test_factory_that_raises(monkeypatch, capsys, tmp_path):
    f = tmp_path / "model.py"
    f.write_text("def get_model(**kw):\n    raise RuntimeError('out of coffee')\n"
                 "def get_signature(**kw):\n    return {'inputs': [{'name': 'x', 'shape': [2]}], "
                 "'outputs': [{'name': 'y', 'shape': [2]}]}\n")
    line = _bad(monkeypatch, capsys, tmp_path, "--input-path", f)
    assert "raised RuntimeError: out of coffee" in line


def test_checkpoint_keys_that_do_not_fit(monkeypatch, capsys, tmp_path):
    state = {k: v for k, v in trained_state().items() if not k.startswith("head.")}
    state["classifier.weight"] = torch.zeros(5, 8)
    save_file(state, tmp_path / "bad.safetensors")
    line = _bad(monkeypatch, capsys, tmp_path, "--input-path", FIXTURE, "--checkpoint", tmp_path / "bad.safetensors")
    assert "missing keys (2): head.weight, head.bias" in line and "unexpected keys (1): classifier.weight" in line


class Opaque:  # a pickled class: weights_only=True refuses it
    pass


def test_pickled_checkpoint_is_refused_with_the_way_out(monkeypatch, capsys, tmp_path):
    torch.save({"state_dict": trained_state(), "extra": Opaque()}, tmp_path / "pickled.pt")
    line = _bad(monkeypatch, capsys, tmp_path, "--input-path", FIXTURE, "--checkpoint", tmp_path / "pickled.pt")
    assert "weights_only=True refuses" in line and "safetensors" in line and "save_file" in line


def test_onnx_file_that_does_not_load(monkeypatch, capsys, tmp_path):
    (tmp_path / "broken.onnx").write_bytes(b"not an onnx model at all")
    line = _bad(monkeypatch, capsys, tmp_path, "--input-path", tmp_path / "broken.onnx", "--input-type", "onnx")
    assert "is not a loadable ONNX model" in line


def test_unknown_model_arg_on_the_cli(monkeypatch, capsys, tmp_path):
    line = _bad(monkeypatch, capsys, tmp_path, "--input-path", FIXTURE, "--model-arg", "depth=3")
    assert "takes no parameter depth" in line and "--ignore-unknown-parameters" in line
    code, out, err = run_cli(monkeypatch, capsys, "--input-path", FIXTURE, "--model-arg", "depth=3",
                             "--model-arg", "width=4", "--ignore-unknown-parameters", "--output-type", "onnx",
                             "--output-path", tmp_path / "ok")
    assert code == 0, err
    rec = Manifest.load(tmp_path / "ok")
    assert rec.source["kwargs"] == {"depth": 3, "width": 4} and rec.source["ignore_unknown_parameters"]


def test_exactly_one_model_flag(monkeypatch, capsys, tmp_path):
    assert "exactly one of" in _bad(monkeypatch, capsys, tmp_path, "--model", "resnet18", "--input-path", FIXTURE)


# ------------------------------------------------------------------ the speed line and the worked example


def _run_script(monkeypatch, capsys, script, *argv):
    monkeypatch.setattr(sys, "argv", [str(script), *map(str, argv)])
    with pytest.raises(SystemExit) as exc:
        runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_worked_example_checkpoint_converts(monkeypatch, capsys, tmp_path):
    example = ROOT / "examples" / "my_model"
    code, out, err = _run_script(monkeypatch, capsys, example / "make_checkpoint.py", "--output",
                                 tmp_path / "w.safetensors", "--steps", "3", "--width", "8")
    assert code == 0, err
    code, out, err = run_cli(monkeypatch, capsys, "--input-path", example / "model.py", "--model-arg", "width=8",
                             "--checkpoint", tmp_path / "w.safetensors", "--output-type", "onnx",
                             "--output-path", tmp_path / "onnx")
    assert code == 0 and "-> OK" in out, err
    assert Manifest.load(tmp_path / "onnx").max_batch_size == 16


def test_onnx_with_external_weights_travels_whole(tmp_path):
    import onnx

    _plain_onnx(tmp_path / "raw.onnx", True)
    proto = onnx.load(str(tmp_path / "raw.onnx"))
    (tmp_path / "src").mkdir()
    onnx.save_model(proto, str(tmp_path / "src" / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="m.weights", size_threshold=0)
    manifest = convert(str(tmp_path / "src" / "m.onnx"), "onnx", tmp_path / "out")
    assert manifest.artifact_files == ["model.onnx", "m.weights"] and manifest.verification["passed"]
    assert (tmp_path / "out" / "m.weights").read_bytes() == (tmp_path / "src" / "m.weights").read_bytes()


def test_convert_from_a_manifest_record_into_another_format(monkeypatch, capsys, tmp_path):
    code, _, err = run_cli(monkeypatch, capsys, "--input-path", FIXTURE, "--model-arg", "width=4",
                           "--output-type", "onnx", "--output-path", tmp_path / "onnx")
    assert code == 0, err
    code, out, err = run_cli(monkeypatch, capsys, "--manifest", tmp_path / "onnx" / "manifest.json",
                             "--output-type", "ts-trace", "--output-path", tmp_path / "ts")
    assert code == 0 and "-> OK" in out, err
    assert Manifest.load(tmp_path / "ts").source == Manifest.load(tmp_path / "onnx").source


# ------------------------------------------------------------------ the other tools take any source


def test_search_reuses_only_artifacts_of_the_same_source(tmp_path):
    from deployment_toolkit.search.artifacts import prepare_formats

    first = prepare_formats(str(FIXTURE), "small", ["onnx"], tmp_path, log=lambda m: None)[0]
    logs = []
    again = prepare_formats(str(FIXTURE), "small", ["onnx"], tmp_path, log=logs.append)[0]
    assert any("reusing" in m for m in logs) and again.digest == first.digest
    logs.clear()
    other = prepare_formats(resolve(str(FIXTURE), kwargs={"width": 4}), "small", ["onnx"], tmp_path, log=logs.append)[0]
    assert any("converting" in m for m in logs) and other.manifest.source["kwargs"] == {"width": 4}


def test_tensorrt_sources_and_targets_need_tensorrt(tmp_path, monkeypatch, capsys):
    from deployment_toolkit.export import FormatUnavailable
    from deployment_toolkit.export.tensorrt import tensorrt_available

    if tensorrt_available()[0]:
        pytest.skip("this host has TensorRT: the GPU path runs instead")
    (tmp_path / "engine.plan").write_bytes(b"\0" * 16)
    with pytest.raises(SourceError, match="needs TensorRT and a GPU"):
        resolve(str(tmp_path / "engine.plan"))
    _plain_onnx(tmp_path / "plain.onnx", True)
    with pytest.raises(FormatUnavailable):
        convert(str(tmp_path / "plain.onnx"), "trt", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    code, _, err = run_cli(monkeypatch, capsys, "--input-path", tmp_path / "engine.plan", "--output-type", "trt",
                           "--output-path", tmp_path / "out2")
    assert code == 2 and "needs TensorRT" in err and not (tmp_path / "out2").exists()


def test_the_pickle_refusal_is_never_cut_mid_sentence_and_a_checkpoint_folder_is_named(monkeypatch, capsys, tmp_path):
    """Issue 30: the message once ended in "Re-running `torch.)"; --checkpoint-dir DIR said the file 'does not exist'."""
    torch.save({"state_dict": trained_state(), "extra": Opaque()}, tmp_path / "pickled.pt")
    line = _bad(monkeypatch, capsys, tmp_path, "--input-path", FIXTURE, "--checkpoint", tmp_path / "pickled.pt")
    inner = line.split("refuses to load (", 1)[1].split("); if you trust", 1)[0]
    assert inner and not inner.endswith(("`torch", "`", "(")) and inner.count("`") % 2 == 0, inner
    (tmp_path / "ckpts").mkdir()
    (tmp_path / "ckpts" / "best.safetensors").write_bytes(b"x")
    line = _bad(monkeypatch, capsys, tmp_path, "--input-path", FIXTURE, "--checkpoint-dir", tmp_path / "ckpts")
    assert "is a folder: pass the file itself, e.g." in line and "best.safetensors" in line
