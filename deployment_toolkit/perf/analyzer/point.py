"""One measurement point: run perf_analyzer, retry an unstable level (up to max_attempts), pick the row of the
requested level, keep the raw CSV and log."""
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
from ...results.schema import MEASURE_COLUMNS, THROUGHPUT
from .command import HasSignature, PerfOptions, build_command, needs_input_file, write_input_data_json
from .errors import PerfAnalyzerError
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


def run_point(
    model_name: str,
    url: str,
    batch_size: int,
    concurrency: int | None,
    signature: HasSignature,
    options: PerfOptions,
    csv_path: str | Path,
    *,
    request_rate: float | None = None,
    model_version: str = "",
    input_data: str | None = None,
    log_path: str | Path | None = None,
    binary: str | Path | None = None,
    request_intervals: str | Path | None = None,
    profile_export: str | Path | None = None,
) -> PointResult:
    """Measure one load level; retry an unstable one with longer windows; never hide instability.

    `request_intervals`: drive `request_rate` from this schedule file (schedule.py) instead of
    `--request-rate-range`. `profile_export`: have perf_analyzer write every request's send and response times
    there (each attempt replaces it; perf_analyzer refuses a path that exists).

    Raises PerfAnalyzerError for anything that is not instability (a dead server, a model error, a bad
    flag), with perf_analyzer's output in the message.
    """
    csv_path = Path(csv_path)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    log_path = Path(log_path) if log_path else csv_path.with_suffix(".log")
    log_path.unlink(missing_ok=True)
    binary = binary or find_perf_analyzer()
    if input_data is None and needs_input_file(signature) and options.input_data in ("random", "zero"):
        input_data = str(write_input_data_json(signature, csv_path.parent / "input_data.json", options.input_data))
    level = {"concurrency": concurrency, "request_rate": request_rate}
    export = Path(profile_export) if profile_export is not None else None

    def attempt(opts: PerfOptions, tag: str) -> tuple[dict[str, Any] | None, OutputDiagnosis, list[str], int]:
        cmd = build_command(model_name, url, batch_size, concurrency, signature, opts, csv_path,
                            request_rate=request_rate, model_version=model_version, input_data=input_data, binary=binary,
                            request_intervals=request_intervals, profile_export=export)
        csv_path.unlink(missing_ok=True)
        if export is not None:
            export.unlink(missing_ok=True)
        with shared_memory_guard(opts.shared_memory, url, wait_s=opts.call_timeout_s()), \
                perf_regions_removed(opts.shared_memory, signature):
            rc, output = _execute(cmd, opts.call_timeout_s())
        with open(log_path, "a") as fh:
            fh.write(f"### {tag}: {' '.join(cmd)}\n### exit code {rc}\n{output}\n")
        if rc == -signal.SIGBUS:
            raise PerfAnalyzerError(
                sigbus_message(opts.shared_memory, f"batch {batch_size}, {_level_text(**level)}",
                               conflicting_runs(opts.shared_memory, url), shm_free_bytes())
                + f"\ncommand: {' '.join(cmd)}\nfull output: {log_path}",
                returncode=rc, output=output,
            )
        diag = diagnose_output(output)
        rows = parse_csv(csv_path) if csv_path.exists() else []
        # with a schedule file the CSV's "Request Rate" is the file's mean rate truncated to an integer: one level,
        # one row
        row = (rows[0] if len(rows) == 1 else None) if request_intervals is not None else \
            _pick_row(rows, concurrency, request_rate)
        if row is None and not diag.unstable:
            what = "\n".join(diag.errors) or output.strip()[-2000:]
            raise PerfAnalyzerError(
                f"perf_analyzer failed at batch {batch_size}, {_level_text(**level)} (exit {rc}):\n{what}\n"
                f"command: {' '.join(cmd)}\nfull output: {log_path}",
                returncode=rc, output=output, connection=diag.connection_error,
            )
        return row, diag, cmd, rc

    opts = options
    last_diag = OutputDiagnosis()
    cmd: list[str] = []
    for n in range(1, options.max_attempts + 1):
        row, last_diag, cmd, _ = attempt(opts, f"attempt {n} ({opts.window_label()})")
        if row is not None and not last_diag.unstable:
            return _result(batch_size, concurrency, request_rate, row, True, n, "", opts, cmd, csv_path, log_path,
                           export)
        if n < options.max_attempts:
            opts = opts.lengthened()
    note = f"unstable after {options.max_attempts} attempt(s) up to {opts.window_label()}"
    if options.relaxed_fallback:
        relaxed = replace(opts, stability_percentage=100000.0, max_trials=3)
        row, diag, cmd, _ = attempt(relaxed, "relaxed run (stability not checked)")
        if row is not None:
            return _result(batch_size, concurrency, request_rate, row, False, options.max_attempts + 1,
                           note + "; numbers from a final run with the stability check off", opts, cmd, csv_path, log_path,
                           export)
        last_diag = diag if diag.last_pass else last_diag
    values = {c: math.nan for c in MEASURE_COLUMNS}
    if last_diag.last_pass:
        values[THROUGHPUT] = last_diag.last_pass[THROUGHPUT]
        key = "Avg Latency" if options.percentile is None else f"P{options.percentile} Latency"
        if key in values:
            values[key] = last_diag.last_pass["latency_ms"]
        note += "; numbers from the last measurement window only"
    return PointResult(batch_size, concurrency, values, False, options.max_attempts, False, request_rate, note,
                       opts.window_label(), cmd, None, log_path, _written(export))


def _written(path: Path | None) -> Path | None:
    return path if path is not None and path.exists() else None


def _result(batch, concurrency, rate, row, stable, attempts, note, opts, cmd, csv_path, log_path,
            export: Path | None = None) -> PointResult:
    values = {c: row.get(c, math.nan) for c in MEASURE_COLUMNS}
    if row.get("residual_clamped"):
        note = "; ".join(filter(None, [note, "Network+server Send/recv clamped to 0 (window too short?)"]))
    return PointResult(batch, concurrency, values, stable, attempts, bool(row.get("residual_clamped")), rate, note,
                       opts.window_label(), cmd, csv_path, log_path, _written(export))


def _pick_row(rows: list[dict[str, Any]], concurrency: int | None, rate: float | None) -> dict[str, Any] | None:
    for row in rows:
        if concurrency is not None and row.get("Concurrent client requests") == concurrency:
            return row
        if rate is not None and math.isclose(row.get("Request rate", math.nan), rate, rel_tol=1e-6):
            return row
    return None


def _level_text(concurrency: int | None, request_rate: float | None) -> str:
    return f"concurrency {concurrency}" if concurrency is not None else f"request rate {request_rate:g}/s"


def _execute(cmd: list[str], timeout_s: float) -> tuple[int, str]:
    """Run perf_analyzer (argument list, no shell); stdout and stderr together; a timeout is an error."""
    try:
        proc = subprocess.run(dying_with_parent(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=perf_environment(), timeout=timeout_s)
    except subprocess.TimeoutExpired as err:
        out = err.output.decode(errors="replace") if isinstance(err.output, bytes) else (err.output or "")
        raise PerfAnalyzerError(
            f"perf_analyzer did not finish within {timeout_s:.0f} s (server hung?). Command: {' '.join(cmd)}\n{out[-2000:]}",
            returncode=None, output=out,
        ) from err
    except FileNotFoundError as err:
        raise PerfAnalyzerNotFound(f"{cmd[0]} not found. {INSTALL_HINT}") from err
    output = proc.stdout or ""
    libs = missing_libraries(output)
    if libs:
        check_perf_analyzer(cmd[0])  # raises with install hints
    return proc.returncode, output
