"""`deployment-toolkit plan` refuses bad input in one line with exit 2, before it converts or measures anything."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("extra", "message"), [
    (["--p99-ms", "0"], "--p99-ms must be > 0 and <= 3.6e+06 ms, got 0.0"),
    (["--peak-rps", "nan"], "--peak-rps must be > 0 and <= 1e+09 inferences/s, got nan"),
    (["--max-replicas", "0"], "--max-replicas must be >= 1"),
    (["--objective", "closed-loop"], "a plan ranks configs by the open-loop capacity"),
    (["--host-memory-gb", "-1"], "--host-memory-gb must be > 0 and <= 100000 GB, got -1.0"),
])
def test_bad_input_is_one_line_and_nothing_is_written(tmp_path, extra, message):
    args = ["--model", "resnet18", "--peak-rps", "100", "--p99-ms", "50", "--result-path", str(tmp_path / "plan"),
            "--workspace", str(tmp_path / "ws")]
    for flag, value in zip(extra[::2], extra[1::2]):  # the case's value replaces the default one
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    out = subprocess.run([sys.executable, "-m", "deployment_toolkit", "plan", *args], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("error:") and message in line
    assert not (tmp_path / "plan").exists() and not (tmp_path / "ws").exists()
