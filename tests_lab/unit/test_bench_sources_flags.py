"""bench-sources' --preset, --no-verify and --seed are ConvertOptions' flags: each default written once, in the
dataclass the conversions run with (issue 37). A flag that restated another default would fail here."""
from __future__ import annotations

from conftest import parsed_vs_defaults
from deployment_toolkit_lab.commands import benchmark_sources
from deployment_toolkit.config import from_args
from deployment_toolkit.export import ConvertOptions


def test_bench_sources_defaults_are_the_convert_options():
    args = benchmark_sources._parser().parse_args([])
    fields = ("preset", "verify", "seed")
    seen, differ = parsed_vs_defaults(args, ConvertOptions, fields)
    assert seen == set(fields)
    assert not differ, f"flags restate other defaults: {differ}"
    assert from_args(ConvertOptions, args) == ConvertOptions()
    assert (args.zoo_model, args.output_type, args.repeats) == ("resnet50", "onnx", 3)  # the command's own


def test_bench_sources_flags_keep_their_forms():
    args = benchmark_sources._parser().parse_args(["--preset", "full", "--no-verify", "--seed", "7"])
    opts = from_args(ConvertOptions, args)
    assert (opts.preset, opts.verify, opts.seed) == ("full", False, 7)
