"""The bench command's flags are built from the settings it runs (BenchMatrix, BenchOptions, BenchRun): each default
written once, in the dataclass (issue 37). A flag that restated another default would fail here."""
from __future__ import annotations

import dataclasses

from conftest import parsed_vs_defaults
from deployment_toolkit.config import Reuse
from deployment_toolkit_lab.commands import bench as cmd
from deployment_toolkit_lab.framework_bench import BenchMatrix, BenchOptions, BenchRun, enumerate_configs


def test_parsed_defaults_are_the_dataclass_defaults():
    args = cmd._parser().parse_args([])
    for settings, fields in ((BenchMatrix, {f.name for f in dataclasses.fields(BenchMatrix)}),
                             (BenchOptions, {"warmup", "duration_s", "min_iterations", "gsd_m", "amp_dtype", "tf32",
                                             "seed"}),
                             (BenchRun, {"isolate", "timeout_s", "remeasure", "progress"})):
        seen, differ = parsed_vs_defaults(args, settings)
        assert seen == fields, settings.__name__
        assert not differ, f"{settings.__name__}: flags restate other defaults: {differ}"
    assert args.reuse == BenchRun.reuse == Reuse.AUTO
    assert cmd.from_args(BenchMatrix, args) == BenchMatrix()
    assert cmd.from_args(BenchOptions, args) == BenchOptions()
    assert cmd.from_args(BenchRun, args, reuse=args.reuse) == BenchRun()


def test_flags_keep_their_names_and_forms():
    args = cmd._parser().parse_args(
        ["--models", "a", "b", "--precisions", "fp32", "bf16", "--compile-modes", "none", "--runtimes", "eager",
         "--batch-sizes", "1,32", "--duration", "5", "--config-timeout", "60", "--isolate", "all", "--no-tf32",
         "--no-progress", "--gsd-m", "10", "30", "--fresh"])
    matrix = cmd.from_args(BenchMatrix, args)
    assert matrix.models == ("a", "b") and matrix.precisions == ("fp32", "bf16") and matrix.batch_sizes == (1, 32)
    assert len(matrix.configs()) == 2 * 2 * 2  # models x precisions x batch sizes, eager only
    opts = cmd.from_args(BenchOptions, args, device="cpu")
    assert (opts.duration_s, opts.tf32, opts.gsd_m) == (5.0, False, (10.0, 30.0))
    run = cmd.from_args(BenchRun, args, reuse=args.reuse)
    assert (run.isolate.value, run.timeout_s, run.progress, run.reuse) == ("all", 60.0, False, Reuse.FRESH)


def test_enumerate_configs_takes_the_matrix_defaults():
    assert BenchMatrix().configs() == enumerate_configs(["resnet50"])
