"""The overhead benchmark parses the perf_analyzer flags into the same fields as the toolkit's perf commands
(issue 37; the toolkit's side is tests/unit/perf/test_perf_load.py): PerfOptions' and RealSamples' defaults, the
flags keep their names and forms."""
from __future__ import annotations

import dataclasses

import pytest

from conftest import parsed_vs_defaults
from deployment_toolkit.config import Protocol, SharedMemory, flag_of
from deployment_toolkit.errors import UserInputError
from deployment_toolkit.perf.analyzer import PerfOptions
from deployment_toolkit.perf.analyzer.flags import PERF_FLAGS_SKIP, RealSamples, perf_options_from_args
from deployment_toolkit_lab.commands import benchmark_overhead


def _flagged(settings: type) -> set[str]:
    return {f.name for f in dataclasses.fields(settings) if flag_of(f) is not None and flag_of(f).name} - set(
        PERF_FLAGS_SKIP)


def test_bench_overhead_parses_its_perf_flags_into_the_fields():
    parse = benchmark_overhead._parser().parse_args
    args = parse([])
    seen, differ = parsed_vs_defaults(args, PerfOptions)
    assert seen == _flagged(PerfOptions) and set(differ) == {"shared_memory"}
    assert parsed_vs_defaults(args, RealSamples) == (_flagged(RealSamples), {})
    args = parse(["--protocol", "http", "--shared-memory", "cuda", "--measurement-interval", "700",
                  "--perf-analyzer-arg=--verbose", "--perf-analyzer-arg=-v", "--async", "--percentile", "95",
                  "--perf-samples", "3", "--dataloader-arg", "k=v"])
    opts = perf_options_from_args(args)
    assert (opts.protocol, opts.shared_memory, opts.measurement_interval_ms) == (Protocol.HTTP, SharedMemory.CUDA, 700)
    assert (opts.extra_args, opts.async_mode, opts.percentile) == (("--verbose", "-v"), True, 95)
    assert (args.perf_samples, args.dataloader_arg) == (3, ["k=v"])
    with pytest.raises(UserInputError, match="--measurement-interval must be"):
        perf_options_from_args(parse(["--measurement-interval", "0"]), shared_memory="none")
