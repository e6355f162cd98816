"""One spelling for the run folder: every command that writes one takes --result-path (the spellings it had before
stay as aliases), so a user never has to remember which command says --output, --result-dir or --results-dir."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
WRITES_A_RUN_FOLDER = {  # subcommand -> the spelling it had before, still accepted (the lab's: tests_lab)
    "perf-offline": None, "perf-online": None, "search": None, "plan": None, "size": None,
    "demo": "--output", "accuracy-demo": "--results-dir", "diffusion-latency": "--result-dir",
    "diffusion-speedup": "--result-dir",
}


@pytest.mark.parametrize("command", sorted(WRITES_A_RUN_FOLDER))
def test_every_run_folder_is_result_path(command):
    out = subprocess.run([sys.executable, "-m", "deployment_toolkit", command, "--help"], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "--result-path" in out.stdout, f"{command}: no --result-path"
    old = WRITES_A_RUN_FOLDER[command]
    if old:
        assert old in out.stdout, f"{command}: the old spelling {old} is no longer accepted"
