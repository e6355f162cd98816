"""A diffusion pipeline served end to end on the real tritonserver: the sampler model calls the denoiser model
through BLS. One embedded server for the module (small sd_unet, ONNX Runtime in the Python backend).

Served vs in-process tolerance: the fp32 verification tolerance of export/verify.py, max |served - in-process|
<= 1e-4 + 1e-4 * max|in-process|. Both run the same numpy sampler and the same ONNX Runtime session settings
on the same chunks, so in practice they agree to the bit; the tolerance leaves room for a runtime whose
kernels depend on thread timing.
"""
from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from deployment_toolkit.client import InferenceError, TritonClient
from deployment_toolkit.diffusion.latency import LatencyPlan, measure
from deployment_toolkit.diffusion.runtime import InProcessPipeline
from deployment_toolkit.diffusion.targets import HttpFormTarget, parse_form
from deployment_toolkit.export import convert
from deployment_toolkit.repository import ConfigOptions
from deployment_toolkit.diffusion.pipeline import (
    PipelineOptions, settings_from_manifest, write_diffusion_pipeline, write_sampler_model,
)
from deployment_toolkit.server import LocalTritonServer, ServerConfig

pytestmark = pytest.mark.integration

MAX_SAMPLES = 3
DENOISER_MAX_BATCH = 2  # below samples x conditionings, so every evaluation is split into chunks
ATOL = RTOL = 1e-4


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("diffusion")
    manifest = convert("sd_unet", "onnx", base / "artifact")
    repo = base / "repo"
    opts = ConfigOptions("unused", host_has_gpu=False, max_batch_size=DENOISER_MAX_BATCH)
    paths = write_diffusion_pipeline(repo, base / "artifact", "sd", PipelineOptions(
        "ddim", MAX_SAMPLES, max_conditionings=2, denoiser_options=opts))
    # a second sampler on the same denoiser model: one artifact serves every sampler
    edm = settings_from_manifest(manifest, "sd_denoiser", "edm_heun", MAX_SAMPLES, 2, DENOISER_MAX_BATCH)
    write_sampler_model(repo, "sd_edm", edm)
    with LocalTritonServer(ServerConfig(repo, log_dir=base / "logs")) as server:
        server.require_models(["sd", "sd_edm", "sd_denoiser"])
        with TritonClient(server.grpc_url, timeout_s=120) as client:
            yield {"server": server, "client": client, "repo": repo, "settings": paths.settings}


def cond_batch(b: int = 2, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((b, 8, 32)).astype(np.float32)


def request(cond: np.ndarray | None, steps: int | None = 3, seed: int | None = 7, samples: int | None = 3) -> dict:
    values = {"encoder_hidden_states": cond, "steps": None if steps is None else np.array([steps], np.int32),
              "seed": None if seed is None else np.array([seed], np.int64),
              "samples": None if samples is None else np.array([samples], np.int32)}
    return {k: v for k, v in values.items() if v is not None}


def infer(client: TritonClient, model: str = "sd", **kwargs) -> np.ndarray:
    return client.infer(model, request(**kwargs), ["latents"])["latents"]


def test_same_seed_gives_identical_bytes(served):
    client, cond = served["client"], cond_batch()
    a, b = infer(client, cond=cond), infer(client, cond=cond)
    assert a.shape == (2 * 3, 4, 16, 16) and a.dtype == np.float32  # row b * samples + s
    assert np.isfinite(a).all()
    assert a.tobytes() == b.tobytes()
    assert np.abs(a - infer(client, cond=cond, seed=8)).max() > 1e-3


@pytest.mark.parametrize("model", ["sd", "sd_edm"])
def test_served_matches_in_process(served, model):
    pipeline = InProcessPipeline.from_repository(served["repo"], model)
    assert pipeline.settings.denoiser_max_batch == DENOISER_MAX_BATCH
    cond = cond_batch(2, seed=3)
    got = infer(served["client"], model, cond=cond, steps=4, seed=11, samples=2)
    ref = pipeline(cond, steps=4, seed=11, samples=2)
    scale = float(np.abs(ref).max())
    assert got.shape == ref.shape
    assert np.abs(got.astype(np.float64) - ref).max() <= ATOL + RTOL * scale


@pytest.mark.parametrize("bad, message", [
    (dict(steps=0), "steps must be in 1..1000, got 0"),
    (dict(samples=MAX_SAMPLES + 1), f"samples must be in 1..{MAX_SAMPLES}"),
    (dict(steps=None), "missing input.*steps"),
    (dict(cond=None), "missing input.*encoder_hidden_states"),
    (dict(cond=cond_batch(3)), r"encoder_hidden_states must be \[B,8,32\] with 1 <= B <= 2"),
    (dict(seed=-1), "seed must be >= 0"),
])
def test_bad_requests_get_clear_errors_and_the_server_keeps_serving(served, bad, message):
    client = served["client"]
    kwargs = dict(cond=cond_batch(1)) | bad
    with pytest.raises(InferenceError, match=message) as info:
        infer(client, **kwargs)
    assert "INVALID_ARGUMENT" in str(info.value)
    assert infer(client, cond=cond_batch(1), steps=1, samples=1).shape == (1, 4, 16, 16)
    assert served["server"].is_alive()


def test_latency_script_on_the_real_server(served, tmp_path, repo_root, table_rows):
    out = tmp_path / "latency"
    proc = subprocess.run(
        [sys.executable, str(repo_root / "triton/run_diffusion_latency.py"), "--server-url", served["server"].grpc_url,
         "--model-repository", str(served["repo"]), "--model-name", "sd", "--targets", "triton,in-process",
         "--steps", "2,4", "--burn-in", "1", "--trials", "2", "--runs", "1", "--result-dir", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = (out / "diffusion_latency.csv").read_text().splitlines()
    assert lines[0].startswith("target,device,sampler,steps,evaluations")
    assert len(lines) == 1 + 2 * 2  # (triton, in-process) x (2, 4) steps
    triton_rows = [row.split(",") for row in lines[1:] if row.startswith("triton,")]
    assert all(r[-1] != "" for r in triton_rows)  # the server's statistics split the time
    md = (out / "diffusion_latency.md").read_text()
    first_cells = [r[0] for r in table_rows(md)]
    assert "2 Steps" in first_cells and "4 Steps" in first_cells and "Triton / in-process" in md
    assert "served / in-process =" in proc.stdout
    assert (out / "run.json").exists()


class _V1Infer(BaseHTTPRequestHandler):
    """A /v1/infer endpoint of the CorrDiff NIM's kind over the in-process sampler: multipart form in, tar out."""

    pipeline: InProcessPipeline

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers["Content-Length"]))
        try:
            fields, files = parse_form(self.headers["Content-Type"], body)
            cond = np.load(io.BytesIO(files["input_array"]), allow_pickle=False)
            out = self.pipeline(cond, int(fields["steps"]), int(fields["seed"]), int(fields["samples"]))
        except (KeyError, ValueError) as err:
            return self._reply(400, f"bad request: {err}".encode(), "text/plain")
        buf, npy = io.BytesIO(), io.BytesIO()
        np.save(npy, out)
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("output.npy")
            info.size = len(npy.getvalue())
            tar.addfile(info, io.BytesIO(npy.getvalue()))
        self._reply(200, buf.getvalue(), "application/x-tar")

    def _reply(self, code: int, payload: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


def test_v1_infer_form_client(served):
    handler = type("Handler", (_V1Infer,), {"pipeline": InProcessPipeline.from_repository(served["repo"], "sd")})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1/infer"
        cond = cond_batch(1, seed=5)
        target = HttpFormTarget(url, cond, timeout_s=60)
        with tarfile.open(fileobj=io.BytesIO(target(steps=3, seed=5, samples=2))) as tar:
            got = np.load(io.BytesIO(tar.extractfile("output.npy").read()))
        # the same request through Triton gives the same latents
        assert got.tobytes() == infer(served["client"], cond=cond, steps=3, seed=5, samples=2).tobytes()
        points = measure([target], LatencyPlan((2,), samples=1, seed=0, burn_in=1, trials=2, runs=2),
                         devices=["test host"], samplers=[""], progress=False)
        assert points[0].target == "http" and len(points[0].latencies) == 4 and points[0].mean > 0
        with pytest.raises(RuntimeError, match="HTTP 400.*steps must be in 1..1000"):
            target(steps=0, seed=0, samples=1)
        target.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
