"""A two-model deployment whose traffic is a bursty request log (issue 57's Done-when): examples/bursty as a user runs
it, make_log.py then `plan --deployment`. fraud's log is Poisson, churn's comes in 1-second bursts; the plan sizes
both by their busiest minute, confirms under Poisson arrivals and again with churn's recorded arrivals, exits 0, and
plan.md and run.json say what a Poisson plan gives and what the bursts need. Kept short on the real embedded
tritonserver and perf_analyzer."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

# one at a time under xdist (conftest): two searches, their capacities, a shared group measured and confirmed twice
pytestmark = [pytest.mark.integration, pytest.mark.exclusive, pytest.mark.timeout(1500)]
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "bursty"
FAST = ["--preset", "small", "--formats", "onnx", "--max-minutes", "1", "--measurement-mode", "time_windows",
        "--measurement-interval", "500", "--max-trials", "3", "--max-attempts", "1", "--noise-repeats", "1",
        "--refine-steps", "0", "--max-concurrency", "4", "--max-configs", "1", "--capacity-trials", "1",
        "--capacity-resolution", "0.2", "--open-loop-window-ms", "500", "--retests", "1", "--confirm-trials", "1",
        "--confirm-window-ms", "1000", "--no-progress"]


def test_a_bursty_request_log_is_planned_and_confirmed_with_its_own_arrivals(tmp_path):
    made = subprocess.run([sys.executable, str(EXAMPLE / "make_log.py")], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert made.returncode == 0 and "requests logged" in made.stdout, made.stdout + made.stderr
    out, ws = tmp_path / "plan", tmp_path / "ws"
    proc = subprocess.run([sys.executable, "-m", "deployment_toolkit", "plan", "--deployment",
                           str(EXAMPLE / "deployment.yaml"), *FAST, "--result-path", str(out), "--workspace", str(ws)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1400)
    logs = proc.stdout + proc.stderr
    assert proc.returncode == 0, logs[-6000:]
    plan_md = (out / "plan.md").read_text()
    said = re.search(r"confirmed with the recorded arrivals of churn \(index of dispersion ([\d.]+)[^)]*\): a Poisson "
                     r"plan gives (\d+) replica\(s\), the bursts need (\d+)", plan_md)
    assert said, plan_md
    assert float(said.group(1)) > 1.5 and int(said.group(3)) >= int(said.group(2)) >= 1
    assert "fraud (index of dispersion" not in plan_md  # Poisson traffic is confirmed as Poisson
    config = json.loads((out / "run.json").read_text())["config"]
    bursty = [c for c in config["confirmations"] if c["bursts"]]
    assert len(bursty) == 1 and "churn" in bursty[0]["models"] and bursty[0]["passed"] is True
    assert bursty[0]["poisson_replicas"] == int(said.group(2))
