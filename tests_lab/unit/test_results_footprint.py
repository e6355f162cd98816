"""Results that stay small (issue 37 item 5): no committed run folder over 2 MiB, counted as the next commit of
the working tree holds it, and the README's statement of the repository's size written by a command and current."""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from deployment_toolkit_lab.housekeeping import footprint

ROOT = Path(__file__).resolve().parents[2]
STATEMENT = ROOT / "docs" / "repository_size.md"


def test_every_committed_run_folder_stays_under_the_limit():
    fp = footprint.measure(ROOT)
    assert fp.run_folders, "no run folder found under results/"
    assert not fp.over(), {f"results/{name}/": size for name, size in fp.over().items()}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_check_counts_what_a_commit_would_hold(tmp_path):
    """Tracked and new files count, ignored and deleted ones do not; a folder past the limit is named."""
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("/results/**/*.profile.json\n")
    big, small = tmp_path / "results" / "big", tmp_path / "results" / "small"
    big.mkdir(parents=True)
    small.mkdir()
    (big / "a.csv").write_bytes(b"x" * (footprint.RUN_FOLDER_LIMIT - 10))
    (small / "run.json").write_text("{}")
    (small / "gone.csv").write_text("y" * 100)
    _git(tmp_path, "add", "-A")
    (small / "gone.csv").unlink()  # deleted in the working tree: not in the next commit
    (small / "p.profile.json").write_bytes(b"z" * footprint.RUN_FOLDER_LIMIT)  # ignored: never committed
    fp = footprint.measure(tmp_path)
    assert fp.run_folders == {"big": footprint.RUN_FOLDER_LIMIT - 10, "small": 2} and not fp.over()
    (big / "b.log").write_text("w" * 11)  # new, not yet added: a commit of the tree would hold it
    fp = footprint.measure(tmp_path)
    assert fp.over() == {"big": footprint.RUN_FOLDER_LIMIT + 1}
    assert fp.largest == ("big", footprint.RUN_FOLDER_LIMIT + 1)
    assert fp.results_bytes == footprint.RUN_FOLDER_LIMIT + 3 and fp.bytes == fp.results_bytes + len("/results/**/*.profile.json\n")


def test_the_readme_states_the_size_the_command_measures():
    """docs/repository_size.md is written by `deployment-toolkit-lab footprint --write` and quoted by the README
    (test_embed_results checks the quote); here it must still be true within 10% (or 0.5 MiB)."""
    assert "<!-- generated from docs/repository_size.md -->" in (ROOT / "README.md").read_text()
    fp = footprint.measure(ROOT)
    assert footprint.stale(STATEMENT.read_text(), fp) == [], (
        "the size in docs/repository_size.md is out of date: deployment-toolkit-lab footprint --write "
        "docs/repository_size.md && deployment-toolkit-lab embed-results README.md")


def test_a_statement_gone_stale_is_caught():
    fp = footprint.Footprint(10, 30 * footprint.MIB, 8, 20 * footprint.MIB, {"a": footprint.MIB})
    text = footprint.markdown(fp)
    assert footprint.stale(text, fp) == []
    assert footprint.stale(text, replace(fp, bytes=fp.bytes + footprint.MIB // 2)) == []  # small edits: still true
    grown = replace(fp, bytes=40 * footprint.MIB, results_bytes=30 * footprint.MIB)  # a raw run committed
    assert [w.split(":")[0] for w in footprint.stale(text, grown)] == ["repository", "results/"]
    assert footprint.stale("no figures here", fp) == ["no size statement found"]


def test_the_command_lists_every_folder_and_fails_past_the_limit(tmp_path, capsys):
    from deployment_toolkit_lab.commands.footprint import main

    if shutil.which("git") is None:
        pytest.skip("needs git")
    _git(tmp_path, "init", "-q")
    (tmp_path / "results" / "r").mkdir(parents=True)
    (tmp_path / "results" / "r" / "x.csv").write_bytes(b"x" * 100)
    out = tmp_path / "size.md"
    assert main(["--root", str(tmp_path), "--write", str(out)]) == 0
    assert "results/r/" in capsys.readouterr().out and "results/ 100 bytes" in out.read_text()
    (tmp_path / "results" / "r" / "y.csv").write_bytes(b"y" * footprint.RUN_FOLDER_LIMIT)
    assert main(["--root", str(tmp_path)]) == 1
    assert "compact-results results/r" in capsys.readouterr().out
