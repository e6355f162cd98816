"""The README's `plan` command on examples/my_model runs as written (issue 56): the command is read from the README
(its `deployment-toolkit plan --input-path examples/my_model/model.py ...` block, continuation lines joined), the
user's weights and samples made by the README's own two lines, and the plan run with short searches added; exit 0
exactly, and plan.md and run.json say the fleet it planned."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

# one at a time under xdist (conftest): it holds a capacity against its SLO and confirms the fleet
pytestmark = [pytest.mark.integration, pytest.mark.exclusive, pytest.mark.timeout(1200)]
ROOT = Path(__file__).resolve().parents[2]
SHORT = ["--preset", "small", "--formats", "onnx", "--max-minutes", "1", "--measurement-mode", "time_windows",
         "--measurement-interval", "500", "--max-trials", "3", "--max-attempts", "1", "--noise-repeats", "1",
         "--refine-steps", "0", "--max-concurrency", "4", "--max-configs", "1", "--capacity-trials", "1",
         "--capacity-resolution", "0.2", "--open-loop-window-ms", "500", "--retests", "1", "--confirm-trials", "1",
         "--confirm-window-ms", "1000", "--no-progress"]


def readme_command(prefix: str) -> list[str]:
    """The README's command that starts with `prefix`, its continuation lines joined, its comment dropped."""
    lines = (ROOT / "README.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(prefix))
    text = ""
    for line in lines[start:]:
        text += line.split(" #", 1)[0].rstrip()
        if not text.endswith("\\"):
            break
        text = text[:-1] + " "
    return shlex.split(text)


def test_the_readmes_plan_command_plans_the_worked_example(tmp_path):
    ws = tmp_path / "my_model"
    for prefix in ("python examples/my_model/make_checkpoint.py", "python examples/my_model/dataloader.py"):
        argv = [a.replace("workspace/my_model", str(ws)) for a in readme_command(prefix)]
        made = subprocess.run([sys.executable, *argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    argv = [a.replace("workspace/my_model", str(ws)) for a in
            readme_command("deployment-toolkit plan --input-path examples/my_model/model.py")]
    assert argv[:2] == ["deployment-toolkit", "plan"] and "--peak-rps" in argv and "--checkpoint" in argv
    out = tmp_path / "plan"
    proc = subprocess.run([sys.executable, "-m", "deployment_toolkit", *argv[1:], *SHORT, "--result-path", str(out),
                           "--workspace", str(tmp_path / "ws")], cwd=ROOT, capture_output=True, text=True,
                          timeout=1100)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    plan_md = (out / "plan.md").read_text()
    replicas = int(re.search(r"\*\*(\d+) replica\(s\)\*\*", plan_md).group(1))
    config = json.loads((out / "run.json").read_text())["config"]
    assert config["replicas"] == replicas and 1 <= replicas <= 20  # the README's --max-replicas 20
    assert config["packing"]["lower_bound"] <= replicas and all(c["passed"] for c in config["confirmations"])
    assert "random inputs" not in plan_md  # measured on the user's samples (--data-dir)
