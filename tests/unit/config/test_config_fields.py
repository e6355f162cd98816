"""Settings written once (deployment_toolkit/config): a command's flags come from the settings dataclass, the
parsed flags give the same object the Python API builds, and a number out of range is refused the same way from
both, in one line naming the flag and its unit."""
from __future__ import annotations

import argparse
import math
import subprocess
import sys

import pytest

from deployment_toolkit.config import OnnxExporter, Precision, add_arguments, from_args
from deployment_toolkit.errors import UserInputError
from deployment_toolkit.export.convert import ConvertOptions


def parse(*argv: str) -> ConvertOptions:
    p = argparse.ArgumentParser()
    add_arguments(p, ConvertOptions)
    return from_args(ConvertOptions, p.parse_args(list(argv)))


def test_flags_give_the_defaults_the_dataclass_has():
    assert parse() == ConvertOptions()
    opts = parse("--onnx-opset", "18", "--precision", "fp16", "--no-verify", "--onnx-optimized", "1",
                 "--export-timeout", "0", "--verify-batch-sizes", "1,4", "--onnx-exporter", "dynamo")
    assert (opts.opset, opts.precision, opts.verify, opts.simplify) == (18, Precision.FP16, False, True)
    assert opts.export_timeout_s is None and opts.verify_batch_sizes == (1, 4)
    assert opts.onnx_exporter is OnnxExporter.DYNAMO and opts.onnx_exporter == "dynamo"


def test_the_api_takes_strings_for_choices():
    opts = ConvertOptions(precision="fp16", onnx_exporter="torchscript")
    assert opts.precision is Precision.FP16 and f"{opts.precision}" == "fp16"
    with pytest.raises(ValueError):
        ConvertOptions(precision="fp8")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("export_timeout_s", math.inf, r"--export-timeout must be >= 0 s, got inf"),
    ("export_timeout_s", -1.0, r"--export-timeout must be >= 0 s, got -1"),
    ("opset", 99, r"--onnx-opset must be >= 7 and <= 30, got 99"),
    ("verify_batch_sizes", (1, 0), r"--verify-batch-sizes must be >= 1 and <= 65536, got 0"),
    ("trt_workspace_bytes", math.nan, r"--max-workspace-size must be >= 1 bytes, got nan"),
])
def test_a_number_out_of_range_is_one_line_from_the_api(field, value, message):
    with pytest.raises(UserInputError, match=message):
        ConvertOptions(**{field: value})


def test_the_command_refuses_the_same_numbers_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "deployment_toolkit", "convert", "--model", "resnet18",
                           "--output-type", "onnx", "--output-path", str(tmp_path / "x"), "--export-timeout", "nan"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "error: --export-timeout must be >= 0 s, got nan"
    assert not (tmp_path / "x").exists()  # refused before anything was built or written


def test_a_flag_of_several_values_fills_a_tuple_and_shows_its_default_as_typed():
    from dataclasses import dataclass

    from deployment_toolkit.config import setting

    @dataclass(frozen=True)
    class Spread:
        gsd_m: tuple[float, ...] = setting((10.0,), flag="--gsd-m", type=float, nargs="+", low=0, low_open=True)
        sizes: tuple[int, ...] = setting((1, 8), flag="--sizes", type=lambda t: tuple(int(x) for x in t.split(",")))

    p = argparse.ArgumentParser()
    add_arguments(p, Spread)
    assert from_args(Spread, p.parse_args([])) == Spread()
    assert from_args(Spread, p.parse_args(["--gsd-m", "10", "30"])).gsd_m == (10.0, 30.0)
    with pytest.raises(UserInputError, match=r"--gsd-m must be > 0, got -1.0"):
        from_args(Spread, p.parse_args(["--gsd-m", "10", "-1"]))
    text = p.format_help()
    assert "(default 10)" in text and "(default 1,8)" in text
