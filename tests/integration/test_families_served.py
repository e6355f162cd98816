"""One embedded tritonserver serving EVERY registered model (small presets, configs written by the
toolkit for the Python-backend runtime on CPU): each loads, and each served answer matches eager PyTorch
from the registry (same seed) within verify.py's fp32 tolerance; the wavelength-conditioned encoder takes
a request with another number of bands."""
import numpy as np
import pytest

from deployment_toolkit.client import TritonClient
from deployment_toolkit.export import ConvertOptions, convert
from deployment_toolkit.export.verify import TOLERANCES
from deployment_toolkit.sources.outputs import torch_callable
from deployment_toolkit.models import get_model, list_models
from deployment_toolkit.models.geospatial import S2_WAVELENGTHS_UM
from deployment_toolkit.repository import ConfigOptions, write_model
from deployment_toolkit.server import LocalTritonServer, ServerConfig

pytestmark = [pytest.mark.integration, pytest.mark.long]  # long: collected first (conftest)

# served name -> (registered model, format): every registered model, ONNX unless named here (a TorchScript
# format per kind of model, so both runtimes of the Python backend are exercised)
OTHER_FORMATS = {"unet2d": "ts-trace", "vit_small_patch16_224": "ts-script", "s2_resnet50": "ts-trace"}
SERVED = {f"{e.name}_{OTHER_FORMATS.get(e.name, 'onnx').replace('-', '_')}": (e.name, OTHER_FORMATS.get(e.name, "onnx"))
          for e in list_models()}
SEED = 0


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Convert every model once (no in-process verification: the test compares the served answers), write
    one repository, start one server; yields (client, manifests by served name)."""
    base = tmp_path_factory.mktemp("families")
    repo = base / "repo"
    manifests = {}
    for name, (model, fmt) in SERVED.items():
        artifact_dir = base / "artifacts" / name
        manifests[name] = convert(model, fmt, artifact_dir, ConvertOptions(preset="small", verify=False, seed=SEED))
        write_model(repo, artifact_dir, ConfigOptions(model_name=name, host_has_gpu=False))
    with LocalTritonServer(ServerConfig(repo, log_dir=base / "logs")) as server:
        server.require_models(list(SERVED))
        with TritonClient(server.grpc_url) as client:
            yield client, manifests


_EAGER: dict = {}


def eager(manifest):
    """The framework model the artifact came from: registry build, same preset and seed."""
    if manifest.model not in _EAGER:
        module = get_model(manifest.model).build(manifest.preset, seed=SEED)
        _EAGER[manifest.model] = torch_callable(module, [t.name for t in manifest.inputs],
                                                [t.name for t in manifest.outputs])
    return _EAGER[manifest.model]


def assert_matches_framework(name, manifest, inputs, got):
    atol, rtol = TOLERANCES["fp32"]
    ref = eager(manifest)(inputs)
    for spec in manifest.outputs:
        r, g = np.asarray(ref[spec.name], np.float64), np.asarray(got[spec.name], np.float64)
        assert g.shape == r.shape, f"{name}.{spec.name}: served shape {g.shape} != framework {r.shape}"
        assert np.isfinite(g).all(), f"{name}.{spec.name}: served output has NaN/inf"
        err, scale = float(np.max(np.abs(r - g))), float(np.max(np.abs(r)))
        assert scale > 0, f"{name}.{spec.name}: framework output is all zeros: the comparison would prove nothing"
        assert err <= atol + rtol * scale, f"{name}.{spec.name}: max abs err {err:.3g} > {atol} + {rtol} x {scale:.3g}"


def test_every_registered_model_is_served():
    assert {m for m, _ in SERVED.values()} == {e.name for e in list_models()}
    assert len(list_models()) >= 14


@pytest.mark.parametrize("name", list(SERVED))
def test_served_answer_matches_framework(served, name):
    client, manifests = served
    manifest = manifests[name]
    inputs = manifest.signature.examples(2, seed=SEED + 1)  # batch 2: the batch axis goes through too
    got = client.infer(name, inputs, [t.name for t in manifest.outputs])
    assert_matches_framework(name, manifest, inputs, got)


def test_dofa_takes_another_number_of_bands(served):
    """Same served model, 4 bands (B2, B3, B4, B8: RGB + NIR) instead of Sentinel-2's 13."""
    client, manifests = served
    manifest = manifests["dofa_vit_onnx"]
    bands = (1, 2, 3, 7)
    rng = np.random.default_rng(7)
    waves = np.asarray([S2_WAVELENGTHS_UM[b] for b in bands], np.float32)
    inputs = {"input__0": rng.standard_normal((2, len(bands), 64, 64)).astype(np.float32),
              "wavelengths__1": np.broadcast_to(waves, (2, len(bands))).copy()}
    got = client.infer("dofa_vit_onnx", inputs, ["output__0"])
    assert got["output__0"].shape == (2, 192)
    assert_matches_framework("dofa_vit_onnx", manifest, inputs, got)
    # the wavelengths input is live: the same pixels called other bands give another embedding
    shifted = dict(inputs, wavelengths__1=inputs["wavelengths__1"] + np.float32(0.3))
    other = client.infer("dofa_vit_onnx", shifted, ["output__0"])["output__0"]
    assert not np.allclose(other, got["output__0"], atol=1e-4)
