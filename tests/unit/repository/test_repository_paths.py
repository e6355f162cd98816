"""Repository paths the embedded server cannot use are refused up front, naming the folder (issue 38 item 6): a
space made its Python backend load the model forever ('still loading' at the timeout), a non-ASCII folder a
6-line UnicodeEncodeError; config and serve say it in one line, exit 2, before anything is written or started."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from deployment_toolkit.spec import SpecError, check_repository_path

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("folder", "why"), [("my models", "has whitespace"), ("tab\there", "has whitespace"),
                                             ("modèles", "has non-ASCII characters")])
def test_a_path_the_backend_cannot_use_names_its_folder(tmp_path, folder, why):
    with pytest.raises(SpecError, match=re.escape(f"the folder {folder!r} {why}")):
        check_repository_path(tmp_path / folder / "repo")
    assert check_repository_path(tmp_path / "models" / "repo") == tmp_path / "models" / "repo"


@pytest.mark.parametrize("command", [
    ["config", "--model-path", "{art}", "--model-name", "m", "--model-repository", "{repo}"],
    ["serve", "--model-repository", "{repo}"],
])
def test_config_and_serve_refuse_it_in_one_line(tmp_path, command):
    repo = tmp_path / "my models" / "repo"
    argv = [a.format(art=tmp_path / "art", repo=repo) for a in command]
    proc = subprocess.run([sys.executable, "-m", "deployment_toolkit", *argv], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "the folder 'my models' has whitespace" in line and not repo.exists()
