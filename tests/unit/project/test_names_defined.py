"""Every name the code uses is bound (pyflakes' undefined-name check over the product, the lab and the tests): a name
used and never imported fails only when its line runs, and the recorded-arrivals path of the planner's rate points
(`np` never imported) first ran in an end-to-end plan."""
from __future__ import annotations

from pathlib import Path

import pytest
from pyflakes import api, messages
from pyflakes.reporter import Reporter

ROOT = Path(__file__).resolve().parents[3]
TREES = ("deployment_toolkit", "deployment_toolkit_lab", "tests", "tests_lab", "examples")


class _Found(Reporter):
    def __init__(self):
        super().__init__(None, None)
        self.found: list[str] = []

    def flake(self, message):
        if isinstance(message, (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)):
            where = Path(message.filename)
            where = where.relative_to(ROOT) if where.is_relative_to(ROOT) else where
            self.found.append(f"{where}:{message.lineno}: "
                              f"{message.message % message.message_args}")

    def syntaxError(self, filename, msg, lineno, offset, text):  # noqa: N802 - pyflakes' interface
        self.found.append(f"{filename}:{lineno}: {msg}")

    def unexpectedError(self, filename, msg):  # noqa: N802
        self.found.append(f"{filename}: {msg}")


@pytest.mark.parametrize("tree", TREES)
def test_every_name_used_is_bound(tree):
    found = _Found()
    for path in sorted((ROOT / tree).rglob("*.py")):
        api.checkPath(str(path), found)
    assert not found.found, "names used but never bound: " + "; ".join(found.found)


def test_the_check_finds_a_name_never_bound(tmp_path):
    (tmp_path / "m.py").write_text("import math\n\n\ndef f(x):\n    return np.asarray(x) + math.pi\n")
    found = _Found()
    api.checkPath(str(tmp_path / "m.py"), found)
    assert len(found.found) == 1 and "undefined name 'np'" in found.found[0]
