"""Generated blocks in Markdown: rewritten from their files, and the repository's READMEs are in sync."""
import subprocess
import sys
from pathlib import Path

import pytest

from deployment_toolkit_lab.housekeeping.embed import EmbedError, embed_generated, stale_blocks

ROOT = Path(__file__).resolve().parents[2]


def test_blocks_are_rewritten_from_their_files_and_the_rest_is_kept(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "t.md").write_text("| a |\n|---|\n| 1 |\n")
    md = tmp_path / "README.md"
    md.write_text("intro\n<!-- generated from r/t.md -->\n| a |\n|---|\n| 9 |\n<!-- end generated -->\noutro\n")
    assert stale_blocks(md, tmp_path) == ["r/t.md"]
    assert embed_generated(md, tmp_path) == ["r/t.md"]
    assert md.read_text() == "intro\n<!-- generated from r/t.md -->\n| a |\n|---|\n| 1 |\n<!-- end generated -->\noutro\n"
    assert stale_blocks(md, tmp_path) == [] and embed_generated(md, tmp_path) == []


def test_missing_or_outside_files_are_clear_errors(tmp_path):
    md = tmp_path / "README.md"
    md.write_text("<!-- generated from results/none.md -->\n<!-- end generated -->\n")
    with pytest.raises(EmbedError, match="does not exist: run the command"):
        embed_generated(md, tmp_path)
    md.write_text("<!-- generated from ../etc/passwd -->\n<!-- end generated -->\n")
    with pytest.raises(EmbedError, match="outside"):
        stale_blocks(md, tmp_path)


def test_the_repository_readmes_quote_their_result_files_verbatim():
    """A figure typed into a README by hand (or a result rerun without re-embedding) fails here."""
    docs = [ROOT / "README.md", *sorted((ROOT / "results").glob("*/README.md"))]
    proc = subprocess.run([sys.executable, str(ROOT / "deployment_toolkit_lab" / "scripts" / "embed_results.py"), "--check", *map(str, docs)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
