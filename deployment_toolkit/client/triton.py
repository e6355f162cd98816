"""`TritonClient`: the one way the toolkit talks to a Triton server (perf_analyzer, a subprocess, aside).

One class on a URL that names its protocol (`grpc://host:port`, `http://host:port`): health and readiness,
server and model metadata, the config the server loaded (typed: the same ModelConfig protobuf the config generator
writes), the repository index and load/unload, statistics, a preflight request and inference (optionally through
system shared memory). Every call has a deadline. Callers in other packages wrap its errors in their own;
`tests/unit/client/test_client_boundary.py` fails when a module outside `client/` imports a Triton client.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import numpy as np
from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as mc

from ..cleanup import sweep_dead_runs
from ..config import Protocol, SharedMemory
from ..errors import UserInputError
from ..spec import TensorSpec, numpy_dtype, triton_dtype
from .connection import LOAD_TIMEOUT_S, RPC_TIMEOUT_S, client_module, close_quietly, connect
from .errors import InferenceError, ServerNotReady
from .shm import Regions
from .url import ServerUrl

Arrays = dict[str, np.ndarray]
HEALTH_POLL_S = 0.1  # polling interval of the readiness waits (a health check, not a fixed wait)


@dataclass
class OutputRequest:
    name: str
    nbytes_per_sample: int  # the region's size with shared memory; 0: unknown (a dynamic axis), in the response


class TritonClient:
    """`with TritonClient("grpc://127.0.0.1:8001") as c: c.wait_until_ready("m"); c.infer("m", {...}, ["out"])`.

    One connection; `infer` is safe to call from one thread (use `infer_many` for requests in flight). A bare
    `host:port` takes `protocol` (default grpc)."""

    def __init__(self, url: "str | ServerUrl", protocol: Protocol | str | None = None,
                 shared_memory: SharedMemory | str = SharedMemory.NONE, timeout_s: float = RPC_TIMEOUT_S):
        if shared_memory not in (SharedMemory.NONE, SharedMemory.SYSTEM):
            raise UserInputError("shared_memory must be none or system "
                                 "(CUDA shared memory: use perf_analyzer --shared-memory cuda)")
        shared_memory = SharedMemory(shared_memory)
        self.url = ServerUrl.parse(url, protocol)
        self.protocol, self.shared_memory, self.timeout_s = self.url.protocol, shared_memory, timeout_s
        self.module = client_module(self.protocol)
        self.client = connect(self.url.address, self.protocol, timeout_s)
        self._regions = Regions(self.client)
        self._scalars: dict[tuple[str, str], tuple[bool, frozenset[str]]] = {}  # see scalar_inputs
        if shared_memory == SharedMemory.SYSTEM:
            sweep_dead_runs()  # dtk_<pid>_ regions of a client that was SIGKILLed before it could free them

    def close(self) -> None:
        try:
            self._regions.free()
        finally:
            close_quietly(self.client)

    def __enter__(self) -> "TritonClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _json(self, method: str, *args, **kwargs) -> Any:
        """A call's answer as JSON (gRPC answers a protobuf unless asked; its int64 fields come as strings)."""
        if self.protocol == Protocol.GRPC:
            kwargs["as_json"] = True
        return getattr(self.client, method)(*args, **kwargs)

    # ---- health ------------------------------------------------------------------------------
    def live(self) -> bool:
        """The server process answers; False when nothing does."""
        try:
            return bool(self.client.is_server_live())
        except Exception:  # noqa: BLE001 - not answering is the answer
            return False

    def ready(self, model: str = "", version: str = "") -> bool:
        """The server (no model named) or the model is ready; False when nothing answers."""
        try:
            return bool(self.client.is_model_ready(model, version) if model else self.client.is_server_ready())
        except Exception:  # noqa: BLE001
            return False

    def health_reason(self, model: str, version: str = "") -> str | None:
        """None when the server is live and the model ready, else why not (naming the models it has)."""
        try:
            if not self.client.is_server_live():
                return f"Triton at {self.url} is not live"
            if self.client.is_model_ready(model, version):
                return None
        except Exception as err:  # noqa: BLE001
            return f"Triton at {self.url} does not answer: {str(err).strip() or type(err).__name__}"
        have = self.model_names()
        reason = f"model {model!r} is not ready on {self.url}"
        if have is None:
            return reason
        if model not in have:
            return (f"{reason}: the server's repository has no model {model!r}; it has "
                    f"{', '.join(have) or 'no models'} (pass one of them to --model-name)")
        return f"{reason} (the repository holds it: {self.model_reason(model) or 'still loading?'})"

    def require_ready(self, model: str, version: str = "") -> None:
        reason = self.health_reason(model, version)
        if reason is not None:
            raise ServerNotReady(reason)

    def wait_until_ready(self, model: str, version: str = "", timeout_s: float = 60.0, fail_fast: bool = True) -> None:
        """Poll until the model is ready; with `fail_fast`, a model the repository does not hold fails at once
        (waiting would not help; a polling server that has yet to find a new model is the exception)."""
        deadline = time.monotonic() + timeout_s
        while True:
            reason = self.health_reason(model, version)
            if reason is None:
                return
            if fail_fast and "(pass one of them" in reason:
                raise ServerNotReady(reason)
            if time.monotonic() > deadline:
                raise ServerNotReady(f"{reason} after waiting {timeout_s:.0f} s: start the server / load the model "
                                     "first")
            time.sleep(HEALTH_POLL_S)

    # ---- metadata and config -----------------------------------------------------------------
    def server_metadata(self) -> dict[str, Any]:
        """name, version (the binary has no --version flag), extensions."""
        return self._json("get_server_metadata")

    def server_version(self) -> str | None:
        try:
            return self.server_metadata().get("version")
        except Exception:  # noqa: BLE001 - the version is informative only
            return None

    def metadata(self, model: str, version: str = "") -> dict[str, Any]:
        """Input/output names, datatypes and shapes (shapes as ints on both protocols)."""
        meta = self._json("get_model_metadata", model, version)
        for group in ("inputs", "outputs"):
            for tensor in meta.get(group, []):
                tensor["shape"] = [int(d) for d in tensor.get("shape", [])]
        return meta

    def config_json(self, model: str, version: str = "") -> dict[str, Any]:
        """The loaded config as the server writes it in JSON (what a run's identity records)."""
        answer = self._json("get_model_config", model, version)
        return answer.get("config", {}) if self.protocol == Protocol.GRPC else answer

    def config(self, model: str, version: str = "") -> mc.ModelConfig:
        """The loaded config, typed: the ModelConfig protobuf that repository.config builds and parses."""
        return config_from_json(self.config_json(model, version))

    def signature(self, model: str, version: str = "") -> tuple[list[TensorSpec], list[TensorSpec], int]:
        """Inputs, outputs and max batch size as the server reports them (batch axis stripped)."""
        meta, max_batch = self.metadata(model, version), self.config(model, version).max_batch_size
        scalars = self.scalar_inputs(model, version)[1]

        def specs(items):
            out = []
            for t in items:
                shape = t["shape"][1:] if max_batch > 0 else t["shape"]
                shape = [] if t["name"] in scalars and shape == [1] else shape  # the model's own shape
                example = [d if d != -1 else 1 for d in shape] if -1 in shape else None
                out.append(TensorSpec(t["name"], tuple(shape), numpy_dtype(t["datatype"]), example_shape=example))
            return out

        return specs(meta["inputs"]), specs(meta["outputs"]), max_batch

    def scalar_inputs(self, model: str, version: str = "") -> tuple[bool, frozenset[str]]:
        """(batched, the inputs that are one number per sample): the loaded config declares them dims [1] with
        `reshape: { shape: [ ] }` (Triton needs a dim). Asked once per model: callers hold such an input as the
        model does ([batch]), and `infer` puts it on the wire as [batch, 1]."""
        key = (model, version)
        if key not in self._scalars:
            cfg = self.config(model, version)
            self._scalars[key] = (cfg.max_batch_size > 0, frozenset(
                t.name for t in cfg.input if t.HasField("reshape") and not t.reshape.shape and list(t.dims) == [1]))
        return self._scalars[key]

    def statistics(self, model: str, version: str = "") -> dict[str, Any]:
        """The model's entry of the statistics extension (cumulative counters); {} if the server has none."""
        stats = self._json("get_inference_statistics", model_name=model, model_version=version)
        entries = stats.get("model_stats", [])
        return entries[0] if entries else {}

    # ---- repository --------------------------------------------------------------------------
    def repository_index(self) -> list[dict[str, Any]]:
        """Every model in the repository, loaded or not: name, version, state, reason."""
        index = self._json("get_model_repository_index")
        return index.get("models", []) if isinstance(index, dict) else list(index)

    def model_names(self) -> list[str] | None:
        """Names in the repository index; None if the server does not say."""
        try:
            return sorted({m.get("name", "") for m in self.repository_index()} - {""})
        except Exception:  # noqa: BLE001
            return None

    def model_reason(self, model: str) -> str:
        """The index's reason for `model` (why it is not ready; '' if none)."""
        try:
            return next((m.get("reason", "") for m in self.repository_index() if m.get("name") == model), "")
        except Exception:  # noqa: BLE001 - the reason is informative only
            return ""

    def load(self, model: str) -> None:
        """Blocks until loaded or failed; raises tritonclient's error with the server's reason."""
        slow = connect(self.url.address, self.protocol, LOAD_TIMEOUT_S)
        try:
            slow.load_model(model)
        finally:
            close_quietly(slow)

    def unload(self, model: str) -> None:
        self.client.unload_model(model)

    def unregister_system_regions(self, leftover: Callable[[str], bool]) -> list[str]:
        """Unregister the server's system shared-memory regions for which `leftover(name)` is True; returns their
        names. A perf_analyzer killed before its exit leaves its regions registered, and the next run's
        registration of the same names fails ("already in manager")."""
        status = self._json("get_system_shared_memory_status")
        regions = status.get("regions", status) if isinstance(status, dict) else status
        names = list(regions) if isinstance(regions, dict) else [r.get("name", "") for r in regions or []]
        gone = [n for n in names if n and leftover(n)]
        for name in gone:
            self.client.unregister_system_shared_memory(name)
        return gone

    # ---- inference ---------------------------------------------------------------------------
    def preflight(self, model: str, version: str, signature: Any, batched: bool, timeout_s: float = 60.0) -> None:
        """Wait for readiness, then send one real request and check that every output comes back non-empty.

        `signature` is a Manifest or a ModelSignature. Catches a model that loads but cannot answer (e.g. the
        Python backend's numpy-2 empty-tensor bug) before perf_analyzer spends minutes timing errors."""
        self.wait_until_ready(model, version, timeout_s)
        rng = np.random.default_rng(0)
        inputs = {spec.name: spec.example(1 if batched else 0, rng) for spec in signature.inputs}
        try:
            result = self.infer(model, inputs, [t.name for t in signature.outputs], version)
        except InferenceError as err:
            raise ServerNotReady(f"model {model!r} is ready but a test request failed: {err}") from err
        for name, value in result.items():
            if value is None or value.size == 0:
                raise ServerNotReady(
                    f"model {model!r} answered with an empty {name!r}: the server's Python environment is "
                    "broken (numpy >= 2 in the backend returns empty tensors; install numpy<2)")

    def infer(self, model: str, inputs: Arrays, outputs: Iterable[OutputRequest] | Iterable[str],
              version: str = "") -> Arrays:
        m = self.module
        outputs = [o if isinstance(o, OutputRequest) else OutputRequest(o, 0) for o in outputs]
        shm = self.shared_memory == SharedMemory.SYSTEM
        req_inputs, req_outputs = [], []
        batched, scalars = True, frozenset()
        if any(np.ndim(a) <= 1 for a in inputs.values()):  # only a scalar per sample can lack its wire dim
            try:
                batched, scalars = self.scalar_inputs(model, version)
            except Exception:  # noqa: BLE001 - no config: the request goes as given and its error says why
                pass
        for name, array in inputs.items():
            array = np.ascontiguousarray(array)
            if name in scalars and array.ndim == int(batched):
                array = array.reshape(-1, 1) if batched else array.reshape(1)
            inp = m.InferInput(name, list(array.shape), triton_dtype(np.dtype(array.dtype).name))
            if shm:
                inp.set_shared_memory(self._regions.write(f"in_{name}", array), array.nbytes)
            else:
                inp.set_data_from_numpy(array)
            req_inputs.append(inp)
        batch = len(next(iter(inputs.values()))) if inputs else 1
        for out in outputs:
            req = m.InferRequestedOutput(out.name)
            handle = None
            if shm and out.nbytes_per_sample:  # a size only the answer knows comes back in the response
                size = out.nbytes_per_sample * batch
                region, handle = self._regions.region(f"out_{out.name}", size)
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
        if self.protocol == Protocol.GRPC:
            shape, datatype = list(out.shape), out.datatype
        else:
            shape, datatype = out["shape"], out["datatype"]
        return Regions.read(handle, datatype, shape)


def config_from_json(config: dict[str, Any]) -> mc.ModelConfig:
    """A server's JSON config as the typed ModelConfig (fields this tritonclient does not know are skipped)."""
    return json_format.ParseDict(config, mc.ModelConfig(), ignore_unknown_fields=True)


def instance_count(config: "mc.ModelConfig | dict[str, Any]") -> int:
    """Model instances from the config's instance_group (Triton's default is one per group); a stored run's JSON
    config is read through the same type."""
    if isinstance(config, dict):
        config = config_from_json(config)
    return sum(g.count or 1 for g in config.instance_group) or 1


def infer_many(url: "str | ServerUrl", model: str, batches: Iterable[tuple[object, Arrays]],
               outputs: list[OutputRequest], protocol: Protocol | str | None = None,
               shared_memory: SharedMemory | str = SharedMemory.NONE,
               in_flight: int = 1, version: str = "") -> Iterator[tuple[object, Arrays]]:
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
