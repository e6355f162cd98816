"""One error root (issue 19, item 3): every exception the toolkit defines is a ToolkitError; cli.run prints a
UserError as one line with exit 2 and lets anything else (a bug) out with its traceback, exit 1."""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import deployment_toolkit
from deployment_toolkit import cli
from deployment_toolkit.errors import ToolkitError, UserError, UserFileNotFoundError, UserInputError

ROOT = Path(__file__).resolve().parents[3]
# Files copied beside a Python backend model: they run in Triton's stub process, without this package.
STANDALONE = ("deployment_toolkit.repository.python_runtime", "deployment_toolkit.diffusion.samplers",
              "deployment_toolkit.diffusion.sampler_model", "deployment_toolkit.pipeline.step_model",
              "deployment_toolkit.pipeline.step_runtime", "deployment_toolkit.pipeline.fused_model")


def _toolkit_exceptions() -> dict[str, type]:
    found = {}
    for info in pkgutil.walk_packages(deployment_toolkit.__path__, "deployment_toolkit."):
        if info.name.startswith(STANDALONE) or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, BaseException) and not issubclass(obj, Warning)
                    and obj.__module__ == info.name):  # warnings are not errors
                found[f"{info.name}.{name}"] = obj
    return found


def test_every_exception_class_of_the_package_is_a_toolkit_error():
    found = _toolkit_exceptions()
    assert len(found) >= 40  # the scan sees the package's exceptions
    strays = sorted(name for name, cls in found.items() if not issubclass(cls, ToolkitError))
    assert not strays, f"exceptions outside the ToolkitError root: {strays}"


def test_user_errors_keep_the_builtin_base_their_callers_catch():
    from deployment_toolkit.models.registry import UnknownModelError
    from deployment_toolkit.binaries import PerfAnalyzerNotFound
    from deployment_toolkit.repository.config import ConfigError
    from deployment_toolkit.server.errors import ServerNotFoundError

    assert issubclass(ConfigError, UserError) and issubclass(ConfigError, ValueError)
    assert issubclass(UnknownModelError, UserError) and issubclass(UnknownModelError, KeyError)
    assert issubclass(ServerNotFoundError, UserError) and issubclass(ServerNotFoundError, RuntimeError)
    assert issubclass(UserInputError, ValueError) and issubclass(UserFileNotFoundError, FileNotFoundError)
    # perf_analyzer missing is the user's to fix in every tool: exit 2, never a traceback
    assert issubclass(PerfAnalyzerNotFound, UserError)


def test_not_every_toolkit_error_is_a_user_error():
    from deployment_toolkit.metrics.calculate import ThresholdsFailed  # a missed bound: exit 1, not bad input
    from deployment_toolkit.search.engine import CandidateRefused  # control flow inside the search

    assert not issubclass(ThresholdsFailed, UserError) and not issubclass(CandidateRefused, UserError)


def test_run_prints_a_user_error_as_one_line_and_exits_2(capsys):
    def main():
        raise UserInputError("--p99-ms must be > 0")

    with pytest.raises(SystemExit) as exc:
        cli.run(main)
    assert exc.value.code == 2
    assert capsys.readouterr().err == "error: --p99-ms must be > 0\n"


@pytest.mark.parametrize("bug", [ValueError("not a user's mistake"), KeyError("missing"),
                                 FileNotFoundError("/internal/path")])
def test_run_lets_a_bug_out_with_its_traceback(bug):
    def main():
        raise bug

    with pytest.raises(type(bug)):  # not turned into "error:" and exit 2
        cli.run(main)


def test_a_bug_in_a_command_exits_1_with_a_traceback(tmp_path):
    script = tmp_path / "buggy.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from deployment_toolkit import cli
        from deployment_toolkit.errors import UserError

        def main():
            if sys.argv[1] == "user":
                raise UserError("the file you named does not exist: give another")
            return {{}}["a programming error"]

        cli.run(main)
    """))
    user = subprocess.run([sys.executable, str(script), "user"], capture_output=True, text=True, timeout=60)
    assert user.returncode == 2 and user.stderr == "error: the file you named does not exist: give another\n"
    bug = subprocess.run([sys.executable, str(script), "bug"], capture_output=True, text=True, timeout=60)
    assert bug.returncode == 1 and "Traceback" in bug.stderr and "KeyError: 'a programming error'" in bug.stderr
