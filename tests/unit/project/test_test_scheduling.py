"""`make test`'s scheduling (tests/conftest.py): the modules that judge measurements against an SLO are found from
their `pytestmark` line and run as one unit of work, on one worker, one after another."""
from __future__ import annotations

from pathlib import Path

from conftest import exclusive_modules, unit_of_work

ROOT = Path(__file__).resolve().parents[3]


def test_the_exclusive_modules_are_read_from_their_marks():
    found = exclusive_modules(ROOT)
    assert "tests/integration/test_plan.py" in found and "tests/integration/test_plan_deployment.py" in found
    assert "tests/integration/test_python_api.py" not in found  # no SLO judged: it runs beside them
    assert all(path.startswith("tests/") and path.endswith(".py") for path in found)


def test_exclusive_files_are_one_unit_and_every_other_file_its_own():
    exclusive = exclusive_modules(ROOT)

    def unit(nodeid: str) -> str:
        return unit_of_work(nodeid, exclusive)

    assert unit("tests/integration/test_plan.py::test_a") == unit("tests/integration/test_sizing_confirm.py::t")
    assert unit("tests/unit/tables/test_tables.py::t1") == unit("tests/unit/tables/test_tables.py::t2")
    assert unit("tests/unit/tables/test_tables.py::t1") != unit("tests/unit/data/test_x.py::t1")
    assert unit("tests/integration/test_python_api.py::t") != unit("tests/integration/test_plan.py::t")
