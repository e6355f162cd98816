"""Fleet sizing on small handmade runs (tests/fixtures/sizing/), against numbers worked out by hand here."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deployment_toolkit.results.store import rows_to_csv
from deployment_toolkit.sizing import (
    Demand,
    Prices,
    SizingError,
    ceil_div,
    coverage_km2_per_s,
    frontier,
    little_flags,
    load_prices,
    load_runs,
    points_of,
    scaling_tables,
    size,
    sustainable,
)
from deployment_toolkit.sizing.output import sizing_csv, write_outputs

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures" / "sizing"
X1, X2 = FIX / "gpu_a100_onnx_x1", FIX / "gpu_a100_onnx_x2"
FLAWED, CPU, GEO = FIX / "gpu_a100_trt_x1_flawed", FIX / "cpu_host_onnx_x2", FIX / "geo_s2_vit_offline"


def one(path: Path):
    (run,) = load_runs(path)
    return run


def tiny_run(tmp_path: Path, points, gpu: bool = True, name: str = "tiny") -> Path:
    """A run folder with online points (batch, concurrency, throughput, p99, avg)."""
    d = tmp_path / name
    d.mkdir()
    rows = [{"Precision": "FP32", "Client Batch Size": b, "Concurrent client requests": c, "Inferences/second": t,
             "P99 Latency": p99, "Avg Latency": avg, "Triton Instances": 1, "stable": True} for b, c, t, p99, avg in points]
    (d / "online.csv").write_text(rows_to_csv(rows))
    hw = {"gpu": [{"name": "NVIDIA L4"}] if gpu else "none", "cpu": {"model": "x", "usable_cores": 8}}
    (d / "run.json").write_text(json.dumps({"hardware": hw, "config": {"model_name": "m", "triton_instances": 1}}))
    return d


# ---- loading ------------------------------------------------------------------------------------

def test_runs_carry_config_device_and_instances():
    r1, r2, cpu = one(X1), one(X2), one(CPU)
    assert (r1.model, r1.kind, r1.instances, r1.gpu, r1.device) == ("resnet50", "online", 1, True, "NVIDIA A100-SXM4-80GB")
    assert r2.instances == 2 and r1.format == "onnxruntime_onnx" and r1.unit == "GPU"
    assert cpu.gpu is False and cpu.unit == "host" and cpu.instances == 2 and "16 cores" in cpu.device
    assert one(FLAWED).format == "tensorrt_plan"


def test_not_a_run_folder(tmp_path):
    with pytest.raises(SizingError, match="no online.csv or offline.csv"):
        load_runs(tmp_path)


# ---- sustainable throughput -----------------------------------------------------------------------

def test_sustainable_is_the_best_measured_point_within_the_slo():
    run = one(X1)  # (c, inf/s, p99): (1, 400, 4) (2, 760, 6) (4, 1400, 9) (8, 2000, 15) (16, 2200, 30)
    s = sustainable(run, 10.0)
    assert (s.throughput, s.point.concurrency, s.point.p99) == (1400.0, 4, 9.0)
    assert "concurrency 4" in s.point.level and not s.at_highest_load
    assert sustainable(run, 15.0).throughput == 2000.0  # p99 == SLO counts as within
    loose = sustainable(run, 1000.0)
    assert loose.throughput == 2200.0 and loose.at_highest_load  # never more than the highest measured point


def test_plan_arithmetic_by_hand():
    demand = Demand(peak_rps=5000, slo_ms=10, headroom=0.2, gpus_per_node=4)
    sizing = size([one(X1), one(X2)], demand, Prices(gpu_hour=2.0))
    x1, x2 = sizing.plans
    # planned 5000 x 1.2 = 6000 inf/s. x1: 1400/replica -> ceil(4.29) = 5 GPUs, 2 nodes of 4, $10/h
    assert (x1.replicas, x1.devices, x1.nodes, x1.cost_h) == (5, 5, 2, 10.0)
    # x2 (2 instances per GPU): 1560/replica -> ceil(3.85) = 4 GPUs, 1 node, $8/h
    assert (x2.replicas, x2.devices, x2.nodes, x2.cost_h) == (4, 4, 1, 8.0)
    assert x2.cost_per_million_peak == pytest.approx(8.0 / (5000 * 3600) * 1e6)  # $0.444
    assert x2.cost_per_million_capacity == pytest.approx(8.0 / (4 * 1560 * 3600) * 1e6)
    assert x2.per_replica_rate == pytest.approx(1500.0) and x2.utilisation == pytest.approx(6000 / 6240)
    assert sizing.recommendation is x2 and [p.rank for p in (x2, x1)] == [1, 2]
    assert sizing.ranked_by == "cost per hour"
    assert "cheapest" in sizing.reason and "+25%" in sizing.reason and "concurrency 4" in sizing.reason


def test_replicas_are_not_inflated_by_float_noise(tmp_path):
    # 100 x 1.2 / 40 = 3.0000000000000004 in floating point: still 3 replicas
    run = one(tiny_run(tmp_path, [(1, 1, 40.0, 5.0, 25.0)]))
    plan = size([run], Demand(100, 10, 0.2), Prices(gpu_hour=1.0)).plans[0]
    assert plan.replicas == 3 and ceil_div(100 * 1.2, 40) == 3 and ceil_div(121, 40) == 4


def test_without_prices_ranked_by_device_count():
    sizing = size([one(X1), one(X2)], Demand(5000, 10))
    assert sizing.recommendation.run.instances == 2 and sizing.recommendation.cost_h is None
    assert "device count" in sizing.ranked_by and "smallest" in sizing.reason
    assert any("--gpu-hour-cost" in n for n in sizing.notes)


def test_prices_yaml_matches_part_of_the_device_name(tmp_path):
    prices = Prices(load_prices(FIX / "prices.yaml"), gpu_hour=99.0)
    assert prices.price(one(X1)) == 2.0  # key "A100" in "NVIDIA A100-SXM4-80GB"
    assert prices.price(one(CPU)) == 0.8
    bad = tmp_path / "bad.yaml"
    bad.write_text("A100: cheap\n")
    with pytest.raises(SizingError, match="must be a number"):
        load_prices(bad)


def test_cpu_only_run_counts_hosts():
    # (c, inf/s, p99): (1, 50, 30) (2, 90, 45) (4, 120, 80); SLO 50 -> 90/host; 200 x 1.2 = 240 -> ceil(2.67) = 3
    sizing = size([one(CPU)], Demand(200, 50), Prices(host_hour=0.8))
    plan = sizing.recommendation
    assert (plan.replicas, plan.devices, plan.nodes, plan.run.unit) == (3, 3, 3, "host")
    assert plan.cost_h == pytest.approx(2.4)
    assert "3 hosts at $2.40/h" in sizing.reason


# ---- unreachable, empty, unstable ---------------------------------------------------------------------

def test_unreachable_slo_is_an_answer_not_a_number():
    sizing = size([one(X1)], Demand(5000, 3.0), Prices(gpu_hour=2.0))
    assert sizing.recommendation is None and sizing.plans[0].replicas is None
    (text,) = sizing.unreachable
    assert "gpu_a100_onnx_x1/online" in text and "unreachable" in text
    assert "best p99 measured is 4.000 ms, at 400.0 inf/s (concurrency 1 (batch 1))" in text
    assert "No configuration meets p99 <= 3 ms" in sizing.reason


def test_unreachable_for_one_run_still_plans_the_others():
    sizing = size([one(X1), one(X2)], Demand(5000, 4.5), Prices(gpu_hour=2.0))
    assert sizing.recommendation.run.instances == 1 and len(sizing.unreachable) == 1
    assert "gpu_a100_onnx_x2" in sizing.unreachable[0] and "5.000 ms" in sizing.unreachable[0]


def test_empty_run_is_a_clear_error():
    with pytest.raises(SizingError, match="has no measured points"):
        size([one(FIX / "empty")], Demand(100, 10))


def test_all_unstable_run_is_a_clear_error():
    with pytest.raises(SizingError, match=r"all 2 points of .*all_unstable/online.csv are unstable"):
        size([one(FIX / "all_unstable")], Demand(100, 10))


def test_unstable_points_are_excluded_and_named():
    s = sustainable(one(FLAWED), 10.0)
    assert [p.concurrency for p in s.unstable] == [16]  # 2600 inf/s at p99 9.8 would have won
    assert s.throughput != 2600.0


# ---- Little's law -----------------------------------------------------------------------------------

def test_littles_law_flags_an_inconsistent_point_and_keeps_it_out():
    run = one(FLAWED)  # c8: 2000 inf/s x 6 ms = 12 in flight, not 8 -> 50% off
    flags = little_flags([run])
    assert [(p.concurrency, round(p.little_deviation, 3)) for _, p in flags] == [(8, 0.5)]
    assert sustainable(run, 10.0).throughput == 1800.0  # c4, not the flagged c8
    assert sustainable(run, 10.0, include_unreliable=True).throughput == 2000.0
    assert all(p.reliable for p in points_of(one(X1)))  # 400 x 2.5 ms = 1, ... all within 10%


def test_littles_law_counts_requests_not_inferences_and_ms():
    # offline: batch 8 at 2000 inf/s = 250 requests/s; x 4 ms = 1 request in flight = concurrency 1
    pts = points_of(one(GEO))
    b8 = next(p for p in pts if p.batch == 8)
    assert b8.request_rate == 250.0 and b8.little_concurrency == pytest.approx(1.0) and b8.reliable
    assert little_flags([one(GEO)]) == []


# ---- geospatial coverage ------------------------------------------------------------------------------

def test_geospatial_coverage_by_hand():
    run = one(GEO)
    assert run.family == "geospatial" and run.tile_hw == (64, 64)
    # offline, SLO 5 ms: batch 4 at 1600 inf/s. 10000 x 1.2 / 1600 = 7.5 -> 8 replicas
    plan = size([run], Demand(10000, 5.0), Prices(gpu_hour=2.0), gsd_m=(10.0, 30.0)).recommendation
    assert plan.replicas == 8 and plan.sustainable.point.batch == 4
    c10, c30 = plan.coverage
    assert c10.km2_per_inference == pytest.approx(0.4096)  # (64 px x 10 m)^2 / 1e6
    assert c10.km2_per_s_replica == pytest.approx(655.36)  # 1600 x 0.4096
    assert c10.km2_per_s_fleet == pytest.approx(5242.88)  # 8 x 655.36
    assert c10.seconds_to_cover == pytest.approx(1.49e8 / 5242.88)  # ~7.9 h for Earth's land
    assert c30.km2_per_inference == pytest.approx(3.6864)  # (64 x 30)^2 / 1e6
    assert coverage_km2_per_s(1000, (224, 224), 10.0) == pytest.approx(5017.6)  # the seed's S2 row
    assert size([one(X1)], Demand(100, 10)).recommendation.coverage == []  # not a geospatial model


# ---- scaling, frontier, outputs ---------------------------------------------------------------------

def test_scaling_table_across_instance_counts():
    sizing = size([one(X1), one(X2)], Demand(5000, 10))
    (table,) = scaling_tables(sizing.plans)
    assert table.counts == [1, 2] and table.throughput == [1400.0, 1560.0]
    assert table.perfect == [1400.0, 2800.0]
    assert table.speedup[1] == pytest.approx(1560 / 1400)
    assert "p99 <= 10 ms" in table.basis


def test_frontier_cost_never_rises_as_the_slo_loosens():
    runs = [one(X1), one(X2), one(FLAWED)]
    steps = frontier(runs, Demand(5000, 10), Prices(gpu_hour=2.0))
    assert steps[0].slo_ms == 3.0 and steps[0].plan is not None  # the tightest p99 measured (trt c1)
    costs = [s.plan.cost_h for s in steps if s.plan]
    assert costs == sorted(costs, reverse=True) and costs[0] > costs[-1]
    assert 10.0 in [s.slo_ms for s in steps]


def test_outputs_md_csv_png(tmp_path, table_rows):
    runs = [one(X1), one(X2), one(FLAWED)]
    demand = Demand(5000, 10, gpus_per_node=4)
    sizing = size(runs, demand, Prices(gpu_hour=2.0))
    paths = write_outputs(sizing, runs, frontier(runs, demand, Prices(gpu_hour=2.0)), tmp_path)
    md = paths["sizing.md"].read_text()
    for text in ("## Recommendation", "ranked by cost per hour", "## Consistency check (Little's law)",
                 "## Excluded points", "concurrency 16", "## Scaling: resnet50", "![cost frontier](sizing.png)"):
        assert text in md, text
    assert ["N (Triton instances)", "1", "2"] in table_rows(md) and ["Speedup", "1x", "1.11x"] in table_rows(md)
    assert paths["sizing.png"].stat().st_size > 10_000
    rows = list(__import__("csv").DictReader(open(paths["sizing.csv"])))
    assert [r["recommended"] for r in rows].count("True") == 1
    trt = next(r for r in rows if "trt" in r["run"])
    # trt: c4 1800/replica -> ceil(3.33) = 4 GPUs, $8/h: ties with x2 on cost, wins on throughput per replica
    assert (trt["replicas"], trt["devices"], trt["cost_per_h"], trt["excluded_unreliable"]) == ("4", "4", "8", "1")
    assert sizing_csv(sizing).splitlines()[0].startswith("rank,recommended,run,kind")


# ---- command line -----------------------------------------------------------------------------------

def _cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, str(ROOT / "triton" / "size_fleet.py"), *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


def test_cli_help_has_an_example():
    out = _cli("--help")
    assert out.returncode == 0 and "example:" in out.stdout and "--peak-rps" in out.stdout


def test_cli_plans_writes_outputs_and_manifests(tmp_path):
    out = _cli(X1, X2, "--peak-rps", 5000, "--p99-ms", 10, "--prices", FIX / "prices.yaml", "--gpus-per-node", 4,
               "--output", tmp_path / "out", "--emit-k8s", tmp_path / "k8s", "--pvc", "models")
    assert out.returncode == 0, out.stderr
    assert "4 GPUs at $8.00/h" in out.stdout and "valid Deployment" in out.stdout
    assert {p.name for p in (tmp_path / "out").iterdir()} >= {"sizing.md", "sizing.csv", "sizing.png", "run.json"}
    assert json.loads((tmp_path / "out" / "run.json").read_text())["config"]["peak_rps"] == 5000
    assert {p.name for p in (tmp_path / "k8s").iterdir()} == {
        "deployment.yaml", "service.yaml", "hpa.yaml", "kserve-inferenceservice.yaml", "prometheus-adapter-rules.yaml"}
    md = (tmp_path / "out" / "sizing.md").read_text()
    assert "## Autoscaling" in md and "scales on requests/s per pod" in md and "--autoscale-on queue-ratio" in md
    queue = _cli(X1, X2, "--peak-rps", 5000, "--p99-ms", 10, "--prices", FIX / "prices.yaml", "--gpus-per-node", 4,
                 "--output", tmp_path / "q", "--emit-k8s", tmp_path / "k8s-q", "--autoscale-on", "queue-ratio")
    assert queue.returncode == 0, queue.stderr
    assert "the HPA scales on queue/compute per pod, target" in queue.stdout
    assert "triton_queue_compute_ratio" in (tmp_path / "k8s-q" / "hpa.yaml").read_text()


def test_cli_defaults_to_the_first_run_folder(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(X1, run)
    perf_meta = (run / "run.json").read_text()
    out = _cli(run, "--peak-rps", 100, "--p99-ms", 10)
    assert out.returncode == 0, out.stderr
    assert (run / "run.json").read_text() == perf_meta  # the run's own record is not replaced
    assert (run / "sizing.md").exists() and (run / "sizing.png").exists()


def test_cli_unreachable_and_errors(tmp_path):
    out = _cli(X1, "--peak-rps", 100, "--p99-ms", 1, "--output", tmp_path)
    assert out.returncode == 1 and "best p99 measured is 4.000 ms" in out.stdout
    assert "## SLO not reachable" in (tmp_path / "sizing.md").read_text()
    bad = _cli(FIX / "all_unstable", "--peak-rps", 100, "--p99-ms", 10, "--output", tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("error: all 2 points") and "Traceback" not in bad.stderr
    neg = _cli(X1, "--peak-rps", -1, "--p99-ms", 10, "--output", tmp_path)
    assert neg.returncode == 2 and "--peak-rps must be > 0 and <= 1e+09 inferences/s, got -1.0" in neg.stderr


# ---- recorded run, report section ---------------------------------------------------------------------

def test_recorded_cpu_run():
    # resnet18 small ONNX on the embedded server, 2-core VM: (c, inf/s, p99 ms, avg ms)
    # (1, 108.1, 43.8, 9.15) (2, 140.0, 63.8, 14.3) (4, 260.6, 23.4, 15.3) (8, 277.8, 49.1, 28.8) (16, 276.1, 94.0, 57.8)
    run = one(FIX / "recorded_cpu_resnet18_x1")
    assert run.gpu is False and run.instances == 1 and run.format.startswith("onnx")
    assert little_flags([run]) == []  # e.g. c8: 277.772 x 28.764 ms = 7.99 in flight
    plan = size([run], Demand(1000, 50), Prices(host_hour=0.4)).recommendation
    # p99 <= 50: c1, c4, c8 -> 277.772 at c8; 1200 / 277.772 = 4.32 -> 5 hosts, $2/h
    assert plan.sustainable.point.concurrency == 8 and (plan.replicas, plan.devices, plan.cost_h) == (5, 5, 2.0)
    assert size([run], Demand(1000, 30)).recommendation.sustainable.throughput == pytest.approx(260.562)


def test_sizing_section_goes_into_the_report_once(tmp_path):
    from deployment_toolkit.report.build import build_report
    from deployment_toolkit.sizing.output import include_in_report

    run_dir = tmp_path / "run"
    shutil.copytree(X1, run_dir)
    build_report(run_dir)
    runs = [one(run_dir)]
    demand = Demand(5000, 10)
    for _ in range(2):  # sizing twice: the section is replaced, not repeated
        paths = write_outputs(size(runs, demand), runs, frontier(runs, demand), run_dir)
    html = (run_dir / "report.html").read_text()
    assert html.count("<h2>Fleet sizing</h2>") == 1 and html.index("Fleet sizing") < html.index("</body>")
    assert "data:image/png;base64" in paths["sizing.html"].read_text()
    md = (run_dir / "report.md").read_text()
    assert md.count("## Fleet sizing") == 1 and "### Recommendation" in md and "# Triton performance report" in md
    build_report(run_dir)  # a rebuilt report keeps the section, once
    assert (run_dir / "report.html").read_text().count("<h2>Fleet sizing</h2>") == 1
    assert (run_dir / "report.md").read_text().count("## Fleet sizing") == 1
    assert set(include_in_report(run_dir)) == {"sizing.md", "sizing.html"}
    assert (run_dir / "report.html").read_text().count("<h2>Fleet sizing</h2>") == 1
