"""Triton Python-backend model of one pipeline step: the user's pre- or post-processing function over each batch.

`pipeline.write` copies this file as `model.py`, `step_runtime.py` beside it, the user's file as `user_step.py` and
the side files it names (FILES) into `<repository>/<name>_preprocess|_postprocess/<version>/`. Config parameters:
  function        the function's name in user_step.py (preprocess | postprocess)
  scalar_inputs   comma-separated inputs that hold one value per sample (dims [1] on the wire, [batch] to the function)
  scalar_outputs  likewise for outputs (the function returns [batch]; [batch, 1] goes back)
The requests of a dynamic batch run as one call where their shapes agree (step_runtime.run_requests); a failure is
that batch's requests' error response, and the model keeps serving.
"""
import json
import os
import sys

import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import step_runtime  # noqa: E402


def _names(text):
    return [n for n in (text or "").split(",") if n]


def _import_shims():
    """Where the toolkit is installed (the embedded server's environment), the import shims its own importer of user
    files applies (a torchvision CUDA build beside a CPU torch); a server without it (the NGC container) needs none."""
    try:
        from deployment_toolkit.compat import prepare_user_imports
    except ImportError:
        return
    prepare_user_imports()


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        version_dir = os.path.join(args["model_repository"], args["model_version"])
        if version_dir not in sys.path:
            sys.path.insert(0, version_dir)  # the user's file imports its side files by name
        _import_shims()
        import user_step  # noqa: E402  (copied beside this file by the toolkit)

        self.what = params.get("function", "step")
        self.function = getattr(user_step, self.what)
        self.inputs = [i["name"] for i in config["input"]]
        self.outputs = [(o["name"], pb_utils.triton_string_to_numpy(o["data_type"])) for o in config["output"]]
        self.scalar_inputs = _names(params.get("scalar_inputs"))
        self.scalar_outputs = set(_names(params.get("scalar_outputs")))

    def execute(self, requests):
        per_request = []
        for request in requests:
            inputs = {}
            for name in self.inputs:
                tensor = pb_utils.get_input_tensor_by_name(request, name)
                if tensor is not None:
                    inputs[name] = tensor.as_numpy()
            per_request.append(step_runtime.squeeze_scalars(inputs, self.scalar_inputs))
        responses = []
        for result in step_runtime.run_requests(self.function, per_request, self.what):
            if isinstance(result, str):
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(result)))
                continue
            message = step_runtime.missing_outputs(self.what, [n for n, _ in self.outputs], result)
            if message:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(message)))
                continue
            tensors = [pb_utils.Tensor(n, step_runtime.to_wire(result[n], dt, n in self.scalar_outputs))
                       for n, dt in self.outputs]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses

    def finalize(self):
        self.function = None
