"""The fused layout's config (issue 36's speed target): one Python-backend model named as the ensemble, with the
ensemble's inputs and outputs, the network's serving settings, and the ensemble's wiring as its graph; refused in
one line where one process cannot run the pipeline as the ensemble would."""
from __future__ import annotations

import dataclasses
import json

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from deployment_toolkit.config import PipelineLayout
from deployment_toolkit.pipeline.configs import StepServing
from deployment_toolkit.pipeline.fused import fused_config, graph
from deployment_toolkit.pipeline.write import build_configs
from deployment_toolkit.repository.config import ConfigError, ConfigOptions, parse_text, to_text
from deployment_toolkit.spec import Manifest, TensorSpec

from test_pipeline_checks import plan, toy_manifest  # noqa: E402  (the same toy pipeline)

NETWORK = ConfigOptions(model_name="toy", instances=2, intra_op_threads=1, max_queue_delay_us=200,
                        preferred_batch_sizes=(4, 8), max_batch_size=8, host_has_gpu=False)


def test_the_fused_model_is_called_as_the_ensemble_and_takes_and_gives_what_it_does(tmp_path):
    p = plan(tmp_path)
    fused = fused_config(p, StepServing(8), NETWORK)
    ensemble = build_configs(p, StepServing(8), NETWORK)["toy_pipeline"]
    assert fused.name == ensemble.name == "toy_pipeline" and fused.backend == "python"
    assert list(fused.input) == list(ensemble.input) and list(fused.output) == list(ensemble.output)
    assert fused.max_batch_size == 8
    assert parse_text(to_text(fused)) == fused  # a config Triton's schema takes


def test_the_fused_model_serves_with_the_networks_settings(tmp_path):
    fused = fused_config(plan(tmp_path), StepServing(8), NETWORK)
    (group,) = fused.instance_group
    assert group.count == 2 and mc.ModelInstanceGroup.Kind.Name(group.kind) == "KIND_CPU"
    assert fused.dynamic_batching.max_queue_delay_microseconds == 200
    assert list(fused.dynamic_batching.preferred_batch_size) == [4, 8]
    assert fused.parameters["intra_op_threads"].string_value == "1"


def test_its_graph_is_the_ensembles_wiring_in_order(tmp_path):
    p = plan(tmp_path)
    ensemble = build_configs(p, StepServing(8), NETWORK)["toy_pipeline"]
    steps = json.loads(fused_config(p, StepServing(8), NETWORK).parameters["graph"].string_value)["steps"]
    assert [(s["kind"], s.get("module"), s.get("function")) for s in steps] == [
        ("function", "user_preprocess", "preprocess"), ("network", None, None),
        ("function", "user_postprocess", "postprocess")]
    assert [(s["inputs"], s["outputs"]) for s in steps] == [
        (dict(e.input_map), dict(e.output_map)) for e in ensemble.ensemble_scheduling.step]
    assert graph(p)["scalar_inputs"] == ["image"] and graph(p)["scalar_outputs"] == ["label"]


def test_a_network_on_a_native_backend_cannot_be_fused(tmp_path):
    with pytest.raises(ConfigError, match="--layout fused runs the network in the Python runtime; --runtime native"):
        fused_config(plan(tmp_path), StepServing(8), dataclasses.replace(NETWORK, runtime="native"))


def test_a_network_whose_inputs_must_be_equal_within_a_batch_is_not_fused(tmp_path):
    folder = toy_manifest(tmp_path / "uniform")
    manifest = Manifest.load(folder)
    manifest.signature = dataclasses.replace(manifest.signature, inputs=(
        TensorSpec("input__0", (3, 8, 8), batch_uniform=True),))
    manifest.save(folder)
    with pytest.raises(ConfigError, match="equal within a batch.*use --layout ensemble"):
        fused_config(plan(tmp_path, manifest=folder), StepServing(8), NETWORK)


def test_the_layout_is_an_enum_a_request_takes_by_its_spelling():
    assert PipelineLayout("fused") is PipelineLayout.FUSED
    with pytest.raises(ValueError):
        PipelineLayout("merged")
