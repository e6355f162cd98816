"""Every test module is run by CI: the Makefile targets `.ci/run` calls collect, between them, every `test_*.py` under
tests/ and tests_lab/. The tests are split over targets (`make test` within 15 minutes, `make test-e2e`, `make
test-lab`); a module in a folder no target CI runs collects would silently never run. The folders are read from the
pytest commands `make -n` prints, so they are what make runs, macros expanded."""
from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from conftest import make_n

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
ROOT = Path(__file__).resolve().parents[3]


def _collected(target: str) -> set[str]:
    """The folders the pytest commands of `target` collect (every phase)."""
    commands = re.findall(r"-m pytest (.*?)(?:\|\||;|$)", make_n(target), re.M)
    assert commands, f"make {target} runs no pytest"
    return {arg for command in commands for arg in shlex.split(command)
            if not arg.startswith("-") and (ROOT / arg).is_dir()}


def test_the_targets_ci_runs_collect_every_test_module():
    targets = re.findall(r"^make ([\w-]+)", (ROOT / ".ci" / "run").read_text(), re.M)
    assert {"demo", "test", "test-e2e", "test-lab"} <= set(targets), targets
    folders = set().union(*(_collected(t) for t in targets if t.startswith("test")))
    assert {"tests/unit", "tests/integration", "tests/e2e", "tests_lab"} <= folders, folders
    modules = [p.relative_to(ROOT).as_posix()
               for base in ("tests", "tests_lab") for p in (ROOT / base).rglob("test_*.py")]
    assert len(modules) > 100
    missed = [m for m in modules if not any(m.startswith(f + "/") for f in folders)]
    assert not missed, f"no target .ci/run calls collects these: {missed}"


def test_make_test_leaves_the_end_to_end_runs_and_the_lab_to_their_own_targets():
    assert _collected("test") == {"tests/unit", "tests/integration"}
    assert _collected("test-e2e") == {"tests/e2e"}
