"""ONNX -> TensorRT engine (plan) with an optimization profile over the batch axis.

Needs an NVIDIA GPU and the `tensorrt` Python package (the `gpu` extra); on other hosts it raises
FormatUnavailable, which the conversion matrix records as a skip with this reason.
"""
from __future__ import annotations

from pathlib import Path

from ..runtimes.host import tensorrt_available  # noqa: F401  (the host probe, re-exported)
from ..spec import ModelSignature
from .errors import ConversionError, FormatUnavailable
from .files import write_replacing
from .verify import alternate_shape


def build_engine(onnx_path: Path, signature: ModelSignature, path: Path, *, precision: str = "fp32",
                 min_batch: int = 1, opt_batch: int = 1, max_batch: int = 8,
                 workspace_bytes: int = 1 << 30) -> dict:
    ok, why = tensorrt_available()
    if not ok:
        raise FormatUnavailable(why)
    import tensorrt as trt

    if not (1 <= min_batch <= opt_batch <= max_batch):
        raise ConversionError(f"profile needs 1 <= min <= opt <= max batch, got {min_batch}/{opt_batch}/{max_batch}")
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # explicit batch is the only mode in TensorRT 10
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):  # from the file: finds external data (> 2 GB) beside it
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise ConversionError("TensorRT could not parse the ONNX model:\n" + "\n".join(errors))
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_bytes)
    if precision == "fp16":
        if not builder.platform_has_fast_fp16:
            raise FormatUnavailable("this GPU has no fast fp16; build the engine in fp32")
        config.set_flag(trt.BuilderFlag.FP16)
    profile = builder.create_optimization_profile()
    dynamic = {}
    for spec in signature.inputs:
        # dynamic non-batch axes span the example size up to the second size verification checks
        dims, top = spec.concrete_shape, alternate_shape(spec)
        profile.set_shape(spec.name, (min_batch, *dims), (opt_batch, *dims), (max_batch, *top))
        if spec.is_dynamic:
            dynamic[spec.name] = [list(dims), list(top)]
    config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise ConversionError("TensorRT failed to build the engine (see the TensorRT log above)")
    write_replacing(path, lambda tmp: tmp.write_bytes(bytes(plan)))
    return {"precision": precision, "profile": [min_batch, opt_batch, max_batch], "workspace_bytes": workspace_bytes,
            "tensorrt": trt.__version__, "dynamic_shapes": dynamic}
