"""Make a written model live on a running server: explicit load through the repository API, or wait
for a polling server to pick it up."""
from __future__ import annotations

import time
import warnings

from ..server.errors import ModelLoadError


def _http_client(url: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import tritonclient.http as http
    return http.InferenceServerClient(url=url)


def load_on_server(url: str, model: str, method: str, timeout_s: float = 120.0) -> None:
    client = _http_client(url)
    try:
        if not client.is_server_live():
            raise ModelLoadError(f"no live Triton server at {url}", models=[model])
    except ModelLoadError:
        raise
    except Exception as err:
        raise ModelLoadError(f"cannot reach Triton at {url}: {err}", models=[model]) from err
    if method == "explicit":
        try:
            client.load_model(model)  # blocks until loaded or failed
        except Exception as err:
            raise ModelLoadError(f"the server refused to load {model!r}: {err}", models=[model]) from err
    deadline = time.monotonic() + timeout_s
    while not client.is_model_ready(model):
        if time.monotonic() > deadline:
            reason = next((m.get("reason", "") for m in client.get_model_repository_index() if m.get("name") == model), "")
            raise ModelLoadError(f"model {model!r} not ready on {url} after {timeout_s:.0f} s"
                                 + (f": {reason}" if reason else " (is the server polling its repository?)"),
                                 models=[model])
        time.sleep(0.2)  # health-check polling interval


def unload_from_server(url: str, model: str) -> None:
    try:
        _http_client(url).unload_model(model)
    except Exception as err:
        raise ModelLoadError(f"the server refused to unload {model!r}: {err}", models=[model]) from err
