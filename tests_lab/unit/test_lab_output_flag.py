"""One spelling for the run folder, in the lab too (tests/unit/results/test_output_flag.py is the toolkit's side):
every command that writes one takes --result-path, the spellings it had before stay as aliases."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WRITES_A_RUN_FOLDER = {  # command -> the spelling it had before, still accepted
    "bench": "--result-dir", "bench-overhead": None, "bench-runtimes": "--result-dir", "bench-corpus": "--output",
    "bench-vs-model-analyzer": None, "bench-ragged": None, "bench-telemetry": None, "pack-bench": None,
    "bench-neighbour": None, "bench-check-plan": None, "bench-group-config": None, "gpu-check": None,
}


@pytest.mark.parametrize("command", sorted(WRITES_A_RUN_FOLDER))
def test_every_run_folder_is_result_path(command):
    out = subprocess.run([sys.executable, "-m", "deployment_toolkit_lab", command, "--help"], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "--result-path" in out.stdout, f"{command}: no --result-path"
    old = WRITES_A_RUN_FOLDER[command]
    if old:
        assert old in out.stdout, f"{command}: the old spelling {old} is no longer accepted"
