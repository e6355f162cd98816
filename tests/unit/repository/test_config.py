"""Config generator: protobuf round trip, golden text for the native GPU backends (whose binaries are
not on CPU hosts), and the semantic checks."""
import warnings
from pathlib import Path

import pytest

from deployment_toolkit.repository.config import (
    BatchingWarning, ConfigError, ConfigOptions, HostMismatchWarning, build_config, parse_text, to_text,
)
from deployment_toolkit.spec import Manifest, ModelSignature, TensorSpec

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "configs"


def manifest(fmt="onnx", precision="fp32", max_batch=8):
    sig = ModelSignature(inputs=(TensorSpec("input__0", (3, 224, 224)),), outputs=(TensorSpec("output__0", (1000,)),))
    return Manifest(model="resnet50", preset="full", family="timm", task="classification", metric="top1", format=fmt,
                    artifact={"onnx": "model.onnx", "trt": "model.plan"}.get(fmt, "model.pt"), signature=sig,
                    max_batch_size=max_batch, precision=precision)


GOLDEN_CASES = {
    "onnx_trt_accelerator_gpu": (manifest("onnx"), dict(runtime="native", instances=2, instance_kind="gpu", gpu_ids=(0,),
                                   backend_accelerator="trt", precision="fp16", preferred_batch_sizes=(4, 8),
                                   max_queue_delay_us=100, host_has_gpu=True)),
    "tensorrt_plan_cuda_graph": (manifest("trt", "fp16"), dict(runtime="native", instance_kind="gpu",
                                   capture_cuda_graph=True, warmup_batch_sizes=(1, 8), host_has_gpu=True)),
    "libtorch_trace_gpu": (manifest("ts-trace"), dict(runtime="native", instances=1, host_has_gpu=True,
                             version_policy="specific:1,2", response_cache=True, intra_op_threads=4)),
    "onnx_openvino_cpu": (manifest("onnx"), dict(runtime="native", backend_accelerator="openvino", host_has_gpu=False)),
    "python_runtime_cpu": (manifest("onnx"), dict(runtime="python", instances=2, intra_op_threads=1,
                             preferred_batch_sizes=(8,), max_queue_delay_us=500, host_has_gpu=False)),
}


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_golden_configs(case, request):
    m, kwargs = GOLDEN_CASES[case]
    text = to_text(build_config(m, ConfigOptions(model_name="resnet50", **kwargs)))
    path = GOLDEN / f"{case}.pbtxt"
    if request.config.getoption("--update-golden", default=False):
        path.write_text(text)
    assert text == path.read_text(), f"config for {case} changed; review and rerun with --update-golden"
    assert to_text(parse_text(text)) == text  # round trip through Triton's schema


def test_platform_mapping_and_dims():
    for fmt, platform in (("onnx", "onnxruntime_onnx"), ("ts-script", "pytorch_libtorch"), ("trt", "tensorrt_plan")):
        cfg = build_config(manifest(fmt), ConfigOptions("m", runtime="native", host_has_gpu=True))
        assert cfg.platform == platform and not cfg.backend
        assert list(cfg.input[0].dims) == [3, 224, 224]
    cfg = build_config(manifest(), ConfigOptions("m", host_has_gpu=False))
    assert cfg.backend == "python" and cfg.instance_group[0].kind == cfg.instance_group[0].KIND_CPU
    assert cfg.parameters["artifact"].string_value == "model.onnx"


def test_dynamic_dims_written_as_minus_one():
    sig = ModelSignature(inputs=(TensorSpec("x", (-1, 64, 64), example_shape=(13, 64, 64)),),
                         outputs=(TensorSpec("y", (384,)),))
    m = Manifest(model="dofa", preset="small", family="g", task="embedding", metric="cosine", format="onnx",
                 artifact="model.onnx", signature=sig, max_batch_size=4)
    cfg = build_config(m, ConfigOptions("dofa", host_has_gpu=False))
    assert list(cfg.input[0].dims) == [-1, 64, 64]


@pytest.mark.parametrize("kwargs, match", [
    (dict(preferred_batch_sizes=(4, 16)), "outside 1..max_batch_size"),
    (dict(max_batch_size=0, preferred_batch_sizes=(1,)), "outside|need dynamic batching"),
    (dict(instances=0), "must be >= 1"),
    (dict(runtime="native", capture_cuda_graph=True), "TensorRT backend option"),
    (dict(backend_accelerator="openvino", instance_kind="gpu"), "CPU instances"),
    (dict(max_queue_delay_us=-1), ">= 0"),
    (dict(version_policy="newest"), "version policy"),
])
def test_semantic_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        build_config(manifest(), ConfigOptions("m", host_has_gpu=False, **kwargs))


def test_accelerator_needs_matching_format():
    with pytest.raises(ConfigError, match="ONNX Runtime execution accelerator"):
        build_config(manifest("ts-trace"), ConfigOptions("m", runtime="native", backend_accelerator="trt", host_has_gpu=True))


def test_trt_engine_constraints():
    with pytest.raises(ConfigError, match="profile max"):
        build_config(manifest("trt", max_batch=8), ConfigOptions("m", runtime="native", max_batch_size=16, host_has_gpu=True))
    with pytest.raises(ConfigError, match="contradicts the TensorRT engine"):
        build_config(manifest("trt", "fp16"), ConfigOptions("m", runtime="native", precision="fp32", host_has_gpu=True))
    with pytest.raises(ConfigError, match="GPU instances only"):
        build_config(manifest("trt"), ConfigOptions("m", runtime="native", instance_kind="cpu", host_has_gpu=True))


def test_gpu_kind_on_cpu_host_warns_but_writes():
    with pytest.warns(HostMismatchWarning, match="another host"):
        cfg = build_config(manifest(), ConfigOptions("m", runtime="native", instance_kind="gpu", host_has_gpu=False))
    assert cfg.instance_group[0].kind == cfg.instance_group[0].KIND_GPU


def test_parse_error_is_config_error():
    with pytest.raises(ConfigError, match="not a valid Triton model config"):
        parse_text("name: 'x'\nmax_batch_size: lots\n")


def dofa_manifest(fmt="onnx"):
    """A wavelength-conditioned encoder: wavelengths__1 is read once per batch (batch_uniform)."""
    sig = ModelSignature(
        inputs=(TensorSpec("input__0", (-1, 64, 64), example_shape=(3, 64, 64)),
                TensorSpec("wavelengths__1", (-1,), example_shape=(3,), value=[0.49, 0.56, 0.66],
                           batch_uniform=True)),
        outputs=(TensorSpec("output__0", (192,)),))
    return Manifest(model="dofa_vit", preset="small", family="geospatial", task="embedding", metric="cosine",
                    format=fmt, artifact="model.onnx" if fmt == "onnx" else "model.pt", signature=sig,
                    max_batch_size=8)


@pytest.mark.parametrize("fmt", ["onnx", "ts-trace"])
def test_native_backend_gets_no_dynamic_batching_with_a_batch_uniform_input(fmt):
    with pytest.warns(BatchingWarning, match="wavelengths__1 must be equal across a batch.*--model-format python"):
        cfg = build_config(dofa_manifest(fmt), ConfigOptions("dofa", runtime="native", max_queue_delay_us=100,
                                                             host_has_gpu=True))
    assert not cfg.HasField("dynamic_batching")
    assert cfg.max_batch_size == 8  # requests still carry batches, each run as sent


def test_native_backend_refuses_preferred_batch_sizes_with_a_batch_uniform_input():
    with pytest.raises(ConfigError, match="wavelengths__1 must be equal across a batch.*--preferred-batch-sizes"):
        build_config(dofa_manifest(), ConfigOptions("dofa", runtime="native", preferred_batch_sizes=(4,),
                                                    host_has_gpu=True))


def test_python_runtime_batches_and_names_the_inputs_to_group_by():
    cfg = build_config(dofa_manifest(), ConfigOptions("dofa", preferred_batch_sizes=(4,), host_has_gpu=False))
    assert list(cfg.dynamic_batching.preferred_batch_size) == [4]
    assert cfg.parameters["batch_uniform_inputs"].string_value == "wavelengths__1"
    assert "batch_uniform_inputs" not in build_config(manifest(), ConfigOptions("m", host_has_gpu=False)).parameters


def test_batch_uniform_inputs_can_be_overridden_and_are_checked():
    cfg = build_config(dofa_manifest(), ConfigOptions("dofa", runtime="native", batch_uniform_inputs=(),
                                                      host_has_gpu=True))
    assert cfg.HasField("dynamic_batching")
    with pytest.raises(ConfigError, match=r"\['bands'\] are not inputs of dofa_vit"):
        build_config(dofa_manifest(), ConfigOptions("dofa", batch_uniform_inputs=("bands",), host_has_gpu=False))


def test_per_sample_inputs_with_a_fixed_value_keep_dynamic_batching():
    """sd_unet's timestep__1 has an example `value` but is read per sample: batching across requests is safe."""
    from deployment_toolkit.models import get_model

    sig = get_model("sd_unet").preset("small").signature
    m = Manifest(model="sd_unet", preset="small", family="diffusion", task="denoising", metric="psnr",
                 format="onnx", artifact="model.onnx", signature=sig, max_batch_size=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BatchingWarning)
        cfg = build_config(m, ConfigOptions("sd", runtime="native", host_has_gpu=True))
    assert cfg.HasField("dynamic_batching")
    assert get_model("dofa_vit").preset("small").signature.inputs[1].batch_uniform


def test_a_host_without_an_nvidia_driver_has_no_gpu_and_torch_is_not_imported_to_say_so(tmp_path, monkeypatch):
    """Writing a config asks whether the host has a GPU; with none of the driver's paths there the answer is no
    without importing torch (3 CPU-seconds a command); with them, torch is asked as before."""
    import subprocess
    import sys

    from deployment_toolkit.repository import config

    code = ("import sys; from deployment_toolkit.repository import config as c; "
            f"c.NVIDIA_DRIVER_PATHS = ({str(tmp_path / 'absent')!r},); "
            "print(c.host_has_gpu(), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]
    asked = []
    monkeypatch.setattr(config, "NVIDIA_DRIVER_PATHS", (str(tmp_path),))  # a driver path that exists
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: asked.append(1) or True)
    assert config.host_has_gpu() is True and asked == [1]
