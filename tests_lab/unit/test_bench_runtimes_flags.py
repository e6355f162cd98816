"""bench-runtimes restates no default (issue 37): its timing flags are TimingOptions' fields, so the command without
them times as a Python caller's TimingOptions() does, and a count out of range is one line."""
from __future__ import annotations

import pytest

from conftest import parsed_vs_defaults
from deployment_toolkit_lab.commands import benchmark_runtimes as command
from deployment_toolkit.config import from_args
from deployment_toolkit.errors import UserInputError
from deployment_toolkit_lab.runtime_speed import TimingOptions

REQUIRED = ["--models", "resnet18", "--result-path", "out"]


def test_the_timing_flags_are_timing_options_defaults():
    args = command._parser().parse_args(REQUIRED)
    seen, differ = parsed_vs_defaults(args, TimingOptions)
    assert seen == {"warmup", "iterations", "min_iterations", "max_seconds", "wait_quiet_s", "retries"}
    assert not differ, differ
    assert from_args(TimingOptions, args) == TimingOptions()


@pytest.mark.parametrize("flag, value, words", [("--warmup", "-1", "--warmup must be >= 0"),
                                                ("--iterations", "0", "--iterations must be >= 1"),
                                                ("--max-seconds", "nan", "--max-seconds must be > 0")])
def test_a_count_out_of_range_is_one_line(flag, value, words):
    args = command._parser().parse_args([*REQUIRED, flag, value])
    with pytest.raises(UserInputError, match=words):
        from_args(TimingOptions, args)
