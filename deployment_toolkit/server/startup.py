"""Waiting for a tritonserver that is starting: which models it is loading and for how long, said every few
seconds, and past the time limit whether it was still loading (give it longer) or a model failed (it will not help).

A server loads the models of its start before it opens HTTP and gRPC, so while they load nothing answers: what
it is doing comes from its log (`loading: NAME:VERSION`, `successfully loaded 'NAME'`, `failed to load 'NAME'`),
read as it grows; once it answers, its repository index says the rest (a model UNAVAILABLE, and why).
The one time limit of a start is `DEFAULT_START_TIMEOUT_S`, given longer with `--server-timeout` (`add_server_timeout`).
"""
from __future__ import annotations

import argparse
import logging
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import UserInputError

log = logging.getLogger(__name__)

DEFAULT_START_TIMEOUT_S = 120.0
TIMEOUT_FLAG = "--server-timeout"
PROGRESS_EVERY_S = 5.0  # a start that takes longer says what it is doing this often (a fast one says nothing)
_LOADING = re.compile(r"\bloading: (.+):(\d+)\"?\s*$")
_LOADED = re.compile(r"successfully loaded '([^']+)'")
_FAILED = re.compile(r"failed to load '([^']+)'")


def check_start_timeout(value: float | str, name: str = TIMEOUT_FLAG) -> float:
    """`value` as a start's time limit: seconds, finite and > 0 (a UserInputError naming `name` otherwise)."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise UserInputError(f"{name} {value!r}: the server's start time limit is in seconds, a finite number > 0 "
                             f"(e.g. 600 for a model that loads for minutes)")
    return seconds


def start_timeout_type(text: str) -> float:
    """argparse `type` of --server-timeout (a bad value: argparse's one-line usage error, exit 2)."""
    try:
        return check_start_timeout(text)
    except UserInputError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix(f"{TIMEOUT_FLAG} ")) from None


def add_server_timeout(parser: Any) -> None:
    """--server-timeout SECONDS on a command (or an argument group) that starts the embedded server."""
    parser.add_argument(TIMEOUT_FLAG, dest="server_timeout", type=start_timeout_type, default=DEFAULT_START_TIMEOUT_S,
                        metavar="SECONDS", help="how long tritonserver may take to start and load its models before "
                                                "the command gives up (default %(default)g; a model that loads for "
                                                "minutes needs more)")


@dataclass
class LogFollower:
    """The lines appended to a log since `offset` (a reused --log-dir holds earlier runs), a partial last line kept."""

    path: Path | None
    offset: int = 0
    _partial: str = ""

    def new_lines(self) -> list[str]:
        if self.path is None:
            return []
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        self.offset += len(data)
        lines = (self._partial + data.decode(errors="replace")).split("\n")
        self._partial = lines.pop()
        return lines


@dataclass
class ModelLoads:
    """What a start did with its models: when each began loading (our clock, from the log), which loaded, which
    failed and why (the log's line, or the repository index's reason once the server answers)."""

    since: dict[str, float] = field(default_factory=dict)
    loaded: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)

    def read(self, lines: list[str], now: float) -> None:
        for line in lines:
            if m := _LOADING.search(line):
                self.since.setdefault(m.group(1), now)
            elif m := _LOADED.search(line):
                self.loaded.add(m.group(1))
            elif m := _FAILED.search(line):
                self.failed.setdefault(m.group(1), line.strip())

    def read_index(self, entries: list[dict]) -> None:
        for entry in entries:
            name, state, reason = str(entry.get("name", "")), entry.get("state", ""), entry.get("reason", "")
            if state == "READY":
                self.loaded.add(name)
            elif state == "UNAVAILABLE" and reason and reason != "unloaded":
                self.failed.setdefault(name, f"{name}: {reason}")

    def loading(self, now: float) -> dict[str, float]:
        """Models still loading -> seconds since they began."""
        return {n: now - t for n, t in self.since.items() if n not in self.loaded and n not in self.failed}

    def describe(self, now: float) -> str:
        """One clause: 'loading a for 12 s, b for 3 s; loaded c; failed d' (empty when nothing is known yet)."""
        parts = []
        if busy := self.loading(now):
            parts.append("loading " + ", ".join(f"{n} for {s:.0f} s" for n, s in sorted(busy.items())))
        if self.loaded:
            parts.append("loaded " + ", ".join(sorted(self.loaded)))
        if self.failed:
            parts.append("failed " + ", ".join(sorted(self.failed)))
        return "; ".join(parts)


class StartWatch:
    """One start's clock, its log and its progress lines (stderr, every `every_s`; `say=None`: quiet)."""

    def __init__(self, log_path: Path | None, timeout_s: float, say: Callable[[str], None] | None = None,
                 offset: int = 0, every_s: float = PROGRESS_EVERY_S, clock: Callable[[], float] = time.monotonic):
        """`offset`: where this start's part of the log begins."""
        self.timeout_s, self.say, self.every_s, self.clock = timeout_s, say, every_s, clock
        self.started = clock()
        self.log = LogFollower(log_path, offset)
        self.models = ModelLoads()
        self._next_say = self.started + every_s

    def elapsed(self) -> float:
        return self.clock() - self.started

    def expired(self) -> bool:
        return self.elapsed() > self.timeout_s

    def poll(self, index: Callable[[], list[dict] | None] | None = None) -> None:
        """Read what the log added; when a progress line is due, ask `index` (None: the server does not answer)
        for the repository index and say where the start is."""
        now = self.clock()
        self.models.read(self.log.new_lines(), now)
        if now < self._next_say:
            return
        self._next_say = now + self.every_s
        self.refresh_index(index)
        if self.say is not None:
            doing = self.models.describe(now) or "no model loading yet"
            self.say(f"tritonserver starting: {now - self.started:.0f} s of {self.timeout_s:g} s "
                     f"({TIMEOUT_FLAG}); {doing}")

    def refresh_index(self, index: Callable[[], list[dict] | None] | None) -> None:
        entries = index() if index is not None else None
        if entries is not None:
            self.models.read_index(entries)

    def timeout_message(self, log_path: Path | None, why: list[str], tail: str) -> str:
        """Past the limit: still loading (and for how long), a model that failed (with the log's reasons), or
        neither (the last log lines); each names the flag that gives a start longer."""
        self.models.read(self.log.new_lines(), self.clock())
        return timeout_message(self.timeout_s, self.models, self.clock(), log_path, why, tail)


def timeout_message(timeout_s: float, models: ModelLoads, now: float, log_path: Path | None, why: list[str],
                    tail: str) -> str:
    head = f"tritonserver did not become ready within {timeout_s:g} s"
    longer = f"give it longer with {TIMEOUT_FLAG} SECONDS"
    if models.failed:
        reasons = "\n".join(why) or "\n".join(models.failed.values())
        return (f"{head}: model(s) {', '.join(sorted(models.failed))} failed to load, so waiting longer will not "
                f"help ({longer} once the cause is fixed). From the server log ({log_path}):\n{reasons}")
    if busy := models.loading(now):
        names = ", ".join(f"{n} (for {s:.0f} s)" for n, s in sorted(busy.items()))
        return (f"{head}: still loading {names}, nothing failed: {longer} (e.g. {TIMEOUT_FLAG} "
                f"{suggest(timeout_s)}). Log: {log_path}")
    return (f"{head} ({models.describe(now) or 'no model was loading'}): {longer}, or see why it is stuck in its "
            f"log ({log_path}); its last lines:\n{tail}")


def suggest(timeout_s: float) -> int:
    """A longer limit worth trying: twice this one, rounded up to a minute."""
    return int(math.ceil(2 * timeout_s / 60.0) * 60)


def stderr_line(text: str) -> None:
    """Progress is logged as a warning, which a command shows on stderr: stdout carries what a command answers
    (serve's 'ready' line, a table)."""
    log.warning(text)
