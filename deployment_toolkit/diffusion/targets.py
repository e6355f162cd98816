"""What a diffusion latency run sends requests to: the Triton sampler model (gRPC), a `/v1/infer` service
of the CorrDiff NIM's kind (multipart form), or the same sampler in-process.

Every target is `target(steps, seed, samples)` -> the response payload, plus `breakdown()` with where the
time went over the requests since `reset()` (seconds; empty when the target cannot tell).
"""
from __future__ import annotations

import email.parser
import email.policy
import io
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .pipeline import PIPELINE_NAME
from .runtime import InProcessPipeline
from ..config import setting
from ..errors import UserInputError


@dataclass(frozen=True)
class TargetOptions:
    """Where a latency run's requests go and how (`make_target`); each default written once (diffusion-latency's
    flags are built from these fields)."""

    model_repository: str | None = setting(None, flag="--model-repository",
                                           help="repository with the pipeline (embedded server, in-process target)")
    model_name: str = setting(PIPELINE_NAME, flag="--model-name",
                              help="the sampler model written by deploy_diffusion.py")
    server_url: str | None = setting(None, flag="--server-url",
                                     help="gRPC HOST:PORT of a running Triton (default: start one)")
    url: str | None = setting(None, flag="--url", help="http://HOST:PORT/v1/infer for the http target")
    input_array: str | None = setting(None, flag="--input-array",
                                      help=".npy conditioning (default: random, shape from the config)")
    timeout_s: float = setting(3600.0, flag="--timeout-s", help="per request")
    sampler: str = setting("", flag="--sampler", show_default=False,
                           help="http target: the service's sampler, for per-evaluation numbers")
    threads: int | None = setting(None, flag="--threads",
                                  help="in-process target's ONNX Runtime threads (default: the served denoiser "
                                       "config's)")


def npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.asarray(array), allow_pickle=False)
    return buf.getvalue()


def load_cond(path: str | None, cond_shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Conditioning for the run: a .npy file ([B, *cond_shape] or one [*cond_shape]) or a seeded random one."""
    if path:
        cond = np.load(path, allow_pickle=False).astype(np.float32)
        return cond[None] if cond.ndim == len(cond_shape) else cond
    return np.random.default_rng(seed).standard_normal((1, *cond_shape)).astype(np.float32)


# ------------------------------------------------------------------------------------------------ Triton

def _stats(client: Any, model: str) -> dict[str, int]:
    """Cumulative success / queue / compute-infer counters of one model (gRPC statistics extension)."""
    stats = client.statistics(model).get("inference_stats", {})
    pick = lambda key: stats.get(key, {})  # noqa: E731
    return {"count": int(pick("success").get("count", 0)), "success_ns": int(pick("success").get("ns", 0)),
            "queue_ns": int(pick("queue").get("ns", 0)), "infer_ns": int(pick("compute_infer").get("ns", 0))}


class TritonSamplerTarget:
    """The sampler model over gRPC; the server's statistics split each request into denoiser, sampler and
    client+network time."""

    name = "triton"

    def __init__(self, url: str, model: str, cond: np.ndarray, timeout_s: float = TargetOptions.timeout_s):
        from ..client import TritonClient

        self.url, self.model, self.cond = url, model, np.ascontiguousarray(cond, dtype=np.float32)
        self.client = TritonClient(url, "grpc", timeout_s=timeout_s)
        self.client.require_ready(model)
        params = {k: v.string_value for k, v in self.client.config(model).parameters.items()}
        if "denoiser" not in params:
            raise UserInputError(f"model {model!r} on {url} is not a diffusion sampler (no 'denoiser' parameter)")
        self.denoiser = params["denoiser"]
        self.sampler = params.get("sampler", "")
        self.client.require_ready(self.denoiser)
        self._client_s: list[float] = []
        self._before: dict[str, dict[str, int]] = {}

    @staticmethod
    def config_params(url: str, model: str) -> dict[str, str]:
        from ..client import TritonClient

        with TritonClient(url, "grpc") as c:
            return {k: v.string_value for k, v in c.config(model).parameters.items()}

    def __call__(self, steps: int, seed: int, samples: int) -> np.ndarray:
        inputs = {"encoder_hidden_states": self.cond, "steps": np.array([steps], np.int32),
                  "seed": np.array([seed], np.int64), "samples": np.array([samples], np.int32)}
        start = time.perf_counter()
        out = self.client.infer(self.model, inputs, ["latents"])["latents"]
        self._client_s.append(time.perf_counter() - start)
        return out

    def reset(self) -> None:
        self._client_s = []
        self._before = {m: _stats(self.client, m) for m in (self.model, self.denoiser)}

    def breakdown(self, evaluations: int | None) -> dict[str, float]:
        if not self._client_s:
            return {}
        deadline = time.monotonic() + 2.0
        while True:  # a request's statistics land when the server releases it, just after the client has the reply
            after = {m: _stats(self.client, m) for m in (self.model, self.denoiser)}
            d = {m: {k: after[m][k] - self._before[m][k] for k in after[m]} for m in after}
            requests = d[self.model]["count"]
            if requests >= len(self._client_s) or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        if requests != len(self._client_s):
            return {}  # someone else used the model meanwhile: no clean split
        server_s = d[self.model]["success_ns"] / requests / 1e9
        denoiser_s = d[self.denoiser]["success_ns"] / requests / 1e9  # per sampling request, queue included
        out = {"sampler_overhead_s": server_s - denoiser_s,
               "client_overhead_s": sum(self._client_s) / len(self._client_s) - server_s}
        if evaluations:
            out["denoiser_s_per_evaluation"] = denoiser_s / evaluations
            out["denoiser_compute_s_per_evaluation"] = d[self.denoiser]["infer_ns"] / requests / 1e9 / evaluations
        return out

    def close(self) -> None:
        self.client.close()


# ------------------------------------------------------------------------------------------------ in-process

class InProcessTarget:
    """The same sampler and artifact in this process; times the denoiser calls to split the total."""

    name = "in-process"

    def __init__(self, pipeline: InProcessPipeline, cond: np.ndarray):
        self.pipeline, self.cond = pipeline, np.ascontiguousarray(cond, dtype=np.float32)
        self.sampler = pipeline.settings.sampler
        inner = pipeline.denoise
        self._denoise_s = 0.0
        self._total_s: list[float] = []

        def timed(x, t, cond):
            start = time.perf_counter()
            try:
                return inner(x, t, cond)
            finally:
                self._denoise_s += time.perf_counter() - start

        self.pipeline = InProcessPipeline(timed, pipeline.settings, pipeline.source)

    def __call__(self, steps: int, seed: int, samples: int) -> np.ndarray:
        start = time.perf_counter()
        out = self.pipeline(self.cond, steps, seed, samples)
        self._total_s.append(time.perf_counter() - start)
        return out

    def reset(self) -> None:
        self._denoise_s, self._total_s = 0.0, []

    def breakdown(self, evaluations: int | None) -> dict[str, float]:
        if not self._total_s:
            return {}
        n = len(self._total_s)
        out = {"sampler_overhead_s": (sum(self._total_s) - self._denoise_s) / n}
        if evaluations:
            out["denoiser_s_per_evaluation"] = self._denoise_s / n / evaluations
        return out

    def close(self) -> None:
        pass


# ------------------------------------------------------------------------------------------------ /v1/infer

class HttpFormTarget:
    """POST the seed's multipart form to `http://HOST:PORT/v1/infer`: fields samples, steps, seed and the file
    `input_array` (.npy bytes); accept: application/x-tar. Any status but 200 raises with the body."""

    name = "http"

    def __init__(self, url: str, cond: np.ndarray | bytes, timeout_s: float = 600.0,
                 accept: str = "application/x-tar"):
        import requests

        self.url, self.timeout_s = url, timeout_s
        self.session = requests.Session()
        self.payload = cond if isinstance(cond, bytes) else npy_bytes(np.asarray(cond, dtype=np.float32))
        self.headers = {"accept": accept}
        self.sampler = ""

    def __call__(self, steps: int, seed: int, samples: int) -> bytes:
        data = {"samples": samples, "steps": steps, "seed": seed}
        files = {"input_array": ("input_array", self.payload, "application/octet-stream")}
        r = self.session.post(self.url, headers=self.headers, data=data, files=files, timeout=self.timeout_s)
        if r.status_code != 200:
            raise RuntimeError(f"POST {self.url} (steps={steps}, samples={samples}, seed={seed}) answered "
                               f"HTTP {r.status_code}: {r.content[:500]!r}")
        return r.content

    def reset(self) -> None:
        pass

    def breakdown(self, evaluations: int | None) -> dict[str, float]:
        return {}

    def close(self) -> None:
        self.session.close()


TARGETS = (TritonSamplerTarget.name, InProcessTarget.name, HttpFormTarget.name)


def make_target(name: str, options: TargetOptions, url: str | None, cond: np.ndarray | None) -> Any:
    """The target `name` (one of TARGETS): the sampler model at the gRPC `url`, the same pipeline in-process (from
    the options' repository), or the options' /v1/infer `url` sent the --input-array file as is (like the seed)."""
    if name == TritonSamplerTarget.name:
        return TritonSamplerTarget(url, options.model_name, cond, timeout_s=options.timeout_s)
    if name == InProcessTarget.name:
        pipeline = InProcessPipeline.from_repository(options.model_repository, options.model_name,
                                                     threads=options.threads)
        return InProcessTarget(pipeline, cond)
    payload = Path(options.input_array).read_bytes() if options.input_array else cond
    return HttpFormTarget(options.url, payload, timeout_s=options.timeout_s)


def parse_form(content_type: str, body: bytes) -> tuple[dict[str, str], dict[str, bytes]]:
    """Split a multipart/form-data body into text fields and files (for a `/v1/infer` front end or a test)."""
    if not content_type.startswith("multipart/form-data"):
        raise UserInputError(f"expected multipart/form-data, got {content_type!r}")
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    fields: dict[str, str] = {}
    files: dict[str, bytes] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        if part.get_filename() is not None:
            files[name] = payload
        else:
            fields[name] = payload.decode()
    return fields, files



def sampler_signature(settings: Any, steps: int, seed: int, samples: int, conditionings: int = 1) -> Any:
    """The sampler model's request as a ModelSignature for perf_analyzer: random conditioning, fixed
    steps / seed / samples (`value`s go into its --input-data JSON)."""
    from ..spec import ModelSignature, TensorSpec

    cond = (conditionings, *settings.cond_shape)
    out = (conditionings * samples, *settings.sample_shape)
    return ModelSignature(
        inputs=(TensorSpec("encoder_hidden_states", (-1, *settings.cond_shape), example_shape=cond),
                TensorSpec("steps", (1,), "int32", value=[int(steps)]),
                TensorSpec("seed", (1,), "int64", value=[int(seed)]),
                TensorSpec("samples", (1,), "int32", value=[int(samples)])),
        outputs=(TensorSpec("latents", (-1, *settings.sample_shape), example_shape=out),),
    )
