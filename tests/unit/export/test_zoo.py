"""The geospatial, segmentation and diffusion zoo families: small presets build and match their signatures,
and the models with unusual inputs (any band count, a timestep) export to ONNX with those inputs dynamic."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch

import deployment_toolkit  # noqa: F401  (hides the triton/ scripts folder from torch)
from deployment_toolkit.export import convert
from deployment_toolkit.framework import framework_model
from deployment_toolkit.models import get_model, list_models

pytestmark = pytest.mark.slow  # real exports or subprocesses: `make test` runs it, `make test-unit` does not

FAMILIES = {
    "geospatial": ("embedding", "cosine", {"s2_resnet50", "s2_vit_small", "dofa_vit"}),
    "segmentation": ("segmentation", "dice", {"unet2d", "nnunet3d"}),
    "diffusion": ("denoising", "psnr", {"sd_unet"}),
}
ENTRIES = [e.name for fam in FAMILIES for e in list_models(fam)]


def _forward(model, feeds: dict[str, np.ndarray]) -> np.ndarray:
    with torch.no_grad():
        return model(*[torch.from_numpy(v) for v in feeds.values()]).numpy()


def _converted(name: str, out_dir):
    """The toolkit's own ONNX conversion (dynamic axes from the signature, verification), then the exported file
    in ONNX Runtime and the framework model it came from, rebuilt from the manifest."""
    manifest = convert(name, "onnx", out_dir)
    assert manifest.verification["passed"], manifest.verification
    session = ort.InferenceSession(str(out_dir / manifest.artifact), providers=["CPUExecutionProvider"])
    return manifest, session, framework_model(manifest, out_dir)


def test_families_register_expected_models():
    for family, (task, metric, names) in FAMILIES.items():
        entries = list_models(family)
        assert {e.name for e in entries} == names
        for e in entries:
            assert (e.task, e.metric) == (task, metric)
            assert set(e.presets) == {"small", "full"}
            assert e.description


@pytest.mark.parametrize("name", ENTRIES)
def test_signatures_are_consistent(name):
    entry = get_model(name)
    for preset in entry.presets.values():
        sig = preset.signature
        assert [t.name for t in sig.outputs] == ["output__0"]
        for i, spec in enumerate(sig.inputs):
            assert spec.name.endswith(f"__{i}"), "Triton-style names: <name>__<index>"
            if spec.value is not None:
                assert np.asarray(spec.value).size == int(np.prod(spec.concrete_shape))
        inp, out = sig.inputs[0], sig.outputs[0]
        if entry.family == "segmentation":
            assert out.shape[1:] == inp.shape[1:], "masks have the input's spatial size"
        if entry.family == "diffusion":
            assert out.shape == inp.shape, "noise prediction has the sample's shape"
        if entry.family == "geospatial":
            assert len(out.shape) == 1 and inp.concrete_shape[0] == 13, "Sentinel-2: 13 bands -> embedding"
        assert preset.max_batch_size > 0


@pytest.mark.parametrize("name", ENTRIES)
def test_small_preset_forward_matches_signature(name):
    entry = get_model(name)
    sig = entry.signature("small")
    model = entry.build("small")
    assert not model.training
    out = _forward(model, sig.examples(batch=2, seed=1))
    assert out.shape == (2, *sig.outputs[0].concrete_shape)
    assert out.dtype == np.dtype(sig.outputs[0].dtype)
    assert np.isfinite(out).all()


def test_unet2d_takes_572_without_cropping():
    """The full preset's claim: BasicUNet pads odd sizes internally, so 572 in gives 572 out."""
    entry = get_model("unet2d")
    assert entry.signature("full").inputs[0].shape == (1, 572, 572)
    model = entry.builder(features=(4, 4, 4, 4, 4, 4)).eval()  # full geometry, narrow channels: fast
    with torch.no_grad():
        out = model(torch.zeros(1, 1, 572, 572))
    assert tuple(out.shape) == (1, 2, 572, 572)


def test_dofa_onnx_keeps_band_axis_dynamic(tmp_path):
    sig = get_model("dofa_vit").signature("small")
    manifest, session, model = _converted("dofa_vit", tmp_path)
    feeds = sig.examples(batch=2, seed=0)
    np.testing.assert_allclose(feeds["wavelengths__1"][1], sig.inputs[1].value)
    assert [i.name for i in session.get_inputs()] == ["input__0", "wavelengths__1"]
    for spec in session.get_inputs():  # batch and band axes are symbolic in the exported graph, not fixed at 13
        assert all(isinstance(d, str) for d in spec.shape[:2]), (spec.name, spec.shape)
    for bands in ([*range(13)], [1, 2, 3, 7]):  # all 13 bands, then RGB + NIR
        sub = {"input__0": np.ascontiguousarray(feeds["input__0"][:, bands]),
               "wavelengths__1": np.ascontiguousarray(feeds["wavelengths__1"][:, bands])}
        got = session.run(None, sub)[0]
        np.testing.assert_allclose(got, _forward(model, sub), atol=1e-4, rtol=0)
        assert got.shape == (2, sig.outputs[0].shape[0])


def test_dofa_band_order_does_not_matter_but_wavelengths_do():
    entry = get_model("dofa_vit")
    model = entry.build("small")
    feeds = entry.signature("small").examples(batch=2, seed=0)
    ref = _forward(model, feeds)
    perm = np.random.default_rng(0).permutation(13)
    permuted = {k: np.ascontiguousarray(v[:, perm]) for k, v in feeds.items()}
    np.testing.assert_allclose(_forward(model, permuted), ref, atol=1e-4)
    shifted = dict(feeds, wavelengths__1=feeds["wavelengths__1"] + 0.1)
    assert np.abs(_forward(model, shifted) - ref).max() > 1e-3


def test_dofa_rejects_different_wavelengths_in_one_batch():
    entry = get_model("dofa_vit")
    feeds = entry.signature("small").examples(batch=2, seed=0)
    feeds["wavelengths__1"][1] += 0.01
    with pytest.raises(ValueError, match="same for every sample"):
        _forward(entry.build("small"), feeds)


def test_sd_unet_onnx_dynamic_batch(tmp_path):
    sig = get_model("sd_unet").signature("small")
    manifest, session, model = _converted("sd_unet", tmp_path)
    assert all(isinstance(i.shape[0], str) for i in session.get_inputs()), "batch axis is symbolic"
    for batch in (1, 3):
        feeds = sig.examples(batch=batch, seed=batch)
        feeds["timestep__1"] = np.array([[999.0], [10.0], [500.0]][:batch], dtype=np.float32)
        got = session.run(None, feeds)[0]
        assert got.shape == (batch, *sig.outputs[0].shape)
        np.testing.assert_allclose(got, _forward(model, feeds), atol=1e-4, rtol=0)


def test_sd_unet_timestep_changes_prediction():
    """The timestep input must reach the network (a constant-folded timestep would pass shape checks)."""
    entry = get_model("sd_unet")
    model = entry.build("small")
    feeds = entry.signature("small").examples(batch=1)
    a = _forward(model, dict(feeds, timestep__1=np.array([[10.0]], dtype=np.float32)))
    b = _forward(model, dict(feeds, timestep__1=np.array([[900.0]], dtype=np.float32)))
    assert np.abs(a - b).max() > 1e-4


def test_the_declared_names_of_the_families_that_import_torch_are_what_they_register():
    """A deployment's zoo name is checked without importing torch (models.zoo_names): the geospatial and diffusion
    families' names are declared, and must be what those modules register."""
    from deployment_toolkit.models import HEAVY_FAMILY_NAMES, zoo_names

    for family, names in HEAVY_FAMILY_NAMES.items():
        assert sorted(names) == sorted(e.name for e in list_models(family)), family
    assert sorted(zoo_names()) == sorted(e.name for e in list_models())
