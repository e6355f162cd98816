"""A user's file that calls sys.exit cannot end the tool with a silent success (issue 30): the command says where
and exits 2. argparse's own exits (--help 0, a usage error 2) are untouched, and a usage error is one line and a
pointer to --help."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.long]  # real exports or subprocesses: `make test` runs it, `make test-unit` does not

ROOT = Path(__file__).resolve().parents[3]


def convert_cli(*args, env=None):
    return subprocess.run([sys.executable, str(ROOT / "triton" / "convert_model.py"), *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300, env=env)


@pytest.mark.parametrize("where", ["import", "get_model", "dataloader"])
def test_sys_exit_in_user_code_is_exit_2_naming_the_file_and_line(tmp_path, where):
    (tmp_path / "model.py").write_text(
        "import sys\nimport torch\n"
        + ("sys.exit(0)\n" if where == "import" else "")
        + "def get_model():\n"
        + ("    sys.exit(0)\n" if where == "get_model" else "    return torch.nn.Linear(3, 2)\n"))
    (tmp_path / "dataloader.py").write_text(
        "import sys\nimport numpy as np\ndef get_dataloader_fn(**kw):\n    def loader():\n"
        "        sys.exit(0)\n        yield\n    return loader\n")
    data = ["--dataloader", tmp_path / "dataloader.py"] if where == "dataloader" else ["--input-shape", "x=3"]
    proc = convert_cli("--input-path", tmp_path / "model.py", *data, "--output-type", "onnx", "--output-path",
                       tmp_path / "out")
    line = {"import": "model.py:3", "get_model": "model.py:4", "dataloader": "dataloader.py:5"}[where]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"user code called sys.exit(0) at {line}" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_help_still_exits_0_and_a_usage_error_is_one_line_and_a_pointer():
    assert convert_cli("--help").returncode == 0
    proc = convert_cli("--bogus")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2 and "error: the following arguments are required" in lines[0] and "--help" in lines[1]


@pytest.mark.parametrize("where, stage", [("import", "importing model.py"),
                                          ("get_model", "building the model (model.py:get_model)"),
                                          ("forward", "running the model on example inputs")])
def test_user_code_that_hangs_is_named_and_stopped(tmp_path, where, stage):
    (tmp_path / "model.py").write_text(
        "import time\nimport torch\n"
        + ("time.sleep(120)\n" if where == "import" else "")
        + "class M(torch.nn.Module):\n    def forward(self, x):\n"
        + ("        time.sleep(120)\n" if where == "forward" else "") + "        return x * 2\n"
        + "def get_model():\n" + ("    time.sleep(120)\n" if where == "get_model" else "") + "    return M()\n")
    temp = tmp_path / "tmp"  # the stacks go to the temp folder: this test's own, not the host's /tmp
    temp.mkdir()
    proc = convert_cli("--input-path", tmp_path / "model.py", "--input-shape", "x=3", "--output-type", "onnx",
                       "--output-path", tmp_path / "out", "--user-code-timeout", "3",
                       env={**os.environ, "TMPDIR": str(temp)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{stage} ..." in proc.stdout  # said before it started
    assert f"error: {stage} did not finish within 3 s (--user-code-timeout)" in proc.stderr
    stacks = proc.stderr.rsplit("Where each thread was: ", 1)[1].strip()
    assert Path(stacks).parent == temp and "model.py" in Path(stacks).read_text()
    assert not (tmp_path / "out" / "manifest.json").exists()
