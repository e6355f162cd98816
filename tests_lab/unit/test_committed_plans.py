"""Every committed plan is one today's planner writes (issue 56): its sections are the report writer's
(deployment.report.SECTIONS), its run.json records the packing the solver chose and the commit that wrote it, and
the command plan.md shows is the one that wrote it.
A plan written by an older planner fails here until it is regenerated."""
from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from deployment_toolkit.deployment.report import sections_problem

ROOT = Path(__file__).resolve().parents[2]
PLANS = [ROOT / f for f in subprocess.run(["git", "-C", str(ROOT), "ls-files", "results"], capture_output=True,
                                          text=True, check=True).stdout.split() if f.endswith("/plan.md")]


def test_the_committed_plans_are_found():
    assert len(PLANS) >= 8


def _words(command: str) -> list[str]:
    """A command's words, its program's two words apart however they were quoted ('deployment-toolkit plan' once)."""
    words = shlex.split(command)
    return [*words[0].split(" "), *words[1:]] if words else []


@pytest.mark.parametrize("plan_md", PLANS, ids=lambda p: str(p.relative_to(ROOT / "results")))
def test_a_committed_plan_is_what_the_planner_writes_today(plan_md):
    headings = [line[3:].strip() for line in plan_md.read_text().splitlines() if line.startswith("## ")]
    assert sections_problem(headings) is None, f"{plan_md}: {sections_problem(headings)}: regenerate it"
    meta = json.loads((plan_md.parent / "run.json").read_text())
    assert "packing" in meta["config"], f"{plan_md.parent}/run.json has no packing: regenerate it"
    assert len(meta["git"]["sha"]) == 40, "the commit that wrote it"
    said = [line[len("Command: `"):-1] for line in plan_md.read_text().splitlines() if line.startswith("Command: `")]
    assert [_words(c) for c in said] in ([], [_words(meta["command"])]), f"{plan_md} shows another command than ran"
