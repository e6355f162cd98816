"""Markdown tables in the layout of NVIDIA's DLE Triton READMEs ("Full tabular data", "Parameter Name |
Parameter Value"), built from a run folder's CSVs (already in ms) and run.json."""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..results.schema import MEASURE_COLUMNS, RESIDUAL, THROUGHPUT
from ..results.store import read_store_csv
from ..results.ledger import row_identities
from ..results.runinfo import commit_text
from ..tables import markdown_table
from ..errors import UserError

ONLINE_COLUMNS = ("Concurrent client requests", *MEASURE_COLUMNS)
OFFLINE_COLUMNS = ("Precision", "Client Batch Size", THROUGHPUT, "P90 Latency", "P95 Latency", "P99 Latency", "Avg Latency")
KINDS = ("offline", "online")
UNSTABLE_NOTE = (
    "(unstable): perf_analyzer never reached a stable measurement for this point, even with longer windows; "
    "its numbers come from a run with the stability check off. Treat them as indicative."
)
CLAMPED_NOTE = (
    "(clamped): the residual Network+server Send/recv came out negative (the parts add up to more than the "
    "client latency, usually a too-short window) and is shown as 0."
)


def key_column(kind: str) -> str:
    return "Concurrent client requests" if kind == "online" else "Client Batch Size"


def sort_rows(kind: str, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """perf_analyzer orders by throughput; tables go by load level."""
    return sorted(rows, key=lambda r: (r.get(key_column(kind)) or 0, r.get("Client Batch Size") or 0,
                                       r.get("Concurrent client requests") or 0))


class ResultsFileError(UserError, ValueError):
    """A results file that cannot be what a sweep wrote (edited by hand, truncated): exit 2, naming it."""


_LATENCY_COLUMNS = tuple(c for c in MEASURE_COLUMNS if c != THROUGHPUT)


def load_rows(run_dir: str | Path, kind: str) -> list[dict[str, Any]]:
    """The sweep's rows, checked: a CSV that is not a sweep's table (wrong header, text where numbers go,
    negative times, a load level below 1) is refused with one line naming the file and the first problem,
    instead of a traceback or a report of nonsense."""
    path = Path(run_dir) / f"{kind}.csv"
    if not path.exists():
        return []
    fix = "restore it from the run or rerun the sweep into a new --result-path"
    try:
        with open(path, newline="") as fh:
            header = next(csv.reader(fh), [])
        missing = [c for c in ("Client Batch Size", "Concurrent client requests", THROUGHPUT) if c not in header]
        if missing:
            raise ResultsFileError(f"{path} is not a {kind} results table (no column {missing[0]!r}): {fix}")
        rows = read_store_csv(path)
    except ResultsFileError:
        raise
    except (ValueError, csv.Error, UnicodeDecodeError) as err:
        raise ResultsFileError(f"{path} holds a value that is not a number ({err}): {fix}") from None
    except OSError as err:
        raise ResultsFileError(f"cannot read {path} ({err.strerror or err})") from None
    for n, row in enumerate(rows, start=2):
        for col in ("Client Batch Size", "Concurrent client requests"):
            if row[col] is None or row[col] < 1:
                raise ResultsFileError(f"{path} line {n}: {col} is {row[col]!r}, not a load level >= 1: {fix}")
        for col in (THROUGHPUT, *_LATENCY_COLUMNS):
            value = row[col]
            if not math.isnan(value) and (value < 0 or math.isinf(value)):
                raise ResultsFileError(f"{path} line {n}: {col} is {value!r}; measured times and rates are "
                                       f"finite and >= 0: {fix}")
    return sort_rows(kind, rows)


def fmt(value: Any, column: str = "") -> str:
    """Like the seed tables: throughput to 0.1, times to 0.001 ms, no trailing zeros, n/a for missing."""
    if value is None or value == "":
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            return "n/a"
        if isinstance(value, int):
            return str(value)
        digits = 1 if column == THROUGHPUT else 3
        text = f"{value:.{digits}f}".rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    return str(value)


def full_table(kind: str, rows: Iterable[dict[str, Any]]) -> str:
    """The seed's "Full tabular data" table for an online (per concurrency) or offline (per batch) sweep.

    Unstable points keep their row, marked "(unstable)" in the first column; a clamped residual reads
    "0 (clamped)"; a footnote explains each mark that occurs.
    """
    rows = sort_rows(kind, rows)
    columns = ONLINE_COLUMNS if kind == "online" else OFFLINE_COLUMNS
    key = key_column(kind)
    body = []
    for r in rows:
        cells = []
        for col in columns:
            text = fmt(r.get(col), col)
            if col == key and r.get("stable") is False:
                text += " (unstable)"
            if col == RESIDUAL and r.get("residual_clamped"):
                text += " (clamped)"
            cells.append(text)
        body.append(cells)
    align = ["l" if c == "Precision" else "r" for c in columns]
    table = markdown_table(columns, body, align)
    notes = []
    if any(r.get("stable") is False for r in rows):
        notes.append(UNSTABLE_NOTE)
    if kind == "online" and any(r.get("residual_clamped") for r in rows):
        notes.append(CLAMPED_NOTE)
    if not rows:
        notes.append("(no points measured yet)")
    return table + ("\n\n" + "\n\n".join(notes) if notes else "")


def config_rows(meta: dict[str, Any], kind: str | None = None) -> list[tuple[str, str]]:
    """Parameter Name / Parameter Value pairs from run.json (model config as the server reported it)."""
    cfg = meta.get("config", {})
    mc = cfg.get("model_config") or {}
    dyn = mc.get("dynamic_batching")
    groups = mc.get("instance_group") or []
    accel = (mc.get("optimization") or {}).get("execution_accelerators") or {}
    accel_names = [a.get("name", "") for side in ("gpu_execution_accelerator", "cpu_execution_accelerator")
                   for a in accel.get(side, []) or []]
    kinds = sorted({str(g.get("kind", "KIND_AUTO")).replace("KIND_", "") for g in groups}) or ["AUTO"]
    rows = [
        ("Model Name", cfg.get("model_name", "n/a")),
        ("Model Format", _model_format(cfg, mc)),
        ("Backend Accelerator", ", ".join(a for a in accel_names if a) or "none"),
        ("Precision", cfg.get("precision", "n/a")),
        ("Max Batch Size", str(mc.get("max_batch_size", "n/a"))),
        ("Number of model instances", str(cfg.get("triton_instances", "n/a"))),
        ("Instance Kind", ", ".join(kinds)),
        ("Dynamic Batching", "enabled" if dyn is not None else "disabled"),
    ]
    if dyn is not None:
        rows += [
            ("Triton Max Queue Delay", f"{int(dyn.get('max_queue_delay_microseconds', 0) or 0)} us"),
            ("Triton Preferred Batch Sizes", " ".join(str(b) for b in dyn.get("preferred_batch_size", []) or []) or "n/a"),
        ]
    sweeps = cfg.get("sweeps", {})
    for name in ([kind] if kind else sorted(sweeps)):
        opts = (sweeps.get(name) or {}).get("perf_options")
        if not opts:
            continue
        prefix = "" if kind else f"{name.capitalize()}: "
        window = (f"{opts['measurement_interval_ms']} ms windows" if opts.get("measurement_mode") == "time_windows"
                  else f"{opts.get('measurement_request_count')}-request windows")
        rows += [
            (f"{prefix}Protocol", str(opts.get("protocol", "n/a")).upper()),
            (f"{prefix}Shared Memory", str(opts.get("shared_memory", "n/a"))),
            (f"{prefix}Input Data", str(opts.get("input_data", "n/a"))),
            (f"{prefix}Measurement", f"{opts.get('measurement_mode')}, {window}, stability "
                                     f"{opts.get('stability_percentage')}%, max {opts.get('max_trials')} trials"),
        ]
        scraped = (sweeps.get(name) or {}).get("telemetry")
        if scraped:
            rows.append((f"{prefix}Server telemetry", f"off: {scraped['off']}" if scraped.get("off")
                         else f"scraped from {scraped.get('metrics_url')}"))
    return rows


def _model_format(cfg: dict[str, Any], mc: dict[str, Any]) -> str:
    manifest = cfg.get("manifest")
    fmt_name = None
    if manifest:
        try:
            import json

            path = Path(manifest)
            path = path / "manifest.json" if path.is_dir() else path
            fmt_name = json.loads(path.read_text()).get("format")
        except (OSError, ValueError):
            fmt_name = None
    backend = mc.get("backend") or mc.get("platform") or "n/a"
    return f"{fmt_name} ({backend} backend)" if fmt_name else f"{backend} backend"


def config_table(meta: dict[str, Any], kind: str | None = None) -> str:
    return markdown_table(("Parameter Name", "Parameter Value"), config_rows(meta, kind), ("l", "l"))


def hardware_lines(meta: dict[str, Any], rows: Iterable[dict[str, Any]] | None = None) -> list[str]:
    """The "Our results were obtained using the following configuration" bullets, for the rows given.

    Rows name the identity they were measured under (results.ledger); the bullets describe that identity's host and
    software, and when the rows were measured. A folder whose rows come from several identities says so and
    describes each. Without rows (or for rows older than row provenance) the run.json's own metadata is used.
    """
    rows = list(rows or [])
    counts = row_identities(rows)
    ids = meta.get("identities") or {}
    if not rows or not any(i in ids for i in counts):
        return _environment_lines(meta, meta.get("timestamp", "n/a"))
    if len(counts) == 1:
        (ident,) = counts
        return _environment_lines(_identity_view(ids[ident]), _measured_range(rows, ident))
    lines = [f"This folder mixes rows measured under {len(counts)} identities (each row's identity column says "
             "which); figures of different identities are not comparable as one run:"]
    for ident, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        if ident not in ids:
            lines.append(f"identity {ident or '(none)'}: {n} row(s), not described in run.json")
            continue
        env = _environment_lines(_identity_view(ids[ident]), _measured_range(rows, ident))
        lines.append(f"identity {ident}: {n} row(s); " + "; ".join(env))
    return lines


def _identity_view(entry: dict[str, Any]) -> dict[str, Any]:
    invocations = entry.get("invocations") or [{}]
    last = invocations[-1]
    hardware = dict(entry.get("hardware") or {})
    host = (entry.get("identity") or {}).get("host") or {}
    if host:  # the identity's host is what defines the rows: it wins over the invocation's hardware probe
        hardware["cpu"] = {**(hardware.get("cpu") or {}), "model": host.get("cpu_model"),
                           "usable_cores": host.get("usable_cores")}
    if last.get("load_average_1_5_15m"):
        hardware["load_average_1_5_15m"] = last["load_average_1_5_15m"]
    return {"hardware": hardware, "versions": entry.get("versions") or {}, "git": last.get("git") or {}}


def _measured_range(rows: Sequence[dict[str, Any]], ident: str) -> str:
    times = sorted(str(r.get("measured_at")) for r in rows if r.get("identity") == ident and r.get("measured_at"))
    if not times:
        return "n/a"
    return times[0] if times[0] == times[-1] else f"{times[0]} to {times[-1]}"


def _environment_lines(meta: dict[str, Any], measured: str) -> list[str]:
    hw = meta.get("hardware", {})
    cpu = hw.get("cpu", {})
    gpu = hw.get("gpu", "none")
    gpu_text = ", ".join(f"{g.get('name')} ({g.get('memory')})" for g in gpu) if isinstance(gpu, list) else str(gpu)
    versions = meta.get("versions", {})
    sha = commit_text(meta.get("git") or {})
    lines = [
        f"GPU: {gpu_text}",
        f"CPU: {cpu.get('model', 'n/a')} ({cpu.get('usable_cores', cpu.get('logical_cores', '?'))} cores usable)",
        f"Memory: {hw.get('memory_gib', 'n/a')} GiB",
        f"Triton server: {versions.get('tritonserver', 'n/a')}; tritonclient {versions.get('tritonclient', 'n/a')}",
        f"Python {versions.get('python', 'n/a')}, numpy {versions.get('numpy', 'n/a')}, "
        f"torch {versions.get('torch', 'n/a')}, onnxruntime {versions.get('onnxruntime', 'n/a')}",
        f"Toolkit commit: {sha}",
        f"Measured: {measured}",
    ]
    load = hw.get("load_average_1_5_15m")
    if load:  # other work on the host inflates every figure: say how busy it was
        lines.append("Host load average when the run was recorded (1/5/15 min): " + " / ".join(f"{x:.2f}" for x in load))
    return lines


def hardware_section(meta: dict[str, Any], rows: Iterable[dict[str, Any]] | None = None) -> str:
    return "Our results were obtained using the following configuration:\n\n" + "\n".join(
        f"- {line}" for line in hardware_lines(meta, rows))
