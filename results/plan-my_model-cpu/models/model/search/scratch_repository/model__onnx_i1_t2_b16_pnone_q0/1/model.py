"""Triton Python-backend model that serves a converted artifact (ONNX Runtime / TorchScript / TensorRT).

The config generator copies this file, `runtimes.py` and the artifact's `manifest.json` into
`<repository>/<model>/<version>/`. Config parameters choose the artifact and runtime settings:
  artifact          file name of the artifact in the version directory (default: the manifest's)
  format            onnx | ts-trace | ts-script | trt (default: the manifest's)
  intra_op_threads  runtime threads per instance (0 = the runtime's default)
  precision         fp32 | fp16 (TorchScript casts floating inputs)
  accelerator       none | cuda | trt | openvino (ONNX Runtime execution providers)
  batch_uniform_inputs  comma-separated inputs whose rows must be equal within a batch (default: the
                    manifest inputs marked batch_uniform, e.g. DOFA's wavelengths__1)
The requests of a dynamic batch are concatenated and run as one batch, then split back; only requests
with byte-identical batch-uniform inputs are merged (one batch per group), answers in request order.
A scalar per sample (manifest shape [], a diffusion timestep) is [1] on the wire; the config's reshape hands it
over as [batch], and a config without that reshape (written by hand) gets the trailing axis dropped here.
"""
import hashlib
import json
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runtimes import batch_uniform_inputs, load_runtime, run_requests  # noqa: E402


def _check_digest(artifact, recorded):
    """Refuse to load an artifact that is not the one the manifest was written for (copied in or edited): the
    server's load error says so, instead of serving the manifest's shapes over another model's answers."""
    if not recorded:
        return
    h = hashlib.sha256()
    with open(artifact, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    if h.hexdigest() != recorded:
        raise RuntimeError("%s is not the artifact manifest.json was written for (sha256 %s..., recorded %s...): "
                           "convert the model again rather than editing either" % (
                               os.path.basename(artifact), h.hexdigest()[:12], recorded[:12]))


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        version_dir = os.path.join(args["model_repository"], args["model_version"])
        with open(os.path.join(version_dir, "manifest.json")) as fh:
            manifest = json.load(fh)
        artifact = os.path.join(version_dir, params.get("artifact") or manifest["artifact"])
        _check_digest(artifact, manifest.get("artifact_sha256"))
        fmt = params.get("format") or manifest["format"]
        device = "cpu"
        if args.get("model_instance_kind") == "GPU":
            device = "cuda:%s" % args.get("model_instance_device_id", "0")
        self.input_names = [i["name"] for i in config["input"]]
        self.outputs = [(o["name"], pb_utils.triton_string_to_numpy(o["data_type"])) for o in config["output"]]
        self.batched = int(config.get("max_batch_size", 0)) > 0
        uniform = batch_uniform_inputs(params.get("batch_uniform_inputs"), manifest["signature"]["inputs"])
        self.uniform_inputs = [n for n in uniform if n in self.input_names]
        self.scalars = {i["name"] for i in manifest["signature"]["inputs"] if not i.get("shape")}
        self.runtime = load_runtime(
            artifact,
            fmt,
            input_names=self.input_names,
            output_names=[n for n, _ in self.outputs],
            device=device,
            threads=int(params.get("intra_op_threads") or 0),
            precision=params.get("precision") or "fp32",
            accelerator=params.get("accelerator") or "none",
        )

    def execute(self, requests):
        try:
            per_request = [
                {n: pb_utils.get_input_tensor_by_name(r, n).as_numpy() for n in self.input_names} for r in requests
            ]
        except AttributeError:  # get_input_tensor_by_name returned None
            missing = [n for n in self.input_names for r in requests if pb_utils.get_input_tensor_by_name(r, n) is None]
            err = pb_utils.TritonError("missing input tensor(s): %s" % ", ".join(sorted(set(missing))))
            return [pb_utils.InferenceResponse(error=err) for _ in requests]
        for inputs in per_request:
            for name in self.scalars.intersection(inputs):
                arr = inputs[name]
                if arr.ndim == (2 if self.batched else 1) and arr.shape[-1] == 1:
                    inputs[name] = arr.reshape(arr.shape[:-1])
        results = run_requests(self.runtime, per_request, self.uniform_inputs, self.batched)
        responses = []
        for res in results:
            tensors = [pb_utils.Tensor(n, np.ascontiguousarray(res[n], dtype=dt)) for n, dt in self.outputs]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses

    def finalize(self):
        self.runtime = None
