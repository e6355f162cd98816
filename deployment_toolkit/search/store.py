"""The search's checkpoint: every measured point and every refused config, saved at once (atomic JSON).

A rerun of the same command reads it back and measures only what is missing, so an interrupted or
time-limited search resumes where it stopped. A point is keyed by candidate (with a digest of the
artifact it served), concurrency and sample number, and carries when it was measured and under which run
identity (results.identity: host, server, perf options, artifacts, input data, toolkit). A checkpoint of another
identity is never reused: it is moved aside (results.ledger), or refused with --resume.

The checkpoint also keeps the answers the search's clock gave (clock.SearchClock), with the settings they were
given under and whether the search ran to its end: a rerun under the same settings is given the same answers, so it
takes the same decisions and measures nothing that is stored (see clock.py); `search_complete` says whether a
result folder holds a finished search (what a fanned-out search left, deployment.fanout).

A refused or failed config is remembered with its cause: the config's own (the server refused it, it does not fit)
is replayed by a rerun, one that came from the environment (the server died or was killed, a port, the disk) is
measured again, since the next run may be on a healthy host; its points measured before the failure stay kept.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Callable, Mapping

from ..results.identity import RunIdentity
from ..results.ledger import IdentityMismatch, now_utc
from ..results.run_folder import RunFolder
from ..spec import atomic_write_text

POINTS_FILE = "search_points.json"
RUN_JSON = "run.json"  # results.run_folder's record, written once a search's outputs are
ENVIRONMENT, CONFIG = "environment", "config"  # where a stored failure came from
# what the host did to a config, not the config itself: the server died or was killed (from outside, by a restart),
# a lost connection, a port, the disk. Memory is left out on purpose: a config that does not fit is its own failure.
_ENVIRONMENT = re.compile(r"server died|was killed|killed by signal|lost the connection|connection (refused|reset)|"
                          r"address already in use|\bports?\b|no space left|disk quota|read-only file system|"
                          r"\bdisk\b|too many open files", re.I)


def failure_cause(reason: str) -> str:
    """ENVIRONMENT when a failure's recorded reason names the host (the server died, a port, the disk), else CONFIG:
    decided from the text the search records ("failed twice: the server died at concurrency 4: ..."), so a
    checkpoint written before causes were stored is read the same way."""
    return ENVIRONMENT if _ENVIRONMENT.search(reason) else CONFIG


class StoreMismatch(IdentityMismatch):
    """--resume, but the result folder holds a search measured under another identity."""


@dataclass
class Point:
    """One perf_analyzer measurement of one candidate at one concurrency (times in ms)."""

    candidate: str
    concurrency: int
    sample: int
    throughput: float
    p99_ms: float
    p50_ms: float = math.nan
    avg_ms: float = math.nan
    queue_ms: float = math.nan
    compute_ms: float = math.nan
    stable: bool = True
    note: str = ""
    seconds: float = 0.0
    # the server's own view (its metrics endpoint, scraped during the point; NaN where it was not reachable):
    server_throughput: float = math.nan  # inferences/s from nv_inference_count
    server_queue_ms: float = math.nan  # average queue time per request
    server_compute_ms: float = math.nan  # average compute (infer) time per request
    host_memory_bytes: float = math.nan  # peak nv_cpu_memory_used_bytes (the whole host's used memory)
    gpu_memory_bytes: float = math.nan  # peak nv_gpu_memory_used_bytes (summed over GPUs), where there is a GPU
    measured_at: str = ""  # UTC, stamped by the store
    identity: str = ""  # the run identity's id, resolved by run.json

    @property
    def key(self) -> str:
        return point_key(self.candidate, self.concurrency, self.sample)

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Point":
        names = {f.name for f in fields(cls)}
        return cls(**{k: (math.nan if v is None else v) for k, v in d.items() if k in names})


def point_key(candidate: str, concurrency: int, sample: int) -> str:
    return f"{candidate}|c{concurrency}|s{sample}"


def as_identity(identity: RunIdentity | Mapping[str, Any]) -> RunIdentity:
    """A plain mapping (tests, callers without a server) becomes an identity whose fields are all in `extra`."""
    if isinstance(identity, RunIdentity):
        return identity
    return RunIdentity(host={}, server_version=None, model_config=None, artifact_digest=None, perf_options={},
                       input_data="", toolkit_version="", extra=dict(identity))


class SearchStore:
    """`<result_dir>/search_points.json`: {"identity", "points": {key: point}, "failures": {cand: {...}}}.

    One JSON document, not a row CSV: a point and a refused candidate are different records, and the checkpoint's
    identity is one for all of them. Its folder, identity and reconciling are the run folder's (results.run_folder).
    """

    def __init__(self, result_dir: str | Path, identity: RunIdentity | Mapping[str, Any]):
        self.folder = RunFolder(result_dir, as_identity(identity))
        self.result_dir = self.folder.path
        self.path = self.folder.file(POINTS_FILE)
        self.identity = self.folder.identity
        self.points: dict[str, Point] = {}
        self.failures: dict[str, dict[str, str]] = {}
        self._loaded: set[str] = set()
        self.reused: set[str] = set()
        self.clock_log: dict[str, Any] | None = None  # {"settings", "answers", "complete"}, as stored
        self._clock: Any = None  # the clock of the search running now (attach_clock)
        self._clock_settings = ""
        self._clock_complete = False

    def open(self, fresh: bool = False, policy: str = "auto") -> "SearchStore":
        """Load the checkpoint when it was measured under this identity; else set it aside (or, with policy
        "resume", refuse). `fresh` sets any checkpoint aside."""
        policy = "fresh" if fresh else policy
        if self.path.exists():
            data = json.loads(self.path.read_text())
            stored_id = data.get("identity_id") or ""
            rows = [{"identity": stored_id}]  # the checkpoint is one unit: all its points share one identity
            try:
                kept = self.folder.reconcile("search", rows, policy, [self.path], stored=data.get("identity"))
            except IdentityMismatch as err:
                raise StoreMismatch(str(err)) from None
            if kept:
                self.points = {k: Point.from_dict(v) for k, v in data.get("points", {}).items()}
                self.failures = dict(data.get("failures", {}))
                self._loaded = set(self.points) | {f"fail:{k}" for k in self.failures}
                self.clock_log = data.get("clock")
        self.folder.register()
        self._write()
        return self

    # ---- points ----
    def get(self, candidate: str, concurrency: int, sample: int) -> Point | None:
        key = point_key(candidate, concurrency, sample)
        point = self.points.get(key)
        if point is not None and key in self._loaded:
            self.reused.add(key)
        return point

    def put(self, point: Point) -> None:
        point.measured_at = point.measured_at or now_utc()
        point.identity = point.identity or self.identity.id
        self.points[point.key] = point
        self._write()

    def samples(self, candidate: str, concurrency: int) -> list[Point]:
        """The samples of a level the search has had so far: measured in this run or read back through `get`. A
        stored sample it has not asked for yet is left out: a rerun judging a level by a noise sample the first run
        took only later ranked another level best, took its noise there and measured again (test_search_rerun)."""
        found = [p for key, p in self.points.items() if p.candidate == candidate and p.concurrency == concurrency
                 and (key not in self._loaded or key in self.reused)]
        return sorted(found, key=lambda p: p.sample)

    # ---- refused / failed candidates ----
    def failure(self, candidate: str, retrying: Callable[[str], None] | None = None) -> dict[str, str] | None:
        """The stored failure a run replays. One from an earlier run whose cause was the environment is dropped
        instead (the config is measured again, its kept points reused), said in one line through `retrying`."""
        found = self.failures.get(candidate)
        if found is None or f"fail:{candidate}" not in self._loaded:
            return found
        cause = found.get("cause") or failure_cause(found.get("reason", ""))
        if cause == ENVIRONMENT:
            del self.failures[candidate]
            self._loaded.discard(f"fail:{candidate}")
            self._write()
            if retrying is not None:
                retrying(f"measured again: its failure in an earlier run came from the environment, not the config "
                         f"({found.get('reason', '')})")
            return None
        self.reused.add(f"fail:{candidate}")
        return found

    def put_failure(self, candidate: str, kind: str, reason: str) -> None:
        self.failures[candidate] = {"kind": kind, "reason": reason, "cause": failure_cause(reason)}
        self._write()

    # ---- the clock's answers ----
    def clock_replay(self, settings: str) -> list[list] | None:
        """The stored answers of a search run under `settings` (clock.settings_key), None when there are none or
        they were given under other settings."""
        log = self.clock_log
        # compared as values, not text: 200 from Python and 200.0 from a flag are the same budget
        if not log or json.loads(log.get("settings") or "null") != json.loads(settings):
            return None
        return [list(a) for a in log.get("answers", [])]

    def attach_clock(self, clock: Any, settings: str) -> None:
        """Keep `clock`'s answers with every save from now on (so an interrupted search keeps what it decided)."""
        self._clock, self._clock_settings, self._clock_complete = clock, settings, False

    def save_clock(self, complete: bool = False) -> None:
        """Save the attached clock's answers now; `complete`: the search ran to its end."""
        if self._clock is not None:
            self._clock_complete = complete
            self._write()

    @property
    def reused_points(self) -> int:
        return sum(1 for k in self.reused if not k.startswith("fail:"))

    @property
    def reused_failures(self) -> int:
        return sum(1 for k in self.reused if k.startswith("fail:"))

    def _write(self) -> None:
        if self._clock is not None:
            self.clock_log = {"settings": self._clock_settings, "answers": list(self._clock.answers),
                              "complete": self._clock_complete}
        doc = {"identity_id": self.identity.id, "identity": self.identity.to_dict(),
               "points": {k: p.to_dict() for k, p in sorted(self.points.items())},
               "failures": self.failures}
        if self.clock_log is not None:
            doc["clock"] = self.clock_log
        atomic_write_text(self.path, json.dumps(doc, indent=1) + "\n")


def _checkpoint_shape(doc: Any) -> str:
    """What is wrong with a checkpoint's shape ("" when nothing): what `SearchStore.open` and the gathering read
    from it (a hand-edited `[]`, `null` or {"clock": [true]} would be an AttributeError further on)."""
    if not isinstance(doc, dict):
        return f"a JSON object expected, got {type(doc).__name__ if doc is not None else 'null'}"
    for key in ("points", "failures"):
        value = doc.get(key)
        if value is not None and not (isinstance(value, dict) and all(isinstance(v, dict) for v in value.values())):
            return f"its {key!r} must be an object of objects, got {json.dumps(value)[:40]}"
    clock = doc.get("clock")
    if clock is not None and not isinstance(clock, dict):
        return f"its 'clock' must be an object, got {json.dumps(clock)[:40]}"
    clock = clock or {}
    if not isinstance(clock.get("answers", []), list) or not isinstance(clock.get("complete", False), bool) \
            or not isinstance(clock.get("settings", ""), str):
        return "its 'clock' must hold settings (text), answers (a list) and complete (true/false)"
    return ""


def _read_object(path: Path) -> tuple[Any, str]:
    """A JSON file's document, or why it cannot be read."""
    try:
        return json.loads(path.read_text()), ""
    except (OSError, ValueError) as err:
        return None, f"unreadable ({err})"


def search_complete(result_dir: str | Path) -> tuple[bool, str]:
    """(True, "") when `result_dir` holds a search that ran to its end and wrote its outputs; else (False, why),
    one short clause. Read from the files alone (no identity: the folder may come from another, identical host). A
    record of the wrong shape (hand-edited) is named with what is wrong and what to do: its search cannot resume."""
    folder = Path(result_dir)
    path = folder / POINTS_FILE
    if not path.exists():
        return False, "never started" if not folder.exists() else f"no {POINTS_FILE}"
    doc, unreadable = _read_object(path)
    if unreadable:
        return False, f"{POINTS_FILE} {unreadable}"
    if shape := _checkpoint_shape(doc):
        return False, f"{path} is not a search checkpoint ({shape}; edited by hand?): delete it, then rerun its index"
    if not (doc.get("clock") or {}).get("complete"):
        return False, "interrupted (its checkpoint is kept: a rerun resumes it)"
    run, unreadable = _read_object(folder / RUN_JSON)
    config = run.get("config") if isinstance(run, dict) else None
    if not unreadable and not isinstance(run, dict) or config is not None and not isinstance(config, dict):
        return False, (f"{folder / RUN_JSON} is not a run record (a JSON object with a 'config' object; edited by "
                       "hand?): delete it, then rerun its index")
    if (config or {}).get("kind") != "search":
        return False, "measured, but its outputs were not written (a rerun writes them without measuring)"
    return True, ""
