"""Issue 29 item 5: the overhead benchmark reports the single client (concurrency 1) on its own, from the same
points as the rest: served against the best and the median in-process timing, the time per request outside the
runtime's inference and the inference against in-process. Checked on the committed resnet50 run's own points."""
from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

import pytest

from deployment_toolkit_lab.overhead.bench import OverheadOptions, Variant, _rows_for_batch, to_markdown
from deployment_toolkit_lab.overhead.report import SINGLE_CLIENT_TARGET

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
    """The sweep's concurrency-1 point, recomputed from the committed run's own points and timings."""
    summary = {(r["batch_size"], r["variant"]): r for r in csv.DictReader(open(RUN / "overhead.csv"))}
    points = [_typed(r) for r in csv.DictReader(open(RUN / "served_points.csv"))]
    inprocess = [float(t) for t in summary[("1", "1x0")]["inprocess_timings"].split(";")]
    timings = [{"throughput": t, "p50_ms": 30.0, "background_cpu": 0.0} for t in inprocess]
    served = {Variant(1, 0): [p for p in points if p["variant"] == "1x0" and p["Client Batch Size"] == 1],
              Variant(2, 1): [p for p in points if p["variant"] == "2x1" and p["Client Batch Size"] == 1]}
    rows = _rows_for_batch(1, timings, served, OverheadOptions(), 2)
    one = next(r for r in rows if r["variant"] == "1x0")
    c1 = next(p for p in served[Variant(1, 0)] if p["Concurrent client requests"] == 1)
    best, median = max(inprocess), statistics.median(inprocess)
    assert one["c1_throughput"] == c1["Inferences/second"]
    assert one["c1_ratio"] == pytest.approx(c1["Inferences/second"] / best)  # against the best in-process timing
    assert one["c1_ratio_median"] == pytest.approx(c1["Inferences/second"] / median)  # against the median one
    # outside the runtime: client send, network, queue, input, output, client receive (ms per request)
    outside = sum(c1[c] for c in ("Client Send", "Network+server Send/recv", "Server Queue", "Server Compute Input",
                                  "Server Compute Output", "Client Recv"))
    assert one["c1_outside_ms"] == pytest.approx(outside, abs=1e-9) and 0 < outside < c1["Avg Latency"]
    assert one["c1_infer_inflation"] == pytest.approx(c1["Server Compute Infer"] / (1000 / median))
    md = to_markdown(rows, OverheadOptions(), {})
    section = md.split("## Single client (concurrency 1)")[1].split("## Verdict")[0]
    (row,) = [ln for ln in section.splitlines() if "| 1x0 " in ln]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:7] == [f"{c1['Inferences/second']:.2f}", f"{best:.2f}", f"{median:.2f}",
                          f"**{one['c1_ratio']:.3f}**", f"{one['c1_ratio_median']:.3f}"], cells
    assert cells[8] == f"{outside:.2f} ({outside / c1['Avg Latency']:.1%})"
    verdicts = [ln for ln in md.splitlines() if ln.startswith("- single client, batch 1")]
    assert len(verdicts) == 1 and "(1x0)" in verdicts[0] and f"target: at least {SINGLE_CLIENT_TARGET}" in verdicts[0]


def test_the_committed_run_judges_the_single_client_by_its_paired_rounds():
    """overhead.csv's paired ratio is the median of single_client.csv's rounds, each its served point over the mean
    of the in-process timings around it, and overhead.md's verdict line quotes it."""
    rounds = list(csv.DictReader(open(RUN / "single_client.csv")))
    rows = {(r["batch_size"], r["variant"]): r for r in csv.DictReader(open(RUN / "overhead.csv"))}
    md = (RUN / "overhead.md").read_text()
    for batch in {r["batch_size"] for r in rounds}:
        mine = [r for r in rounds if r["batch_size"] == batch]
        ratios = [float(r["served_c1"]) / ((float(r["inprocess_before"]) + float(r["inprocess_after"])) / 2)
                  for r in mine]
        assert [float(r["ratio"]) for r in mine] == pytest.approx(ratios, rel=1e-5)
        assert all(a["inprocess_after"] == b["inprocess_before"] for a, b in zip(mine, mine[1:]))
        row = rows[(batch, mine[0]["variant"])]
        assert float(row["pair_ratio"]) == pytest.approx(statistics.median(ratios), rel=1e-5)
        verdict = next(ln for ln in md.splitlines() if ln.startswith(f"- single client, batch {batch} ("))
        assert f"{len(mine)} paired rounds): {float(row['pair_ratio']):.3f}x of in-process" in verdict


def test_paired_rounds_compare_each_served_point_with_the_timings_around_it():
    """A host that slows down and recovers: each round's served point is judged against the in-process timings
    just before and after it, so the drift does not land on one side; the best-of-all reference would call the
    same points 0.86x."""
    from deployment_toolkit_lab.overhead.single_client import measure_pairs, paired_summary

    timings = iter([33.0, 29.0, 27.0, 31.0])
    served = iter([(30.1, 34.0, 1.0, 33.0), (26.6, 37.0, 1.0, 36.0), (28.2, 35.5, 1.0, 34.5)])
    logs: list[str] = []

    def point(n: int) -> dict:
        tp, latency, outside, infer = next(served)
        return {"Inferences/second": tp, "Avg Latency": latency, "Client Send": 0.01, "Network+server Send/recv": 0.3,
                "Server Queue": 0.05, "Server Compute Input": 0.1, "Server Compute Infer": infer,
                "Server Compute Output": outside - 0.47, "Client Recv": 0.01, "stable": True}

    rounds = measure_pairs(lambda: next(timings), point, 3, 1, logs.append)
    assert [r.reference for r in rounds] == [31.0, 28.0, 29.0]
    assert [r.ratio for r in rounds] == pytest.approx([30.1 / 31, 26.6 / 28, 28.2 / 29])
    s = paired_summary(rounds)
    assert s["pair_rounds"] == 3 and s["pair_ratio"] == pytest.approx(30.1 / 31)
    assert s["pair_ratio_min"] == pytest.approx(26.6 / 28) and s["pair_ratio_max"] == pytest.approx(28.2 / 29)
    assert s["pair_outside_ms"] == pytest.approx(1.0) and s["pair_inprocess"] == pytest.approx(29.0)
    assert s["pair_infer_vs_inprocess"] == pytest.approx(34.5 / (1000 / 29.0))
    assert 28.2 / 33.0 < 0.86 and len(logs) == 3 and "round 2/3" in logs[1]


def test_a_failed_served_point_keeps_the_rounds_measured_and_the_report_says_pairs():
    from deployment_toolkit.perf.analyzer import PerfAnalyzerError
    from deployment_toolkit_lab.overhead.single_client import measure_pairs, paired_summary

    calls = {"n": 0}

    def point(n: int) -> dict:
        if n == 2:
            raise PerfAnalyzerError("perf_analyzer: the server went away\nmore")
        return {"Inferences/second": 29.0, "Avg Latency": 34.0, "Server Compute Infer": 33.0}

    def timing() -> float:
        calls["n"] += 1
        return 30.0

    logs: list[str] = []
    rounds = measure_pairs(timing, point, 3, 1, logs.append)
    assert len(rounds) == 1 and calls["n"] == 2 and "keeping 1 round(s)" in logs[-1]
    summary = {(r["batch_size"], r["variant"]): r for r in csv.DictReader(open(RUN / "overhead.csv"))}
    points = [_typed(r) for r in csv.DictReader(open(RUN / "served_points.csv"))]
    timings = [{"throughput": float(t), "p50_ms": 30.0, "background_cpu": 0.0}
               for t in summary[("1", "1x0")]["inprocess_timings"].split(";")]
    served = {Variant(1, 0): [p for p in points if p["variant"] == "1x0" and p["Client Batch Size"] == 1]}
    (row,) = _rows_for_batch(1, timings, served, OverheadOptions(), 2)
    row.update(paired_summary(rounds))
    md = to_markdown([row], OverheadOptions(), {})
    assert "In pairs:" in md and "**0.967** [0.967..0.967]" in md and "In the sweep:" in md
    (verdict,) = [ln for ln in md.splitlines() if ln.startswith("- single client")]  # the pairs' verdict only
    assert "1 paired rounds" in verdict and "0.967x" in verdict and "not met" in verdict
