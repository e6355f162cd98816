"""Outputs that couple the samples of a batch (a [B, B] similarity, a batch statistic) are found before export:
the model is served with max_batch_size 0, each request one whole batch, and the manifest says which outputs
did it. Row-wise models keep their batch axis. (CLIP itself: tests/integration/test_caches_and_coupled_batches.py.)"""
import importlib

import numpy as np
import pytest
import torch
from torch import nn

from deployment_toolkit.export import ConversionError, ConvertOptions, convert
from deployment_toolkit.export.coupling import batch_coupling
from deployment_toolkit.export.onnx import dynamic_axes_of
from deployment_toolkit.models.registry import ModelEntry, Preset
from deployment_toolkit.repository import ConfigOptions
from deployment_toolkit.repository.config import ConfigError, build_config
from deployment_toolkit.runtimes.artifact import OnnxRuntime
from deployment_toolkit.spec import Manifest, ModelSignature, SpecError, TensorSpec

zoo_source = importlib.import_module("deployment_toolkit.sources.zoo")
SIG = ModelSignature(inputs=(TensorSpec("x", (4,)),), outputs=(TensorSpec("sim", (2,)), TensorSpec("emb", (4,))))


class Similarity(nn.Module):
    """Every sample against every other, like CLIP's logits_per_image, beside a per-sample embedding."""

    def forward(self, x):
        return {"sim": x @ x.T, "emb": torch.tanh(x)}


class Centred(nn.Module):
    """Same shape per sample, but each row depends on the batch's mean (a batch statistic)."""

    def forward(self, x):
        return {"sim": x[:, :2] - x[:, :2].mean(0, keepdim=True), "emb": x * 2}


class RowWise(nn.Module):
    def forward(self, x):
        return {"sim": x[:, :2] * 3, "emb": torch.tanh(x)}


class Noisy(nn.Module):
    """Random per call (a sampling VAE): not coupled, just not deterministic."""

    def forward(self, x):
        return {"sim": x[:, :2] + torch.randn_like(x[:, :2]), "emb": x}


@pytest.fixture
def register(monkeypatch):
    def use(builder) -> None:
        entry = ModelEntry(name="tiny", family="test", task="embedding", metric="cosine", builder=builder,
                           presets={"small": Preset("small", SIG, {}, max_batch_size=8)})
        monkeypatch.setattr(zoo_source, "get_model", lambda name: entry)

    return use


def _probe(model):
    x = torch.randn(2, 4)
    out = model(x)
    return batch_coupling(model, SIG, (x,), (out["sim"], out["emb"]), {"sim": ["sim"], "emb": ["emb"]})


def test_an_output_comparing_the_samples_is_served_one_whole_batch_per_request(register, tmp_path, capsys):
    register(Similarity)
    manifest = convert("tiny", "onnx", tmp_path)
    assert manifest.max_batch_size == 0 and list(manifest.batch_coupled) == ["sim"]
    assert manifest.batch_coupled["sim"] == "[2, 2] for a batch of 2, [1, 1] for one sample"
    shapes = {t.name: (t.shape, t.example_shape) for t in (*manifest.inputs, *manifest.outputs)}
    assert shapes == {"x": ((-1, 4), (2, 4)), "sim": ((-1, -1), (2, 2)), "emb": ((-1, 4), (2, 4))}
    assert manifest.verification["passed"] and manifest.verification["input_shapes"] == [{"x": [2, 4]}, {"x": [4, 4]}]
    assert "note: output(s) sim depend on the other samples of the batch" in capsys.readouterr().err
    loaded = Manifest.load(tmp_path)
    assert loaded.batch_coupled == manifest.batch_coupled
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)  # any request batch
    assert OnnxRuntime(str(tmp_path / "model.onnx"))({"x": x})["sim"].shape == (3, 3)
    cfg = build_config(loaded, ConfigOptions(model_name="tiny", host_has_gpu=False))
    assert cfg.max_batch_size == 0 and not cfg.HasField("dynamic_batching")
    assert [list(t.dims) for t in cfg.input] == [[-1, 4]] and [list(t.dims) for t in cfg.output] == [[-1, -1], [-1, 4]]
    with pytest.raises(ConfigError, match="outputs sim depend on the other samples of a batch.*drop --max-batch-size 4"):
        build_config(loaded, ConfigOptions(model_name="tiny", max_batch_size=4, host_has_gpu=False))


def test_asking_for_batching_a_coupled_model_cannot_do_is_one_line(register, tmp_path):
    register(Similarity)
    with pytest.raises(ConversionError, match=r"^tiny: output\(s\) sim depend on the other samples of the batch "
                                              r".*drop --max-batch-size 4"):
        convert("tiny", "ts-trace", tmp_path, ConvertOptions(max_batch_size=4))
    assert not (tmp_path / "manifest.json").exists()


def test_a_batch_statistic_couples_by_value_and_row_wise_or_random_outputs_do_not():
    coupled = _probe(Centred())
    assert list(coupled.outputs) == ["sim"] and "sample 0 differs by" in coupled.outputs["sim"]
    assert _probe(RowWise()) is None
    torch.manual_seed(0)
    assert _probe(Noisy()) is None  # differs between two identical calls too: no coupling to find


def test_a_row_wise_model_keeps_its_batch_axis(register, tmp_path):
    register(RowWise)
    manifest = convert("tiny", "ts-trace", tmp_path)
    assert manifest.max_batch_size == 8 and manifest.batch_coupled == {}
    assert [t.shape for t in manifest.outputs] == [(2,), (4,)]


def test_without_a_batch_axis_onnx_dynamic_axes_count_from_the_first():
    sig = ModelSignature(inputs=(TensorSpec("ids", (-1, 7), example_shape=(2, 7)),),
                         outputs=(TensorSpec("sim", (-1, -1), example_shape=(2, 2)),))
    assert dynamic_axes_of(sig, dynamic_batch=False) == {"ids": {0: "ids_d0"}, "sim": {0: "sim_d0", 1: "sim_d1"}}
    assert dynamic_axes_of(sig, dynamic_batch=True)["ids"] == {0: "batch", 1: "ids_d1"}


def test_old_manifests_read_and_a_coupled_manifest_must_not_batch(tmp_path):
    d = Manifest(model="m", preset="small", family="f", task="embedding", metric="cosine", format="onnx",
                 artifact="model.onnx", signature=SIG, max_batch_size=8).to_dict()
    d.pop("batch_coupled")  # written before the field
    assert Manifest.from_dict(d).batch_coupled == {}
    with pytest.raises(SpecError, match="couple the batch: max_batch_size must be 0"):
        Manifest.from_dict({**d, "batch_coupled": {"sim": "[2, 2]"}})
