"""Make a written model live on a running server: explicit load through the repository API, or wait
for a polling server to pick it up. The calls are client.TritonClient's; this module says what failed."""
from __future__ import annotations

from ..client import ServerNotReady, TritonClient
from .errors import ModelLoadError


def _client(url: str) -> TritonClient:
    """The repository API is the HTTP port's unless the URL names gRPC."""
    return TritonClient(url, None if "://" in url else "http")


def load_on_server(url: str, model: str, method: str, timeout_s: float = 120.0) -> None:
    with _client(url) as client:
        if not client.live():
            raise ModelLoadError(f"no live Triton server at {client.url}", models=[model])
        if method == "explicit":
            try:
                client.load(model)  # blocks until loaded or failed
            except Exception as err:
                raise ModelLoadError(f"the server refused to load {model!r}: {err}", models=[model]) from err
        try:
            client.wait_until_ready(model, timeout_s=timeout_s, fail_fast=method == "explicit")
        except ServerNotReady as err:
            reason = client.model_reason(model)
            raise ModelLoadError(f"model {model!r} not ready on {client.url} after {timeout_s:.0f} s"
                                 + (f": {reason}" if reason else f" (is the server polling its repository?) - {err}"),
                                 models=[model]) from err


def unload_from_server(url: str, model: str) -> None:
    with _client(url) as client:
        try:
            client.unload(model)
        except Exception as err:
            raise ModelLoadError(f"the server refused to unload {model!r}: {err}", models=[model]) from err
