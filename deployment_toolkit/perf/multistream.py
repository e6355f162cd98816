"""One load generator for several models: each model on its own seeded open-loop schedule, all from one process.

Why: mixed traffic used to take one perf_analyzer per model (deployment/mixed.py); six models on a 2-core host were
six load-generator processes competing with the server they measure. Here one child process drives every stream
from one asyncio loop over one gRPC channel (client/aio.py), and its per-model results become the same
store rows perf_analyzer's points become (perf/openloop/together.py), so perf.openloop.ratepoint.RatePoint judges them
unchanged.

How a run goes (the child, `python -m deployment_toolkit.perf.multistream SPEC.json OUT.json`):
- every stream's arrivals are made up front with schedule.make_schedule(rate, seconds, distribution, seed), the
  generator perf_analyzer's `--request-intervals` files come from, so a point driven either way sees the same
  arrivals; the schedules share one clock start;
- each request is fired as a task at its intended time and never rescheduled when late (an absolute schedule, as
  perf_analyzer's): a stalled sender sends its backlog back to back. The intended, actual send and completion times
  are recorded (time.perf_counter_ns), so latency from the intended send time (coordinated omission avoided) sits
  beside latency from the actual send;
- asyncio's timers wake on whole milliseconds (epoll), which alone would make about every request "late" by
  LATE_TOLERANCE_MS: the sender sleeps on the loop until SPIN_NS before a send and the rest in a blocking sleep;
- windows of window_ms from the start; the run stops after max_windows, or once every stream's last three windows
  after the warm-up settle (the counting and stability rules: multistream_stats.py; the requests' data, built once
  per stream: multistream_data.py); outstanding requests then get up to timeout_s, and OUT.json is written. The
  parent (drive) reads nothing else; the child's output goes to its log.
"""
from __future__ import annotations

import asyncio
import gc
import json
import logging
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import UserError, UserInputError, reason_line
from ..spec import TensorSpec
from .analyzer.schedule import ARRIVALS
from .multistream_data import intended_offsets_ns, request_arrays, schedule_seconds
from .multistream_stats import StreamResult, Trace, WindowFigures, reported, settled, summarise, window_figures

log = logging.getLogger(__name__)
MODULE = "deployment_toolkit.perf.multistream"
SPIN_NS = 1_200_000  # closer than this to a send, the sender sleeps blocking: the loop's timers round to whole ms
START_LEAD_NS = 20_000_000  # the shared clock starts this long after set-up, so the first sends are not late
STARTUP_S = 120.0  # what the child may take besides its windows and the final wait (imports, connecting)


class DriveError(UserError, RuntimeError):
    """The driver could not run a stream (a model the server does not have, a server that does not answer, bad
    input data) or did not finish: one line."""


# ---- what to drive ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Stream:
    """One model's traffic: `rate` requests/s of `batch` samples on the seeded arrivals of make_schedule."""

    model_name: str
    batch: int  # samples per request (the model's client batch)
    rate: float  # requests/s
    seed: int  # the arrival schedule's seed (schedule.make_schedule)
    distribution: str = "poisson"  # or "constant" (schedule.ARRIVALS)
    model_version: str = ""
    input_data: str = "random"  # "random" | "zero" | a perf_analyzer --input-data JSON file
    inputs: tuple[TensorSpec, ...] = ()  # the model's inputs (name, dtype, per-sample shape, value/value_range)
    samples_per_request: float = 1.0  # a batch-coupled model's stacked samples: each request is that many inferences
    batched: bool = True  # False: a model without a batch axis (max_batch_size 0): requests carry one sample's shape

    def __post_init__(self) -> None:
        if not self.model_name:
            raise UserInputError("a stream needs a model name")
        if self.distribution not in ARRIVALS:
            raise UserInputError(f"stream {self.model_name}: distribution {self.distribution!r}: choose one of "
                                 f"{', '.join(ARRIVALS)}")
        if not self.rate > 0 or not math.isfinite(self.rate):
            raise UserInputError(f"stream {self.model_name}: the rate must be a positive number, got {self.rate}")
        if int(self.batch) < 1 or (not self.batched and int(self.batch) != 1):
            raise UserInputError(f"stream {self.model_name}: batch {self.batch} (at least 1; 1 without a batch axis)")
        if not self.inputs:
            raise UserInputError(f"stream {self.model_name}: give the model's inputs (TensorSpec) to build requests")
        object.__setattr__(self, "inputs", tuple(self.inputs))

    @property
    def inferences_per_request(self) -> float:
        return self.batch * self.samples_per_request

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["inputs"] = [t.to_dict() for t in self.inputs]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Stream":
        return cls(**{**d, "inputs": tuple(TensorSpec.from_dict(t) for t in d.get("inputs") or ())})


@dataclass(frozen=True)
class DriveSpec:
    """Where, what and for how long: the child's whole instruction, written as SPEC.json."""

    url: str  # gRPC host:port of the server (a grpc:// prefix is taken)
    streams: tuple[Stream, ...]
    window_ms: int  # one measurement window
    max_windows: int  # stop after this many windows at the latest (the warm-up window included)
    stability: float  # percent: stop once every stream's last 3 windows agree within it (throughput, average latency)
    timeout_s: float = 30.0  # a request not answered within this is an error
    trace_dir: str = ""  # when set: every stream's per-request times as <trace_dir>/<model>.trace.json

    def __post_init__(self) -> None:
        object.__setattr__(self, "streams", tuple(self.streams))
        names = [s.model_name for s in self.streams]
        if not names:
            raise UserInputError("nothing to drive: no streams")
        if len(set(names)) != len(names):
            raise UserInputError(f"one stream per model: {sorted({n for n in names if names.count(n) > 1})} repeated")
        if int(self.window_ms) <= 0 or int(self.max_windows) < 1 or not self.stability > 0 or not self.timeout_s > 0:
            raise UserInputError(f"window_ms ({self.window_ms}), max_windows ({self.max_windows}), stability "
                                 f"({self.stability}) and timeout_s ({self.timeout_s}) must be positive")

    @property
    def grpc_target(self) -> str:
        return self.url.split("://", 1)[1] if "://" in self.url else self.url

    def to_dict(self) -> dict[str, Any]:
        return {**{f.name: getattr(self, f.name) for f in fields(self)},
                "streams": [s.to_dict() for s in self.streams]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "DriveSpec":
        return cls(**{**d, "streams": tuple(Stream.from_dict(s) for s in d["streams"])})


# ---- the child: one asyncio loop drives every stream ------------------------------------------------------------

@dataclass
class _StreamState:
    stream: Stream
    trace: Trace
    inputs: list[list[Any]]  # the inputs of each distinct request (AsyncTritonClient.inputs), cycled
    fired: int = 0
    errors: int = 0
    first_error: str = ""
    unanswered: int = 0


class _Driver:
    """The run: one client, one clock, one sender merging every stream's schedule."""

    def __init__(self, spec: DriveSpec):
        self.spec = spec
        self.window_ns = int(spec.window_ms) * 1_000_000
        self.states: list[_StreamState] = []
        self.pending: set[asyncio.Task] = set()
        self.t0 = 0
        self.parent = os.getppid()

    def now(self) -> int:
        return time.perf_counter_ns() - self.t0

    async def run(self) -> dict[str, StreamResult]:
        from ..client.aio import AsyncTritonClient  # the child's only network code, in the client package

        arrays = [request_arrays(s) for s in self.spec.streams]  # bad input data: one line before connecting
        client = AsyncTritonClient(self.spec.grpc_target, self.spec.timeout_s)
        try:
            await self._check_models(client)
            for s, distinct in zip(self.spec.streams, arrays):  # schedules and inputs, before the clock starts
                datatypes = {t.name: t.triton_dtype for t in s.inputs}
                requests = [client.inputs(a, datatypes) for a in distinct]
                offsets = intended_offsets_ns(s, self.spec.window_ms, self.spec.max_windows)
                self.states.append(_StreamState(s, Trace.planned(offsets), requests))
            windows = await self._send_all(client)
            await self._drain()
        finally:
            await client.close()
        return {st.stream.model_name: self._result(st, windows) for st in self.states}

    async def _check_models(self, client) -> None:
        """The server live and each model ready, before any clock starts: a missing model is one line naming it."""
        if not await client.live():
            raise DriveError(f"the server at {self.spec.url} is not live")
        for s in self.spec.streams:
            if not await client.model_ready(s.model_name, s.model_version):
                version = f" version {s.model_version}" if s.model_version else ""
                raise DriveError(f"model {s.model_name!r}{version} is not ready on the server at {self.spec.url}: "
                                 "it is not in the model repository or did not load")

    async def _send_all(self, client) -> int:
        """Fire every request at its intended time until the run stops; returns the windows run."""
        # every stream's requests merged in time order (ties: the stream listed first): one sender for all
        times = np.concatenate([st.trace.intended_ns for st in self.states])
        which = np.concatenate([np.full(len(st.trace.intended_ns), i) for i, st in enumerate(self.states)])
        number = np.concatenate([np.arange(len(st.trace.intended_ns)) for st in self.states])
        by_time = np.argsort(times, kind="stable")
        order = zip(times[by_time].tolist(), which[by_time].tolist(), number[by_time].tolist())
        upcoming = next(order, None)
        gc.collect()
        gc.freeze()  # what was built so far is never garbage: fewer and shorter pauses mid-run
        self.t0 = time.perf_counter_ns() + START_LEAD_NS
        boundary, windows = self.window_ns, 0
        while True:
            now = self.now()
            while upcoming is not None and upcoming[0] <= now and upcoming[0] < boundary:
                _, i, j = upcoming
                task = asyncio.get_running_loop().create_task(self._one(client, self.states[i], j))
                self.pending.add(task)
                task.add_done_callback(self.pending.discard)
                self.states[i].fired = j + 1
                upcoming = next(order, None)
            await asyncio.sleep(0)  # the tasks just made send now, and answers are taken in
            if now >= boundary:  # every request of the window went out (late ones too): judge the windows
                windows += 1
                self._log_window(windows)
                if windows >= self.spec.max_windows or self._all_settled(windows) or os.getppid() != self.parent:
                    return windows  # (a parent gone: nobody reads the result, stop loading its server)
                boundary += self.window_ns
                continue
            now = self.now()
            wait = min(upcoming[0] if upcoming is not None else boundary, boundary) - now
            if wait > SPIN_NS:
                await asyncio.sleep((wait - SPIN_NS) / 1e9)  # wakes up to 1 ms late: still before the event
            elif wait > 0:
                time.sleep(wait / 1e9)  # the rest blocking: the loop's timer would be up to 1 ms late

    async def _one(self, client, st: _StreamState, j: int) -> None:
        s, trace = st.stream, st.trace
        trace.send_ns[j] = self.now()
        try:
            await client.infer(s.model_name, st.inputs[j % len(st.inputs)], s.model_version)
            trace.ok[j] = True
        except asyncio.CancelledError:
            st.unanswered += 1
            self._error(st, f"no answer within {self.spec.timeout_s:g} s")
            raise
        except Exception as err:  # noqa: BLE001 - any failure of a request is that request's error, counted
            self._error(st, reason_line(err))
        finally:
            trace.end_ns[j] = self.now()

    @staticmethod
    def _error(st: _StreamState, text: str) -> None:
        st.errors += 1
        if not st.first_error:
            st.first_error = text

    async def _drain(self) -> None:
        """Outstanding requests get up to timeout_s (each has that deadline itself); any left then is cancelled."""
        if self.pending:
            _, left = await asyncio.wait(set(self.pending), timeout=self.spec.timeout_s + 1.0)
            for task in left:
                task.cancel()
            if left:
                await asyncio.wait(left, timeout=5.0)

    def _figures(self, st: _StreamState, windows: int) -> WindowFigures:
        return window_figures(st.trace.head(st.fired), self.window_ns, windows, st.stream.inferences_per_request)

    def _all_settled(self, windows: int) -> bool:
        return all(settled(f.throughput, f.avg_ms, self.spec.stability, f.counts)
                   for f in (self._figures(st, windows) for st in self.states))

    def _log_window(self, windows: int) -> None:
        k = windows - 1
        for st in self.states:
            f = self._figures(st, windows)
            avg, p99 = f.avg_ms[k], f.p99_ms[k]
            log.info(f"window {windows} {st.stream.model_name}: {f.throughput[k]:.1f} infer/sec, avg "
                     f"{'-' if avg is None else f'{avg:.2f}'} ms, p99 {'-' if p99 is None else f'{p99:.2f}'} ms, "
                     f"{st.fired} sent, {st.errors} errors")

    def _result(self, st: _StreamState, windows: int) -> StreamResult:
        trace = st.trace.head(st.fired)
        result = summarise(st.stream, trace, self.spec.window_ms, windows, self.spec.stability, st.errors,
                           st.first_error, st.unanswered)
        if self.spec.trace_dir:
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in st.stream.model_name)
            path = Path(self.spec.trace_dir) / f"{safe}.trace.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"model_name": st.stream.model_name, **trace.to_json()}) + "\n")
            result.trace = str(path)
        return result


def main(argv: Sequence[str] | None = None) -> int:
    """The child: SPEC.json in, OUT.json out ({"results": {model: StreamResult}} or {"error": one line})."""
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)  # the parent's log file
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        log.error(f"usage: python -m {MODULE} SPEC.json OUT.json")
        return 2
    spec_path, out_path = Path(args[0]), Path(args[1])
    started = time.monotonic()
    try:
        spec = DriveSpec.from_dict(json.loads(spec_path.read_text()))
        results = asyncio.run(_Driver(spec).run())
    except UserError as err:
        out_path.write_text(json.dumps({"error": reason_line(err)}) + "\n")
        log.error(f"error: {reason_line(err)}")
        return 2
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out = {"results": {name: r.to_dict() for name, r in results.items()},
           "cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": time.monotonic() - started}
    tmp = out_path.with_name(out_path.name + ".tmp")
    tmp.write_text(json.dumps(out, allow_nan=False) + "\n")
    os.replace(tmp, out_path)  # the parent never reads half a file
    return 0


# ---- the parent -------------------------------------------------------------------------------------------------

def drive(spec: DriveSpec, log_path: Path | None = None) -> dict[str, StreamResult]:
    """Runs the driver in one child process (its output to `log_path`), waits for it, returns per model name.
    A stream the driver cannot run raises DriveError with the child's one line."""
    limit = STARTUP_S + spec.max_windows * spec.window_ms / 1000.0 + 2 * spec.timeout_s + 10.0
    with tempfile.TemporaryDirectory(prefix="multistream-") as tmp:
        spec_path, out_path = Path(tmp) / "spec.json", Path(tmp) / "out.json"
        spec_path.write_text(json.dumps(spec.to_dict()) + "\n")
        log_file = Path(log_path) if log_path is not None else Path(tmp) / "driver.log"
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(log_file, "w") as fh:
            try:
                proc = subprocess.run([sys.executable, "-m", MODULE, str(spec_path), str(out_path)],
                                      stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, timeout=limit,
                                      check=False, env=_child_env())
            except subprocess.TimeoutExpired as err:
                raise DriveError(f"the multistream driver did not finish within {limit:.0f} s"
                                 + (f"; its log: {log_path}" if log_path else "")) from err
        out = json.loads(out_path.read_text()) if out_path.is_file() else {}
        if out.get("error"):
            raise DriveError(out["error"])
        if proc.returncode != 0 or "results" not in out:
            raise DriveError(f"the multistream driver failed (exit {proc.returncode}): {_last_line(log_file)}"
                             + (f"; its log: {log_path}" if log_path else ""))
    return {name: StreamResult.from_dict(r) for name, r in out["results"].items()}


def _child_env() -> dict[str, str]:
    """This process's environment, with the folder this package was imported from first on PYTHONPATH: the child
    runs the same toolkit, installed or not."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    return env


def _last_line(log: Path) -> str:
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    return lines[-1].strip()[:300] if lines else "no output"


__all__ = ["DriveError", "DriveSpec", "Stream", "StreamResult", "Trace", "WindowFigures", "drive",
           "intended_offsets_ns", "main", "reported", "request_arrays", "schedule_seconds", "settled", "summarise",
           "window_figures"]


if __name__ == "__main__":
    sys.exit(main())
