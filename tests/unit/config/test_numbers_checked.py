"""Every number a user gives is checked where it is declared (config.setting): finite, in range, said in one line
with its flag and unit, exit 2, nothing written; the same check from the Python API (issue 38 item 2, the probes:
NaN, inf and 1e308 went through the `<= 0` checks into tracebacks or a 308-digit replica count)."""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from deployment_toolkit.errors import UserInputError
from deployment_toolkit.deployment.settings import Demand
from deployment_toolkit.search.trials import SearchSettings

ROOT = Path(__file__).resolve().parents[3]
RUN = ROOT / "tests" / "fixtures" / "stored_search"  # a search's run.json, as size reads it first


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--peak-rps", "nan", "--peak-rps must be > 0 and <= 1e+09 inferences/s, got nan"),
    ("--peak-rps", "inf", "--peak-rps must be > 0 and <= 1e+09 inferences/s, got inf"),
    ("--peak-rps", "1e308", "--peak-rps must be > 0 and <= 1e+09 inferences/s, got 1e+308"),
    ("--headroom", "nan", "--headroom must be >= 0 and <= 10, got nan"),
    ("--p99-ms", "inf", "--p99-ms must be > 0 and <= 3.6e+06 ms, got inf"),
])
def test_size_refuses_numbers_that_are_not_numbers(tmp_path, flag, value, message):
    args = {"--peak-rps": "100", "--p99-ms": "50", flag: value}
    proc = subprocess.run([sys.executable, str(ROOT / "triton" / "size_fleet.py"), str(RUN),
                           *[x for kv in args.items() for x in kv], "--result-path", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"error: {message}"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("make", [
    lambda: SearchSettings(budget_ms=math.inf),
    lambda: SearchSettings(budget_ms=math.nan),
    lambda: SearchSettings(budget_ms=1e308),
    lambda: SearchSettings(budget_ms=50, max_minutes=-1),
    lambda: SearchSettings(budget_ms=50, queue_delays_us=(100, -5)),
    lambda: Demand(peak_rps=math.nan, p99_ms=50),
    lambda: Demand(peak_rps=100, p99_ms=50, headroom=math.inf),
    lambda: Demand(peak_rps=1e308, p99_ms=50),
])
def test_the_api_refuses_the_same_numbers(make):
    with pytest.raises(UserInputError, match=r"^--[a-z0-9-]+ must be .*, got "):
        make()


def test_search_and_plan_refuse_a_budget_that_is_not_a_number_before_any_work(tmp_path):
    for command, extra in (("search", []), ("plan", ["--peak-rps", "100"])):
        proc = subprocess.run([sys.executable, "-m", "deployment_toolkit", command, "--model", "resnet18",
                               "--p99-ms", "nan", *extra, "--result-path", str(tmp_path / command),
                               "--workspace", str(tmp_path / f"ws-{command}")],
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().splitlines() == ["error: --p99-ms must be > 0 and <= 3.6e+06 ms, got nan"]
        assert not (tmp_path / command).exists() and not (tmp_path / f"ws-{command}").exists()


def test_a_model_argument_too_long_to_read_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "deployment_toolkit", "convert", "--model", "resnet18",
                           "--model-arg", "width=" + "9" * 100_000, "--output-type", "onnx",
                           "--output-path", str(tmp_path / "x")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "characters is past the 10,000 taken" in proc.stderr.strip().splitlines()[-1]
