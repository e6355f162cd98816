"""`deployment-toolkit-lab`, the lab's entry point (issue 45, item 1): one table of commands, each a module with
`main(argv)` run through the toolkit's cli.run, each --help ending with an example of itself; the scripts in
deployment_toolkit_lab/scripts/ (their names from triton/) are shims over the same table; the CLI reference the docs
site generates has a section for every command."""
from __future__ import annotations

import ast
import contextlib
import importlib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from deployment_toolkit_lab.__main__ import COMMANDS, PROG, SCRIPTS, Group, main

ROOT = Path(__file__).resolve().parents[2]
SCRIPT_FILES = sorted((ROOT / SCRIPTS).glob("*.py"))


def _help(name: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0, name
    return out.getvalue()


def test_every_command_module_has_main_with_argv():
    for command in COMMANDS.values():
        module = importlib.import_module(f"deployment_toolkit_lab.{command.module}")
        assert "argv" in module.main.__code__.co_varnames[:module.main.__code__.co_argcount], command.name


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_help_ends_with_an_example_of_itself(name):
    text = _help(name).rstrip()
    assert text.startswith(f"usage: {PROG} {name}"), text[:80]
    last_header = re.findall(r"^(\S[^\n]*):\s*$", text, re.M)[-1]
    assert last_header in ("example", "examples"), f"{name}: --help ends with {last_header!r}, not an example"
    assert f"{PROG} {name}" in text.rsplit(last_header + ":", 1)[1], f"{name}: no `{PROG} {name} ...` example"


@pytest.mark.parametrize("script", SCRIPT_FILES, ids=lambda p: p.name)
def test_every_script_is_a_shim_over_a_command(script):
    by_script = {c.script: c for c in COMMANDS.values() if c.script}
    assert script.stem in by_script, f"{SCRIPTS}/{script.name} has no command in COMMANDS"
    calls = [n for n in ast.walk(ast.parse(script.read_text())) if isinstance(n, ast.Call)
             and getattr(n.func, "id", None) == "run_script"]
    assert [c.args[0].value for c in calls] == [by_script[script.stem].name]
    assert len(script.read_text().splitlines()) <= 12, "a shim, not a second copy of the command"


def test_every_script_a_command_names_is_there():
    assert {c.script for c in COMMANDS.values() if c.script} == {p.stem for p in SCRIPT_FILES}


def test_help_lists_every_command_under_its_heading_and_unknown_ones_exit_2(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for group in Group:
        section = out.split(f"\n{group.value}:\n", 1)[1].split("\n\n", 1)[0]
        assert [ln.split()[0] for ln in section.splitlines()] == [c.name for c in COMMANDS.values() if c.group is group]
    assert out.rstrip().splitlines()[-1].strip() == f"{PROG} COMMAND --help"
    assert main(["no-such-step"]) == 2
    assert "unknown command 'no-such-step'" in capsys.readouterr().err


def test_a_script_and_its_command_are_the_same_command():
    """The shim and `python -m deployment_toolkit_lab NAME` give the same --help (bar the program name)."""
    script = subprocess.run([sys.executable, f"{SCRIPTS}/embed_results.py", "--help"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    sub = subprocess.run([sys.executable, "-m", "deployment_toolkit_lab", "embed-results", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert script.returncode == sub.returncode == 0, script.stderr + sub.stderr
    same = " ".join(script.stdout.replace("embed_results.py", f"{PROG} embed-results").split())
    assert same == " ".join(sub.stdout.split())


@pytest.mark.slow
def test_the_cli_reference_has_a_section_for_every_lab_command():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_reference_lab", ROOT / "docs" / "gen_reference.py")
    gen = importlib.util.module_from_spec(spec)
    sys.modules["gen_reference_lab"] = gen
    spec.loader.exec_module(gen)
    cli = gen.cli_reference()
    for name, command in COMMANDS.items():
        assert f"### `{PROG} {name}`" in cli, f"the CLI reference has no section for {name}"
        if command.script:
            assert f"`python {SCRIPTS}/{command.script}.py`" in cli
