"""Every test module is run by CI: the Makefile targets `.ci/run` calls collect, between them, every `test_*.py` under
tests/ and tests_lab/. The tests are split over targets (`make test` within 15 minutes, `make test-e2e`, `make
test-lab`); a module in a folder no target CI runs collects would silently never run."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _recipe(makefile: str, target: str) -> str:
    """The recipe lines of `target` (tab-indented lines after `target:`)."""
    match = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert match, f"no target {target} in the Makefile"
    return match.group(1)


def _collected(makefile: str, target: str) -> set[str]:
    """The test folders a target's recipe hands pytest (directly or through the two_phases macro)."""
    return set(re.findall(r"(?<![\w/])(tests(?:_lab)?(?:/[\w]+)*)(?=[\s,)])", _recipe(makefile, target)))


def test_the_targets_ci_runs_collect_every_test_module():
    makefile = (ROOT / "Makefile").read_text()
    targets = re.findall(r"^make ([\w-]+)", (ROOT / ".ci" / "run").read_text(), re.M)
    assert {"demo", "test", "test-e2e", "test-lab"} <= set(targets), targets
    folders = set().union(*(_collected(makefile, t) for t in targets if t.startswith("test")))
    assert {"tests/unit", "tests/integration", "tests/e2e", "tests_lab"} <= folders, folders
    modules = [p.relative_to(ROOT).as_posix()
               for base in ("tests", "tests_lab") for p in (ROOT / base).rglob("test_*.py")]
    assert len(modules) > 100
    missed = [m for m in modules if not any(m.startswith(f + "/") for f in folders)]
    assert not missed, f"no target .ci/run calls collects these: {missed}"


def test_make_test_leaves_the_end_to_end_runs_and_the_lab_to_their_own_targets():
    makefile = (ROOT / "Makefile").read_text()
    assert _collected(makefile, "test") == {"tests/unit", "tests/integration"}
    assert _collected(makefile, "test-e2e") == {"tests/e2e"}
