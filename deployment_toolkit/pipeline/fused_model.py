"""Triton Python-backend model that runs a whole pipeline in one process: the preprocess, the network (its artifact
with the runtime the Python runtime serves it with) and the postprocess, in the order and with the tensor hand-overs
of the ensemble it replaces (`--layout fused`). Each step of an ensemble is a hop between Triton and a stub process;
here a request makes one.

`pipeline.fused` copies this file as `model.py` into `<repository>/<name>_pipeline/<version>/`, beside
`step_runtime.py`, `runtimes.py` (deployment_toolkit/runtimes/artifact.py), the artifact and its `manifest.json`, the
user's files as `user_preprocess.py` / `user_postprocess.py` and the side files they name. Config parameters:
  graph             JSON: the steps in order, each {"kind": "function" | "network", "module", "function", "inputs":
                    {its input: pipeline tensor}, "outputs": {its output: pipeline tensor}}, and the model's
                    "scalar_inputs" / "scalar_outputs" (one value per sample: [batch, 1] on the wire)
  intra_op_threads, precision, accelerator   the network's runtime settings, as the Python runtime takes them
The requests of a dynamic batch run through each step as one call where their shapes agree
(step_runtime.run_requests); a failing step is that batch's requests' error response, and the model keeps serving.
"""
import importlib.util
import json
import os
import sys

import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import step_runtime  # noqa: E402
from runtimes import load_runtime  # noqa: E402


def _import_shims():
    """As step_model: the toolkit's import shims where it is installed; none in a server without it."""
    try:
        from deployment_toolkit.compat import prepare_user_imports
    except ImportError:
        return
    prepare_user_imports()


def _user_module(version_dir, module):
    spec = importlib.util.spec_from_file_location(module, os.path.join(version_dir, module + ".py"))
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[module] = loaded
    spec.loader.exec_module(loaded)
    return loaded


class _Step:
    def __init__(self, what, call, inputs, outputs):
        self.what, self.call, self.inputs, self.outputs = what, call, inputs, outputs


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        graph = json.loads(params["graph"])
        version_dir = os.path.join(args["model_repository"], args["model_version"])
        if version_dir not in sys.path:
            sys.path.insert(0, version_dir)  # the user's files import their side files by name
        _import_shims()
        with open(os.path.join(version_dir, "manifest.json")) as fh:
            manifest = json.load(fh)
        device = "cpu"
        if args.get("model_instance_kind") == "GPU":
            device = "cuda:%s" % args.get("model_instance_device_id", "0")
        self.steps = []
        for step in graph["steps"]:
            if step["kind"] == "network":
                runtime = load_runtime(
                    os.path.join(version_dir, manifest["artifact"]), manifest["format"],
                    input_names=list(step["inputs"]), output_names=list(step["outputs"]), device=device,
                    threads=int(params.get("intra_op_threads") or 0), precision=params.get("precision") or "fp32",
                    accelerator=params.get("accelerator") or "none")
                self.steps.append(_Step("the model", lambda _runtime=runtime, **x: _runtime(x),
                                        step["inputs"], step["outputs"]))
            else:
                function = getattr(_user_module(version_dir, step["module"]), step["function"])
                self.steps.append(_Step(step["function"], function, step["inputs"], step["outputs"]))
        self.inputs = [i["name"] for i in config["input"]]
        self.outputs = [(o["name"], pb_utils.triton_string_to_numpy(o["data_type"])) for o in config["output"]]
        self.scalar_inputs = graph.get("scalar_inputs", [])
        self.scalar_outputs = set(graph.get("scalar_outputs", []))

    def execute(self, requests):
        states = []  # per request: the pipeline's tensors by name, or the error that ended it
        for request in requests:
            tensors = {}
            for name in self.inputs:
                tensor = pb_utils.get_input_tensor_by_name(request, name)
                if tensor is not None:
                    tensors[name] = tensor.as_numpy()
            states.append(step_runtime.squeeze_scalars(tensors, self.scalar_inputs))
        for step in self.steps:
            live = [i for i, s in enumerate(states) if not isinstance(s, str)]
            feeds = []
            for i in list(live):
                missing = [t for t in step.inputs.values() if t not in states[i]]
                if missing:
                    states[i] = "%s needs %s, which the request did not send" % (step.what, ", ".join(missing))
                    live.remove(i)
                    continue
                feeds.append({port: states[i][tensor] for port, tensor in step.inputs.items()})
            for i, result in zip(live, step_runtime.run_requests(step.call, feeds, step.what)):
                if isinstance(result, str):
                    states[i] = result
                    continue
                message = step_runtime.missing_outputs(step.what, list(step.outputs), result)
                if message:
                    states[i] = message
                    continue
                states[i].update({tensor: result[port] for port, tensor in step.outputs.items()})
        responses = []
        for state in states:
            if isinstance(state, str):
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(state)))
                continue
            tensors = [pb_utils.Tensor(n, step_runtime.to_wire(state[n], dt, n in self.scalar_outputs))
                       for n, dt in self.outputs]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses

    def finalize(self):
        self.steps = []
