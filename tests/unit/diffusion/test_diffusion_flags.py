"""The diffusion commands' flags are built from the settings they run (LatencyPlan, TargetOptions, SpeedupPlan,
DenoiserSource, PipelineOptions, ConvertOptions, ConfigOptions): each default written once, in the dataclass or
constant (issue 37). A flag that restated another default would fail here."""
from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from conftest import parsed_vs_defaults
from deployment_toolkit.commands import deploy_diffusion, run_diffusion_latency, run_diffusion_speedup
from deployment_toolkit.config import from_args, flag_of
from deployment_toolkit.diffusion.latency import LatencyPlan, SpeedupPlan
from deployment_toolkit.diffusion.pipeline import PIPELINE_NAME, DenoiserSource, PipelineOptions
from deployment_toolkit.diffusion.targets import TARGETS, TargetOptions, TritonSamplerTarget
from deployment_toolkit.export import ConvertOptions
from deployment_toolkit.repository.config import ConfigOptions


def _check(args: Any, expected: list[tuple[type, set[str]]]) -> None:
    for settings, fields in expected:
        seen, differ = parsed_vs_defaults(args, settings, tuple(fields))
        assert seen == fields, settings.__name__
        assert not differ, f"{settings.__name__}: flags restate other defaults: {differ}"


def _all(settings: type) -> set[str]:
    return {f.name for f in dataclasses.fields(settings) if flag_of(f) is not None and flag_of(f).name}


def test_diffusion_latency_defaults_are_the_dataclass_defaults():
    args = run_diffusion_latency._parser().parse_args([])
    _check(args, [(LatencyPlan, _all(LatencyPlan)), (TargetOptions, _all(TargetOptions))])
    assert from_args(LatencyPlan, args) == LatencyPlan() and from_args(TargetOptions, args) == TargetOptions()
    assert args.targets == TritonSamplerTarget.name == TARGETS[0]
    assert TargetOptions.model_name == PIPELINE_NAME


def test_diffusion_speedup_defaults_are_the_dataclass_defaults():
    args = run_diffusion_speedup._parser().parse_args([])
    _check(args, [(SpeedupPlan, _all(SpeedupPlan)), (DenoiserSource, _all(DenoiserSource)),
                  (ConvertOptions, {"preset"}), (PipelineOptions, {"sampler"})])
    assert from_args(SpeedupPlan, args) == SpeedupPlan()


def test_deploy_diffusion_defaults_are_the_dataclass_defaults():
    args = deploy_diffusion._parser().parse_args(["--model-repository", "repo"])
    _check(args, [(DenoiserSource, _all(DenoiserSource)), (PipelineOptions, _all(PipelineOptions)),
                  (ConvertOptions, {"preset", "precision", "max_batch_size", "verify"}),
                  (ConfigOptions, set(deploy_diffusion.DENOISER_CONFIG))])
    assert args.name == PIPELINE_NAME
    assert from_args(ConvertOptions, args) == ConvertOptions()
    assert from_args(PipelineOptions, args) == PipelineOptions()


def test_deploy_diffusion_flags_keep_their_names_and_forms():
    args = deploy_diffusion._parser().parse_args(
        ["--model-repository", "repo", "--precision", "fp16", "--no-verify", "--instance-kind", "cpu",
         "--max-batch-size", "8", "--workspace", "ws", "--model", "m", "--preset", "full"])
    opts = from_args(ConvertOptions, args)
    assert (opts.precision, opts.verify, opts.max_batch_size, opts.preset) == ("fp16", False, 8, "full")
    source = from_args(DenoiserSource, args)
    assert str(source.artifact_dir(args.preset, "onnx", args.precision)) == "ws/m_full_onnx_fp16"
    with pytest.raises(SystemExit) as exit_info:
        deploy_diffusion._parser().parse_args([])  # --model-repository stays required
    assert exit_info.value.code == 2


def test_latency_and_speedup_flags_keep_their_forms():
    args = run_diffusion_latency._parser().parse_args(["--steps", "4,8", "--timeout-s", "60", "--threads", "2"])
    assert from_args(LatencyPlan, args).steps == (4, 8)
    assert (args.timeout_s, args.threads) == (60.0, 2)
    args = run_diffusion_speedup._parser().parse_args(["--batch-sizes", "1,8", "--steps", "20"])
    assert (from_args(SpeedupPlan, args).batch_sizes, args.steps) == ((1, 8), 20)
