"""The search's checkpoint: every measured point and every refused config, saved at once (atomic JSON).

A rerun of the same command reads it back and measures only what is missing, so an interrupted or
time-limited search resumes where it stopped. A point is keyed by candidate (with a digest of the
artifact it served), concurrency and sample number; a fingerprint of what defines the numbers (model,
perf options, usable cores) guards the file, so a different setup is refused instead of silently mixed.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ..spec import atomic_write_text

POINTS_FILE = "search_points.json"


class StoreMismatch(RuntimeError):
    """The result folder holds a search measured under other conditions."""


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


class SearchStore:
    """`<result_dir>/search_points.json`: {"fingerprint", "points": {key: point}, "failures": {cand: {...}}}."""

    def __init__(self, result_dir: str | Path, fingerprint: dict[str, Any]):
        self.path = Path(result_dir) / POINTS_FILE
        self.fingerprint = fingerprint
        self.points: dict[str, Point] = {}
        self.failures: dict[str, dict[str, str]] = {}
        self._loaded: set[str] = set()
        self.reused: set[str] = set()

    def open(self, fresh: bool = False) -> "SearchStore":
        if self.path.exists() and not fresh:
            data = json.loads(self.path.read_text())
            stored = data.get("fingerprint", {})
            if stored != self.fingerprint:
                keys = sorted(set(stored) | set(self.fingerprint))
                diffs = [f"  {k}: stored {stored.get(k)!r}, now {self.fingerprint.get(k)!r}"
                         for k in keys if stored.get(k) != self.fingerprint.get(k)]
                raise StoreMismatch(
                    f"{self.path} holds a search measured under other conditions:\n" + "\n".join(diffs)
                    + "\nUse another --result-path, or pass --fresh to discard the stored points.")
            self.points = {k: Point.from_dict(v) for k, v in data.get("points", {}).items()}
            self.failures = dict(data.get("failures", {}))
            self._loaded = set(self.points) | {f"fail:{k}" for k in self.failures}
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
        self.points[point.key] = point
        self._write()

    def samples(self, candidate: str, concurrency: int) -> list[Point]:
        found = [p for p in self.points.values() if p.candidate == candidate and p.concurrency == concurrency]
        return sorted(found, key=lambda p: p.sample)

    # ---- refused / failed candidates ----
    def failure(self, candidate: str) -> dict[str, str] | None:
        found = self.failures.get(candidate)
        if found is not None and f"fail:{candidate}" in self._loaded:
            self.reused.add(f"fail:{candidate}")
        return found

    def put_failure(self, candidate: str, kind: str, reason: str) -> None:
        self.failures[candidate] = {"kind": kind, "reason": reason}
        self._write()

    @property
    def reused_points(self) -> int:
        return sum(1 for k in self.reused if not k.startswith("fail:"))

    @property
    def reused_failures(self) -> int:
        return sum(1 for k in self.reused if k.startswith("fail:"))

    def _write(self) -> None:
        doc = {"fingerprint": self.fingerprint,
               "points": {k: p.to_dict() for k, p in sorted(self.points.items())},
               "failures": self.failures}
        atomic_write_text(self.path, json.dumps(doc, indent=1) + "\n")
