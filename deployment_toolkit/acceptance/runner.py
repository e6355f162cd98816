"""Run the acceptance plan like Model Navigator runs its steps: each step ends ok, failed (with the reason) or
skipped (with the reason), one failure never stops the others, and each step is held to its time budget.

Each step is a child process in its own process group (a budget overrun kills the whole group, perf_analyzer
and compile workers included); its output goes to logs/<n>_<step>.log. steps.json is rewritten atomically after
every step, so an interrupted check still says what ran.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from ..spec import atomic_write_text
from .plan import Step

ROOT = Path(__file__).resolve().parents[2]
STEPS_JSON = "steps.json"
SERVER_STEP = "start embedded tritonserver"


@dataclass
class StepResult:
    name: str
    stage: str
    status: str  # ok | failed | skipped
    reason: str
    seconds: float
    budget_s: float
    command: str
    log: str  # relative to the result folder; "" when the step did not run

    def to_dict(self) -> dict:
        return asdict(self)


def shown(argv: tuple[str, ...]) -> str:
    return shlex.join(["python", *argv])


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")[:60]


def _last_line(log: Path) -> str:
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:400] if lines else ""


def _kill_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_command(argv: tuple[str, ...], log: Path, timeout_s: float) -> tuple[int | None, float]:
    """(exit code or None when killed at the budget, seconds). argv[0] is a script relative to the repo root."""
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        fh.write(f"$ {shown(argv)}\n")
        fh.flush()
        proc = subprocess.Popen([sys.executable, str(ROOT / argv[0]), *argv[1:]], cwd=ROOT, stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=max(timeout_s, 1.0))
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            code = None
        except BaseException:
            _kill_group(proc)
            raise
    return code, time.perf_counter() - t0


class Runner:
    """Execute steps in order against a deadline; `server_factory` starts the embedded server lazily."""

    def __init__(self, result_dir: Path, deadline_s: float, capabilities: dict[str, str],
                 server_factory: Callable[[], object] | None = None, log=print):
        self.result_dir = result_dir
        self.deadline = time.monotonic() + deadline_s
        self.capabilities = capabilities
        self.server_factory = server_factory
        self.server = None
        self.server_error = ""
        self.results: list[StepResult] = []
        self.log = log

    def _record(self, result: StepResult) -> None:
        self.results.append(result)
        atomic_write_text(self.result_dir / STEPS_JSON,
                          json.dumps([r.to_dict() for r in self.results], indent=2) + "\n")
        why = f": {result.reason}" if result.reason else ""
        self.log(f"[{result.status:>7}] {result.name} ({result.seconds:.0f} s / {result.budget_s:.0f} s){why}")

    def _status(self, name: str) -> str | None:
        return next((r.status for r in self.results if r.name == name), None)

    def _skip_reason(self, step: Step) -> str:
        for need in step.requires:
            status = self._status(need)
            if status != "ok":
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
            self.server = self.server_factory()
            self._record(StepResult(SERVER_STEP, "server", "ok", "", time.perf_counter() - t0, 0.0, "", ""))
            return True
        except Exception as err:  # noqa: BLE001 - any start failure is this step's recorded reason
            text = str(err) or type(err).__name__
            log = Path("logs") / "tritonserver_start_error.txt"
            atomic_write_text(self.result_dir / log, text + "\n")  # the models' reasons and the server log's tail
            self.server_error = text.splitlines()[0]
            self._record(StepResult(SERVER_STEP, "server", "failed", self.server_error, time.perf_counter() - t0,
                                    0.0, "", str(log)))
            return False

    def stop_server(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def run(self, steps: list[Step], fill: Callable[[str], str] = lambda a: a) -> list[StepResult]:
        for i, step in enumerate(steps):
            # the server is stopped once no later step needs it (the diffusion scripts start their own)
            if self.server is not None and not any(s.server for s in steps[i:]):
                self.stop_server()
            left = self.deadline - time.monotonic()
            reason = "" if left > 5 else "the check's time budget (--max-minutes) was spent before it"
            reason = reason or self._skip_reason(step)
            if reason:
                self._record(StepResult(step.name, step.stage, "skipped", reason, 0.0, step.budget_s,
                                        shown(step.argv), ""))
                continue
            argv = tuple(fill(a) for a in step.argv)
            budget = min(step.budget_s, self.deadline - time.monotonic())
            log = Path("logs") / f"{i:02d}_{_slug(step.name)}.log"
            self.log(f"--- {step.name}\n$ {shown(argv)}")
            code, seconds = run_command(argv, self.result_dir / log, budget)
            if code is None:
                status, why = "failed", f"over its time budget of {budget:.0f} s (killed; what it wrote before is kept)"
            elif code in step.ok_codes:
                status, why = "ok", ""
            elif code in step.skip_codes:
                status, why = "skipped", _last_line(self.result_dir / log) or f"exit {code}"
            else:
                status, why = "failed", f"exit {code}: {_last_line(self.result_dir / log)}"
            self._record(StepResult(step.name, step.stage, status, why, seconds, budget, shown(argv), str(log)))
        self.stop_server()
        return self.results
