"""Run the acceptance plan with the toolkit's one step runner (`deployment_toolkit.steps`): each step ends ok,
failed (with the reason) or skipped (with the reason), one failure never stops the others, and each step is held
to its time budget.

Each step is a child process in its own process group (a budget overrun kills the whole group, perf_analyzer
and compile workers included): a GPU step can hang in a driver or a TensorRT build, and only a process can be
killed for it. Its output goes to logs/<n>_<step>.log; steps.json is rewritten atomically after every step, so an
interrupted check still says what ran.
"""
from __future__ import annotations

import contextlib
import logging
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Callable, ContextManager

from deployment_toolkit.config import StepStatus
from deployment_toolkit.spec import atomic_write_text
from deployment_toolkit.steps import ROOT, STEPS_JSON, StepResult, StepRunner
from .plan import Step

__all__ = ["ROOT", "Runner", "SERVER_STEP", "STEPS_JSON", "StepResult", "shown"]
SERVER_STEP = "start embedded tritonserver"
log = logging.getLogger(__name__)


def shown(argv: tuple[str, ...]) -> str:
    return shlex.join(["python", *argv])


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")[:60]


class Runner:
    """Execute steps in order against a deadline. `server_factory()` is a context manager that serves (the embedded
    server, `check._server_factory`): entered when a step first needs it, left once no later step does."""

    def __init__(self, result_dir: Path, deadline_s: float, capabilities: dict[str, str],
                 server_factory: Callable[[], ContextManager[Any]] | None = None,
                 log: Callable[[str], None] = log.info):
        self.result_dir = result_dir
        self.deadline = time.monotonic() + deadline_s
        self.capabilities = capabilities
        self.server_factory = server_factory
        self.server: Any = None
        self.server_error = ""
        self._serving = contextlib.ExitStack()  # holds the server while it is up
        self.steps = StepRunner(result_dir, log=log, stop_on_failure=False)
        self.log = log

    @property
    def results(self) -> list[StepResult]:
        return self.steps.results

    def _record(self, result: StepResult) -> None:
        self.steps.record(result)

    def _status(self, name: str) -> str | None:
        return self.steps.status(name)

    def _skip_reason(self, step: Step) -> str:
        for need in step.requires:
            status = self._status(need)
            if status is not StepStatus.OK:
                return f"needs '{need}', which {'did not run' if status is None else status}"
        if step.skip_unless and self.capabilities.get(step.skip_unless):
            return self.capabilities[step.skip_unless]
        if step.server and not self._ensure_server():
            return f"needs the embedded tritonserver, which did not start: {self.server_error}"
        return ""

    def _ensure_server(self) -> bool:
        if self.server is not None:
            return True
        if self.server_error or self.server_factory is None:
            self.server_error = self.server_error or "no server in this run"
            return False
        t0 = time.perf_counter()
        try:
            self.server = self._serving.enter_context(self.server_factory())
            self._record(StepResult(SERVER_STEP, StepStatus.OK, time.perf_counter() - t0, stage="server"))
            return True
        except Exception as err:  # noqa: BLE001 - any start failure is this step's recorded reason
            text = str(err) or type(err).__name__
            error_log = Path("logs") / "tritonserver_start_error.txt"
            atomic_write_text(self.result_dir / error_log, text + "\n")  # the models' reasons and the log's tail
            self.server_error = text.splitlines()[0]
            self._record(StepResult(SERVER_STEP, StepStatus.FAILED, time.perf_counter() - t0, "", self.server_error,
                                    str(error_log), "server"))
            return False

    def stop_server(self) -> None:
        """Leave the server's context (it stops); a later step that needs it would start it again."""
        self.server = None
        self._serving.close()

    def run(self, steps: list[Step], fill: Callable[[str], str] = lambda a: a) -> list[StepResult]:
        for i, step in enumerate(steps):
            # the server is stopped once no later step needs it (the diffusion scripts start their own)
            if self.server is not None and not any(s.server for s in steps[i:]):
                self.stop_server()
            left = self.deadline - time.monotonic()
            reason = "" if left > 5 else "the check's time budget (--max-minutes) was spent before it"
            reason = reason or self._skip_reason(step)
            if reason:
                self.steps.skip(step.name, reason, shown(step.argv), step.stage, step.budget_s)
                continue
            argv = tuple(fill(a) for a in step.argv)
            budget = min(step.budget_s, self.deadline - time.monotonic())
            step_log = self.result_dir / "logs" / f"{i:02d}_{_slug(step.name)}.log"
            # argv[0] is a script relative to the checkout's root (or -m and a module), run with this Python
            run = argv if argv[0] == "-m" else (str(ROOT / argv[0]), *argv[1:])
            self.steps.run_command(step.name, (sys.executable, *run), step_log, budget,
                                   step.ok_codes, step.skip_codes, step.stage, command=shown(argv))
        self.stop_server()
        return self.results
