"""Every call the toolkit makes to a running Triton server, in one place (besides perf_analyzer, a subprocess).

Why one module: health waits, metadata, the config the server loaded, the repository API and statistics were
written four times (perf, repository, server, search); each copy handled an unreachable server differently.
Callers in other packages import from here (or `client.infer.TritonClient` for inference and system shared
memory); `tests/unit/test_client_boundary.py` fails when a module outside `client/` imports a Triton client.

Two transports:
- tritonclient, HTTP or gRPC (`url` is host:port of that protocol): health, metadata, config, repository
  index and load/unload, statistics, the preflight request.
- the REST API over urllib (`rest_*`, `http_url` is the HTTP host:port): for the server process manager,
  which polls while the server starts and quotes the status and body of a refused repository call; it needs
  no tritonclient import and never raises for an unreachable server (status 0).

This module imports nothing from server/ or perf/ (they import it); their errors wrap the ones raised here.
"""
from __future__ import annotations

import functools
import inspect
import json
import time
import urllib.error
import urllib.request
import warnings
from typing import Any

import numpy as np

from ..errors import UserError

HEALTH_POLL_S = 0.2  # polling interval of the readiness waits (a health check, not a fixed wait)


class ServerNotReady(UserError, RuntimeError):
    """The server does not answer, the model is not ready, or it answers its first request wrongly."""


# ---- tritonclient --------------------------------------------------------------------------------

RPC_TIMEOUT_S = 60.0  # the deadline of a call that names none (a model load gets LOAD_TIMEOUT_S)
LOAD_TIMEOUT_S = 600.0  # building a TensorRT engine or loading a large model takes minutes


class _GrpcWithDeadline:
    """tritonclient's gRPC calls have no deadline unless given one, so a server that accepted the connection and
    never answers (a wedged backend) blocks its caller, and a test suite, forever; the HTTP client has its
    network_timeout. Every method that takes `client_timeout` gets this one unless the caller names its own."""

    def __init__(self, client, timeout_s: float):
        self._client, self._timeout_s = client, timeout_s

    def __getattr__(self, name: str):
        attr = getattr(self._client, name)
        if callable(attr) and "client_timeout" in _parameters(attr):
            return functools.partial(attr, client_timeout=self._timeout_s)
        return attr


@functools.lru_cache(maxsize=None)
def _parameters_of(function) -> frozenset[str]:
    return frozenset(inspect.signature(function).parameters)


def _parameters(method) -> frozenset[str]:
    return _parameters_of(getattr(method, "__func__", method))


def connect(url: str, protocol: str, timeout_s: float = RPC_TIMEOUT_S):
    """A tritonclient InferenceServerClient for `protocol` (grpc or http) whose calls give up after `timeout_s`;
    close it with `close_quietly`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tritonclient imports the deprecated pkg_resources
        if protocol == "grpc":
            import tritonclient.grpc as grpcclient

            return _GrpcWithDeadline(grpcclient.InferenceServerClient(url=url), timeout_s)
        import tritonclient.http as httpclient

    return httpclient.InferenceServerClient(url=url, connection_timeout=min(10.0, timeout_s),
                                            network_timeout=timeout_s)


def close_quietly(client) -> None:
    try:
        client.close()
    except Exception:  # noqa: BLE001 - closing a dead connection must not hide the real error
        pass


def health_reason(url: str, protocol: str, model: str, version: str = "") -> str | None:
    """None when the server is live and the model ready, else why not (a health check, not a sleep)."""
    client = None
    try:
        client = connect(url, protocol)
        kw = {"client_timeout": 5.0} if protocol == "grpc" else {}
        if not client.is_server_live(**kw):
            return f"server at {url} is not live"
        if not client.is_model_ready(model, version, **kw):
            return f"model {model!r} is not ready on {url}"
        return None
    except Exception as err:  # noqa: BLE001 - any failure to answer is the answer
        return f"server at {url} ({protocol}) does not answer: {str(err).strip() or type(err).__name__}"
    finally:
        if client is not None:
            close_quietly(client)


def fetch_model_config(url: str, protocol: str, model: str, version: str = "") -> dict[str, Any]:
    """The model's config as Triton sees it (HTTP: GET /v2/models/NAME/config)."""
    client = connect(url, protocol)
    try:
        if protocol == "grpc":
            return client.get_model_config(model, version, as_json=True).get("config", {})
        return client.get_model_config(model, version)
    finally:
        close_quietly(client)


def fetch_model_metadata(url: str, protocol: str, model: str, version: str = "") -> dict[str, Any]:
    """GET /v2/models/NAME: input/output names, datatypes, shapes (gRPC's JSON has int64 as strings)."""
    client = connect(url, protocol)
    try:
        meta = client.get_model_metadata(model, version, as_json=True) if protocol == "grpc" else \
            client.get_model_metadata(model, version)
    finally:
        close_quietly(client)
    for group in ("inputs", "outputs"):
        for tensor in meta.get(group, []):
            tensor["shape"] = [int(d) for d in tensor.get("shape", [])]
    return meta


def fetch_server_version(url: str, protocol: str) -> str | None:
    client = connect(url, protocol)
    try:
        meta = client.get_server_metadata(as_json=True) if protocol == "grpc" else client.get_server_metadata()
        return meta.get("version")
    except Exception:  # noqa: BLE001 - the version is informative only
        return None
    finally:
        close_quietly(client)


def model_statistics(http_url: str, model: str) -> dict[str, Any]:
    """The model's entry of GET /v2/models/NAME/stats (cumulative counters); {} if the server has none."""
    client = connect(http_url, "http")
    try:
        stats = client.get_inference_statistics(model).get("model_stats", [])
    finally:
        client.close()
    return stats[0] if stats else {}


def repository_models(url: str, protocol: str) -> list[str] | None:
    """Names in the server's repository index (loaded or not); None if the server does not say."""
    client = None
    try:
        client = connect(url, protocol)
        if protocol == "grpc":
            index = client.get_model_repository_index(as_json=True).get("models", [])
        else:
            index = client.get_model_repository_index()
        return sorted({m.get("name", "") for m in index} - {""})
    except Exception:  # noqa: BLE001 - a server that cannot list its models: keep waiting for readiness
        return None
    finally:
        if client is not None:
            close_quietly(client)


def wait_until_ready(url: str, protocol: str, model: str, version: str = "", timeout_s: float = 60.0) -> None:
    """Poll until the model is ready; a model the server's repository does not hold fails at once, naming
    the models it does hold (waiting would not help)."""
    deadline = time.monotonic() + timeout_s
    while True:
        reason = health_reason(url, protocol, model, version)
        if reason is None:
            return
        if reason.startswith("model "):  # the server answers; is the model there at all?
            have = repository_models(url, protocol)
            if have is not None and model not in have:
                raise ServerNotReady(
                    f"{reason}: the server's repository has no model {model!r}; it has "
                    f"{', '.join(have) or 'no models'} (pass one of them to --model-name)")
        if time.monotonic() > deadline:
            raise ServerNotReady(f"{reason} after waiting {timeout_s:.0f} s: start the server / load the model first")
        time.sleep(HEALTH_POLL_S)


def preflight(url: str, protocol: str, model: str, version: str, signature: Any, batched: bool,
              timeout_s: float = 60.0) -> None:
    """Wait for readiness, then send one real request and check that every output comes back non-empty.

    `signature` is a Manifest or a ModelSignature (inputs and outputs as TensorSpecs). Catches a model that
    loads but cannot answer (e.g. the Python backend's numpy-2 empty-tensor bug) before perf_analyzer spends
    minutes timing errors.
    """
    wait_until_ready(url, protocol, model, version, timeout_s)
    if protocol == "grpc":
        import tritonclient.grpc as tc
    else:
        import tritonclient.http as tc
    client = connect(url, protocol)
    try:
        inputs = []
        rng = np.random.default_rng(0)
        for spec in signature.inputs:
            data = spec.example(1 if batched else 0, rng)
            tensor = tc.InferInput(spec.name, list(data.shape), spec.triton_dtype)
            tensor.set_data_from_numpy(data)
            inputs.append(tensor)
        outputs = [tc.InferRequestedOutput(t.name) for t in signature.outputs]
        try:
            result = client.infer(model, inputs, model_version=version, outputs=outputs)
        except Exception as err:  # noqa: BLE001
            raise ServerNotReady(f"model {model!r} is ready but a test request failed: {err}") from err
        for spec in signature.outputs:
            value = result.as_numpy(spec.name)
            if value is None or value.size == 0:
                raise ServerNotReady(
                    f"model {model!r} answered with an empty {spec.name!r}: the server's Python environment is "
                    "broken (numpy >= 2 in the backend returns empty tensors; install numpy<2)"
                )
    finally:
        close_quietly(client)


# ---- repository API through tritonclient (HTTP); callers wrap failures in their own errors --------

def is_server_live(url: str) -> bool:
    """Raises tritonclient's error when nothing answers at `url`."""
    client = connect(url, "http")
    try:
        return client.is_server_live()
    finally:
        close_quietly(client)


def load_model(url: str, model: str) -> None:
    """POST /v2/repository/models/NAME/load: blocks until loaded or failed (raises with the server's reason)."""
    client = connect(url, "http", LOAD_TIMEOUT_S)
    try:
        client.load_model(model)
    finally:
        close_quietly(client)


def unload_model(url: str, model: str) -> None:
    client = connect(url, "http")
    try:
        client.unload_model(model)
    finally:
        close_quietly(client)


def wait_model_ready(url: str, model: str, timeout_s: float) -> bool:
    """Poll the model's readiness (HTTP) for up to `timeout_s`: False when it never became ready."""
    client = connect(url, "http")
    try:
        deadline = time.monotonic() + timeout_s
        while not client.is_model_ready(model):
            if time.monotonic() > deadline:
                return False
            time.sleep(HEALTH_POLL_S)
        return True
    finally:
        close_quietly(client)


def repository_reason(url: str, model: str) -> str:
    """The repository index's reason for `model` (why it is not ready; '' if none)."""
    client = connect(url, "http")
    try:
        return next((m.get("reason", "") for m in client.get_model_repository_index() if m.get("name") == model), "")
    finally:
        close_quietly(client)


# ---- REST over urllib: the server process manager's calls ----------------------------------------

def rest_request(url: str, method: str = "GET", body: dict | None = None, timeout: float = 5.0) -> tuple[int, bytes]:
    """(status, body) of one REST call; status 0 when nothing answers (the caller decides what that means)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return 0, b""


def fetch_metrics(url: str, timeout_s: float = 2.0) -> str:
    """The text of a server's Prometheus metrics endpoint (`http://host:8002/metrics`); raises ConnectionError when
    it does not answer with 200."""
    status, data = rest_request(url, timeout=timeout_s)
    if status != 200:
        raise ConnectionError(f"HTTP {status}" if status else "no answer")
    return data.decode("utf-8", "replace")


def rest_status(url: str) -> int:
    return rest_request(url, timeout=2.0)[0]


def rest_json(url: str, method: str = "GET", body: dict | None = None):
    status, data = rest_request(url, method=method, body=body, timeout=30.0)
    if status != 200:
        return None
    return json.loads(data or b"null")


def rest_server_ready(http_url: str) -> bool:
    """GET /v2/health/ready answered 200."""
    return rest_status(f"http://{http_url}/v2/health/ready") == 200


def rest_server_metadata(http_url: str) -> dict:
    """Server metadata from /v2: name, version (the binary has no --version flag), extensions."""
    return rest_json(f"http://{http_url}/v2") or {}


def rest_repository_index(http_url: str) -> list[dict]:
    return rest_json(f"http://{http_url}/v2/repository/index", method="POST", body={}) or []


def rest_model_ready(http_url: str, name: str, version: str = "") -> bool:
    path = f"/v2/models/{name}" + (f"/versions/{version}" if version else "") + "/ready"
    return rest_status(f"http://{http_url}{path}") == 200


def rest_repository_call(http_url: str, name: str, action: str) -> tuple[int, bytes]:
    """POST /v2/repository/models/NAME/{load,unload}: (status, body) for the caller's error message."""
    return rest_request(f"http://{http_url}/v2/repository/models/{name}/{action}", method="POST", body={})
