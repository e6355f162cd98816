"""Run a converted artifact on numpy arrays: ONNX Runtime, TorchScript or a TensorRT plan.

Self-contained on purpose (numpy plus the runtime it loads, imported lazily): the toolkit uses it
in-process for verification and framework inference, and the config generator copies this file next
to `model.py` into the Triton model repository, where the Python backend runs it without the toolkit.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, Hashable, List, Optional, Sequence

import numpy as np

Arrays = Dict[str, np.ndarray]


class ArtifactRuntime:
    """Callable: dict of named numpy inputs -> dict of named numpy outputs."""

    format: str = ""
    input_names: List[str]
    output_names: List[str]

    def __call__(self, inputs: Arrays) -> Arrays:  # pragma: no cover - interface
        raise NotImplementedError


class OnnxRuntime(ArtifactRuntime):
    format = "onnx"

    def __init__(self, path: str, device: str = "cpu", threads: int = 0, accelerator: str = "none"):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        if threads > 0:
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        available = ort.get_available_providers()
        providers: List = ["CPUExecutionProvider"]
        if device.startswith("cuda") and "CUDAExecutionProvider" in available:
            dev_id = int(device.split(":")[1]) if ":" in device else 0
            providers.insert(0, ("CUDAExecutionProvider", {"device_id": dev_id}))
            if accelerator == "trt" and "TensorrtExecutionProvider" in available:
                providers.insert(0, ("TensorrtExecutionProvider", {"device_id": dev_id}))
        elif accelerator == "openvino" and "OpenVINOExecutionProvider" in available:
            providers.insert(0, "OpenVINOExecutionProvider")
        self.session = ort.InferenceSession(path, sess_options=opts, providers=providers)
        self.providers = self.session.get_providers()
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        self._input_types = {i.name: _ORT_TYPES.get(i.type, np.float32) for i in self.session.get_inputs()}

    def __call__(self, inputs: Arrays) -> Arrays:
        feed = {n: np.ascontiguousarray(inputs[n], dtype=self._input_types[n]) for n in self.input_names}
        outs = self.session.run(self.output_names, feed)
        return dict(zip(self.output_names, outs))


_ORT_TYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


class TorchScriptRuntime(ArtifactRuntime):
    format = "torchscript"

    def __init__(
        self,
        path: str,
        input_names: Sequence[str],
        output_names: Sequence[str],
        device: str = "cpu",
        threads: int = 0,
        precision: str = "fp32",
    ):
        import torch

        if threads > 0:
            torch.set_num_threads(threads)
        self.torch = torch
        self.device = torch.device(device)
        self.module = torch.jit.load(path, map_location=self.device).eval()
        self.half = precision == "fp16"
        if self.half:
            self.module = self.module.half()
        self.input_names = list(input_names)
        self.output_names = list(output_names)

    def __call__(self, inputs: Arrays) -> Arrays:
        torch = self.torch
        args = []
        for name in self.input_names:
            t = torch.from_numpy(np.ascontiguousarray(inputs[name])).to(self.device)
            if self.half and t.is_floating_point():
                t = t.half()
            args.append(t)
        with torch.inference_mode():
            out = self.module(*args)
        if isinstance(out, dict):
            out = [out[n] for n in self.output_names]
        elif not isinstance(out, (list, tuple)):
            out = [out]
        return {n: o.detach().float().cpu().numpy() if o.is_floating_point() else o.cpu().numpy()
                for n, o in zip(self.output_names, out)}


class TensorRTRuntime(ArtifactRuntime):
    """Runs a serialized engine with torch tensors as device buffers (TensorRT 10 API)."""

    format = "trt"

    def __init__(self, path: str, device: str = "cuda:0"):
        import tensorrt as trt
        import torch

        self.torch = torch
        self.device = torch.device(device if device.startswith("cuda") else "cuda:0")
        logger = trt.Logger(trt.Logger.WARNING)
        with open(path, "rb") as fh:
            self.engine = trt.Runtime(logger).deserialize_cuda_engine(fh.read())
        if self.engine is None:
            raise RuntimeError(f"TensorRT could not deserialize {path} (built by another TensorRT version or GPU?)")
        self.context = self.engine.create_execution_context()
        names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        self.input_names = [n for n in names if self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.output_names = [n for n in names if self.engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT]
        self._np_dtype = {n: np.dtype(trt.nptype(self.engine.get_tensor_dtype(n))) for n in names}

    def __call__(self, inputs: Arrays) -> Arrays:
        torch = self.torch
        keep = []
        for n in self.input_names:
            t = torch.from_numpy(np.ascontiguousarray(inputs[n], dtype=self._np_dtype[n])).to(self.device)
            keep.append(t)
            self.context.set_input_shape(n, tuple(t.shape))
            self.context.set_tensor_address(n, t.data_ptr())
        outs = {}
        for n in self.output_names:
            shape = tuple(self.context.get_tensor_shape(n))
            t = torch.empty(shape, dtype=_torch_dtype(torch, self._np_dtype[n]), device=self.device)
            outs[n] = t
            self.context.set_tensor_address(n, t.data_ptr())
        stream = torch.cuda.current_stream(self.device)
        if not self.context.execute_async_v3(stream.cuda_stream):
            raise RuntimeError("TensorRT execution failed")
        stream.synchronize()
        return {n: t.float().cpu().numpy() if t.is_floating_point() else t.cpu().numpy() for n, t in outs.items()}


def _torch_dtype(torch, dtype: np.dtype):
    return {np.dtype(np.float32): torch.float32, np.dtype(np.float16): torch.float16,
            np.dtype(np.int32): torch.int32, np.dtype(np.int64): torch.int64,
            np.dtype(np.bool_): torch.bool, np.dtype(np.int8): torch.int8}[np.dtype(dtype)]


def load_runtime(
    path: str,
    fmt: str,
    input_names: Sequence[str] = (),
    output_names: Sequence[str] = (),
    device: str = "cpu",
    threads: int = 0,
    precision: str = "fp32",
    accelerator: str = "none",
) -> ArtifactRuntime:
    if not os.path.exists(path):
        raise FileNotFoundError(f"artifact {path} not found")
    if fmt == "onnx":
        return OnnxRuntime(path, device=device, threads=threads, accelerator=accelerator)
    if fmt in ("ts-trace", "ts-script"):
        return TorchScriptRuntime(path, input_names, output_names, device=device, threads=threads, precision=precision)
    if fmt == "trt":
        return TensorRTRuntime(path, device=device)
    raise ValueError(f"no runtime for format {fmt!r}")


def run_batched(runtime: Callable[[Arrays], Arrays], inputs: Arrays, max_batch: Optional[int]) -> Arrays:
    """Run in chunks of at most `max_batch` along axis 0 and concatenate (for dumps larger than a batch)."""
    n = len(next(iter(inputs.values())))
    if not max_batch or n <= max_batch:
        return runtime(inputs)
    parts: List[Arrays] = [runtime({k: v[i:i + max_batch] for k, v in inputs.items()}) for i in range(0, n, max_batch)]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


# ---- merging the requests of one Triton execute() call ------------------------------------------

def batch_uniform_inputs(parameter: Optional[str], manifest_inputs: Sequence[Dict[str, Any]]) -> List[str]:
    """Inputs whose rows must be equal across a merged batch (e.g. DOFA's band wavelengths: the model
    reads row 0 for the whole batch). The config's `batch_uniform_inputs` parameter names them; without
    it, the manifest inputs marked `batch_uniform`."""
    if parameter is not None:
        return [n.strip() for n in parameter.split(",") if n.strip()]
    return [t["name"] for t in manifest_inputs if t.get("batch_uniform")]


def _row_bytes(row: np.ndarray) -> bytes:
    if row.dtype == object:  # strings / bytes: tobytes() would give pointers
        return repr(row.tolist()).encode()
    return np.ascontiguousarray(row).tobytes()


def merge_key(inputs: Arrays, uniform: Sequence[str]) -> Optional[Hashable]:
    """Requests with equal keys can run as one batch: same dtypes and per-sample shapes (concatenation
    works) and byte-identical rows in every uniform input. None: the request must run alone (its own
    rows of a uniform input differ, so no merge could keep them right)."""
    key: List[Hashable] = [(name, np.asarray(a).dtype.str, np.shape(a)[1:]) for name, a in sorted(inputs.items())]
    for name in uniform:
        rows = np.asarray(inputs[name])
        if rows.ndim == 0 or len(rows) == 0:
            return None
        first = _row_bytes(rows[0])
        if any(_row_bytes(r) != first for r in rows[1:]):
            return None
        key.append((name, first))
    return tuple(key)


def group_requests(per_request: Sequence[Arrays], uniform: Sequence[str]) -> List[List[int]]:
    """Indices of the requests that may be merged, in order of first appearance; a request whose key is
    None gets a group of its own."""
    groups: Dict[Hashable, List[int]] = {}
    order: List[List[int]] = []
    for i, inputs in enumerate(per_request):
        key = merge_key(inputs, uniform)
        if key is not None and key in groups:
            groups[key].append(i)
            continue
        order.append([i])
        if key is not None:
            groups[key] = order[-1]
    return order


def run_requests(runtime: Callable[[Arrays], Arrays], per_request: Sequence[Arrays], uniform: Sequence[str],
                 batched: bool = True) -> List[Arrays]:
    """Answers for each request, in request order. Batched models merge the requests of each group along
    axis 0, run once per group and split the outputs back; requests that differ in a uniform input are
    never merged (merging them would answer every request with the first one's wavelengths)."""
    if not batched:
        return [runtime(p) for p in per_request]
    results: List[Optional[Arrays]] = [None] * len(per_request)
    for group in group_requests(per_request, uniform):
        if len(group) == 1:
            results[group[0]] = runtime(per_request[group[0]])
            continue
        names = list(per_request[group[0]])
        merged = {n: np.concatenate([per_request[i][n] for i in group]) for n in names}
        outputs = runtime(merged)
        bounds = np.cumsum([0] + [len(per_request[i][names[0]]) for i in group])
        for i, a, b in zip(group, bounds[:-1], bounds[1:]):
            results[i] = {n: v[a:b] for n, v in outputs.items()}
    return results  # type: ignore[return-value]
