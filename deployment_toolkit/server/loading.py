"""Make a written model live on a running server: explicit load through the repository API, or wait
for a polling server to pick it up. The calls are client.server_api's; this module says what failed."""
from __future__ import annotations

from ..client import server_api
from .errors import ModelLoadError


def load_on_server(url: str, model: str, method: str, timeout_s: float = 120.0) -> None:
    try:
        if not server_api.is_server_live(url):
            raise ModelLoadError(f"no live Triton server at {url}", models=[model])
    except ModelLoadError:
        raise
    except Exception as err:
        raise ModelLoadError(f"cannot reach Triton at {url}: {err}", models=[model]) from err
    if method == "explicit":
        try:
            server_api.load_model(url, model)  # blocks until loaded or failed
        except Exception as err:
            raise ModelLoadError(f"the server refused to load {model!r}: {err}", models=[model]) from err
    if not server_api.wait_model_ready(url, model, timeout_s):
        reason = server_api.repository_reason(url, model)
        raise ModelLoadError(f"model {model!r} not ready on {url} after {timeout_s:.0f} s"
                             + (f": {reason}" if reason else " (is the server polling its repository?)"),
                             models=[model])


def unload_from_server(url: str, model: str) -> None:
    try:
        server_api.unload_model(url, model)
    except Exception as err:
        raise ModelLoadError(f"the server refused to unload {model!r}: {err}", models=[model]) from err
