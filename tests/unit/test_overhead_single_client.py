"""Issue 29 item 5: the overhead benchmark reports the single client (concurrency 1) on its own, from the same
points as the rest: served against the best and the median in-process timing, the time per request outside the
runtime's inference and the inference against in-process. Checked on the committed resnet50 run's own points."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from deployment_toolkit.perf.overhead import OverheadOptions, Variant, _rows_for_batch, to_markdown
from deployment_toolkit.perf.overhead_report import SINGLE_CLIENT_TARGET

RUN = Path(__file__).resolve().parents[2] / "results" / "overhead-resnet50-cpu"


def _typed(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        try:
            out[k] = float(v) if v not in ("", None) else math.nan
        except ValueError:
            out[k] = v
    out["stable"] = row.get("stable") == "True"
    return out


def test_concurrency_one_is_reported_with_where_its_time_goes():
    summary = {(r["batch_size"], r["variant"]): r for r in csv.DictReader(open(RUN / "overhead.csv"))}
    points = [_typed(r) for r in csv.DictReader(open(RUN / "served_points.csv"))]
    timings = [{"throughput": float(t), "p50_ms": 30.0, "background_cpu": 0.0}
               for t in summary[("1", "1x0")]["inprocess_timings"].split(";")]
    served = {Variant(1, 0): [p for p in points if p["variant"] == "1x0" and p["Client Batch Size"] == 1],
              Variant(2, 1): [p for p in points if p["variant"] == "2x1" and p["Client Batch Size"] == 1]}
    rows = _rows_for_batch(1, timings, served, OverheadOptions(), 2)
    one = next(r for r in rows if r["variant"] == "1x0")
    assert one["c1_throughput"] == pytest.approx(28.7077)
    assert one["c1_ratio"] == pytest.approx(28.7077 / 32.8706, rel=1e-4)  # against the best in-process timing
    assert one["c1_ratio_median"] == pytest.approx(28.7077 / 29.39, rel=1e-4)  # against the median one
    # outside the runtime: client send, network, queue, input, output, client receive (ms per request)
    assert one["c1_outside_ms"] == pytest.approx(0.011 + 0.341 + 0.057 + 0.121 + 0.442 + 0.004, abs=1e-6)
    assert one["c1_infer_inflation"] == pytest.approx(33.838 / (1000 / 29.39), rel=1e-4)
    md = to_markdown(rows, OverheadOptions(), {})
    section = md.split("## Single client (concurrency 1)")[1].split("## Verdict")[0]
    (row,) = [ln for ln in section.splitlines() if "| 1x0 " in ln]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:7] == ["28.71", "32.87", "29.39", "**0.873**", "0.977"] and cells[8] == "0.98 (2.8%)", cells
    verdicts = [ln for ln in md.splitlines() if ln.startswith("- single client, batch 1")]
    assert len(verdicts) == 1 and "(1x0)" in verdicts[0] and f"target: at least {SINGLE_CLIENT_TARGET}" in verdicts[0]
    assert "not met against the best in-process timing (0.977x of the median one)" in verdicts[0]
