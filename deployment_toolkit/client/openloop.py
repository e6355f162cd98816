"""An open-loop sender of its own, for checking a plan with a client that is not the planner's (check-plan).

Why a second sender: a plan is judged by a client that shares nothing with the code that made it (the planner drives
its mixes with perf_analyzer or perf/multistream.py). This one is deliberately small:
- each model's arrivals are made up front (`poisson_schedule`: numpy's default_rng(seed).exponential), so a round is
  reproducible from its seed;
- one asyncio task per scheduled request, created at its intended time and never rescheduled when late: a sender
  that fell behind sends its backlog at once, and every latency is counted from the intended send time (answer
  time - intended time), so a slow server cannot slow the clock (no coordinated omission);
- the process's own CPU (user + system, every thread: resource.getrusage) is sampled over the counted window, so the
  caller can void a round whose load generator was the bottleneck.

Transport only (tritonclient's asyncio gRPC client through client/aio.py); what a result means is the caller's.
"""
from __future__ import annotations

import asyncio
import gc
import resource
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Mapping, Sequence

import numpy as np

from ..errors import reason_line

SPIN_NS = 1_500_000  # closer than this to a send the sender sleeps blocking: asyncio's timers round to whole ms
START_LEAD_NS = 30_000_000  # the clock starts this long after set-up, so the first sends are not late already
Send = Callable[[str, int], Awaitable[None]]  # (model, request number) -> the request, answered or raising


def poisson_schedule(rate: float, seconds: float, seed: int | Sequence[int]) -> np.ndarray:
    """Intended send times (ns from the round's start, ascending) of a Poisson process at `rate` requests/s over
    `seconds`: exponential gaps drawn from default_rng(seed), the first arrival one gap after 0."""
    if rate <= 0 or seconds <= 0:
        return np.zeros(0, dtype=np.int64)
    rng = np.random.default_rng(seed)
    expected = rate * seconds
    gaps = rng.exponential(1.0 / rate, size=int(expected + 6 * np.sqrt(expected) + 16))
    times = np.cumsum(gaps)
    while times[-1] < seconds:  # (a draw far beyond 6 sigma: extend it, same generator)
        times = np.concatenate([times, times[-1] + np.cumsum(rng.exponential(1.0 / rate, size=len(times)))])
    return (times[times < seconds] * 1e9).astype(np.int64)


@dataclass
class StreamTrace:
    """One model's requests in a round: when each was meant to go, went, and was answered (ns from the start)."""

    model: str
    intended_ns: np.ndarray
    sent_ns: np.ndarray = field(default=None)  # type: ignore[assignment]  # -1: never sent
    done_ns: np.ndarray = field(default=None)  # type: ignore[assignment]  # -1: no answer (error, or cut off)
    ok: np.ndarray = field(default=None)  # type: ignore[assignment]
    errors: int = 0
    first_error: str = ""

    def __post_init__(self) -> None:
        n = len(self.intended_ns)
        self.intended_ns = np.asarray(self.intended_ns, dtype=np.int64)
        self.sent_ns = np.full(n, -1, np.int64) if self.sent_ns is None else self.sent_ns
        self.done_ns = np.full(n, -1, np.int64) if self.done_ns is None else self.done_ns
        self.ok = np.zeros(n, bool) if self.ok is None else self.ok

    def latency_ms(self) -> np.ndarray:
        """Each request's latency from its intended send time (NaN where it was not answered)."""
        out = (self.done_ns - self.intended_ns) / 1e6
        return np.where(self.ok, out, np.nan)

    def error(self, text: str) -> None:
        self.errors += 1
        self.first_error = self.first_error or text


@dataclass
class RoundTrace:
    """Every stream of one round and the sender's own CPU over its counted window [start_ns, end_ns)."""

    streams: dict[str, StreamTrace]
    start_ns: int  # the counted window: requests meant to go in it are judged (those before warm the server up)
    end_ns: int
    cpu_s: float  # the sender process's CPU time (user + system, all threads) over the counted window
    wall_s: float

    @property
    def cpu_share(self) -> float:
        """The sender's CPU over the window, in cores (1.0: one core busy throughout)."""
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Sender:
    """Fires every scheduled request at its intended time from one event loop (see the module docstring)."""

    def __init__(self, schedules: Mapping[str, np.ndarray], send: Send, start_ns: int, end_ns: int):
        self.traces = {m: StreamTrace(m, t) for m, t in schedules.items()}
        self.send, self.start_ns, self.end_ns = send, start_ns, end_ns
        self.pending: set[asyncio.Task] = set()
        self.t0 = 0
        self.cpu: list[tuple[int, float]] = []  # (clock, process CPU) at the window's start and end

    def now(self) -> int:
        return time.perf_counter_ns() - self.t0

    async def one(self, trace: StreamTrace, j: int) -> None:
        trace.sent_ns[j] = self.now()
        try:
            await self.send(trace.model, j)
            trace.ok[j] = True
        except asyncio.CancelledError:
            trace.error("no answer before the round ended")
            raise
        except Exception as err:  # noqa: BLE001 - a failed request is that request's error, counted
            trace.error(reason_line(err))
        finally:
            trace.done_ns[j] = self.now() if trace.ok[j] else -1

    def _order(self) -> list[tuple[int, str, int]]:
        """Every request of every stream, in time order (ties: the stream listed first)."""
        events = [(int(t), k, m, j) for k, (m, tr) in enumerate(self.traces.items())
                  for j, t in enumerate(tr.intended_ns.tolist())]
        events.sort()
        return [(t, m, j) for t, _, m, j in events]

    async def run(self) -> None:
        order = self._order()
        gc.collect()
        gc.freeze()  # what was built so far is never garbage: fewer collector pauses mid-round
        loop = asyncio.get_running_loop()
        self.t0 = time.perf_counter_ns() + START_LEAD_NS
        marks = [self.start_ns, self.end_ns]  # where the sender's CPU is sampled
        i = 0
        while i < len(order) or len(self.cpu) < len(marks):
            due = [order[i][0]] if i < len(order) else []
            due += [marks[len(self.cpu)]] if len(self.cpu) < len(marks) else []
            wait = min(due) - self.now()
            if wait > SPIN_NS:
                await asyncio.sleep((wait - SPIN_NS) / 1e9)  # answers are taken in meanwhile
                continue
            if wait > 0:
                time.sleep(wait / 1e9)  # the rest blocking: the loop's timer would wake up to 1 ms late
            now = self.now()
            while i < len(order) and order[i][0] <= now:  # due, or overdue: sent now, timed from intended
                _, model, j = order[i]
                task = loop.create_task(self.one(self.traces[model], j))
                self.pending.add(task)
                task.add_done_callback(self.pending.discard)
                i += 1
            if len(self.cpu) < len(marks) and now >= marks[len(self.cpu)]:
                self.cpu.append((now, _cpu_s()))
            await asyncio.sleep(0)  # the tasks just made send now

    async def drain(self, drain_s: float) -> None:
        """Outstanding requests get up to `drain_s` (each has its own deadline too); any left is cancelled."""
        if self.pending:
            _, left = await asyncio.wait(set(self.pending), timeout=drain_s)
            for task in left:
                task.cancel()
            if left:
                await asyncio.wait(left, timeout=5.0)
        gc.unfreeze()


async def drive(schedules: Mapping[str, np.ndarray], send: Send, start_s: float, end_s: float,
                drain_s: float) -> RoundTrace:
    """Send each model's scheduled requests (intended times in ns, from the round's start) through `send` at their
    intended times; the window [start_s, end_s) is the one counted (the sender's CPU is sampled at its ends). Every
    request meant to go before end_s goes, late or not; then outstanding ones get `drain_s`."""
    end_ns = int(end_s * 1e9)
    kept = {m: np.asarray(t, dtype=np.int64)[np.asarray(t) < end_ns] for m, t in schedules.items()}
    sender = _Sender(kept, send, int(start_s * 1e9), end_ns)
    try:
        await sender.run()
    finally:
        await sender.drain(drain_s)
    (t_start, cpu_start), (t_end, cpu_end) = sender.cpu
    return RoundTrace(sender.traces, sender.start_ns, sender.end_ns, cpu_end - cpu_start, (t_end - t_start) / 1e9)


@dataclass(frozen=True)
class Requests:
    """One model's distinct requests (inputs by name, a batch of one each, cycled over its schedule) and the Triton
    datatype of each input."""

    model: str
    arrays: tuple[Mapping[str, np.ndarray], ...]
    datatypes: Mapping[str, str]


async def _with_client(address: str, timeout_s: float, body: Callable) -> object:
    from .aio import AsyncTritonClient

    client = AsyncTritonClient(address, timeout_s)
    try:
        return await body(client)
    finally:
        await client.close()


def run_round(address: str, requests: Sequence[Requests], schedules: Mapping[str, np.ndarray], start_s: float,
              end_s: float, timeout_s: float) -> RoundTrace:
    """One round against the gRPC endpoint `address` (host:port): each model's requests cycled over its schedule,
    every request with a deadline of `timeout_s`."""
    async def body(client) -> RoundTrace:
        built = {r.model: [client.inputs(a, r.datatypes) for a in r.arrays] for r in requests}

        async def send(model: str, j: int) -> None:
            inputs = built[model]
            await client.infer(model, inputs[j % len(inputs)])

        return await drive(schedules, send, start_s, end_s, timeout_s + 1.0)

    return asyncio.run(_with_client(address, timeout_s, body))  # type: ignore[return-value]


def probe(address: str, requests: Sequence[Requests], timeout_s: float) -> dict[str, str]:
    """One request per model, each of its distinct requests in turn, before any load: {model: why it failed} for
    the models whose requests the server refused (empty: every one answered)."""
    async def body(client) -> dict[str, str]:
        failed: dict[str, str] = {}
        for r in requests:
            for arrays in r.arrays:
                try:
                    await client.infer(r.model, client.inputs(arrays, r.datatypes))
                except Exception as err:  # noqa: BLE001 - the refusal is the answer
                    failed[r.model] = reason_line(err)
                    break
        return failed

    return asyncio.run(_with_client(address, timeout_s, body))  # type: ignore[return-value]


__all__ = ["Requests", "RoundTrace", "StreamTrace", "drive", "poisson_schedule", "probe", "run_round"]
