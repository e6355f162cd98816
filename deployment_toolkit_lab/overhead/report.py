"""The overhead benchmark's report (overhead/bench.py measures): overhead.csv, served_points.csv and overhead.md with
the summary per batch size, every variant, where the time goes at each best point, the single client (concurrency
1, where serving costs most) and the verdict against the bars."""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from deployment_toolkit.results.bench_store import as_float as _f
from deployment_toolkit.results.rows import RowSchema, to_csv as rows_to_csv
from deployment_toolkit.results.run_folder import RunFolder
from deployment_toolkit.spec import atomic_write_text
from deployment_toolkit.tables import markdown_table

if TYPE_CHECKING:
    from .options import OverheadOptions

DESIGN_BAR = 0.95  # DESIGN.md: measured 0.95-1.0x with a throw-away prototype on 2 cores
SINGLE_CLIENT_TARGET = 0.97  # issue 29: served / in-process at concurrency 1


def to_csv(rows: Sequence[dict[str, Any]]) -> str:
    """The rows through the one row writer (results.rows): every column any row has, in first-seen order; floats
    with 6 significant digits, NaN and None empty."""
    return rows_to_csv(RowSchema(tuple(dict.fromkeys(c for r in rows for c in r))), rows)


def _n(value: Any, digits: int = 2) -> str:
    v = _f(value)
    return "n/a" if math.isnan(v) else f"{v:.{digits}f}"


def to_markdown(rows: Sequence[dict[str, Any]], opts: "OverheadOptions", config: dict[str, Any]) -> str:
    """Summary per batch (reported variant), every variant, the breakdown at each best point, and a verdict."""
    unit = "images/s"
    out = [f"# Serving overhead: {opts.model} ({opts.preset}), in-process ONNX Runtime vs Triton (Python backend)\n",
           f"Load average before {config.get('load_average_before')}, after {config.get('load_average_after')} "
           f"on {os.cpu_count()} logical cores: on a shared machine the ratio is noisy; rerun on a quiet one to "
           "quote it.\n",
           "## Summary (better variant per batch size)\n",
           markdown_table(["batch", f"in-process ({unit})", f"served best ({unit})", "served / in-process", "variant",
                           "concurrency"],
                          [[r["batch_size"], _n(r["inprocess_throughput"]), _n(r["served_throughput"]),
                            f"**{_n(r['ratio'], 3)}**", r["variant"], r["best_concurrency"]]
                           for r in rows if r["reported"]], ["r", "r", "r", "r", "l", "r"])]
    out += ["", "## Every variant\n",
            "Variant = instances x intra-op threads (0: ONNX Runtime's default). In-process timings: before the first "
            "sweep and after each one; the reference is the highest. Served by concurrency: images/s per level.\n",
            markdown_table(["batch", "variant", "in-process timings", "served by concurrency", "best", "ratio", "stable"],
                           [[r["batch_size"], r["variant"], r["inprocess_timings"], r["served_by_concurrency"],
                             _n(r["served_throughput"]), _n(r["ratio"], 3), "yes" if r["best_stable"] else "no"]
                            for r in rows], ["r", "l", "l", "l", "r", "r", "l"])]
    for restart in config.get("server_restarts", []):
        out.append(f"\nServer restarted during the {restart['model']} batch {restart['batch']} sweep (the sweep resumed "
                   f"from its completed points): {restart['error']} (log: {restart['log']})")
    out += ["", "## Where the time goes (at each variant's best point, ms per request)\n",
            markdown_table(
                ["batch", "variant", "avg latency", "client send", "network+server send/recv", "queue", "compute input",
                 "compute infer", "compute output", "client recv", "executed batch (avg)", "infer per execution",
                 "infer inflation vs in-process"],
                [[r["batch_size"], r["variant"], _n(r["avg_latency_ms"]), _n(r["client_send_ms"], 3),
                  _n(r["network_server_send_recv_ms"], 3), _n(r["server_queue_ms"]), _n(r["server_compute_input_ms"], 3),
                  _n(r["server_compute_infer_ms"]), _n(r["server_compute_output_ms"], 3), _n(r["client_recv_ms"], 3),
                  _n(r["avg_exec_batch"]), _n(r["infer_ms_per_exec"]), f"{_n(r['infer_inflation'])}x"] for r in rows],
                ["r", "l"] + ["r"] * 11)]
    out += ["", "Infer inflation = Server Compute Infer per execution / (executed batch / in-process throughput): "
            "1.0 means the backend's ONNX Runtime runs as fast as in-process; above 1 it is slowed by the cores it "
            "shares with the server, perf_analyzer and other instances. A variant with fewer intra-op threads than the "
            "in-process session (e.g. 2x1 against ORT's default of one thread per core) is slower per execution by "
            "design: expect about (in-process threads / variant threads) there.", ""]
    out += single_client_section(rows)
    out += ["", "## Verdict\n"]
    for r in rows:
        if not r["reported"]:
            continue
        ratio = _f(r["ratio"])
        if math.isnan(ratio):
            verdict = "no served measurement"
        elif ratio >= DESIGN_BAR:
            verdict = f"meets DESIGN.md's {DESIGN_BAR} bar (and the issue's {opts.bar})"
        elif ratio >= opts.bar:
            verdict = f"meets the issue's {opts.bar} bar, below DESIGN.md's {DESIGN_BAR}"
        else:
            verdict = f"BELOW the issue's {opts.bar} bar: {diagnose(r)}"
        out.append(f"- batch {r['batch_size']}: {_n(ratio, 3)}x - {verdict}")
    out += single_client_verdicts(rows)
    return "\n".join(out) + "\n"


def _single_best(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per batch size, the variant with the highest throughput at concurrency 1."""
    best: dict[Any, dict[str, Any]] = {}
    for r in rows:
        tp = _f(r.get("c1_throughput"))
        if math.isnan(tp):
            continue
        b = r["batch_size"]
        if b not in best or tp > _f(best[b]["c1_throughput"]):
            best[b] = r
    return list(best.values())


def single_client_section(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Concurrency 1 on its own: the paired rounds (overhead/single_client.py) where measured, then the sweep's
    concurrency-1 point against the best and the median in-process timing, and where the time per request goes
    (outside the runtime's inference vs the inference against in-process)."""
    out: list[str] = []
    paired = [r for r in rows if not math.isnan(_f(r.get("pair_ratio")))]
    if paired or any(not math.isnan(_f(r.get("c1_throughput"))) for r in rows):
        out.append("## Single client (concurrency 1)\n")
    if paired:
        out += ["In pairs: each round times in-process ONNX Runtime, then measures the served model at concurrency "
                "1, and a last timing closes the rounds, all with one server up (idle while in-process runs); a "
                "round's ratio is its served throughput over the mean of the in-process timings just before and "
                "after it. The ratio is the rounds' median [min..max] (per round in single_client.csv).\n",
                markdown_table(
                    ["batch", "variant", "rounds", "served at c=1", "in-process around it", "served / in-process",
                     "latency ms", "outside the runtime ms", "inference vs in-process"],
                    [[r["batch_size"], r["variant"], r["pair_rounds"], _n(r.get("pair_served")),
                      _n(r.get("pair_inprocess")),
                      f"**{_n(r['pair_ratio'], 3)}** [{_n(r.get('pair_ratio_min'), 3)}..{_n(r.get('pair_ratio_max'), 3)}]",
                      _n(r.get("pair_latency_ms")), _outside(r, "pair_"), f"{_n(r.get('pair_infer_vs_inprocess'))}x"]
                     for r in paired], ["r", "l", "r", "r", "r", "l", "r", "r", "r"]), ""]
    if not any(not math.isnan(_f(r.get("c1_throughput"))) for r in rows):
        return out
    out += ["In the sweep: one request at a time, where serving costs most: nothing overlaps the per-request work. "
            "Outside the runtime = client send + network/server send-receive + queue + compute input + compute output "
            "+ client receive, per request; the runtime's inference is Triton's compute infer against the in-process "
            "time per request (from the median in-process timing, since the best one is a single lucky timing on a "
            "shared host). The in-process timings were taken minutes away from this point.\n",
            markdown_table(
                ["batch", "variant", "served at c=1", "in-process best", "in-process median", "c=1 / best",
                 "c=1 / median", "latency ms", "outside the runtime ms", "inference ms", "in-process ms",
                 "inference vs in-process"],
                [[r["batch_size"], r["variant"], _n(r.get("c1_throughput")), _n(r["inprocess_throughput"]),
                  _n(r.get("inprocess_median")), f"**{_n(r.get('c1_ratio'), 3)}**", _n(r.get("c1_ratio_median"), 3),
                  _n(r.get("c1_latency_ms")), _outside(r), _n(r.get("c1_infer_ms")),
                  _n(r.get("inprocess_ms_per_request")), f"{_n(r.get('c1_infer_inflation'))}x"] for r in rows],
                ["r", "l"] + ["r"] * 10)]
    return out


def _outside(r: dict[str, Any], prefix: str = "c1_") -> str:
    outside, latency = _f(r.get(f"{prefix}outside_ms")), _f(r.get(f"{prefix}latency_ms"))
    if math.isnan(outside):
        return "n/a"
    return f"{outside:.2f} ({outside / latency:.1%})" if latency and not math.isnan(latency) else f"{outside:.2f}"


def single_client_verdicts(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per batch size against SINGLE_CLIENT_TARGET: the paired rounds' median where measured (in-process
    and served taken next to each other), else the sweep's concurrency-1 point of the best variant at it."""
    out = []
    for r in rows:
        ratio = _f(r.get("pair_ratio"))
        if math.isnan(ratio):
            continue
        met = "met" if ratio >= SINGLE_CLIENT_TARGET else "not met"
        out.append(f"- single client, batch {r['batch_size']} ({r['variant']}, {r['pair_rounds']} paired rounds): "
                   f"{_n(ratio, 3)}x of in-process [{_n(r.get('pair_ratio_min'), 3)}..{_n(r.get('pair_ratio_max'), 3)}] "
                   f"(target: at least {SINGLE_CLIENT_TARGET}): {met}; {_outside(r, 'pair_')} ms per request outside "
                   f"the runtime, its inference {_n(r.get('pair_infer_vs_inprocess'))}x the in-process time per request")
    paired_batches = {r["batch_size"] for r in rows if not math.isnan(_f(r.get("pair_ratio")))}
    for r in _single_best(rows):
        if r["batch_size"] in paired_batches:
            continue
        ratio, median = _f(r["c1_ratio"]), _f(r["c1_ratio_median"])
        met = "met" if ratio >= SINGLE_CLIENT_TARGET else (
            f"not met against the best in-process timing ({_n(median, 3)}x of the median one)")
        out.append(f"- single client, batch {r['batch_size']} ({r['variant']}): {_n(ratio, 3)}x of in-process "
                   f"(target: at least {SINGLE_CLIENT_TARGET}): {met}; {_outside(r)} ms per request outside the "
                   f"runtime, its inference {_n(r['c1_infer_inflation'])}x the in-process time per request")
    return out


def diagnose(row: dict[str, Any]) -> str:
    """One line on where the served time goes, from the best point's breakdown."""
    stages = {"queue": _f(row["server_queue_ms"]), "compute infer": _f(row["server_compute_infer_ms"]),
              "compute input+output": _f(row["server_compute_input_ms"]) + _f(row["server_compute_output_ms"]),
              "client/network": sum(_f(row[k]) for k in ("client_send_ms", "network_server_send_recv_ms",
                                                         "client_recv_ms"))}
    total = sum(v for v in stages.values() if not math.isnan(v)) or math.nan
    parts = ", ".join(f"{k} {v / total:.0%}" for k, v in stages.items() if not math.isnan(v))
    infl = _f(row["infer_inflation"])
    why = (f"the backend's inference itself runs {infl:.2f}x slower than in-process (CPU contention)"
           if not math.isnan(infl) and infl > 1.1 else "the time is outside the runtime's inference")
    return f"latency split {parts}; {why}"


def write_results(result_dir: Path, rows: list[dict[str, Any]], points: list[dict[str, Any]], opts: "OverheadOptions",
                  config: dict[str, Any], server_version: str | None,
                  pairs: Sequence[dict[str, Any]] = ()) -> dict[str, Path]:
    paths = {"csv": result_dir / "overhead.csv", "points_csv": result_dir / "served_points.csv",
             "md": result_dir / "overhead.md"}
    atomic_write_text(paths["csv"], to_csv(rows))
    atomic_write_text(paths["points_csv"], to_csv(points))
    if pairs:
        paths["single_client_csv"] = result_dir / "single_client.csv"
        atomic_write_text(paths["single_client_csv"], to_csv(pairs))
    atomic_write_text(paths["md"], to_markdown(rows, opts, config))
    folder = RunFolder(result_dir)
    folder.record(config, server_version)
    paths["run_json"] = folder.run_json_path
    return paths


__all__ = ["DESIGN_BAR", "SINGLE_CLIENT_TARGET", "diagnose", "single_client_section", "single_client_verdicts",
           "to_csv", "to_markdown", "write_results"]
