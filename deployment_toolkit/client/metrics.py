"""The server's Prometheus metrics endpoint (`http://host:8002/metrics`): plain text over HTTP, not part of the
inference protocol that `TritonClient` speaks."""
from __future__ import annotations

import urllib.error
import urllib.request


def fetch_metrics(url: str, timeout_s: float = 2.0) -> str:
    """The endpoint's text; raises ConnectionError when it does not answer with 200."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url), timeout=timeout_s) as resp:
            status, data = resp.status, resp.read()
    except urllib.error.HTTPError as err:
        status, data = err.code, b""
    except (urllib.error.URLError, TimeoutError, OSError) as err:
        raise ConnectionError("no answer") from err
    if status != 200:
        raise ConnectionError(f"HTTP {status}")
    return data.decode("utf-8", "replace")
