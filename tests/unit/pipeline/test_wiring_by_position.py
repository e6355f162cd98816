"""Wiring by position where it is unambiguous, refused where it is not (issue 53): a model whose only output is the
exporter's `output__0` feeds a postprocess whose one parameter is `logits`, and a preprocess's only array feeds a
model's only input, whatever their names, in the in-process run, the ensemble, the fused graph and the network's
search inputs alike, each said as "wired by position: output__0 → logits". A parameter that matches none of two
outputs is refused in one line naming the outputs and the parameter. The pre-search check (pipeline.precheck) does
the same on the framework model built from its reference, with the names its export will have."""
from __future__ import annotations

import numpy as np
import pytest

from deployment_toolkit.errors import UserInputError
from deployment_toolkit.pipeline.configs import StepServing
from deployment_toolkit.pipeline.fused import graph
from deployment_toolkit.pipeline.ports import Port
from deployment_toolkit.pipeline.wiring import ByPosition, post_by_position, pre_by_position
from deployment_toolkit.pipeline.write import build_configs
from deployment_toolkit.spec import Manifest, ModelSignature, TensorSpec

from test_pipeline_checks import images, plan, write  # the same toy pipeline

LOGITS = "import numpy as np\ndef postprocess(logits):\n    return {'best': logits.argmax(axis=1).astype(np.int64)}\n"
PIXELS = """
    import io
    import numpy as np
    from PIL import Image

    def preprocess(image):
        pixels = [np.asarray(Image.open(io.BytesIO(bytes(b))).convert("RGB").resize((8, 8)), dtype=np.float32)
                  for b in image]
        return {"pixels": np.stack(pixels).transpose(0, 3, 1, 2) / 255.0}
"""
OUT = Port("output__0", "float32", (10,))


def test_the_only_output_feeds_the_one_parameter_no_tensor_names():
    providers = [("model", (OUT,)), ("preprocess", (Port("input__0", "float32", (3, 8, 8)),)), ("raw", ())]
    assert post_by_position(["logits"], providers) == (ByPosition("output__0", "logits"),)
    assert ByPosition("output__0", "logits").text() == "wired by position: output__0 → logits"
    # a raw input or a preprocess output taken by name beside it leaves the one unnamed parameter to the output
    raw = [("model", (OUT,)), ("preprocess", ()), ("raw", (Port("image", "bytes"),))]
    assert post_by_position(["logits", "image"], raw) == (ByPosition("output__0", "logits"),)
    assert post_by_position(["output__0"], providers) == ()  # by name: nothing to do
    assert post_by_position(["logits", "extra"], providers) == ()  # two unnamed: left to the lines that say so
    # a declared port of another dtype is not wired by position (the mismatch line names the fix)
    assert post_by_position(["logits"], providers, {"logits": Port("logits", "float16", (10,))}) == ()


def test_a_parameter_matching_none_of_two_outputs_is_refused_naming_them():
    two = [("model", (OUT, Port("output__1", "float32", (4,)))), ("preprocess", ()), ("raw", ())]
    with pytest.raises(UserInputError) as err:
        post_by_position(["scores"], two, where="post.py")
    assert str(err.value) == (
        "post.py: postprocess takes 'scores', which matches no output of the model by name, and 2 of its outputs "
        "could feed it ('output__0' float32 [10], 'output__1' float32 [4]): too many to wire by position; name the "
        "parameter after the one it takes (e.g. postprocess(output__0, ...)), or declare INPUTS")
    assert "\n" not in str(err.value)


def test_the_only_preprocess_array_feeds_the_only_model_input():
    given, wanted = Port("pixels", "float32", (3, 8, 8)), Port("input__0", "float32", (3, 8, 8))
    assert pre_by_position([given], [wanted]) == (ByPosition("pixels", "input__0"),)
    assert pre_by_position([given], [Port("input__0", "float32", (3, 16, 16))]) == ()  # does not fit: refused later
    assert pre_by_position([given, Port("size", "int64")], [wanted]) == ()  # two arrays: by name only


def test_logits_takes_output__0_in_process_in_the_ensemble_and_fused(tmp_path):
    p = plan(tmp_path, pre_text=PIXELS, post_text=LOGITS)
    assert p.wiring.describe_positions() == ("wired by position: pixels → input__0; "
                                             "wired by position: output__0 → logits")
    assert p.step("toy").input_map == {"input__0": "preprocess__pixels"}
    assert p.step("toy_postprocess").input_map == {"logits": "model__output__0"}
    assert p.step("toy_postprocess").inputs == (Port("logits", "float32", (4,)),)
    for run in p.runs:  # the in-process run: the model fed the pixels, the postprocess the model's output
        np.testing.assert_array_equal(run.post["best"], run.model["output__0"].argmax(axis=1))
    configs = build_configs(p, StepServing(8))  # the ensemble checked against its steps (check_ensemble)
    steps = {s.model_name: s for s in configs["toy_pipeline"].ensemble_scheduling.step}
    assert dict(steps["toy"].input_map) == {"input__0": "preprocess__pixels"}
    assert dict(steps["toy_postprocess"].input_map) == {"logits": "model__output__0"}
    assert [t.name for t in configs["toy_postprocess"].input] == ["logits"]
    fused = graph(p)["steps"]
    assert fused[1]["inputs"] == {"input__0": "preprocess__pixels"} and fused[2]["inputs"] == {
        "logits": "model__output__0"}
    x = {**p.runs[0].raw, **p.runs[0].pre, **p.runs[0].model}  # how the speed benchmark feeds the steps
    assert set(p.step("toy").feed(x)) == {"input__0"} and set(p.step("toy_postprocess").feed(x)) == {"logits"}


def test_declared_inputs_are_wired_by_position_where_they_fit(tmp_path):
    declared = "INPUTS = {'logits': ('float32', [4])}\n" + LOGITS
    assert plan(tmp_path, post_text=declared).step("toy_postprocess").input_map == {"logits": "model__output__0"}


def test_two_outputs_and_a_parameter_matching_neither_are_refused(tmp_path):
    two = tmp_path / "two"
    two.mkdir()
    Manifest(model="toy", preset="small", family="test", task="embedding", metric="cosine", format="onnx",
             artifact="model.onnx", max_batch_size=8, signature=ModelSignature(
                 inputs=(TensorSpec("input__0", (3, 8, 8)),),
                 outputs=(TensorSpec("output__0", (4,)), TensorSpec("output__1", (4,))))).save(two)
    with pytest.raises(UserInputError, match=r"^post\.py: postprocess takes 'logits', which matches no output of the "
                                             r"model by name, and 2 of its outputs could feed it \('output__0' float32 "
                                             r"\[4\], 'output__1' float32 \[4\]\)"):
        plan(tmp_path, post_text=LOGITS, manifest=two)


ONE_OUTPUT = """
    import torch


    def get_model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                   torch.nn.Linear(4, 5))
"""
DICT_OUTPUT = """
    import torch


    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3 * 8 * 8, 5)

        def forward(self, pixels):
            logits = self.fc(pixels.flatten(1))
            return {"scores": logits, "probs": logits.softmax(-1)}


    def get_model():
        return Net()
"""


@pytest.mark.slow
def test_the_check_before_the_search_sees_the_names_the_export_gives(tmp_path):
    from deployment_toolkit.pipeline.precheck import check_pipeline

    raw = images(tmp_path / "raw")
    pre = write(tmp_path, "pre.py", PIXELS)
    post = write(tmp_path, "post.py", LOGITS)
    check = check_pipeline("net", str(write(tmp_path, "one.py", ONE_OUTPUT)), raw, pre, post)
    assert check.wiring.describe_positions() == "wired by position: output__0 → logits"  # a bare tensor: output__0
    assert "wired by position: output__0 → logits" in check.text() and "on raw sample img_0.png" in check.text()
    model = write(tmp_path, "dict.py", DICT_OUTPUT)  # a dict keeps its keys: 'scores' and 'probs', no position
    with pytest.raises(UserInputError, match=r"^post\.py: postprocess takes 'logits', .*\('scores' float32 \[5\], "
                                             r"'probs' float32 \[5\]\)"):
        check_pipeline("net", str(model), raw, pre, post)
    by_name = write(tmp_path, "by_name.py", "def postprocess(scores):\n    return {'best': scores.argmax(axis=1)}\n")
    assert check_pipeline("net", str(model), raw, pre, by_name).by_position == ()


def test_the_networks_search_inputs_take_the_name_of_the_input_they_feed(tmp_path):
    """A network that declares its one input (an ONNX file's `features`) behind a preprocess giving `vec`: the
    per-sample files and the specs the search reads are written under `features`."""
    import onnx
    from onnx import TensorProto, helper

    from deployment_toolkit.pipeline.network_inputs import network_inputs
    from deployment_toolkit.sources import parse_reference

    node = helper.make_node("Identity", ["features"], ["score"])
    graph_ = helper.make_graph([node], "g", [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["b", 4])],
                               [helper.make_tensor_value_info("score", TensorProto.FLOAT, ["b", 4])])
    onnx.save(helper.make_model(graph_, opset_imports=[helper.make_opsetid("", 13)]), str(tmp_path / "m.onnx"))
    raw = tmp_path / "raw"
    raw.mkdir()
    for i in range(2):
        (raw / f"t{i}.txt").write_text("x" * (i + 1))
    pre = write(tmp_path, "pre.py", "import numpy as np\ndef preprocess(text):\n"
                                    "    return {'vec': np.ones((len(text), 4), np.float32)}\n")
    inputs = network_inputs(pre, raw, tmp_path / "inputs", model=parse_reference(str(tmp_path / "m.onnx")))
    assert [t.name for t in inputs.specs] == ["features"]
    assert all(list(np.load(f)) == ["features"] for f in sorted((tmp_path / "inputs").glob("*.npz")))
    unchanged = network_inputs(pre, raw, tmp_path / "plain")  # no model given: the preprocess's names
    assert [t.name for t in unchanged.specs] == ["vec"]

