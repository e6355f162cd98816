"""Artifacts made elsewhere: an ONNX file, a TorchScript file, a TensorRT plan.

The signature is read from the artifact: names, dtypes and shapes from the ONNX graph (a dynamic axis 0 on
every input and output is the batch axis; without one the model is served with max_batch_size 0). A
TorchScript file records its argument names but not shapes: those come from --input-shape, and the outputs
from one run. The "framework model" of an artifact is the artifact itself under its own runtime: what a
copy or a conversion (ONNX -> TensorRT) is verified against.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import reason_line
from ..spec import ModelSignature, SpecError, TensorSpec
from .base import ARTIFACT_KINDS, DEFAULT_MAX_BATCH, ModelSource, ResolvedModel, SourceError, display_name, register_source
from .common import input_specs, probe_outputs, task_and_metric


def _exists(source: ModelSource) -> Path:
    path = Path(source.ref)
    if not path.is_file():
        raise SourceError(f"{source.kind} file {path} does not exist")
    return path


def onnx_dims(value_info) -> tuple[list[int], str]:
    from onnx import helper

    t = value_info.type.tensor_type
    dims = [int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else -1 for d in t.shape.dim]
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type)).name
    except Exception as err:
        raise SourceError(f"ONNX tensor {value_info.name} has an unsupported element type {t.elem_type}") from err
    return dims, dtype


def ort_module(path: Path, input_names: list[str]):
    """An ONNX file as a torch module (tensors in, tensors out): the reference that verification and
    `run_inference_on_fw.py --runtime framework` use for an ONNX source, which has no PyTorch model."""
    import torch

    from ..runtimes.artifact import OnnxRuntime

    class OrtModule(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            try:
                self.runtime = OnnxRuntime(str(path))
            except Exception as err:  # noqa: BLE001 - ONNX Runtime's own classes (Fail, InvalidGraph, ...) say why
                raise SourceError(f"{path} cannot be loaded by ONNX Runtime: {reason_line(err, 300)} (export it "
                                  "again with operators ONNX Runtime has, or give the model another way)") from None
            self.names = input_names

        def forward(self, *args):
            out = self.runtime({n: a.detach().cpu().numpy() for n, a in zip(self.names, args)})
            return tuple(torch.from_numpy(np.asarray(v)) for v in out.values())

    return OrtModule().eval()


def check_external_data(path: Path, graph) -> None:
    """Every external weights file the graph names is there and long enough (ONNX Runtime's own failure is a page
    of C++ context); one line naming the file, its expected and actual size."""
    import onnx

    need: dict[str, int] = {}
    for init in graph.initializer:
        if init.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in init.external_data}
        end = int(info.get("offset", 0) or 0) + int(info.get("length", 0) or 0)
        need[info.get("location", "")] = max(need.get(info.get("location", ""), 0), end)
    for name, size in need.items():
        data = path.parent / name
        if not data.is_file():
            raise SourceError(f"{path} keeps its weights in {name}, which is not next to it ({data}): copy it there "
                              f"(at least {size} bytes)")
        if data.stat().st_size < size:
            raise SourceError(f"{data} is truncated: {data.stat().st_size} bytes, {path.name} needs at least {size}; "
                              "copy it again from where the model was exported")


@register_source("onnx")
def resolve_onnx(source: ModelSource) -> ResolvedModel:
    import onnx

    path = _exists(source)
    try:
        graph = onnx.load(str(path), load_external_data=False).graph
    except Exception as err:
        raise SourceError(f"{path} is not a loadable ONNX model: {type(err).__name__}: "
                          f"{str(err).splitlines()[0][:200] if str(err) else ''}") from err
    check_external_data(path, graph)
    inits = {i.name for i in graph.initializer}
    ins = [(v.name, *onnx_dims(v)) for v in graph.input if v.name not in inits]
    outs = [(v.name, *onnx_dims(v)) for v in graph.output]
    if not ins or not outs:
        raise SourceError(f"{path} has no graph inputs or outputs")
    batched = all(dims and dims[0] == -1 for _, dims, _ in ins + outs)
    if source.max_batch_size == 0:
        batched = False
    per_sample = (lambda d: d[1:]) if batched else (lambda d: d)
    overrides = source.input_shapes
    inputs = []
    for name, dims, dtype in ins:
        shape = per_sample(dims)
        example = overrides.get(name)
        example = example["shape"] if isinstance(example, dict) else example
        if -1 in shape and example is None:
            raise SourceError(f"{path}: input {name} has dynamic axes {shape} (per sample); pass "
                              f"--input-shape {name}=D1,D2,... for examples and perf runs")
        try:
            inputs.append(TensorSpec(name, shape or (1,), dtype, example_shape=example if -1 in shape else None))
        except SpecError as err:
            raise SourceError(f"{path}: input {name}: {err}") from err
    outputs = []
    probed = None
    for i, (name, dims, dtype) in enumerate(outs):
        shape = per_sample(dims)
        example = None
        if -1 in shape:  # learn the example size from one run
            if probed is None:
                probed = probe_outputs(ort_module(path, [t.name for t in inputs]), tuple(inputs), 1 if batched else 0)
            example = probed[i].shape
        outputs.append(TensorSpec(name, shape or (1,), dtype, example_shape=example))
    signature = ModelSignature(inputs=tuple(inputs), outputs=tuple(outputs))
    if source.max_batch_size and not batched:
        raise SourceError(f"{path} has no batch axis (axis 0 of its inputs and outputs is fixed), so it is served "
                          "with max_batch_size 0; drop --max-batch-size or re-export with a dynamic axis 0")
    max_batch = (source.max_batch_size or DEFAULT_MAX_BATCH) if batched else 0
    task, metric = task_and_metric(source, signature.outputs)
    return ResolvedModel(
        source=source, name=display_name(source), family="artifact", task=task, metric=metric, signature=signature,
        max_batch_size=max_batch, builder=lambda seed: ort_module(path, [t.name for t in inputs]),
        artifact=path, artifact_format="onnx",
    )


@register_source("ts")
def resolve_torchscript(source: ModelSource) -> ResolvedModel:
    import torch

    path = _exists(source)

    def build(seed: int):
        try:
            return torch.jit.load(str(path), map_location="cpu").eval()
        except Exception as err:
            raise SourceError(f"{path} is not a loadable TorchScript file: {type(err).__name__}: "
                              f"{str(err).strip().splitlines()[0][:200] if str(err).strip() else ''}") from err

    module = build(0)
    arg_names = [a.name for a in module.forward.schema.arguments[1:]]
    if not source.input_shapes:
        raise SourceError(f"{path}: a TorchScript file does not record its input shapes; pass "
                          f"--input-shape NAME=D1,D2,... for each of its inputs ({', '.join(arg_names)}), per sample")
    inputs = input_specs(source)
    missing = [n for n in arg_names if n not in source.input_shapes]
    if len(inputs) != len(arg_names) and missing:
        raise SourceError(f"{path}: forward takes {', '.join(arg_names)}; --input-shape gave {', '.join(source.input_shapes)}")
    if [t.name for t in inputs] != arg_names and not missing:  # keep forward's order
        inputs = tuple(sorted(inputs, key=lambda t: arg_names.index(t.name)))
    batched = source.max_batch_size != 0
    outputs = probe_outputs(module, inputs, 1 if batched else 0)
    signature = ModelSignature(inputs=inputs, outputs=outputs)
    task, metric = task_and_metric(source, outputs)
    return ResolvedModel(
        source=source, name=display_name(source), family="artifact", task=task, metric=metric, signature=signature,
        max_batch_size=(source.max_batch_size or DEFAULT_MAX_BATCH) if batched else 0, builder=build,
        artifact=path, artifact_format=ARTIFACT_KINDS["ts"],
    )


@register_source("trt")
def resolve_tensorrt(source: ModelSource) -> ResolvedModel:
    from ..runtimes.host import tensorrt_available

    path = _exists(source)
    ok, why = tensorrt_available()
    if not ok:
        raise SourceError(f"{path}: a TensorRT plan needs TensorRT and a GPU on this host ({why})")
    import tensorrt as trt  # pragma: no cover - GPU hosts only

    engine = trt.Runtime(trt.Logger(trt.Logger.WARNING)).deserialize_cuda_engine(path.read_bytes())
    if engine is None:
        raise SourceError(f"{path} is not a TensorRT plan this TensorRT ({trt.__version__}) can load")
    ins, outs = [], []
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        dims = [int(d) for d in engine.get_tensor_shape(name)]
        dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(name))).name
        (ins if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT else outs).append((name, dims, dtype))
    batched = all(d and d[0] == -1 for _, d, _ in ins)
    per_sample = (lambda d: d[1:]) if batched else (lambda d: d)
    inputs = tuple(TensorSpec(n, per_sample(d), t, example_shape=source.input_shapes.get(n) if -1 in per_sample(d) else None)
                   for n, d, t in ins)
    outputs = tuple(TensorSpec(n, [abs(x) for x in per_sample(d)], t) for n, d, t in outs)
    signature = ModelSignature(inputs=inputs, outputs=outputs)
    task, metric = task_and_metric(source, outputs)

    def build(seed: int):
        raise SourceError(f"{path}: a TensorRT plan has no framework model; it is served as-is")

    return ResolvedModel(
        source=source, name=display_name(source), family="artifact", task=task, metric=metric, signature=signature,
        max_batch_size=(source.max_batch_size or DEFAULT_MAX_BATCH) if batched else 0, builder=build,
        artifact=path, artifact_format="trt",
    )
