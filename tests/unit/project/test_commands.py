"""One installed `deployment-toolkit` command (issue 19, item 6): every triton/*.py script is a shim over a
subcommand, every subcommand's --help ends with an example of itself, and every command goes through cli.run.
Its --help lists the user's jobs by what the user is doing, at most 22, none of them a benchmark of the toolkit or the
housekeeping of its results (issue 45, item 1): those are the lab's, `deployment-toolkit-lab` (tests_lab/)."""
from __future__ import annotations

import ast
import contextlib
import importlib
import io
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from deployment_toolkit.__main__ import COMMANDS, PROG, Group, main

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = sorted((ROOT / "triton").glob("*.py"))


def _help(name: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0, name
    return out.getvalue()


MAX_SUBCOMMANDS = 24  # check-plan (issue 54) and traffic (issue 57) are user jobs; `size` folds into `plan` (56)
# what a user's job is not: the toolkit's own benchmarks and the housekeeping of its committed runs
LAB_WORDS = ("bench", "corpus", "model-analyzer", "matrix", "embed", "compact", "footprint", "results")


def test_the_installed_commands_are_the_two_tables():
    """Two entry points: the toolkit's, and the lab's (read from pyproject.toml: this test imports no lab code)."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {PROG: "deployment_toolkit.__main__:main",
                       "deployment-toolkit-lab": "deployment_toolkit_lab.__main__:main"}


def test_help_groups_at_most_22_user_jobs_and_no_benchmark(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    listed = re.findall(r"^  ([a-z][a-z0-9-]*)  ", out, re.M)
    assert sorted(listed) == sorted(COMMANDS) and len(listed) <= MAX_SUBCOMMANDS, listed
    assert not [n for n in listed if any(w in n for w in LAB_WORDS)], listed
    headings = re.findall(r"^(\S[^\n]*):$", out, re.M)
    assert headings == [g.value for g in Group] + ["example"], headings
    for group in Group:  # each command under its own heading, with its one line
        section = out.split(f"\n{group.value}:\n", 1)[1].split("\n\n", 1)[0]
        assert [ln.split()[0] for ln in section.splitlines()] == [c.name for c in COMMANDS.values() if c.group is group]
        assert all(c.help in section for c in COMMANDS.values() if c.group is group)
    assert "deployment-toolkit-lab --help" in out


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_script_is_a_shim_over_a_subcommand(script):
    by_script = {c.script: c for c in COMMANDS.values() if c.script}
    assert script.stem in by_script, f"triton/{script.name} has no subcommand in __main__.COMMANDS"
    command = by_script[script.stem]
    calls = [n for n in ast.walk(ast.parse(script.read_text())) if isinstance(n, ast.Call)
             and getattr(n.func, "id", None) == "run_script"]
    assert [c.args[0].value for c in calls] == [command.name]  # the shim runs its own subcommand, nothing else
    assert len(script.read_text().splitlines()) <= 12, "a shim, not a second copy of the command"


def test_every_command_module_has_main_with_argv():
    for command in COMMANDS.values():
        module = importlib.import_module(f"deployment_toolkit.{command.module}")
        assert "argv" in module.main.__code__.co_varnames[:module.main.__code__.co_argcount], command.name


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_subcommand_help_ends_with_an_example_of_itself(name):
    text = _help(name).rstrip()
    assert text.startswith(f"usage: {PROG} {name}"), text[:80]
    last_header = re.findall(r"^(\S[^\n]*):\s*$", text, re.M)[-1]
    assert last_header in ("example", "examples"), f"{name}: --help ends with {last_header!r}, not an example"
    example = text.rsplit(last_header + ":", 1)[1]
    assert f"{PROG} {name}" in example, f"{name}: the example does not show `{PROG} {name} ...`"


def test_top_level_help_lists_every_subcommand_and_unknown_ones_exit_2(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(re.search(rf"^  {re.escape(n)} ", out, re.M) for n in COMMANDS)
    assert out.rstrip().splitlines()[-1].strip() == f"{PROG} SUBCOMMAND --help"
    assert main(["no-such-step"]) == 2
    assert "unknown subcommand 'no-such-step'" in capsys.readouterr().err


def test_a_script_and_its_subcommand_are_the_same_command():
    """The shim and `python -m deployment_toolkit SUB` give the same --help (bar the program name)."""
    script = subprocess.run([sys.executable, "triton/report.py", "--help"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    sub = subprocess.run([sys.executable, "-m", "deployment_toolkit", "report", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert script.returncode == sub.returncode == 0, script.stderr + sub.stderr
    same = " ".join(script.stdout.replace("report.py", f"{PROG} report").split())
    assert same == " ".join(sub.stdout.split())
