"""tritonclient's InferenceServerClient for a protocol, with a deadline on every call.

tritonclient's gRPC calls have no deadline unless given one, so a server that accepted the connection and never
answers (a wedged backend) blocks its caller, and a test suite, forever; the HTTP client has its network_timeout.

The client libraries are C extensions (numpy, protobuf, grpc; gevent and geventhttpclient under tritonclient.http)
and are imported here with stop signals held (cleanup.signals_deferred): a Ctrl-C or SIGTERM raised inside one of
their imports crashed `serve` with SIGSEGV. The package imports this module first, so the gRPC side is loaded
here; the HTTP side when a client first needs it (`client_module`).
"""
from __future__ import annotations

import functools
import inspect
import warnings

from ..cleanup import signals_deferred
from ..config import Protocol

with signals_deferred(), warnings.catch_warnings():
    warnings.simplefilter("ignore")  # tritonclient imports the deprecated pkg_resources
    import numpy  # noqa: F401
    import tritonclient.grpc  # noqa: F401

RPC_TIMEOUT_S = 60.0  # the deadline of a call that names none (a model load gets LOAD_TIMEOUT_S)
LOAD_TIMEOUT_S = 600.0  # building a TensorRT engine or loading a large model takes minutes


class _GrpcWithDeadline:
    """Every method that takes `client_timeout` gets this one unless the caller names its own."""

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


def client_module(protocol: Protocol | str):
    """tritonclient.grpc or tritonclient.http (their InferInput/InferRequestedOutput classes differ)."""
    with signals_deferred(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tritonclient imports the deprecated pkg_resources
        if protocol == Protocol.GRPC:
            import tritonclient.grpc as module
        else:
            import tritonclient.http as module
    return module


def connect(address: str, protocol: Protocol | str, timeout_s: float = RPC_TIMEOUT_S):
    """An InferenceServerClient for `protocol` at host:port whose calls give up after `timeout_s`."""
    module = client_module(protocol)
    # built with stop signals held (quick: no connection is made here): a SIGTERM inside tritonclient's __init__
    # left a half-built client whose __del__ printed "Exception ignored ... no attribute '_closed'" and a traceback
    with signals_deferred():
        if protocol == Protocol.GRPC:
            return _GrpcWithDeadline(module.InferenceServerClient(url=address), timeout_s)
        return module.InferenceServerClient(url=address, connection_timeout=min(10.0, timeout_s),
                                            network_timeout=timeout_s)


def close_quietly(client) -> None:
    try:
        client.close()
    except Exception:  # noqa: BLE001 - closing a dead connection must not hide the real error
        pass
