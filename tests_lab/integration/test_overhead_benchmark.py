"""The serving-overhead benchmark: a tiny run through the real server and perf_analyzer (resnet18 small, batch 1,
one concurrency, short windows), plus its arithmetic on hand-made numbers."""
from __future__ import annotations

import csv
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deployment_toolkit_lab.overhead.bench import Variant, best_point, infer_inflation, stats_delta

ROOT = Path(__file__).resolve().parents[2]


def test_variant_parsing():
    assert Variant.parse("2x1") == Variant(2, 1)
    assert Variant.parse("1x0").label == "1 instance x default threads"
    assert Variant(2, 1).model_name("resnet50") == "resnet50_i2_t1"
    with pytest.raises(ValueError, match="INSTANCESxTHREADS"):
        Variant.parse("two")
    with pytest.raises(ValueError, match=">= 1"):
        Variant.parse("0x1")


def test_best_point_prefers_stable_points():
    rows = [{"Inferences/second": 10.0, "stable": True}, {"Inferences/second": 12.0, "stable": False},
            {"Inferences/second": 11.0, "stable": True}]
    assert best_point(rows)["Inferences/second"] == 11.0
    assert best_point(rows[1:2])["Inferences/second"] == 12.0
    assert best_point([]) is None


def test_stats_delta_and_inflation_by_hand():
    # 20 executions between the snapshots: 10 at batch 1 (40 ms each) and 10 dynamic batches of 3 requests
    # (160 ms each); inference_stats count per request, so the 3-request batches add their time 3 times
    before = {"execution_count": 10, "inference_count": 10,
              "inference_stats": {"success": {"count": 10}, "compute_infer": {"ns": 400_000_000},
                                  "queue": {"ns": 10_000_000}},
              "batch_stats": [{"batch_size": 1, "compute_infer": {"count": 10, "ns": 400_000_000}}]}
    after = {"execution_count": 30, "inference_count": 50,
             "inference_stats": {"success": {"count": 50}, "compute_infer": {"ns": 400_000_000 + 400_000_000
                                                                             + 30 * 160_000_000},
                                 "queue": {"ns": 90_000_000}},
             "batch_stats": [{"batch_size": 1, "compute_infer": {"count": 20, "ns": 800_000_000}},
                             {"batch_size": 3, "compute_infer": {"count": 10, "ns": 1_600_000_000}}]}
    d = stats_delta(before, after)
    assert (d["requests"], d["executions"], d["inferences"]) == (40, 20, 40)
    assert d["avg_exec_batch"] == 2.0
    assert d["infer_ms_per_exec"] == pytest.approx(100.0)  # (10 x 40 + 10 x 160) ms / 20 executions
    assert d["compute_infer_ms_per_request"] == pytest.approx(130.0)  # (400 + 4800) ms / 40 requests
    assert d["queue_ms_per_request"] == pytest.approx(2.0)
    assert d["exec_batch_hist"] == "1:10;3:10"
    assert d["infer_ms_by_exec_batch"] == "1:40.00;3:160.00"
    # 2 samples per execution at 25 samples/s in-process = 80 ms; the server took 100 ms -> 1.25x
    assert infer_inflation(100.0, 2.0, 25.0) == pytest.approx(1.25)
    assert math.isnan(infer_inflation(100.0, math.nan, 25.0))


@pytest.mark.integration
def test_tiny_overhead_run(tmp_path):
    result = tmp_path / "overhead"
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "deployment_toolkit_lab/scripts/benchmark_overhead.py"), "--model", "resnet18",
         "--preset", "small", "--batch-sizes", "1", "--concurrency", "1", "--variants", "1x0", "--inprocess-warmup", "1",
         "--inprocess-seconds", "0.5", "--single-client-rounds", "2", "--measurement-interval", "500", "--stability-percentage", "50",
         "--max-trials", "6", "--max-attempts", "1", "--workspace", str(tmp_path / "ws"),
         "--result-path", str(result)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    elapsed = time.monotonic() - t0
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # 1: below the bar on a busy machine
    assert "served / in-process" in proc.stdout
    for name in ("overhead.csv", "served_points.csv", "overhead.md", "run.json"):
        assert (result / name).exists(), name
    rows = list(csv.DictReader(open(result / "overhead.csv")))
    assert len(rows) == 1 and rows[0]["reported"] == "True"
    ratio = float(rows[0]["ratio"])
    assert math.isfinite(ratio) and ratio > 0
    assert float(rows[0]["inprocess_throughput"]) > 0 and float(rows[0]["served_throughput"]) > 0
    points = list(csv.DictReader(open(result / "served_points.csv")))
    assert points[0]["Concurrent client requests"] == "1" and int(points[0]["executions"]) > 0
    meta = json.loads((result / "run.json").read_text())
    assert len(meta["config"]["load_average_before"]) == 3
    assert meta["config"]["private_shm"] == (os.geteuid() == 0 and shutil.which("unshare") is not None)
    assert meta["versions"]["tritonserver"]
    assert (result / "sweeps" / "resnet18_i1_t0_b1" / "online.csv").exists()
    # the single client in pairs: two rounds of in-process then served at concurrency 1, on their own server
    pairs = list(csv.DictReader(open(result / "single_client.csv")))
    assert [p["paired_round"] for p in pairs] == ["1", "2"]
    assert all(float(p["served_c1"]) > 0 and float(p["inprocess_before"]) > 0 for p in pairs)
    assert pairs[0]["inprocess_after"] == pairs[1]["inprocess_before"]  # one timing closes a round, opens the next
    assert rows[0]["pair_rounds"] == "2" and float(rows[0]["pair_ratio"]) > 0
    md = (result / "overhead.md").read_text()
    assert "In pairs:" in md and any(ln.startswith("- single client, batch 1 (1x0, 2 paired rounds)")
                                     for ln in md.splitlines())
    print(f"tiny overhead run: ratio {ratio:.3f} in {elapsed:.0f} s")
