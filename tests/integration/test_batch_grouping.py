"""Dynamic batching on the embedded server merges requests with other band wavelengths into one
execute() call; the Python runtime must still answer each request with its own wavelengths."""
from __future__ import annotations

import json
import threading
import time
import urllib.request

import numpy as np
import pytest

from deployment_toolkit.client import TritonClient
from deployment_toolkit.export import ConvertOptions, convert
from deployment_toolkit.models.geospatial import S2_WAVELENGTHS_UM
from deployment_toolkit.repository import ConfigOptions, write_model
from deployment_toolkit.server import LocalTritonServer, ServerConfig

pytestmark = pytest.mark.integration

MODEL = "dofa"
QUEUE_DELAY_US = 1_000_000  # long enough that two requests sent together always share one execute()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("grouping")
    convert("dofa_vit", "onnx", base / "onnx", ConvertOptions(preset="small", verify=False, seed=0))
    write_model(base / "repo", base / "onnx", ConfigOptions(MODEL, max_queue_delay_us=QUEUE_DELAY_US,
                                                            host_has_gpu=False))
    with LocalTritonServer(ServerConfig(base / "repo", log_dir=base / "logs")) as srv:
        srv.require_models([MODEL])
        yield srv


def request(waves: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"input__0": rng.standard_normal((2, len(waves), 64, 64)).astype(np.float32),
            "wavelengths__1": np.broadcast_to(waves, (2, len(waves))).copy()}


def executions_after(srv: LocalTritonServer, requests_done: int, timeout_s: float = 30.0) -> int:
    """Model executions (one per execute() call, however many requests it merged) once the server has
    counted `requests_done` successful requests: statistics are recorded after the response goes out."""
    deadline = time.monotonic() + timeout_s
    while True:
        with urllib.request.urlopen(f"http://{srv.http_url}/v2/models/{MODEL}/stats", timeout=10) as resp:
            stats = json.load(resp)["model_stats"][0]
        if int(stats["inference_stats"]["success"]["count"]) >= requests_done:
            return int(stats["execution_count"])
        assert time.monotonic() < deadline, f"the server never counted {requests_done} requests: {stats}"
        time.sleep(0.05)  # polling interval


def infer_together(srv: LocalTritonServer, requests: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    answers: list = [None] * len(requests)
    start = threading.Barrier(len(requests))

    def send(i: int) -> None:
        with TritonClient(srv.grpc_url) as client:
            start.wait()
            answers[i] = client.infer(MODEL, requests[i], ["output__0"])["output__0"]

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return answers


def test_merged_requests_keep_their_own_wavelengths(server):
    waves = np.asarray(S2_WAVELENGTHS_UM, np.float32)
    reqs = [request(waves, 1), request(waves + np.float32(0.3), 2)]
    with TritonClient(server.grpc_url) as client:
        alone = [client.infer(MODEL, r, ["output__0"])["output__0"] for r in reqs]
    before = executions_after(server, 2)
    together = infer_together(server, reqs)
    merged = executions_after(server, 4) - before == 1
    assert merged, "the two requests did not share one execute(): the test would prove nothing"
    for a, t in zip(alone, together):
        np.testing.assert_allclose(t, a, rtol=1e-5, atol=1e-5)
