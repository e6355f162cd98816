"""perf_analyzer: find it, build its command, run one measurement point, parse what it writes.

Facts this module is built on (checked against the perf_analyzer that ships in tritonclient 2.50.0):
- its CSV rows are sorted by throughput, not by load level, and every time in it is in microseconds;
- `--verbose-csv` adds `Avg latency` (and `request/response`, `response wait`); `--percentile` drops `Avg latency`;
- a level that never stabilises prints "Failed to obtain stable measurement ..." and is simply missing from the
  CSV: with one level the exit code is 2 and no CSV is written, with a range the exit code is 0;
- `--output-shared-memory-size` is per sample: perf_analyzer allocates `size x batch` per output;
- JSON `--input-data` entries are batch-1 samples (`{"b64": ...}` or `{"content": [...], "shape": [...]}`) that
  perf_analyzer repeats to fill a batch;
- it names its shared-memory regions after the tensors (`/dev/shm/<output>`, `/dev/shm/<input>_<stream>_<step>`),
  with no option for a prefix, and unregisters every region of its server when it starts: two runs with shared
  memory at once corrupt each other (one dies of SIGBUS), so runs here take a lock and refuse to start next to
  a foreign one (`shared_memory_guard`).
"""
from __future__ import annotations

import base64
import contextlib
import csv
import fcntl
import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Iterator, Protocol, Sequence

import numpy as np

from ..cleanup import PerfShmRecord, die_with_parent, perf_region_pattern
from ..spec import TensorSpec, atomic_write_text
from ..errors import UserError, UserInputError

PERF_ANALYZER = "perf_analyzer"
DEFAULT_OUTPUT_SHM_BYTES = 100 * 1024  # perf_analyzer's own default
# perf_analyzer CSV header -> the column names of the DLE "Full tabular data" tables
CSV_TO_SEED = {
    "Concurrency": "Concurrent client requests",
    "Request Rate": "Request rate",
    "Inferences/Second": "Inferences/second",
    "Client Send": "Client Send",
    "Network+Server Send/Recv": "Network+server Send/recv",
    "Server Queue": "Server Queue",
    "Server Compute Input": "Server Compute Input",
    "Server Compute Infer": "Server Compute Infer",
    "Server Compute Output": "Server Compute Output",
    "Client Recv": "Client Recv",
    "p50 latency": "P50 Latency",
    "p90 latency": "P90 Latency",
    "p95 latency": "P95 Latency",
    "p99 latency": "P99 Latency",
    "Avg latency": "Avg Latency",
}
THROUGHPUT = "Inferences/second"
RESIDUAL = "Network+server Send/recv"
BREAKDOWN_COLUMNS = (
    "Client Send",
    "Network+server Send/recv",
    "Server Queue",
    "Server Compute Input",
    "Server Compute Infer",
    "Server Compute Output",
    "Client Recv",
)
LATENCY_COLUMNS = ("P50 Latency", "P90 Latency", "P95 Latency", "P99 Latency", "Avg Latency")
# Measured values of one point, in the order of the seed's online table (times in ms).
MEASURE_COLUMNS = (THROUGHPUT, *BREAKDOWN_COLUMNS, *LATENCY_COLUMNS)

_UNSTABLE = re.compile(
    r"Failed to obtain stable measurement(?: within (\d+) measurement windows for (concurrency|request rate) ([\d.]+))?"
)
_PASS = re.compile(r"Pass \[(\d+)\] throughput: ([\d.eE+-]+) infer/sec\. (?:Avg|p\d+) latency: (\d+) usec")
_CONNECTION = re.compile(
    r"failed to connect|couldn't connect|connection refused|socket closed|connection reset|broken pipe|"
    r"unavailable|empty reply from server|failed to get model metadata: .*(connect|unavailable)",
    re.I,
)
_MISSING_LIB = re.compile(r"error while loading shared libraries: (\S+?):")


# ---- finding the binary ------------------------------------------------------------------------

class PerfAnalyzerNotFound(UserError, RuntimeError):
    """perf_analyzer is missing or cannot start; the message says what to install."""


class PerfAnalyzerError(UserError, RuntimeError):
    """perf_analyzer ran but failed for a reason other than an unstable measurement."""

    def __init__(self, message: str, *, returncode: int | None = None, output: str = "", connection: bool = False):
        super().__init__(message)
        self.returncode = returncode
        self.output = output
        self.connection = connection


_INSTALL_HINT = (
    "perf_analyzer ships in the tritonclient 2.50.0 wheel (later wheels dropped it): "
    "`pip install 'tritonclient[all]==2.50.0'`; it also needs `apt-get install libb64-0d` and "
    "`pip install nvidia-cuda-runtime-cu12` (libcudart.so.12, even on CPU hosts)"
)
_LIB_HINTS = {
    "libcudart": "`pip install nvidia-cuda-runtime-cu12` (the toolkit puts its lib/ on LD_LIBRARY_PATH itself)",
    "libb64": "`apt-get install libb64-0d`",
}


def find_perf_analyzer() -> Path:
    """perf_analyzer next to this interpreter (the venv's bin/), else on PATH."""
    here = Path(sys.executable).parent / PERF_ANALYZER
    if here.exists():
        return here
    found = shutil.which(PERF_ANALYZER)
    if found:
        return Path(found)
    raise PerfAnalyzerNotFound(f"perf_analyzer not found next to {sys.executable} nor on PATH. {_INSTALL_HINT}")


def cuda_runtime_lib_dirs() -> list[str]:
    """lib/ folders of the pip CUDA runtime wheel (nvidia-cuda-runtime-cu12) in this environment."""
    dirs = []
    for base in map(Path, sys.path):
        candidate = base / "nvidia" / "cuda_runtime" / "lib"
        if (candidate / "libcudart.so.12").exists() and str(candidate) not in dirs:
            dirs.append(str(candidate))
    return dirs


def perf_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment perf_analyzer needs: libcudart.so.12 from the pip wheel on LD_LIBRARY_PATH."""
    env = dict(os.environ if base is None else base)
    parts = [*cuda_runtime_lib_dirs(), *[p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(dict.fromkeys(parts))
    return env


def missing_libraries(text: str) -> list[str]:
    """Shared libraries named in a loader error or as `=> not found` in ldd output."""
    libs = _MISSING_LIB.findall(text)
    libs += re.findall(r"^\s*(\S+) => not found", text, re.M)
    return list(dict.fromkeys(libs))


def check_perf_analyzer(binary: str | Path | None = None) -> tuple[Path, str]:
    """Return (binary, version line); raise PerfAnalyzerNotFound naming any missing .so and how to get it."""
    path = Path(binary) if binary else find_perf_analyzer()
    env = perf_environment()
    try:
        proc = subprocess.run([str(path), "--version"], capture_output=True, text=True, env=env, timeout=30)
    except OSError as err:
        raise PerfAnalyzerNotFound(f"cannot execute {path}: {err}. {_INSTALL_HINT}") from err
    text = proc.stdout + proc.stderr
    libs = missing_libraries(text)
    if not libs and proc.returncode != 0 and shutil.which("ldd"):
        ldd = subprocess.run(["ldd", str(path)], capture_output=True, text=True, env=env, timeout=30)
        libs = missing_libraries(ldd.stdout + ldd.stderr)
    if libs:
        hints = [f"{lib}: " + next((h for k, h in _LIB_HINTS.items() if lib.startswith(k)), "install the package providing it")
                 for lib in libs]
        raise PerfAnalyzerNotFound(f"{path} cannot start, missing shared libraries:\n  " + "\n  ".join(hints))
    if proc.returncode != 0:
        raise PerfAnalyzerNotFound(f"`{path} --version` failed (exit {proc.returncode}): {text.strip()}. {_INSTALL_HINT}")
    version = next((line.strip() for line in text.splitlines() if "version" in line.lower()), text.strip())
    return path, version


# ---- options and command -----------------------------------------------------------------------

class HasSignature(Protocol):
    """A Manifest or a ModelSignature: anything with inputs and outputs."""

    @property
    def inputs(self) -> Sequence[TensorSpec]: ...

    @property
    def outputs(self) -> Sequence[TensorSpec]: ...


@dataclass(frozen=True)
class PerfOptions:
    """How perf_analyzer measures a point. Fields that change the numbers go into a sweep's fingerprint."""

    protocol: str = "grpc"  # grpc | http
    shared_memory: str = "none"  # system | cuda | none
    output_shared_memory_size: int | None = None  # bytes per sample; None = from the manifest
    input_data: str = "random"  # random | zero | path to a JSON file or directory
    measurement_mode: str = "time_windows"  # time_windows | count_windows
    measurement_interval_ms: int = 5000
    measurement_request_count: int = 50
    stability_percentage: float = 10.0
    max_trials: int = 10
    percentile: int | None = None  # stabilise on this latency percentile instead of the average
    async_mode: bool = False
    extra_args: tuple[str, ...] = ()
    # retries of an unstable point (not part of the measurement definition)
    max_attempts: int = 5
    retry_interval_step_ms: int = 2000
    retry_request_count_step: int = 50
    relaxed_fallback: bool = True  # after the last unstable attempt, measure once with stability unchecked
    timeout_s: float | None = None  # per perf_analyzer call; None = derived from the window settings

    def __post_init__(self) -> None:
        checks = {
            "protocol": (self.protocol, ("grpc", "http")),
            "shared_memory": (self.shared_memory, ("system", "cuda", "none")),
            "measurement_mode": (self.measurement_mode, ("time_windows", "count_windows")),
        }
        for name, (value, allowed) in checks.items():
            if value not in allowed:
                raise UserInputError(f"{name}={value!r}: choose one of {', '.join(allowed)}")
        if self.measurement_interval_ms <= 0 or self.measurement_request_count <= 0 or self.max_trials <= 0:
            raise UserInputError("measurement interval, request count and max trials must be positive")
        if self.max_attempts < 1:
            raise UserInputError("max_attempts must be >= 1")
        object.__setattr__(self, "extra_args", tuple(self.extra_args))

    def measurement_fields(self) -> dict[str, Any]:
        """The fields that define what is measured (for fingerprints and run.json)."""
        skip = {"max_attempts", "retry_interval_step_ms", "retry_request_count_step", "relaxed_fallback", "timeout_s"}
        return {k: v if not isinstance(v, tuple) else list(v) for k, v in asdict(self).items() if k not in skip}

    def lengthened(self) -> "PerfOptions":
        """The next retry's options: a longer window, as the DLE runner does (+2000 ms or +50 requests)."""
        if self.measurement_mode == "time_windows":
            return replace(self, measurement_interval_ms=self.measurement_interval_ms + self.retry_interval_step_ms)
        return replace(self, measurement_request_count=self.measurement_request_count + self.retry_request_count_step)

    def window_label(self) -> str:
        if self.measurement_mode == "time_windows":
            return f"{self.measurement_interval_ms} ms windows"
        return f"{self.measurement_request_count}-request windows"

    def call_timeout_s(self) -> float:
        if self.timeout_s is not None:
            return self.timeout_s
        if self.measurement_mode == "time_windows":
            return 60.0 + 3.0 * self.max_trials * self.measurement_interval_ms / 1000.0
        return 600.0


def output_shared_memory_size(outputs: Iterable[TensorSpec], headroom: float = 1.25) -> int:
    """Bytes per sample for `--output-shared-memory-size`: the largest output with headroom.

    perf_analyzer multiplies this by the batch size (checked: 8 bytes at -b 4 gives a 32-byte region), so
    a per-sample size is right; it never goes below perf_analyzer's 100 KB default.
    """
    largest = max((t.nbytes(1) for t in outputs), default=0)
    return max(DEFAULT_OUTPUT_SHM_BYTES, int(math.ceil(largest * headroom / 4096.0)) * 4096)


def needs_input_file(signature: HasSignature) -> bool:
    return any(t.value is not None for t in signature.inputs)


def write_input_data_json(signature: HasSignature, path: str | Path, kind: str = "random", seed: int = 0) -> Path:
    """A perf_analyzer `--input-data` JSON file: fixed `value`s for non-data inputs, random/zero data for the rest.

    One batch-1 entry; perf_analyzer repeats it to fill larger batches. Binary tensors are base64 encoded
    (compact for image-sized inputs); string tensors are listed as content.
    """
    if kind not in ("random", "zero"):
        raise UserInputError(f"generated input data is 'random' or 'zero', not {kind!r}")
    rng = np.random.default_rng(seed)
    entry: dict[str, Any] = {}
    for spec in signature.inputs:
        sample = spec.example(0, rng, kind)
        shape = list(spec.concrete_shape)
        if sample.dtype == object:
            entry[spec.name] = {"content": [str(v) for v in sample.ravel()], "shape": shape}
        else:
            data = np.ascontiguousarray(sample).tobytes()
            entry[spec.name] = {"b64": base64.b64encode(data).decode("ascii"), "shape": shape}
    atomic_write_text(path, json.dumps({"data": [entry]}) + "\n")
    return Path(path)


def shape_args(signature: HasSignature) -> list[str]:
    """`--shape NAME:d1,d2` for every input with a dynamic (-1) dim, from its example shape."""
    args: list[str] = []
    for spec in signature.inputs:
        if spec.is_dynamic:
            args += ["--shape", f"{spec.name}:" + ",".join(str(d) for d in spec.concrete_shape)]
    return args


def build_command(
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
    binary: str | Path | None = None,
) -> list[str]:
    """The perf_analyzer argument list for one load level (a concurrency or a request rate)."""
    if (concurrency is None) == (request_rate is None):
        raise ValueError("give exactly one of concurrency or request_rate")
    data = input_data or options.input_data
    if data in ("random", "zero") and needs_input_file(signature):
        fixed = [t.name for t in signature.inputs if t.value is not None]
        raise UserInputError(
            f"inputs {fixed} have fixed values: pass input_data= a JSON file from write_input_data_json() "
            "so perf_analyzer does not send random numbers there"
        )
    cmd = [
        str(binary or find_perf_analyzer()),
        "-m", model_name,
        "-u", url,
        "-i", options.protocol,
        "-b", str(int(batch_size)),
        "--input-data", str(data),
        "--measurement-mode", options.measurement_mode,
        "--stability-percentage", f"{options.stability_percentage:g}",
        "--max-trials", str(options.max_trials),
        "-f", str(csv_path),
        "--verbose-csv",
        "-v",
    ]
    if model_version:
        cmd += ["-x", str(model_version)]
    if concurrency is not None:
        cmd += ["--concurrency-range", f"{int(concurrency)}:{int(concurrency)}:1"]
    else:
        cmd += ["--request-rate-range", f"{request_rate:g}:{request_rate:g}:1"]
    if options.measurement_mode == "time_windows":
        cmd += ["--measurement-interval", str(options.measurement_interval_ms)]
    else:
        cmd += ["--measurement-request-count", str(options.measurement_request_count)]
    if options.shared_memory != "none":
        size = options.output_shared_memory_size or output_shared_memory_size(signature.outputs)
        cmd += ["--shared-memory", options.shared_memory, "--output-shared-memory-size", str(size)]
    if options.percentile is not None:
        cmd += ["--percentile", str(options.percentile)]
    if options.async_mode:
        cmd.append("--async")
    cmd += shape_args(signature)
    cmd += list(options.extra_args)
    return cmd


# ---- parsing -----------------------------------------------------------------------------------

def parse_csv(source: str | Path) -> list[dict[str, Any]]:
    """Rows of a perf_analyzer CSV, sorted by load level, times converted from µs to ms.

    Keys are the seed's column names; a column perf_analyzer did not write is NaN. The residual
    "Network+server Send/recv" is clamped to 0 when negative and the row gets `residual_clamped=True`
    (also when perf_analyzer already clamped it but the parts add up to more than the average latency).
    Repeated header lines and blank or short lines (a file appended to, or cut off) are skipped.
    """
    text = Path(source).read_text() if isinstance(source, Path) or "\n" not in str(source) else str(source)
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    rows: list[dict[str, Any]] = []
    for record in reader:
        if not record or not any(cell.strip() for cell in record):
            continue
        cells = [c.strip() for c in record]
        if cells[0] in ("Concurrency", "Request Rate"):
            header = cells
            continue
        if header is None or len(cells) < len(header):
            continue
        raw = dict(zip(header, cells))
        try:
            rows.append(_convert_row(raw))
        except ValueError:
            continue
    key = "Concurrent client requests" if rows and "Concurrent client requests" in rows[0] else "Request rate"
    rows.sort(key=lambda r: r.get(key, 0))
    return rows


def _convert_row(raw: dict[str, str]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for csv_name, seed_name in CSV_TO_SEED.items():
        if csv_name not in raw:
            if seed_name in MEASURE_COLUMNS:
                row[seed_name] = math.nan
            continue
        value = float(raw[csv_name])
        if csv_name == "Concurrency":
            row[seed_name] = int(value)
        elif csv_name in ("Request Rate", "Inferences/Second"):
            row[seed_name] = value
        else:
            row[seed_name] = value / 1000.0  # µs -> ms
    clamped = False
    if row[RESIDUAL] < 0:
        row[RESIDUAL] = 0.0
        clamped = True
    avg = row.get("Avg Latency", math.nan)
    parts = sum(row[c] for c in BREAKDOWN_COLUMNS if c != RESIDUAL and not math.isnan(row[c]))
    if not math.isnan(avg) and row[RESIDUAL] == 0.0 and parts > avg * 1.001:
        clamped = True
    row["residual_clamped"] = clamped
    return row


@dataclass
class OutputDiagnosis:
    """What perf_analyzer's console output says besides the numbers."""

    unstable: bool = False
    unstable_levels: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    connection_error: bool = False
    last_pass: dict[str, float] | None = None  # from `-v` "Pass [n]" lines: throughput, latency (ms)


def diagnose_output(text: str) -> OutputDiagnosis:
    diag = OutputDiagnosis()
    for match in _UNSTABLE.finditer(text):
        diag.unstable = True
        if match.group(3):
            diag.unstable_levels.append(float(match.group(3)))
    for line in text.splitlines():
        s = line.strip()
        low = s.lower()
        if not s or s.startswith("Failed to obtain stable measurement"):
            continue
        if low.startswith("error") or "had error" in low or low.startswith("failed to") or "unrecognized option" in low:
            diag.errors.append(s)
    diag.connection_error = any(_CONNECTION.search(e) for e in diag.errors)
    passes = _PASS.findall(text)
    if passes:
        _, thr, lat = passes[-1]
        diag.last_pass = {THROUGHPUT: float(thr), "latency_ms": int(lat) / 1000.0}
    return diag


# ---- one measurement point ---------------------------------------------------------------------

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
) -> PointResult:
    """Measure one load level; retry an unstable one with longer windows; never hide instability.

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

    def attempt(opts: PerfOptions, tag: str) -> tuple[dict[str, Any] | None, OutputDiagnosis, list[str], int]:
        cmd = build_command(model_name, url, batch_size, concurrency, signature, opts, csv_path,
                            request_rate=request_rate, model_version=model_version, input_data=input_data, binary=binary)
        csv_path.unlink(missing_ok=True)
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
        row = _pick_row(parse_csv(csv_path), concurrency, request_rate) if csv_path.exists() else None
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
            return _result(batch_size, concurrency, request_rate, row, True, n, "", opts, cmd, csv_path, log_path)
        if n < options.max_attempts:
            opts = opts.lengthened()
    note = f"unstable after {options.max_attempts} attempt(s) up to {opts.window_label()}"
    if options.relaxed_fallback:
        relaxed = replace(opts, stability_percentage=100000.0, max_trials=3)
        row, diag, cmd, _ = attempt(relaxed, "relaxed run (stability not checked)")
        if row is not None:
            return _result(batch_size, concurrency, request_rate, row, False, options.max_attempts + 1,
                           note + "; numbers from a final run with the stability check off", opts, cmd, csv_path, log_path)
        last_diag = diag if diag.last_pass else last_diag
    values = {c: math.nan for c in MEASURE_COLUMNS}
    if last_diag.last_pass:
        values[THROUGHPUT] = last_diag.last_pass[THROUGHPUT]
        key = "Avg Latency" if options.percentile is None else f"P{options.percentile} Latency"
        if key in values:
            values[key] = last_diag.last_pass["latency_ms"]
        note += "; numbers from the last measurement window only"
    return PointResult(batch_size, concurrency, values, False, options.max_attempts, False, request_rate, note,
                       opts.window_label(), cmd, None, log_path)


def _result(batch, concurrency, rate, row, stable, attempts, note, opts, cmd, csv_path, log_path) -> PointResult:
    values = {c: row.get(c, math.nan) for c in MEASURE_COLUMNS}
    if row.get("residual_clamped"):
        note = "; ".join(filter(None, [note, "Network+server Send/recv clamped to 0 (window too short?)"]))
    return PointResult(batch, concurrency, values, stable, attempts, bool(row.get("residual_clamped")), rate, note,
                       opts.window_label(), cmd, csv_path, log_path)


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
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=perf_environment(), timeout=timeout_s, preexec_fn=die_with_parent())
    except subprocess.TimeoutExpired as err:
        out = err.output.decode(errors="replace") if isinstance(err.output, bytes) else (err.output or "")
        raise PerfAnalyzerError(
            f"perf_analyzer did not finish within {timeout_s:.0f} s (server hung?). Command: {' '.join(cmd)}\n{out[-2000:]}",
            returncode=None, output=out,
        ) from err
    except FileNotFoundError as err:
        raise PerfAnalyzerNotFound(f"{cmd[0]} not found. {_INSTALL_HINT}") from err
    output = proc.stdout or ""
    libs = missing_libraries(output)
    if libs:
        check_perf_analyzer(cmd[0])  # raises with install hints
    return proc.returncode, output


# ---- shared memory: one perf_analyzer at a time ----------------------------------------------------

SHM_LOCK_NAME = "deployment_toolkit-perf_analyzer-shm.lock"
SHM_DIR = Path("/dev/shm")


@dataclass(frozen=True)
class ShmRun:
    """A running perf_analyzer that uses shared memory, read from its command line."""

    pid: int
    shared_memory: str  # system | cuda
    url: str
    model: str

    def describe(self) -> str:
        return f"pid {self.pid}: perf_analyzer -m {self.model} -u {self.url} --shared-memory {self.shared_memory}"


def _flag_value(argv: Sequence[str], *names: str) -> str | None:
    """The value of an option in any spelling getopt accepts: `-u X`, `-uX`, `--url X`, `--url=X`."""
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if name.startswith("--") and arg.startswith(name + "="):
                return arg[len(name) + 1:]
            if not name.startswith("--") and arg.startswith(name) and len(arg) > len(name):
                return arg[len(name):]
    return None


def parse_shm_run(pid: int, argv: Sequence[str]) -> ShmRun | None:
    """A perf_analyzer command line -> its shared-memory use; None for other programs and for runs without."""
    if not argv or Path(argv[0]).name != PERF_ANALYZER:
        return None
    shm = _flag_value(argv, "--shared-memory")
    if shm not in ("system", "cuda"):
        return None
    url = _flag_value(argv, "-u", "--url") or "localhost:8000"  # perf_analyzer's own default
    return ShmRun(pid, shm, url, _flag_value(argv, "-m", "--model-name") or "?")


def running_shm_runs(proc: Path = Path("/proc")) -> list[ShmRun]:
    """Every perf_analyzer on this host (this PID namespace) that uses shared memory, from /proc."""
    runs = []
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:  # exited while we looked, or not ours to read
            continue
        run = parse_shm_run(int(entry.name), [a for a in argv if a])
        if run is not None:
            runs.append(run)
    return runs


def _same_server(a: str, b: str) -> bool:
    def norm(url: str) -> str:
        url = url.split("://", 1)[-1].rstrip("/")
        return url.replace("localhost", "127.0.0.1")

    return norm(a) == norm(b)


def conflicting_runs(shared_memory: str, url: str, runs: Iterable[ShmRun] | None = None) -> list[ShmRun]:
    """The runs a new one with `shared_memory` against `url` would corrupt, or be corrupted by.

    System shared memory: any other system-shm run (region names are tensor names, the same for every
    zoo model: input__0, output__0). Any shared memory: a run against the same server (each start
    unregisters all of the server's regions).
    """
    if shared_memory == "none":
        return []
    runs = running_shm_runs() if runs is None else runs
    return [r for r in runs if (shared_memory == "system" and r.shared_memory == "system") or _same_server(r.url, url)]


def concurrent_message(runs: Sequence[ShmRun]) -> str:
    listed = "\n".join(f"  {r.describe()}" for r in runs)
    return (
        f"another perf_analyzer is using shared memory on this host:\n{listed}\n"
        "perf_analyzer names its shared-memory regions after the model's tensors (/dev/shm/input__0_0_0, "
        "/dev/shm/output__0, ...) with no per-run prefix, and unregisters all of a server's regions when it "
        "starts, so two runs at once corrupt each other (one dies of SIGBUS). Wait for it to finish (or stop "
        f"it: kill {' '.join(str(r.pid) for r in runs)}), or measure with --shared-memory none."
    )


def shm_free_bytes(path: Path = SHM_DIR) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def sigbus_message(shared_memory: str, where: str, runs: Sequence[ShmRun], free_bytes: int | None) -> str:
    """Why perf_analyzer died of SIGBUS (exit -7) and what to do: the two causes are a region resized or
    removed by another run, and a full /dev/shm (Docker's default is 64 MiB)."""
    if shared_memory == "none":
        return (f"perf_analyzer was killed by SIGBUS (bus error) at {where}, with no shared memory in use: "
                "see its output in the log and check the host's memory")
    lines = [f"perf_analyzer was killed by SIGBUS (bus error) at {where}: a shared-memory region it had "
             "mapped was shrunk or removed under it, or /dev/shm ran out of space."]
    if runs:
        lines.append(concurrent_message(runs))
    elif shared_memory == "system":
        lines.append("No other perf_analyzer with shared memory is running now; one that ran at the same time "
                     "(perf_analyzer names regions after the tensors, with no per-run prefix) resizes and removes "
                     "the same /dev/shm files. Run one perf_analyzer with --shared-memory system at a time.")
    if free_bytes is not None:
        lines.append(f"{SHM_DIR} has {free_bytes / 2**20:.0f} MiB free; in a container, start it with "
                     "--shm-size=1g (or --ipc=host) if that is less than the inputs and outputs of a batch.")
    lines.append("Or measure with --shared-memory none.")
    return "\n".join(lines)


def shm_lock_path() -> Path:
    """One lock per shared-memory namespace: /dev/shm itself where it exists."""
    return (SHM_DIR if SHM_DIR.is_dir() else Path(tempfile.gettempdir())) / SHM_LOCK_NAME


def _open_lock(path: Path) -> int | None:
    """A descriptor to flock (read-only: a lock file another user created is fine); None if impossible."""
    for flags in (os.O_RDONLY, os.O_RDONLY | os.O_CREAT):
        try:
            return os.open(path, flags, 0o666)
        except FileNotFoundError:
            continue
        except OSError:  # no permission: fall back to detecting other runs only
            return None
    return None


def _note_once(said: set[str], what: str) -> None:
    """Say once per wait why nothing happens (a sweep otherwise looks hung)."""
    if what not in said:
        said.add(what)
        print(f"waiting for {what} to finish: perf_analyzer runs with shared memory cannot overlap", file=sys.stderr)


def _acquire(fd: int, deadline: float, said: set[str], path: Path) -> bool:
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            _note_once(said, f"another perf_analyzer run of this toolkit (lock {path})")
            time.sleep(0.2)  # polling interval, not a fixed wait


@contextlib.contextmanager
def perf_regions_removed(shared_memory: str, signature: HasSignature) -> Iterator[None]:
    """Remove the system shared-memory regions perf_analyzer created, however it ended: killed (our SIGTERM,
    Ctrl-C, a timeout) it never unlinks them. Only names that match its tensor-named regions and appeared
    during the run are removed (the run holds the shared-memory lock); a record beside the lock lets the
    next run clear what a SIGKILLed one left."""
    if shared_memory != "system" or not SHM_DIR.is_dir():
        yield
        return
    pattern = perf_region_pattern([t.name for t in signature.inputs], [t.name for t in signature.outputs])
    record = PerfShmRecord(shm_lock_path().with_name(SHM_LOCK_NAME.replace(".lock", ".regions.json")))
    before = record.begin(pattern)
    try:
        yield
    finally:
        record.end(pattern, before)


@contextlib.contextmanager
def shared_memory_guard(shared_memory: str, url: str, wait_s: float, lock_path: Path | None = None) -> Iterator[None]:
    """Run the body alone among perf_analyzer runs with shared memory on this host.

    Runs of this toolkit queue on a lock (two sweeps at once interleave point by point instead of
    crashing); a foreign perf_analyzer still running after `wait_s` is a PerfAnalyzerError that names it.
    """
    if shared_memory == "none":
        yield
        return
    path = lock_path or shm_lock_path()
    fd = _open_lock(path)
    deadline = time.monotonic() + wait_s
    said: set[str] = set()
    try:
        if fd is not None and not _acquire(fd, deadline, said, path):
            raise PerfAnalyzerError(
                f"another perf_analyzer run of this toolkit has held {path} for more than {wait_s:.0f} s: wait for "
                "it to finish (`fuser -v` on that file names it), or measure with --shared-memory none")
        while runs := conflicting_runs(shared_memory, url):
            if time.monotonic() > deadline:
                raise PerfAnalyzerError(concurrent_message(runs))
            listed = "; ".join(r.describe() for r in runs)
            _note_once(said, f"another perf_analyzer using shared memory ({listed})")
            time.sleep(0.5)  # polling interval, not a fixed wait
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock


# ---- command-line flags (shared by the offline and online scripts) -----------------------------

def add_perf_arguments(parser) -> None:
    """The perf_analyzer flags of triton/run_*_performance_test_on_triton.py (names follow perf_analyzer's)."""
    g = parser.add_argument_group("perf_analyzer")
    g.add_argument("--protocol", choices=("grpc", "http"), default="grpc", help="default: %(default)s")
    g.add_argument("--shared-memory", choices=("auto", "system", "cuda", "none"), default="auto",
                   help="tensor transport; auto = system for a server on this host (loopback URL), else none")
    g.add_argument("--output-shared-memory-size", type=int, default=None, metavar="BYTES",
                   help="per sample and output; default: the manifest's largest output + 25%% (min 100 KB)")
    g.add_argument("--input-data", default="random", metavar="random|zero|PATH",
                   help="inputs with fixed values in the manifest always get those values (default: %(default)s)")
    g.add_argument("--data-dir", default=None, metavar="DIR",
                   help="real samples instead of --input-data: a folder of .npy/.npz samples, or the data_dir of "
                        "--dataloader; written as perf_analyzer JSON (input_data_<sha12>.json) in the run folder")
    g.add_argument("--dataloader", default=None, metavar="FILE",
                   help="a dataloader.py defining get_dataloader_fn(**kwargs) (the DLE form) for the real samples")
    g.add_argument("--dataloader-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="extra keyword argument for get_dataloader_fn (repeatable)")
    g.add_argument("--perf-samples", type=int, default=16,
                   help="real samples written for perf_analyzer, sent round-robin (default: %(default)s)")
    g.add_argument("--measurement-mode", choices=("time_windows", "count_windows"), default="time_windows")
    g.add_argument("--measurement-interval", type=int, default=5000, metavar="MS",
                   help="window length for time_windows (default: %(default)s)")
    g.add_argument("--measurement-request-count", type=int, default=50,
                   help="requests per window for count_windows (default: %(default)s)")
    g.add_argument("--stability-percentage", type=float, default=10.0, help="default: %(default)s")
    g.add_argument("--max-trials", type=int, default=10, help="windows per attempt (default: %(default)s)")
    g.add_argument("--percentile", type=int, default=None, help="stabilise on this latency percentile (e.g. 99)")
    g.add_argument("--async", dest="async_mode", action="store_true", help="perf_analyzer --async")
    g.add_argument("--max-attempts", type=int, default=5,
                   help="attempts per point, each with a longer window (+2000 ms or +50 requests); default %(default)s")
    g.add_argument("--perf-analyzer-arg", action="append", default=[], metavar="ARG",
                   help="extra argument passed to perf_analyzer as is (repeatable)")


def real_input_data(args, signature: HasSignature, directory: str | Path, *, precision: str = "fp32",
                    batched: bool = True) -> str | None:
    """With --data-dir/--dataloader: the user's samples, validated against `signature`, written as
    perf_analyzer JSON in `directory`; returns its path (None without those flags). --input-data must then
    be left at its default."""
    from ..data.perf_input import build_perf_input
    from ..data.user import user_data_from_args
    from ..spec import ModelSignature

    if getattr(args, "data_dir", None) is None and getattr(args, "dataloader", None) is None:
        return None
    if getattr(args, "input_data", "random") != "random":
        raise UserInputError("give either --input-data or --data-dir/--dataloader, not both")
    sig = getattr(signature, "signature", signature)  # a Manifest carries one
    if not isinstance(sig, ModelSignature):
        sig = ModelSignature(tuple(signature.inputs), tuple(signature.outputs))
    data = user_data_from_args(args, sig, precision=precision, batched=batched)
    if data is None:  # --data-dir synthetic
        return None
    return str(build_perf_input(data, directory, args.perf_samples))


def perf_options_from_args(args, shared_memory: str | None = None) -> PerfOptions:
    return PerfOptions(
        protocol=args.protocol,
        shared_memory=shared_memory or args.shared_memory,
        output_shared_memory_size=args.output_shared_memory_size,
        input_data=args.input_data,
        measurement_mode=args.measurement_mode,
        measurement_interval_ms=args.measurement_interval,
        measurement_request_count=args.measurement_request_count,
        stability_percentage=args.stability_percentage,
        max_trials=args.max_trials,
        percentile=args.percentile,
        async_mode=args.async_mode,
        max_attempts=args.max_attempts,
        extra_args=tuple(args.perf_analyzer_arg),
    )
