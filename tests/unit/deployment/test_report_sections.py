"""The report writer's list of sections is the one its code writes (issue 56): a committed plan is checked against
it (tests_lab/unit/test_committed_plans.py), so the list must not drift from the code."""
from __future__ import annotations

import re
from pathlib import Path

from deployment_toolkit.deployment import report
from deployment_toolkit.deployment.report import SECTIONS, sections_problem


def test_the_listed_sections_are_the_ones_the_writer_writes():
    written = re.findall(r'"## ([^"]+)"', Path(report.__file__).read_text())
    assert sorted(set(written)) == sorted(name for name, _ in SECTIONS)


def test_a_plan_of_an_older_planner_is_told_apart():
    today = ["The fleet", "The packing", "Per model", "Confirmation under mixed open-loop traffic", "What was tried",
             "Kubernetes", "Stages"]
    assert sections_problem(today) is None
    assert "no longer writes: ['Layouts compared']" in sections_problem(
        ["The fleet", "Per model", "Layouts compared", "What was tried", "Stages"])
    assert "missing: ['What was tried']" in sections_problem(["The fleet", "Per model", "Stages"])
    assert "out of the writer's order" in sections_problem(["Per model", "The fleet", "What was tried", "Stages"])
