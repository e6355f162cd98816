"""One step runner for every composite job (the demo, the accuracy demo, the plan, the lab's gpu-check), as Model
Navigator runs its pipeline: each step ends ok, failed (with the reason), skipped (with the reason) or stopped
(Ctrl-C or SIGTERM while it ran), timed, with the command that does the same from a shell, and, where its output went
to a file, that log. Statuses are `config.StepStatus`: a str enum, so steps.json keeps their plain values.

A step is either a function called in this process (its typed result comes back in memory) or a command run as a
child process in its own process group, held to a time budget (a hung TensorRT build or perf_analyzer is killed
with everything it started). `steps.json`, when the runner has a folder, is rewritten atomically after every step,
so an interrupted job still says what ran.
"""
from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from .config import StepStatus
from .errors import ToolkitError, UserError, reason_line

log = logging.getLogger(__name__)
T = TypeVar("T")
STATUSES = StepStatus.values()
STEPS_JSON = "steps.json"
ROOT = Path(__file__).resolve().parents[1]


@dataclass
class StepResult:
    name: str
    status: StepStatus
    seconds: float = 0.0
    command: str = ""  # what a user types for the same step
    reason: str = ""  # why it failed or was skipped
    log: str = ""  # where its output went (relative to the runner's folder where it has one)
    stage: str = ""
    budget_s: float = 0.0

    def __post_init__(self) -> None:
        try:
            self.status = StepStatus(self.status)
        except ValueError:
            raise ValueError(f"step status must be one of {STATUSES}, got {self.status!r}") from None

    def to_dict(self) -> dict:
        return {**asdict(self), "status": self.status.value}


class StepFailed(UserError, RuntimeError):
    """A step of a composite job failed; `result` says which and why (its own output above says more). A user
    error: one line, exit 2, where the job does not say otherwise."""

    def __init__(self, result: StepResult):
        super().__init__(f"step '{result.name}' failed: {result.reason}"
                         + (f" (the same from a shell: {result.command})" if result.command else ""))
        self.result = result


def relative(arg: str | Path) -> str:
    """A path inside the checkout as the user types it (from its root); anything else as it is."""
    prefix, text = f"{ROOT}/", str(arg)
    return text[len(prefix):] if text.startswith(prefix) else text


def shown(argv: Sequence[str | Path]) -> str:
    """A command line as the user types it: paths inside the checkout relative to its root."""
    return shlex.join(relative(a) for a in argv)


def script_path(script: str) -> str:
    """A script relative to the checkout's root; a bare name means the seed's triton/<name>."""
    return script if "/" in script else f"triton/{script}"


def script_command(script: str, *args: str) -> str:
    """What a user types for a script step: `python triton/<name> args`."""
    return shown(["python", script_path(script), *args])


class StepRunner:
    """Runs steps in order and keeps their results. `stop_on_failure`: a failed `call` raises StepFailed (the
    demos); without it the failure is recorded and the job goes on (gpu-check). `log`: where the step lines go
    (this module's logger unless a caller collects them)."""

    def __init__(self, folder: Path | None = None, log: Callable[[str], None] = log.info,
                 stop_on_failure: bool = True):
        self.folder = folder
        self.log = log
        self.stop_on_failure = stop_on_failure
        self.results: list[StepResult] = []

    # ---- recording -------------------------------------------------------------------------
    def record(self, result: StepResult) -> StepResult:
        result.status = StepStatus(result.status)
        self.results.append(result)
        if self.folder is not None:
            from .spec import atomic_write_text

            text = json.dumps([r.to_dict() for r in self.results], indent=2) + "\n"
            atomic_write_text(self.folder / STEPS_JSON, text)
        budget = f" / {result.budget_s:.0f} s" if result.budget_s else ""
        why = f": {result.reason}" if result.reason else ""
        self.log(f"[{result.status:>7}] {result.name} ({result.seconds:.1f} s{budget}){why}")
        return result

    def skip(self, name: str, reason: str, command: str = "", stage: str = "", budget_s: float = 0.0) -> StepResult:
        return self.record(StepResult(name, StepStatus.SKIPPED, 0.0, command, reason, "", stage, budget_s))

    def status(self, name: str) -> StepStatus | None:
        return next((r.status for r in self.results if r.name == name), None)

    def failed(self) -> list[StepResult]:
        return [r for r in self.results if r.status is StepStatus.FAILED]

    def table(self) -> str:
        """The steps as a markdown table: status, seconds and the command of each."""
        from .tables import markdown_table

        return markdown_table(["step", "status", "seconds", "command"],
                              [[r.name, r.status.value + (f" ({r.reason})" if r.reason else ""), f"{r.seconds:.1f}",
                                f"`{r.command}`" if r.command else ""] for r in self.results], "llrl")

    # ---- running ---------------------------------------------------------------------------
    def call(self, name: str, fn: Callable[[], T], command: str = "", stage: str = "",
             stop: bool | None = None) -> T | None:
        """Run `fn` in this process and return its result. A UserError or ToolkitError is the step's failure (its
        first line the reason): raised as StepFailed when `stop` (default: the runner's stop_on_failure), else
        recorded and None returned (a step the job can do without, e.g. one model of many); any other exception is
        a bug and propagates after being recorded."""
        self.log(f"\n=== {name}" + (f"\n$ {command}" if command else ""))
        t0 = time.perf_counter()
        try:
            value = fn()
        except (UserError, ToolkitError) as err:
            result = self.record(StepResult(name, StepStatus.FAILED, time.perf_counter() - t0, command,
                                            reason_line(err), "", stage))
            if self.stop_on_failure if stop is None else stop:
                raise StepFailed(result) from err
            return None
        except (KeyboardInterrupt, SystemExit) as err:  # Ctrl-C or SIGTERM (cli's handler): stopped, not a crash
            self.record(StepResult(name, StepStatus.STOPPED, time.perf_counter() - t0, command, stopped_why(err), "",
                                   stage))
            raise
        except BaseException:
            self.record(StepResult(name, StepStatus.FAILED, time.perf_counter() - t0, command,
                                   "crashed (traceback below)", "", stage))
            raise
        self.record(StepResult(name, StepStatus.OK, time.perf_counter() - t0, command, "", "", stage))
        return value

    def run_command(self, name: str, argv: Sequence[str], log: Path, budget_s: float, ok_codes: Sequence[int] = (0,),
                    skip_codes: Sequence[int] = (), stage: str = "", command: str | None = None) -> StepResult:
        """Run `argv` as a child process held to `budget_s`, its output in `log` (after a `$ command` line); never
        raises for its failure. `command`: how to show it (default: argv as typed from the checkout's root)."""
        command = command or shown(argv)
        self.log(f"--- {name}\n$ {command}")
        log_text = str(log.relative_to(self.folder)) if self.folder and log.is_relative_to(self.folder) else str(log)
        t0 = time.perf_counter()
        try:
            code, seconds = run_in_group(argv, log, budget_s, header=f"$ {command}\n")
        except (KeyboardInterrupt, SystemExit) as err:  # the child's group is killed; the step says it was stopped
            self.record(StepResult(name, StepStatus.STOPPED, time.perf_counter() - t0, command, stopped_why(err),
                                   log_text, stage, budget_s))
            raise
        if code is None:
            status, why = StepStatus.FAILED, \
                f"over its time budget of {budget_s:.0f} s (killed; what it wrote before is kept)"
        elif code in ok_codes:
            status, why = StepStatus.OK, ""
        elif code in skip_codes:
            status, why = StepStatus.SKIPPED, last_line(log) or f"exit {code}"
        else:
            status, why = StepStatus.FAILED, f"exit {code}: {last_line(log)}"
        return self.record(StepResult(name, status, seconds, command, why, log_text, stage, budget_s))


    def script(self, name: str, script: str, *args: str) -> StepResult:
        """`python <script> args` from the checkout's root as a user types it (a bare name means triton/<name>),
        its output on the console: the worked example's steps, which show the commands themselves."""
        path = script_path(script)
        command = script_command(script, *args)
        self.log(f"\n=== {name}\n$ {command}")
        t0 = time.perf_counter()
        code = subprocess.run([sys.executable, str(ROOT / path), *args], cwd=ROOT).returncode
        result = self.record(StepResult(name, StepStatus.OK if code == 0 else StepStatus.FAILED,
                                        time.perf_counter() - t0, command, "" if code == 0 else f"exit {code}"))
        if code != 0 and self.stop_on_failure:
            raise StepFailed(result)
        return result


def stopped_why(err: BaseException) -> str:
    """The reason of a step stopped by Ctrl-C (KeyboardInterrupt) or SIGTERM (cli's handler: SystemExit 143)."""
    return "stopped by Ctrl-C" if isinstance(err, KeyboardInterrupt) else f"stopped (exit {getattr(err, 'code', '')})"


def last_line(log: Path) -> str:
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:400] if lines else ""


def _kill_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM to the step's process group, SIGKILL if it is still there after `grace_s`."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_in_group(argv: Sequence[str], log: Path, timeout_s: float, header: str = "") -> tuple[int | None, float]:
    """(exit code or None on timeout, seconds) of `argv` run from the checkout's root in its own process group."""
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(log, "wb") as out:
        out.write(header.encode())
        out.flush()
        proc = subprocess.Popen(list(argv), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=max(timeout_s, 1.0))
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            code = None
        except BaseException:
            _kill_group(proc)
            raise
    return code, time.perf_counter() - t0
