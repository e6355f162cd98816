"""No command rewrites a committed results folder unless told to (issue 30): a folder git tracks is refused as an
output in one line (exit 2, nothing written), --update-committed lets a regeneration through, and an untracked
folder is written as before."""
import subprocess
import sys
from pathlib import Path

import pytest

from deployment_toolkit import committed

ROOT = Path(__file__).resolve().parents[3]
COMMITTED_RUN = ROOT / "results" / "demo-resnet50-onnx-cpu"


def git_status(path: Path) -> str:
    return subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", str(path)],
                          capture_output=True, text=True, check=True).stdout


def run(script: str, *args):
    return subprocess.run([sys.executable, str(ROOT / "triton" / script), *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)


@pytest.fixture(autouse=True)
def _reset():
    yield
    committed.allow(False)


def test_the_guard_refuses_a_tracked_folder_and_lets_an_untracked_one_through(tmp_path):
    assert committed.tracked_files(COMMITTED_RUN), "the committed example run must be tracked for this test"
    with pytest.raises(committed.UserInputError, match="committed to git.*--update-committed"):
        committed.refuse_committed(COMMITTED_RUN)
    committed.refuse_committed(tmp_path / "new-run")  # not a repository: fine
    committed.refuse_committed(ROOT / "results" / "local" / "x")  # git-ignored: fine
    committed.allow(True)
    committed.refuse_committed(COMMITTED_RUN)


@pytest.mark.parametrize("script, args", [
    ("report.py", [COMMITTED_RUN]),
    ("size_fleet.py", [ROOT / "tests" / "fixtures" / "stored_search", "--peak-rps", "10", "--result-path", COMMITTED_RUN]),
    ("run_online_performance_test_on_triton.py", ["--server-url", "127.0.0.1:1", "--model-name", "resnet50",
                                                  "--result-path", COMMITTED_RUN]),
])
def test_commands_pointed_at_a_committed_run_change_nothing(script, args):
    before = git_status(COMMITTED_RUN)
    proc = run(script, *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "committed to git" in proc.stderr and "--update-committed" in proc.stderr
    assert git_status(COMMITTED_RUN) == before == ""
