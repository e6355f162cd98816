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

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from ...results.identity import RunIdentity
from ...results.rows import RowSchema, read_csv, to_csv
from ...results.run_folder import RunFolder

FILE_NAME = "openloop.csv"
KEY_COLUMNS = ("config", "distribution", "request_rate", "batch", "options", "trial")
# p50_ms / p99_ms are perf_analyzer's (latency from the actual send); sched_* from the intended send time, late_*
# how late requests went out (ratepoint, perf/analyzer/schedule.py); empty in rows measured before them
SCHEDULE_COLUMNS = ("sched_p50_ms", "sched_p90_ms", "sched_p99_ms", "late_pct", "late_p99_ms", "late_max_ms")
# the server's own view of the point (perf.telemetry over its metrics endpoint; empty where it was not scraped)
SERVER_COLUMNS = ("server_infer_per_s", "server_avg_batch", "server_queue_us", "server_compute_us",
                  "server_pending", "server_cpu_util_pct", "server_cpu_memory_gib", "server_gpu_util_pct",
                  "server_gpu_memory_gib")
# what other processes took of the usable cores during the point's window (perf.neighbours; empty before them)
NEIGHBOUR_COLUMNS = ("others_cores", "others_share", "disturbed", "neighbours_source")
MEASURE_COLUMNS = (
    "offered", "answered", "send_rate", "delayed_pct", "p50_ms", "p99_ms", "avg_ms", "server_queue_ms",
    *SCHEDULE_COLUMNS, "window_throughput", "window_latency_ms", "queue_growing", "client_limited", "stable",
    *SERVER_COLUMNS, *NEIGHBOUR_COLUMNS,
)
PROVENANCE_COLUMNS = ("timestamp", "url", "command", "log", "schedule_seed", "profile_export", "identity")
STORE_COLUMNS = (*KEY_COLUMNS, *MEASURE_COLUMNS, *PROVENANCE_COLUMNS)
_FLOATS = {"request_rate", "offered", "answered", "send_rate", "delayed_pct", "p50_ms", "p99_ms", "avg_ms",
           "server_queue_ms", *SCHEDULE_COLUMNS, *SERVER_COLUMNS, "others_cores", "others_share"}
_INTS = {"batch", "trial"}
_OPTIONAL_INTS = {"schedule_seed"}
_BOOLS = {"queue_growing", "client_limited", "stable", "disturbed"}
_LISTS = {"window_throughput", "window_latency_ms"}
# openloop.csv as results.rows stores it: keyed by RateKey's fields, sorted by (config, trial, request rate)
SCHEMA = RowSchema(
    columns=STORE_COLUMNS, key=KEY_COLUMNS, sort_by=("config", "trial", "request_rate"),
    types={**{c: float for c in _FLOATS}, **{c: int for c in (*_INTS, *_OPTIONAL_INTS)},
           **{c: bool for c in _BOOLS}, **{c: list for c in _LISTS}},
    empty={c: 0 for c in _INTS}, identity_column="identity")


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
        self.folder = RunFolder(run_dir, identity)
        self.identity = identity
        self.table = self.folder.table(file_name, SCHEMA, label=file_name).open(policy)
        self.path = self.table.path

    def get(self, key: RateKey) -> dict[str, Any] | None:
        return self.table.get(key.as_row())

    def put(self, key: RateKey, row: dict[str, Any]) -> None:
        self.table.put({**row, **key.as_row()})

    def rows(self) -> list[dict[str, Any]]:
        return self.table.rows()


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


def rows_to_csv(rows: Iterable[dict[str, Any]]) -> str:
    """openloop.csv's text (rows sorted by config, trial and request rate, as the store writes them)."""
    return to_csv(SCHEMA, SCHEMA.ordered(rows))


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """openloop.csv's rows, typed."""
    return read_csv(SCHEMA, path)
