"""`size SEARCH` reads the stored search before anything starts (issue 56): what is not a finished capacity search of
one model, another SLO than the one it was measured under, or a committed output folder is one line and exit 2,
nothing written; a search's own folder flags (--update-committed, --fresh) are not taken over."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from deployment_toolkit.deployment.stored import stored_search
from deployment_toolkit.errors import UserInputError

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "stored_search"


def _search(folder: Path, command: str = "deployment-toolkit search --model resnet18 --p99-ms 50", **config) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"kind": "search", "settings": {"budget_ms": 50.0, "objective": "capacity"},
           "winner": {"format": "onnx", "instances": 1}, **config}
    (folder / "run.json").write_text(json.dumps({"command": command, "config": doc}))
    return folder


def _size(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "deployment_toolkit", "size", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def test_a_stored_search_is_read_with_the_command_that_made_it(tmp_path):
    stored = stored_search(_search(tmp_path / "s", "'deployment-toolkit plan' --model resnet18 --p99-ms 50 --fresh "
                                                   "--update-committed --result-path results/x"))
    assert stored.program == "plan" and stored.budget_ms == 50.0
    assert stored.argv == ("--model", "resnet18", "--p99-ms", "50", "--result-path", "results/x")
    assert "onnx" in stored.winner and stored_search(_search(tmp_path / "t")).program == "search"


@pytest.mark.parametrize(("config", "command", "message"), [
    ({"kind": "sweep"}, None, "no search's run.json there"),
    ({"settings": {"budget_ms": 50.0, "objective": "closed-loop"}}, None, "ranked its configs by closed-loop"),
    ({"winner": None}, None, "has no winner"),
    ({}, "deployment-toolkit plan --deployment d.yaml --gather", "plan --deployment FILE --gather"),
])
def test_what_is_not_a_finished_capacity_search_of_one_model_is_refused(tmp_path, config, command, message):
    folder = _search(tmp_path / "s", **({"command": command} if command else {}), **config)
    with pytest.raises(UserInputError, match=message):
        stored_search(folder)


def test_bad_input_is_one_line_before_anything_is_written(tmp_path):
    for args, message in (((tmp_path / "none", "--peak-rps", "10"), "SEARCH: "),
                          ((FIXTURE, "--peak-rps", "10", "--p99-ms", "80"), "--p99-ms 80: "),
                          ((FIXTURE, "--peak-rps", "10", "--result-path", ROOT / "results" / "plan-bursty-cpu"),
                           "committed to git")):
        proc = _size(*args, *(() if "--result-path" in args else ("--result-path", tmp_path / "out")))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith("error: ") and message in line, line
    assert not (tmp_path / "out").exists()


def test_size_and_plan_declare_their_shared_flags_once_with_one_meaning():
    """Issue 56: --max-replicas (and every demand, confirmation and Kubernetes flag) means the same in both."""
    from deployment_toolkit.commands.plan_fleet import build_parser as plan_parser
    from deployment_toolkit.commands.size_fleet import build_parser as size_parser

    def flags(parser):
        return {a.option_strings[0]: (a.help, a.default) for a in parser._actions if a.option_strings}

    plan, size = flags(plan_parser()), flags(size_parser())
    for flag in ("--max-replicas", "--peak-rps", "--headroom", "--host-hour-cost", "--retests", "--autoscale-on"):
        assert size[flag] == plan[flag], flag
    assert "refuse a plan that needs more replicas" in size["--max-replicas"][0]
    assert "--gpus-per-node" not in plan and "--gpus-per-node" not in size  # read by neither: gone
