"""bench-check-plan's agreement: a group-round agrees when check-plan's verdict in it is the planner's for the group;
a void round counts for neither side, and a round run again counts by its last attempt."""
from __future__ import annotations

import json

from deployment_toolkit_lab.commands.benchmark_check_plan import agreement


def _round(index: int, verdict: str, attempt: int = 1) -> dict:
    return {"round": index, "attempt": attempt, "verdict": verdict, "cpu_share": 0.1, "models": []}


def test_each_round_is_held_against_the_planners_verdict(tmp_path):
    plan, check = tmp_path / "plan", tmp_path / "check"
    plan.mkdir()
    check.mkdir()
    (plan / "run.json").write_text(json.dumps({"config": {"confirmations": [
        {"models": ["a", "b"], "passed": True}, {"models": ["c"], "passed": False}]}}))
    (check / "check.json").write_text(json.dumps({"groups": [
        {"label": "a-b", "models": ["a", "b"], "replicas": 2, "verdict": "holds",
         "rounds": [_round(1, "holds"), _round(2, "void"), _round(2, "fails", 2), _round(3, "holds")]},
        {"label": "c", "models": ["c"], "replicas": 1, "verdict": "fails",
         "rounds": [_round(1, "fails"), _round(2, "void"), _round(2, "void", 2), _round(3, "holds")]},
        {"label": "d", "models": ["d"], "replicas": 1, "verdict": "holds", "rounds": [_round(1, "holds")]}]}))
    rows = {r["group"]: r for r in agreement(plan, check)}
    assert rows["a-b"]["rounds"] == ["holds", "fails", "holds"] and rows["a-b"]["agree"] == 2
    assert rows["a-b"]["judged"] == 3 and rows["a-b"]["planner_holds"] is True
    assert rows["c"]["rounds"] == ["fails", "void", "holds"] and rows["c"]["judged"] == 2 and rows["c"]["agree"] == 1
    assert rows["d"]["planner_holds"] is None and rows["d"]["agree"] is None  # the planner never confirmed it
