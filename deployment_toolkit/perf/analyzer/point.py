"""One measurement point: run perf_analyzer at one load level (config.Load), retry an unstable level (up to
max_attempts), pick the row of the requested level, keep the raw CSV and log."""
from __future__ import annotations

import math
import signal
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...binaries import (INSTALL_HINT, PerfAnalyzerNotFound, check_perf_analyzer, find_perf_analyzer, missing_libraries,
                         perf_environment)
from ...cleanup import dying_with_parent
from ...config import Concurrency, Load, RequestRate, Schedule
from ...results.schema import MEASURE_COLUMNS, THROUGHPUT
from .command import PerfOptions, PerfTarget, build_command, needs_input_file, write_input_data_json
from .errors import EMPTY_WINDOW, PerfAnalyzerError, PerfAnalyzerTimeout
from ...errors import reason_line
from .parse import OutputDiagnosis, diagnose_output, parse_csv
from .shm_lock import conflicting_runs, perf_regions_removed, shared_memory_guard, shm_free_bytes, sigbus_message


@dataclass
class PointResult:
    """One measured load level. `stable=False` means perf_analyzer never stabilised; the values are the
    best numbers there are (a final run with the stability check relaxed), and `note` says which."""

    batch_size: int
    concurrency: int | None
    values: dict[str, float]
    stable: bool
    attempts: int
    residual_clamped: bool = False
    request_rate: float | None = None
    note: str = ""
    window: str = ""
    command: list[str] = field(default_factory=list)
    csv_path: Path | None = None
    log_path: Path | None = None
    profile_export: Path | None = None  # perf_analyzer's per-request times, when asked for and written
    samples_per_request: float = 1.0  # Inferences/second counts them (PerfTarget.samples_per_request)

    def row(self) -> dict[str, Any]:
        return {
            "Client Batch Size": self.batch_size,
            "Concurrent client requests": self.concurrency,
            **{c: self.values.get(c, math.nan) for c in MEASURE_COLUMNS},
            "stable": self.stable,
            "residual_clamped": self.residual_clamped,
            "attempts": self.attempts,
            "window": self.window,
            "note": self.note,
        }

    @property
    def load(self) -> Load:
        """The level measured, as the tagged value (a schedule's file is not kept: its nominal rate is)."""
        return Concurrency(self.concurrency) if self.concurrency is not None else RequestRate(self.request_rate)


def run_point(target: PerfTarget, batch_size: int, load: Load, options: PerfOptions, csv_path: str | Path, *,
              log_path: str | Path | None = None, profile_export: str | Path | None = None) -> PointResult:
    """Measure one load level; retry an unstable one with longer windows; never hide instability.

    A `Schedule` load drives its nominal rate from its file of send intervals (schedule.py) instead of
    `--request-rate-range`. `profile_export`: have perf_analyzer write every request's send and response times
    there (each attempt replaces it; perf_analyzer refuses a path that exists).

    Raises PerfAnalyzerError for anything that is not instability (a dead server, a model error, a bad
    flag), with perf_analyzer's output in the message.
    """
    csv_path = Path(csv_path)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    log_path = Path(log_path) if log_path else csv_path.with_suffix(".log")
    log_path.unlink(missing_ok=True)
    target = replace(target, binary=target.binary or find_perf_analyzer())
    if target.input_data is None and needs_input_file(target.signature) and options.input_data in ("random", "zero"):
        target = replace(target, input_data=str(write_input_data_json(
            target.signature, csv_path.parent / "input_data.json", options.input_data)))
    export = Path(profile_export) if profile_export is not None else None
    run = _Run(target, batch_size, load, csv_path, log_path, export)

    opts = options
    last_diag = OutputDiagnosis()
    for n in range(1, options.max_attempts + 1):
        row, last_diag = run.attempt(opts, f"attempt {n} ({opts.window_label()})")
        if row is not None and not last_diag.unstable:
            return run.result(row, True, n, "", opts)
        if n < options.max_attempts:
            opts = opts.lengthened()
    note = f"unstable after {options.max_attempts} attempt(s) up to {opts.window_label()}"
    if options.relaxed_fallback:
        # a window no request finished in gets longer for the last run too (stability unchecked cannot fill it)
        relaxed = replace(opts.lengthened() if run.empty_windows else opts, stability_percentage=100000.0,
                          max_trials=3)
        row, diag = run.attempt(relaxed, "relaxed run (stability not checked)")
        if row is not None:
            return run.result(row, False, options.max_attempts + 1,
                              note + "; numbers from a final run with the stability check off", opts)
        last_diag = diag if diag.last_pass else last_diag
    values = {c: math.nan for c in MEASURE_COLUMNS}
    if last_diag.last_pass:
        values[THROUGHPUT] = last_diag.last_pass[THROUGHPUT] * target.samples_per_request
        key = "Avg Latency" if options.percentile is None else f"P{options.percentile} Latency"
        if key in values:
            values[key] = last_diag.last_pass["latency_ms"]
        note += "; numbers from the last measurement window only"
    concurrency, rate = _level(load)
    return PointResult(batch_size, concurrency, values, False, options.max_attempts, False, rate, note,
                       opts.window_label(), run.cmd, None, log_path, _written(export), target.samples_per_request)


@dataclass
class _Run:
    """One point's perf_analyzer calls: where each writes, and the last command run."""

    target: PerfTarget
    batch_size: int
    load: Load
    csv_path: Path
    log_path: Path
    export: Path | None
    cmd: list[str] = field(default_factory=list)
    empty_windows: int = 0  # closed-loop attempts in which no request finished within a window

    def attempt(self, opts: PerfOptions, tag: str) -> tuple[dict[str, Any] | None, OutputDiagnosis]:
        """One perf_analyzer call: its row of the level (None when unstable) and what its output says."""
        url, signature = self.target.url, self.target.signature
        cmd = self.cmd = build_command(self.target, self.batch_size, self.load, opts, self.csv_path, self.export)
        self.csv_path.unlink(missing_ok=True)
        if self.export is not None:
            self.export.unlink(missing_ok=True)
        with shared_memory_guard(opts.shared_memory, url, wait_s=opts.call_timeout_s()), \
                perf_regions_removed(opts.shared_memory, signature, url, opts.protocol):
            try:
                rc, output = _execute(cmd, opts.call_timeout_s())
            except PerfAnalyzerTimeout as err:  # its log says so too: the point's record of why it failed
                with open(self.log_path, "a") as fh:
                    fh.write(f"### {tag}: {' '.join(cmd)}\n### {reason_line(err)}\n{err.output}\n")
                raise
        with open(self.log_path, "a") as fh:
            fh.write(f"### {tag}: {' '.join(cmd)}\n### exit code {rc}\n{output}\n")
        where = f"batch {self.batch_size}, {_level_text(self.load)}"
        if rc == -signal.SIGBUS:
            raise PerfAnalyzerError(
                sigbus_message(opts.shared_memory, where, conflicting_runs(opts.shared_memory, url), shm_free_bytes())
                + f"\ncommand: {' '.join(cmd)}\nfull output: {self.log_path}",
                returncode=rc, output=output,
            )
        diag = diagnose_output(output)
        rows = parse_csv(self.csv_path) if self.csv_path.exists() else []
        # with a schedule file the CSV's "Request Rate" is the file's mean rate truncated to an integer: one level,
        # one row
        row = (rows[0] if len(rows) == 1 else None) if isinstance(self.load, Schedule) else _pick_row(rows, self.load)
        if row is None and not diag.unstable and isinstance(self.load, Concurrency) and EMPTY_WINDOW in output:
            # closed loop: not one request finished within a window, on a host too busy for its length; like an
            # unstable window, a longer one is the cure (open loop raises: there it is the rate's failing verdict)
            self.empty_windows += 1
            diag.unstable = True
            return None, diag
        if row is None and not diag.unstable:
            what = "\n".join(diag.errors) or output.strip()[-2000:]
            said = next((ln.strip() for ln in what.splitlines() if ln.strip()), "no output")
            raise PerfAnalyzerError(  # its own words on the first line: a one-line report keeps them
                f"perf_analyzer failed at {where} (exit {rc}): {said}\n{what}\n"
                f"command: {' '.join(cmd)}\nfull output: {self.log_path}",
                returncode=rc, output=output, connection=diag.connection_error,
            )
        return row, diag

    def result(self, row: dict[str, Any], stable: bool, attempts: int, note: str, opts: PerfOptions) -> PointResult:
        values = {c: row.get(c, math.nan) for c in MEASURE_COLUMNS}
        values[THROUGHPUT] *= self.target.samples_per_request  # a request of k stacked samples is k inferences
        if row.get("residual_clamped"):
            note = "; ".join(filter(None, [note, "Network+server Send/recv clamped to 0 (window too short?)"]))
        concurrency, rate = _level(self.load)
        return PointResult(self.batch_size, concurrency, values, stable, attempts, bool(row.get("residual_clamped")),
                           rate, note, opts.window_label(), self.cmd, self.csv_path, self.log_path,
                           _written(self.export), self.target.samples_per_request)


def _written(path: Path | None) -> Path | None:
    return path if path is not None and path.exists() else None


def _level(load: Load) -> tuple[int | None, float | None]:
    """(concurrency, request rate) as a PointResult keeps them: one of the two."""
    return (load.clients, None) if isinstance(load, Concurrency) else (None, float(load.per_second))


def _pick_row(rows: list[dict[str, Any]], load: Load) -> dict[str, Any] | None:
    for row in rows:
        if isinstance(load, Concurrency) and row.get("Concurrent client requests") == load.clients:
            return row
        if isinstance(load, RequestRate) and math.isclose(row.get("Request rate", math.nan), load.per_second,
                                                          rel_tol=1e-6):
            return row
    return None


def _level_text(load: Load) -> str:
    return f"concurrency {load.clients}" if isinstance(load, Concurrency) else f"request rate {load.per_second:g}/s"


STOP_GRACE_S = 15.0  # a stopped perf_analyzer's in-flight requests finish within this, or it is killed


def _stop(proc: subprocess.Popen) -> None:
    """Stop perf_analyzer the way it stops cleanly: SIGINT lets its in-flight requests finish and unregisters its
    shared-memory regions from the server (a SIGKILL abandons both; tritonserver 2.51 was seen to crash with
    SIGSEGV right after such a run); killed only past STOP_GRACE_S."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=STOP_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            pass
    proc.kill()
    proc.wait()


def _execute(cmd: list[str], timeout_s: float) -> tuple[int, str]:
    """Run perf_analyzer (argument list, no shell); stdout and stderr together; a timeout is an error. When this
    process stops (Ctrl-C, SIGTERM) or dies, perf_analyzer gets SIGINT, its own clean stop (`_stop`)."""
    try:
        proc = subprocess.Popen(dying_with_parent(cmd, death_signal=signal.SIGINT), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=perf_environment())
    except FileNotFoundError as err:
        raise PerfAnalyzerNotFound(f"{cmd[0]} not found. {INSTALL_HINT}") from err
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired as err:
        _stop(proc)
        out = err.output.decode(errors="replace") if isinstance(err.output, bytes) else (err.output or "")
        raise PerfAnalyzerTimeout(
            f"perf_analyzer did not finish within {timeout_s:.0f} s (server hung?). Command: {' '.join(cmd)}\n{out[-2000:]}",
            returncode=None, output=out,
        ) from err
    except BaseException:  # Ctrl-C or SIGTERM (SystemExit) while it measures: stop it cleanly, then go on stopping
        _stop(proc)
        raise
    output = output or ""
    libs = missing_libraries(output)
    if libs:
        check_perf_analyzer(cmd[0])  # raises with install hints
    return proc.returncode, output
