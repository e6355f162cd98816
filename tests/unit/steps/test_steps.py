"""The one step runner: each step ends ok, failed or skipped, timed, with its command; a function's result
comes back in memory; a command is held to its budget and killed with its whole process group."""
from __future__ import annotations

import json
import sys
import time

import pytest

from deployment_toolkit.errors import UserInputError
from deployment_toolkit.steps import StepFailed, StepRunner


def test_call_returns_the_result_and_records_ok(tmp_path):
    lines: list[str] = []
    steps = StepRunner(tmp_path, log=lines.append)
    assert steps.call("add", lambda: 1 + 1, command="python add.py") == 2
    (r,) = steps.results
    assert (r.name, r.status, r.command) == ("add", "ok", "python add.py") and r.seconds >= 0
    assert json.loads((tmp_path / "steps.json").read_text())[0]["status"] == "ok"
    assert "$ python add.py" in "\n".join(lines)


def test_a_user_error_fails_the_step_with_its_first_line():
    steps = StepRunner(log=lambda _: None)

    def bad():
        raise UserInputError("--model nope: not in the zoo\nmore detail")

    with pytest.raises(StepFailed, match="step 'resolve' failed: --model nope: not in the zoo") as info:
        steps.call("resolve", bad, command="python convert.py --model nope")
    assert info.value.result.status == "failed" and "python convert.py" in str(info.value)
    assert steps.failed() == [info.value.result]


def test_without_stop_on_failure_the_job_goes_on():
    steps = StepRunner(log=lambda _: None, stop_on_failure=False)
    assert steps.call("a", lambda: (_ for _ in ()).throw(UserInputError("no"))) is None
    steps.skip("b", "needs 'a', which failed")
    assert steps.call("c", lambda: "done") == "done"
    assert [(r.name, r.status) for r in steps.results] == [("a", "failed"), ("b", "skipped"), ("c", "ok")]
    assert "needs 'a'" in steps.table()


def test_a_bug_keeps_its_traceback_but_is_recorded():
    steps = StepRunner(log=lambda _: None)
    with pytest.raises(ZeroDivisionError):
        steps.call("divide", lambda: 1 / 0)
    assert steps.results[0].status == "failed"


def test_a_command_over_its_budget_is_killed_with_its_children(tmp_path):
    steps = StepRunner(tmp_path, log=lambda _: None)
    child = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); " \
            "print('started', flush=True); time.sleep(60)"
    t0 = time.monotonic()
    r = steps.run_command("sleeper", [sys.executable, "-c", child], tmp_path / "logs" / "sleeper.log", budget_s=2)
    assert time.monotonic() - t0 < 30
    assert r.status == "failed" and "over its time budget" in r.reason and r.log == "logs/sleeper.log"
    assert "started" in (tmp_path / "logs" / "sleeper.log").read_text()


def test_a_command_exit_code_maps_to_its_status(tmp_path):
    steps = StepRunner(tmp_path, log=lambda _: None)
    ok = steps.run_command("ok", [sys.executable, "-c", "print('fine')"], tmp_path / "ok.log", 30)
    skip = steps.run_command("skip", [sys.executable, "-c", "print('no GPU here'); raise SystemExit(3)"],
                             tmp_path / "skip.log", 30, skip_codes=(3,))
    bad = steps.run_command("bad", [sys.executable, "-c", "raise SystemExit('broken input')"], tmp_path / "bad.log", 30)
    assert (ok.status, skip.status, skip.reason) == ("ok", "skipped", "no GPU here")
    assert bad.status == "failed" and "exit 1: broken input" in bad.reason


def test_a_stop_signal_is_recorded_as_stopped_not_as_a_crash():
    """SIGTERM (cli's handler raises SystemExit 143) or Ctrl-C in a step: steps.json says it was stopped, and the
    exit still propagates (it said 'crashed (traceback below)' with no traceback, issue 38)."""
    steps = StepRunner()
    for err, why in ((SystemExit(143), "stopped (exit 143)"), (KeyboardInterrupt(), "stopped by Ctrl-C")):
        def stop(err=err):
            raise err

        with pytest.raises(type(err)):
            steps.call("sweep", stop)
        assert (steps.results[-1].status, steps.results[-1].reason) == ("stopped", why)
