"""run.json says which commit measured a figure, and whether the code was as committed: a tree made dirty only by
results/ being rewritten (a sweep writing its rows) measured the committed code, which "dirty" alone cannot say."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from deployment_toolkit.results.runinfo import commit_text, git_state


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    if not shutil.which("git"):
        pytest.skip("git is not installed")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "run.csv").write_text("a\n")
    (tmp_path / "code.py").write_text("x = 1\n")

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                       capture_output=True)

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "init")
    return tmp_path


def test_a_clean_tree(repo):
    state = git_state(repo)
    assert len(state["sha"]) == 40 and state["dirty"] is False and state["code_dirty"] is False
    assert commit_text(state) == state["sha"][:12]


def test_rewritten_results_leave_the_code_as_committed(repo):
    (repo / "results" / "run.csv").write_text("a\nb\n")
    (repo / "scratch.txt").write_text("untracked")
    state = git_state(repo)
    assert state["dirty"] is True and state["code_dirty"] is False and state["changed_code"] == []
    assert state["changed_files"] == 1 and state["untracked_files"] == 1
    assert commit_text(state).endswith("(code as committed; uncommitted changes under results/ only)")


def test_changed_code_is_named(repo):
    (repo / "code.py").write_text("x = 2\n")
    (repo / "results" / "run.csv").write_text("a\nb\n")
    state = git_state(repo)
    assert state["code_dirty"] is True and state["changed_code"] == ["code.py"] and state["changed_files"] == 2
    assert commit_text(state) == f"{state['sha'][:12]} (uncommitted changes to code.py)"


def test_runs_recorded_before_code_dirty_keep_their_wording():
    assert commit_text({"sha": "a" * 40, "dirty": True}) == "a" * 12 + " (uncommitted changes)"
    assert commit_text({}) == "unknown"
