"""Inference through tritonclient over HTTP or gRPC, optionally through system shared memory.

Shared memory skips serialising tensors into the request: the client writes the input into a
region the server maps, and the server writes outputs into another; only names travel.
"""
from __future__ import annotations

import itertools
import os
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np

from ..cleanup import sweep_dead_runs
from .server_api import connect
from ..spec import TensorSpec, numpy_dtype
from ..errors import UserError, UserInputError

Arrays = dict[str, np.ndarray]


class InferenceError(UserError, RuntimeError):
    pass


def _client_module(protocol: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if protocol == "grpc":
            import tritonclient.grpc as module
        elif protocol == "http":
            import tritonclient.http as module
        else:
            raise UserInputError(f"protocol must be grpc or http, got {protocol!r}")
    return module


def _shm_module():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tritonclient imports the deprecated pkg_resources
        import tritonclient.utils.shared_memory as shm
    return shm


@dataclass
class OutputRequest:
    name: str
    nbytes_per_sample: int


class TritonClient:
    """One connection; `infer` is safe to call from one thread. Use `infer_many` for requests in flight."""

    _region_ids = itertools.count()

    def __init__(self, url: str, protocol: str = "grpc", shared_memory: str = "none", timeout_s: float = 60.0):
        if shared_memory not in ("none", "system"):
            raise UserInputError("shared_memory must be none or system (CUDA shared memory: use perf_analyzer --shared-memory cuda)")
        self.url, self.protocol, self.shared_memory, self.timeout_s = url, protocol, shared_memory, timeout_s
        self.module = _client_module(protocol)
        self.client = connect(url, protocol, timeout_s)  # every call, not only inference, gives up after timeout_s
        self._regions: dict[str, tuple[str, object, int]] = {}
        if shared_memory == "system":
            sweep_dead_runs()  # dtk_<pid>_ regions of a client that was SIGKILLed before it could free them

    def close(self) -> None:
        self._free_regions()
        self.client.close()

    def __enter__(self) -> "TritonClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- metadata --------------------------------------------------------------------------
    def require_ready(self, model: str, version: str = "") -> None:
        try:
            live = self.client.is_server_live()
        except Exception as err:
            raise InferenceError(f"cannot reach Triton at {self.url} over {self.protocol}: {err}") from err
        if not live:
            raise InferenceError(f"Triton at {self.url} is not live")
        if not self.client.is_model_ready(model, version):
            names = self._model_names()
            hint = f"; models in the repository: {', '.join(names)}" if names else ""
            raise InferenceError(f"model {model!r} is not ready on {self.url}{hint}")

    def _model_names(self) -> list[str]:
        try:
            index = self.client.get_model_repository_index()
        except Exception:
            return []
        if isinstance(index, list):
            return [m["name"] for m in index]
        return [m.name for m in index.models]

    def model_config(self, model: str, version: str = "") -> dict:
        """The config the server loaded, as JSON (gRPC's int64 fields come as strings)."""
        if self.protocol == "grpc":
            return self.client.get_model_config(model, version, as_json=True)["config"]
        return self.client.get_model_config(model, version)

    def inference_statistics(self, model: str, version: str = "") -> dict:
        """The statistics extension's answer for `model` (cumulative counters; gRPC's int64 as strings)."""
        if self.protocol == "grpc":
            return self.client.get_inference_statistics(model_name=model, model_version=version, as_json=True)
        return self.client.get_inference_statistics(model_name=model, model_version=version)

    def signature(self, model: str, version: str = "") -> tuple[list[TensorSpec], list[TensorSpec], int]:
        """Inputs, outputs and max batch size as the server reports them (batch axis stripped)."""
        meta = self.client.get_model_metadata(model, version)
        config = self.client.get_model_config(model, version)
        if self.protocol == "grpc":
            from google.protobuf.json_format import MessageToDict

            meta = MessageToDict(meta, preserving_proto_field_name=True)
            config = MessageToDict(config, preserving_proto_field_name=True)["config"]
        max_batch = int(config.get("max_batch_size", 0))

        def specs(items):
            out = []
            for t in items:
                shape = [int(d) for d in t["shape"]]
                if max_batch > 0:
                    shape = shape[1:]
                example = [d if d != -1 else 1 for d in shape] if -1 in shape else None
                out.append(TensorSpec(t["name"], tuple(shape), numpy_dtype(t["datatype"]), example_shape=example))
            return out

        return specs(meta["inputs"]), specs(meta["outputs"]), max_batch

    # ---- inference -------------------------------------------------------------------------
    def infer(self, model: str, inputs: Arrays, outputs: Iterable[OutputRequest] | Iterable[str],
              version: str = "") -> Arrays:
        m = self.module
        outputs = [o if isinstance(o, OutputRequest) else OutputRequest(o, 0) for o in outputs]
        shm = self.shared_memory == "system"
        req_inputs, req_outputs = [], []
        for name, array in inputs.items():
            array = np.ascontiguousarray(array)
            inp = m.InferInput(name, list(array.shape), _triton_dtype(array.dtype))
            if shm:
                region, handle = self._region(f"in_{name}", array.nbytes)
                _shm_module().set_shared_memory_region(handle, [array])
                inp.set_shared_memory(region, array.nbytes)
            else:
                inp.set_data_from_numpy(array)
            req_inputs.append(inp)
        batch = len(next(iter(inputs.values()))) if inputs else 1
        for out in outputs:
            req = m.InferRequestedOutput(out.name)
            handle = None
            if shm:
                if not out.nbytes_per_sample:
                    raise UserInputError(f"output {out.name}: shared memory needs its size (from the manifest)")
                size = out.nbytes_per_sample * batch
                region, handle = self._region(f"out_{out.name}", size)
                req.set_shared_memory(region, size)
            req_outputs.append((out.name, req, handle))
        try:
            result = self.client.infer(model, req_inputs, model_version=version,
                                       outputs=[r for _, r, _ in req_outputs])
        except Exception as err:
            raise InferenceError(f"inference on {model!r} failed: {err}") from err
        return {name: self._read_output(result, name, handle) for name, _, handle in req_outputs}

    def _read_output(self, result, name: str, handle) -> np.ndarray:
        if handle is None:
            return result.as_numpy(name)
        out = result.get_output(name)
        if self.protocol == "grpc":
            shape, datatype = list(out.shape), out.datatype
        else:
            shape, datatype = out["shape"], out["datatype"]
        return _shm_module().get_contents_as_numpy(handle, np.dtype(numpy_dtype(datatype)), shape).copy()

    def _region(self, role: str, size: int) -> tuple[str, object]:
        """A registered region for `role` of at least `size` bytes, reused across requests: registering
        per request costs two round trips, and the server may still hold a region just answered."""
        have = self._regions.get(role)
        if have is not None and have[2] >= size:
            return have[0], have[1]
        if have is not None:
            self._drop(have)
        name = f"dtk_{os.getpid()}_{id(self)}_{next(self._region_ids)}"
        handle = _shm_module().create_shared_memory_region(name, f"/{name}", size)
        self.client.register_system_shared_memory(name, f"/{name}", size)
        self._regions[role] = (name, handle, size)
        return name, handle

    def _drop(self, region: tuple[str, object, int]) -> None:
        name, handle, _ = region
        for attempt in range(50):
            try:
                self.client.unregister_system_shared_memory(name)
                break
            except Exception as err:  # "currently in use" right after a response: the server lets go shortly
                if "in use" not in str(err) or attempt == 49:
                    break
                time.sleep(0.01)
        _shm_module().destroy_shared_memory_region(handle)

    def _free_regions(self) -> None:
        for region in self._regions.values():
            self._drop(region)
        self._regions.clear()


def _triton_dtype(dtype: np.dtype) -> str:
    from ..spec import triton_dtype

    return triton_dtype(np.dtype(dtype).name)


def infer_many(url: str, model: str, batches: Iterable[tuple[object, Arrays]], outputs: list[OutputRequest],
               protocol: str = "grpc", shared_memory: str = "none", in_flight: int = 1,
               version: str = "") -> Iterator[tuple[object, Arrays]]:
    """Send batches with up to `in_flight` requests outstanding (one client per worker thread);
    yields (key, outputs) in input order."""
    local = threading.local()
    clients: list[TritonClient] = []
    lock = threading.Lock()

    def work(item):
        key, inputs = item
        if not hasattr(local, "client"):
            local.client = TritonClient(url, protocol, shared_memory)
            with lock:
                clients.append(local.client)
        return key, local.client.infer(model, inputs, outputs, version)

    try:
        with ThreadPoolExecutor(max_workers=max(1, in_flight)) as pool:
            pending: list = []
            for item in batches:
                pending.append(pool.submit(work, item))
                if len(pending) >= 2 * max(1, in_flight):
                    yield pending.pop(0).result()
            for fut in pending:
                yield fut.result()
    finally:
        for c in clients:
            c.close()
