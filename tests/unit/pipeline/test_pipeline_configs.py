"""The pipeline's generated configs (issue 36, item 1): the step models and the ensemble built as ModelConfig
protobufs, round-tripping through config.pbtxt, and the ensemble validated against its steps (each refusal one
line); the step runtime the server and the toolkit share; the perf_analyzer input data of raw bytes; the arithmetic
of each step's share and of the served-against-in-process comparison."""
from __future__ import annotations

import base64
import copy
import json
import struct

import numpy as np
import pytest
from tritonclient.grpc import model_config_pb2 as mc

from deployment_toolkit.pipeline import step_runtime
from deployment_toolkit.pipeline.configs import StepServing, check_ensemble, step_config
from deployment_toolkit.pipeline.measure import input_entry, step_shares, write_input_json
from deployment_toolkit.pipeline.ports import Port, parse_ports
from deployment_toolkit.pipeline.speed import SpeedResult
from deployment_toolkit.pipeline.stepfile import StepKind
from deployment_toolkit.pipeline.verify import compare, wire_inputs
from deployment_toolkit.pipeline.write import build_configs
from deployment_toolkit.repository.config import ConfigError, ConfigOptions, parse_text, to_text

from test_pipeline_checks import plan  # noqa: E402  (the same toy pipeline)


@pytest.fixture()
def configs(tmp_path):
    p = plan(tmp_path)
    return p, build_configs(p, StepServing(8, instances=2, max_queue_delay_us=100),
                            ConfigOptions(model_name="x", host_has_gpu=False))


def test_every_model_of_the_pipeline_gets_its_config(configs):
    _, cfgs = configs
    assert list(cfgs) == ["toy_preprocess", "toy", "toy_postprocess", "toy_pipeline"]
    pre = cfgs["toy_preprocess"]
    assert pre.backend == "python" and pre.max_batch_size == 8
    assert [(t.name, mc.DataType.Name(t.data_type), list(t.dims)) for t in pre.input] == [("image", "TYPE_STRING", [1])]
    assert [(t.name, list(t.dims)) for t in pre.output] == [("input__0", [3, 8, 8])]
    assert pre.dynamic_batching.max_queue_delay_microseconds == 100
    group = pre.instance_group[0]
    assert group.count == 2 and mc.ModelInstanceGroup.Kind.Name(group.kind) == "KIND_CPU"
    assert {k: v.string_value for k, v in pre.parameters.items()} == {
        "function": "preprocess", "scalar_inputs": "image", "scalar_outputs": ""}
    assert cfgs["toy"].name == "toy" and cfgs["toy"].backend == "python"  # the network, as write_model writes it
    post = cfgs["toy_postprocess"]
    assert post.parameters["scalar_outputs"].string_value == "label"


def test_the_ensemble_chains_the_steps_and_round_trips(configs):
    _, cfgs = configs
    ens = cfgs["toy_pipeline"]
    assert ens.platform == "ensemble" and ens.max_batch_size == 8
    assert [(t.name, mc.DataType.Name(t.data_type)) for t in ens.input] == [("image", "TYPE_STRING")]
    assert [(t.name, mc.DataType.Name(t.data_type), list(t.dims)) for t in ens.output] == [
        ("label", "TYPE_STRING", [1])]
    steps = [(s.model_name, dict(s.input_map), dict(s.output_map)) for s in ens.ensemble_scheduling.step]
    assert steps == [
        ("toy_preprocess", {"image": "image"}, {"input__0": "preprocess__input__0"}),
        ("toy", {"input__0": "preprocess__input__0"}, {"output__0": "model__output__0"}),
        ("toy_postprocess", {"output__0": "model__output__0"}, {"label": "label"}),
    ]
    for cfg in cfgs.values():
        assert parse_text(to_text(cfg)) == cfg


def _broken(cfgs, edit):
    cfgs = {k: copy.deepcopy(v) for k, v in cfgs.items()}
    edit(cfgs)
    return cfgs


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["toy"].input[0].dims.__setitem__(1, 16),
     "ensemble 'toy_pipeline': 'preprocess__input__0' is TYPE_FP32 [3, 8, 8] but input 'input__0' of 'toy' is "
     "TYPE_FP32 [3, 16, 8]"),
    (lambda c: c["toy_pipeline"].ensemble_scheduling.step[1].input_map.__setitem__("input__0", "nowhere"),
     "ensemble 'toy_pipeline': input 'input__0' of 'toy' reads 'nowhere', which no earlier step produces"),
    (lambda c: c["toy_pipeline"].ensemble_scheduling.step[1].input_map.pop("input__0"),
     "ensemble 'toy_pipeline': input(s) input__0 of 'toy' are not fed"),
    (lambda c: c["toy_pipeline"].ensemble_scheduling.step[2].output_map.__setitem__("label", "preprocess__input__0"),
     "ensemble 'toy_pipeline': tensor 'preprocess__input__0' is produced twice"),
    (lambda c: c["toy_pipeline"].output[0].__setattr__("name", "labels"),
     "ensemble 'toy_pipeline': output 'labels' is produced by no step"),
    (lambda c: c["toy_postprocess"].__setattr__("max_batch_size", 4),
     "ensemble 'toy_pipeline': max_batch_size 8 exceeds that of 'toy_postprocess' (4)"),
    (lambda c: c.pop("toy"), "ensemble 'toy_pipeline': step 'toy' is not among the models written beside it"),
])
def test_an_ensemble_triton_would_refuse_is_caught_before_writing(configs, edit, message):
    _, cfgs = configs
    broken = _broken(cfgs, edit)
    with pytest.raises(ConfigError) as err:
        check_ensemble(broken["toy_pipeline"], broken)
    assert str(err.value) == message


def test_a_smaller_network_batch_bounds_the_steps_and_the_ensemble(tmp_path):
    p = plan(tmp_path)
    cfgs = build_configs(p, StepServing(8), ConfigOptions(model_name="x", max_batch_size=4, host_has_gpu=False))
    assert {c.max_batch_size for c in cfgs.values()} == {4}


def test_step_serving_numbers_are_checked():
    with pytest.raises(ConfigError, match="--step-instances must be >= 1"):
        StepServing(8, instances=0)
    with pytest.raises(ConfigError, match="--step-queue-delay-us must be >= 0"):
        StepServing(8, max_queue_delay_us=-1)


def test_step_config_declares_scalars_for_the_runtime():
    cfg = step_config("m", StepKind.POSTPROCESS, (Port("logits", "float32", (4,)),),
                      (Port("label", "bytes"), Port("top", "text", (5,))), StepServing(0))
    assert not cfg.HasField("dynamic_batching")  # no batch axis: nothing to batch
    assert [list(t.dims) for t in cfg.output] == [[1], [5]]
    assert cfg.parameters["scalar_outputs"].string_value == "label"


# ---- the step runtime (the same code in the server and in-process) ----------------------------------------------

def _double(x):
    return {"y": x * 2, "n": np.array([str(len(x))] * len(x))}


def test_requests_of_equal_shapes_run_as_one_batch_and_split_back():
    calls = []

    def fn(x):
        calls.append(len(x))
        return _double(x)

    out = step_runtime.run_requests(fn, [{"x": np.ones((1, 2))}, {"x": np.zeros((3, 2))}], "step")
    assert calls == [4]
    assert [o["y"].shape for o in out] == [(1, 2), (3, 2)]
    assert out[1]["n"].tolist() == [b"4", b"4", b"4"]  # str returned, UTF-8 bytes given


def test_requests_of_other_shapes_run_one_by_one_and_a_failure_answers_its_own():
    def fn(x):
        if x.shape[1] == 3:
            raise ValueError("three")
        return _double(x)

    out = step_runtime.run_requests(fn, [{"x": np.ones((1, 2))}, {"x": np.ones((1, 3))}], "pre")
    assert out[0]["y"].tolist() == [[2.0, 2.0]]
    assert out[1].startswith("pre failed: ValueError: three (test_pipeline_configs.py:")


def test_scalars_are_squeezed_for_the_function_and_widened_for_the_wire():
    inputs = step_runtime.squeeze_scalars({"image": np.array([[b"a"], [b"b"]], dtype=object)}, ["image"])
    assert inputs["image"].shape == (2,)
    wire = step_runtime.to_wire(np.array([b"x", b"y"], dtype=object), np.object_, True)
    assert wire.shape == (2, 1) and wire.dtype == object
    assert step_runtime.to_wire(np.ones((2, 3)), np.float32, False).dtype == np.float32


# ---- declarations, perf input data, verification, shares -----------------------------------------------------------

def test_declarations_take_a_dtype_or_a_dtype_and_shape():
    assert parse_ports("f", {"image": "bytes", "x": ("float32", [3, -1])}) == (
        Port("image", "bytes"), Port("x", "float32", (3, -1)))
    assert parse_ports("f", None) is None


def test_raw_bytes_go_to_perf_analyzer_as_length_prefixed_base64(tmp_path):
    ports = (Port("image", "bytes"), Port("n", "int64", (2,)))
    entry = input_entry(ports, {"image": np.array([b"\xff\xd8jpeg"], dtype=object), "n": np.array([[1, 2]])})
    blob = base64.b64decode(entry["image"]["content"]["b64"])
    assert struct.unpack("<I", blob[:4])[0] == 6 and blob[4:] == b"\xff\xd8jpeg"
    assert entry["image"]["shape"] == [1]
    assert np.frombuffer(base64.b64decode(entry["n"]["content"]["b64"]), "<i8").tolist() == [1, 2]
    p = plan(tmp_path)
    data = json.loads(write_input_json(p, tmp_path / "in.json").read_text())["data"]
    assert len(data) == len(p.runs) and set(data[0]) == {"image"}


def test_served_outputs_are_compared_as_numbers_or_strings():
    tol = (1e-4, 1e-4)
    same = compare("s", Port("label", "bytes", (2,)), np.array([[b"a", b"b"]], dtype=object),
                   np.array([[b"a", b"b"]], dtype=object), tol)
    assert same.passed and same.kind == "strings"
    other = compare("s", Port("label", "bytes"), np.array([b"cat"], dtype=object), np.array([[b"dog"]], dtype=object),
                    tol)
    assert not other.passed and other.detail == "served [dog], in-process [cat]"
    close = compare("s", Port("p", "float32", (3,)), np.ones((1, 3)), np.ones((1, 3)) + 1e-6, tol)
    assert close.passed and close.max_abs_err == pytest.approx(1e-6)
    far = compare("s", Port("p", "float32", (3,)), np.ones((1, 3)), np.ones((1, 3)) + 1e-2, tol)
    assert not far.passed
    assert wire_inputs((Port("image", "bytes"),), {"image": np.array([b"x"], dtype=object)})["image"].shape == (1, 1)


def test_each_steps_share_comes_from_the_statistics_between_two_snapshots():
    def stats(count, queue, infer):
        return {"inference_stats": {"success": {"count": str(count)}, "queue": {"ns": str(queue)},
                                    "compute_infer": {"ns": str(infer)}}}

    before = {"pre": stats(10, 0, 0), "net": stats(10, 0, 0)}
    after = {"pre": stats(20, 10_000_000, 10_000_000), "net": stats(20, 0, 60_000_000)}
    shares = step_shares(before, after)
    assert [(s.model, s.requests, s.queue_ms, s.compute_ms) for s in shares] == [
        ("pre", 10, 1.0, 1.0), ("net", 10, 0.0, 6.0)]
    assert [round(s.share, 2) for s in shares] == [0.25, 0.75]


def test_the_speed_target_is_served_within_1_1x_in_process_plus_the_round_trip():
    ok = SpeedResult(10, inprocess_ms=10.0, stage_ms={"model": 10.0}, served_ms=11.5, server_ms=10.5,
                     round_trip_ms=0.6, steps=3)
    assert ok.bound_ms == pytest.approx(11.6) and ok.met and "met" in ok.text()
    slow = SpeedResult(10, 1.0, {"model": 1.0}, 3.0, 2.2, 0.8, steps=3)
    assert not slow.met and "NOT met" in slow.text() and slow.overhead_per_step_ms == pytest.approx(0.4)


def test_a_step_that_leaves_out_an_output_is_named_in_one_line():
    assert step_runtime.missing_outputs("postprocess", ["labels", "scores"], {"labels": 1, "extra": 2}) == (
        "postprocess returned no scores (it returned labels, extra)")
    assert step_runtime.missing_outputs("the model", ["y"], {"y": 1}) is None
