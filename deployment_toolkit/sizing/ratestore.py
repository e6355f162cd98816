"""The open-loop points of a run folder (`<run_dir>/openloop.csv`): measured once, reused on every rerun.

Each row is one perf_analyzer run at one offered request rate. Its identity is explicit and in the row itself:
(config, distribution, request rate, batch, perf options with how the arrivals are driven (ratepoint.point_key),
trial); a rerun that asks for the same key gets the stored row instead of measuring again, so an interrupted
capacity search resumes where it stopped. Rows carry their provenance (UTC timestamp, the perf_analyzer command,
its log, the schedule's seed and profile export). The file is rewritten through a temp file
and a rename after every point, so it never holds half a row.

When the store is opened against a live server it also carries the run identity (results.identity: host, server
version, the config the server loaded, perf options, input data, toolkit): rows measured under another identity
are moved aside (results.ledger), never replayed, and every new row records the identity's id. Replaying without a
server (planning from stored points) reads the rows as they are; the report shows which identity measured them.
"""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from ..results.identity import RunIdentity
from ..results.ledger import ensure_registered, reconcile
from ..spec import atomic_write_text

FILE_NAME = "openloop.csv"
KEY_COLUMNS = ("config", "distribution", "request_rate", "batch", "options", "trial")
# p50_ms / p99_ms are perf_analyzer's (latency from the actual send); sched_* from the intended send time, late_*
# how late requests went out (ratepoint, perf/analyzer/schedule.py); empty in rows measured before them
SCHEDULE_COLUMNS = ("sched_p50_ms", "sched_p90_ms", "sched_p99_ms", "late_pct", "late_p99_ms", "late_max_ms")
# the server's own view of the point (perf.telemetry over its metrics endpoint; empty where it was not scraped)
SERVER_COLUMNS = ("server_infer_per_s", "server_avg_batch", "server_queue_us", "server_compute_us",
                  "server_pending", "server_cpu_util_pct", "server_cpu_memory_gib", "server_gpu_util_pct",
                  "server_gpu_memory_gib")
MEASURE_COLUMNS = (
    "offered", "answered", "send_rate", "delayed_pct", "p50_ms", "p99_ms", "avg_ms", "server_queue_ms",
    *SCHEDULE_COLUMNS, "window_throughput", "window_latency_ms", "queue_growing", "client_limited", "stable",
    *SERVER_COLUMNS,
)
PROVENANCE_COLUMNS = ("timestamp", "url", "command", "log", "schedule_seed", "profile_export", "identity")
STORE_COLUMNS = (*KEY_COLUMNS, *MEASURE_COLUMNS, *PROVENANCE_COLUMNS)
_FLOATS = {"request_rate", "offered", "answered", "send_rate", "delayed_pct", "p50_ms", "p99_ms", "avg_ms",
           "server_queue_ms", *SCHEDULE_COLUMNS, *SERVER_COLUMNS}
_INTS = {"batch", "trial"}
_OPTIONAL_INTS = {"schedule_seed"}
_BOOLS = {"queue_growing", "client_limited", "stable"}
_LISTS = {"window_throughput", "window_latency_ms"}


@dataclass(frozen=True)
class RateKey:
    """What makes two open-loop points the same measurement (the server URL is not: ports change)."""

    config: str  # the served configuration, e.g. "resnet18_i2/online" or "fleet-2x/resnet18_i1"
    distribution: str  # poisson | constant
    request_rate: float  # requests/s offered (inferences/s = x batch)
    batch: int
    options: str  # perf options that change the numbers, as canonical JSON
    trial: int = 1  # repeated capacity searches are separate measurements

    def as_row(self) -> dict[str, Any]:
        return {"config": self.config, "distribution": self.distribution, "request_rate": self.request_rate,
                "batch": self.batch, "options": self.options, "trial": self.trial}

    @staticmethod
    def from_row(row: dict[str, Any]) -> "RateKey":
        return RateKey(str(row["config"]), str(row["distribution"]), float(row["request_rate"]), int(row["batch"]),
                       str(row["options"]), int(row["trial"]))


def options_key(fields: dict[str, Any]) -> str:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


class RateStore:
    """`<run_dir>/openloop.csv`: get(key) -> the stored row or None; put(key, row) saves at once."""

    def __init__(self, run_dir: str | Path, file_name: str = FILE_NAME, identity: RunIdentity | None = None,
                 policy: str = "auto"):
        self.path = Path(run_dir) / file_name
        self.identity = identity
        self._rows: dict[RateKey, dict[str, Any]] = {}
        rows = read_rows(self.path) if self.path.exists() else []
        if identity is not None:
            rows = reconcile(self.path.parent, file_name, rows, identity, policy, [self.path])
        for row in rows:
            self._rows[RateKey.from_row(row)] = row

    def get(self, key: RateKey) -> dict[str, Any] | None:
        return self._rows.get(key)

    def put(self, key: RateKey, row: dict[str, Any]) -> None:
        self._rows[key] = {**{c: row.get(c) for c in STORE_COLUMNS}, **key.as_row()}
        if self.identity is not None:
            ensure_registered(self.path.parent, self.identity)
            self._rows[key]["identity"] = self.identity.id
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, rows_to_csv(self._rows.values()))

    def rows(self) -> list[dict[str, Any]]:
        return list(self._rows.values())


class FreshStore:
    """A RateStore that records every point but never replays one: confirmations, bursts and fleet checks are
    measured each time (their CPU seconds and verdicts belong to this run)."""

    def __init__(self, store: RateStore):
        self.store = store

    def get(self, key: RateKey) -> dict[str, Any] | None:
        return None

    def put(self, key: RateKey, row: dict[str, Any]) -> None:
        self.store.put(key, row)

    @property
    def path(self) -> Path:
        return self.store.path


def _fmt(col: str, v: Any) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if col in _LISTS:
        return ";".join(f"{x:.6g}" for x in v)
    if isinstance(v, float):
        return f"{v:.6g}"
    return v


def rows_to_csv(rows: Iterable[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(STORE_COLUMNS), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for row in sorted(rows, key=lambda r: (str(r["config"]), int(r["trial"]), float(r["request_rate"]))):
        w.writerow({c: _fmt(c, row.get(c)) for c in STORE_COLUMNS})
    return buf.getvalue()


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    out = []
    with open(path, newline="") as fh:
        for raw in csv.DictReader(fh):
            if not raw.get("config") or raw.get("config") == "config":
                continue
            row: dict[str, Any] = {}
            for c in STORE_COLUMNS:
                v = raw.get(c, "") or ""
                if c in _FLOATS:
                    row[c] = float(v) if v else math.nan
                elif c in _INTS:
                    row[c] = int(float(v)) if v else 0
                elif c in _OPTIONAL_INTS:
                    row[c] = int(v) if v else None
                elif c in _BOOLS:
                    row[c] = v.strip().lower() in ("true", "1", "yes")
                elif c in _LISTS:
                    row[c] = [float(x) for x in v.split(";") if x]
                else:
                    row[c] = v
            out.append(row)
    return out
