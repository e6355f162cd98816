"""Triton Python-backend model: a diffusion sampler that calls the denoiser model through BLS.

`write_diffusion_pipeline` copies this file as `model.py`, with `samplers.py` (pure numpy) next to it,
into `<repository>/<pipeline>/<version>/`. Each model evaluation of the sampler is one business-logic
request, `pb_utils.InferenceRequest(model_name=<denoiser>, ...).exec()`, of at most the denoiser's
max batch size rows (`samplers.chunked`), so the denoiser is served, batched and measured by Triton
like any other model (Python runtime on CPU hosts, its native backend on GPU hosts).

Request (max_batch_size 0: one request = one sampling run):
  encoder_hidden_states  FP32  [B, tokens, dim]  B conditionings, at most `max_conditionings`
  steps                  INT32 [1]               1..max_steps
  seed                   INT64 [1]               >= 0; the sampler's rng seed (same seed -> same bytes)
  samples                INT32 [1]               samples per conditioning, 1..max_samples
Response:
  latents                FP32  [B * samples, *sample_shape]; row b * samples + s is sample s of cond b

Why steps/seed/samples are INPUT tensors and not request parameters:
- they are declared in the config, so they appear in the model metadata: any client (tritonclient,
  curl JSON, perf_analyzer's --input-data) can discover and send them, and Triton itself checks their
  dtype and shape before the model runs;
- a misspelled or unknown input is rejected by Triton ("unexpected inference input"), while a misspelled
  request parameter (`step=8`) is silently ignored and the run uses some other value;
- both protocols carry typed tensors the same way; parameters arrive as a JSON string to parse;
- perf_analyzer fills inputs from --input-data JSON in every version, while request parameters need
  a newer `--request-parameter` flag. The cost is three 4-8 byte tensors per request.
They are declared `optional: true` only so that a missing one reaches this model, which answers with
one consistent, explicit per-request error instead of Triton's generic count mismatch; the model
requires all four (no hidden default seed: a request fully determines its output).

Config parameters (written by write_diffusion_pipeline): denoiser, denoiser_version, denoiser_inputs
(sample,timestep,cond names), denoiser_output, denoiser_max_batch, sampler, sampler_options (JSON),
sample_shape, cond_shape, max_samples, max_conditionings, max_steps.
Bad requests get `InferenceResponse(error=TritonError(...))` for that request only; the model keeps serving.
"""
import json
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import samplers  # noqa: E402

INPUTS = {"encoder_hidden_states": np.float32, "steps": np.int32, "seed": np.int64, "samples": np.int32}
OUTPUT = "latents"


class RequestError(ValueError):
    """The request itself is wrong (answered as INVALID_ARG)."""


class DenoiserError(RuntimeError):
    """The denoiser model failed a BLS call (answered as INTERNAL with its message)."""


def _error(message, invalid_arg=True):
    code = getattr(pb_utils.TritonError, "INVALID_ARG" if invalid_arg else "INTERNAL", None)
    err = pb_utils.TritonError(message) if code is None else pb_utils.TritonError(message, code)
    return pb_utils.InferenceResponse(error=err)


def _ints(text):
    return tuple(int(v) for v in text.split(",") if v.strip())


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        p = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        self.denoiser = p["denoiser"]
        self.denoiser_version = int(p.get("denoiser_version") or -1)
        self.in_names = [n.strip() for n in p["denoiser_inputs"].split(",")]
        if len(self.in_names) != 3:
            raise ValueError("denoiser_inputs must name 3 tensors: sample,timestep,cond; got %r" % p["denoiser_inputs"])
        self.out_name = p["denoiser_output"]
        self.max_batch = int(p["denoiser_max_batch"])
        self.sampler_name = p["sampler"]
        self.sample = samplers.get_sampler(self.sampler_name)
        self.options = samplers.options_for(self.sampler_name, json.loads(p.get("sampler_options") or "{}"))
        self.shape = _ints(p["sample_shape"])
        self.cond_shape = _ints(p["cond_shape"])
        self.max_samples = int(p["max_samples"])
        self.max_conditionings = int(p["max_conditionings"])
        self.max_steps = int(p.get("max_steps") or 1000)
        # Ask for CPU outputs: the sampler's state is numpy (matters when the denoiser runs on a GPU).
        self.bls_kwargs = {}
        if hasattr(pb_utils, "PreferredMemory"):
            self.bls_kwargs["preferred_memory"] = pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_CPU, 0)
        self.logger = pb_utils.Logger

    # ---- request handling ---------------------------------------------------------------------
    def execute(self, requests):
        return [self._answer(request) for request in requests]

    def _answer(self, request):
        try:
            cond, steps, seed, samples = self._read(request)
        except RequestError as err:
            return _error(str(err))
        denoise = samplers.chunked(self._bls_denoiser(request), self.max_batch)
        try:
            out = self.sample(denoise, cond, steps=steps, seed=seed, samples=samples, shape=self.shape,
                              options=self.options)
        except DenoiserError as err:
            return _error(str(err), invalid_arg=False)
        except ValueError as err:  # the sampler's own argument checks
            return _error("%s: %s" % (self.sampler_name, err))
        except Exception as err:  # keep serving; the message says what broke
            self.logger.log_error("sampling failed: %s: %s" % (type(err).__name__, err))
            return _error("sampling failed: %s: %s" % (type(err).__name__, err), invalid_arg=False)
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(OUTPUT, np.ascontiguousarray(out))])

    def _read(self, request):
        values = {name: pb_utils.get_input_tensor_by_name(request, name) for name in INPUTS}
        missing = [n for n, v in values.items() if v is None]
        if missing:
            raise RequestError(
                "missing input(s) %s: a request needs encoder_hidden_states FP32 [B,%s], steps INT32 [1], "
                "seed INT64 [1] and samples INT32 [1]" % (", ".join(missing), ",".join(map(str, self.cond_shape))))
        arrays = {n: v.as_numpy() for n, v in values.items()}
        steps, seed, samples = (int(arrays[n].reshape(-1)[0]) for n in ("steps", "seed", "samples"))
        cond = np.ascontiguousarray(arrays["encoder_hidden_states"], dtype=np.float32)
        if not 1 <= steps <= self.max_steps:
            raise RequestError("steps must be in 1..%d, got %d" % (self.max_steps, steps))
        if not 1 <= samples <= self.max_samples:
            raise RequestError("samples must be in 1..%d (max_samples of this pipeline), got %d"
                               % (self.max_samples, samples))
        if seed < 0:
            raise RequestError("seed must be >= 0, got %d" % seed)
        if cond.ndim != 1 + len(self.cond_shape) or not 1 <= cond.shape[0] <= self.max_conditionings:
            raise RequestError("encoder_hidden_states must be [B,%s] with 1 <= B <= %d, got %s"
                               % (",".join(map(str, self.cond_shape)), self.max_conditionings, list(cond.shape)))
        return cond, steps, seed, samples

    # ---- the denoiser, through business-logic scripting ----------------------------------------
    def _bls_denoiser(self, request):
        evaluation = [0]

        def denoise(x, t, cond):
            evaluation[0] += 1
            if hasattr(request, "is_cancelled") and request.is_cancelled():
                raise DenoiserError("request cancelled by the client at denoiser call %d" % evaluation[0])
            inputs = [pb_utils.Tensor(name, np.ascontiguousarray(a, dtype=np.float32))
                      for name, a in zip(self.in_names, (x, t, cond))]
            response = pb_utils.InferenceRequest(
                model_name=self.denoiser, model_version=self.denoiser_version,
                requested_output_names=[self.out_name], inputs=inputs, **self.bls_kwargs,
            ).exec()
            if response.has_error():
                raise DenoiserError("denoiser model '%s' failed at call %d (%d rows): %s"
                                    % (self.denoiser, evaluation[0], x.shape[0], response.error().message()))
            tensor = pb_utils.get_output_tensor_by_name(response, self.out_name)
            if tensor is None:
                raise DenoiserError("denoiser model '%s' returned no output '%s'" % (self.denoiser, self.out_name))
            return _to_numpy(tensor)

        return denoise

    def finalize(self):
        self.sample = None


def _to_numpy(tensor):
    if tensor.is_cpu():
        return tensor.as_numpy()
    from torch.utils.dlpack import from_dlpack  # GPU output despite the CPU preference: copy it over

    return from_dlpack(tensor.to_dlpack()).cpu().numpy()
