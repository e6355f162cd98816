"""tritonclient's asyncio gRPC client, for a load generator that keeps many requests in flight from one event loop
(perf/multistream.py): one channel, every call with a deadline, and tritonclient's types kept inside this package.

Transport only, as the rest of the package: whether the server and a model are ready, a request's inputs built once
(InferInput objects are only read when a request is sent, so one set serves every request that carries the same
data), one inference. A refused or failed request is an InferenceError, one line.
"""
from __future__ import annotations

import warnings
from typing import Any, Mapping

import numpy as np

from ..cleanup import signals_deferred
from .errors import InferenceError, ServerNotReady

with signals_deferred(), warnings.catch_warnings():
    warnings.simplefilter("ignore")  # tritonclient imports the deprecated pkg_resources
    import tritonclient.grpc.aio as grpc_aio
    from tritonclient.utils import InferenceServerException


class AsyncTritonClient:
    """The gRPC endpoint at `address` (host:port); create and use it inside one running event loop."""

    def __init__(self, address: str, timeout_s: float):
        self.address, self.timeout_s = address, float(timeout_s)
        with signals_deferred():
            self._client = grpc_aio.InferenceServerClient(url=address)

    async def live(self) -> bool:
        """Whether the server answers as live; ServerNotReady (one line) when it does not answer at all."""
        try:
            return bool(await self._client.is_server_live(client_timeout=self.timeout_s))
        except InferenceServerException as err:
            raise ServerNotReady(f"the server at {self.address} does not answer over gRPC: {_line(err)}") from err

    async def model_ready(self, model_name: str, model_version: str = "") -> bool:
        try:
            return bool(await self._client.is_model_ready(model_name, model_version, client_timeout=self.timeout_s))
        except InferenceServerException as err:
            raise ServerNotReady(f"model {model_name!r}: the server at {self.address} did not say whether it is "
                                 f"ready: {_line(err)}") from err

    @staticmethod
    def inputs(arrays: Mapping[str, np.ndarray], datatypes: Mapping[str, str]) -> list[Any]:
        """One request's inputs, built once: {name: array} with {name: Triton datatype} ("FP32", "INT64", ...)."""
        built = []
        for name, array in arrays.items():
            one = grpc_aio.InferInput(name, list(array.shape), datatypes[name])
            one.set_data_from_numpy(array)
            built.append(one)
        return built

    async def infer(self, model_name: str, inputs: list[Any], model_version: str = "") -> None:
        """One inference, its outputs discarded (a load generator times answers, it does not read them)."""
        try:
            await self._client.infer(model_name, inputs, model_version=model_version, client_timeout=self.timeout_s)
        except InferenceServerException as err:
            raise InferenceError(f"{model_name}: {_line(err)}") from err

    async def close(self) -> None:
        try:
            await self._client.close()
        except Exception:  # noqa: BLE001 - closing a dead channel must not hide the run's own error
            pass


def _line(err: BaseException) -> str:
    return " ".join(str(err).split())[:500]


__all__ = ["AsyncTritonClient"]
