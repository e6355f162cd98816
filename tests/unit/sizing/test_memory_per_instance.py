"""Memory per instance (issue 29, item 3): the line through the memory each instance count used, whether a plan
fits a device, on recorded server summaries (`<kind>_server.csv` as the sweeps write it) - a real CPU sweep's rows
and handmade GPU ones with two GPUs in the series - and the sizing's ranking, rejection and refusal on them."""
from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from deployment_toolkit.results.memory import GB, GIB, MemoryReading, at_point, fit, memory_model, sweep_memories
from deployment_toolkit.sizing import Demand, Prices, SizingError, load_runs, size
from deployment_toolkit.sizing.memory import MemoryBudget, markdown
from deployment_toolkit.sizing.output import sizing_csv

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures" / "sizing"
HEADER = ("Client Batch Size,Concurrent client requests,client_infer_per_s,samples,seconds,server_infer_per_s,"
          "client_vs_server_pct,avg_batch,queue_us_per_request,compute_infer_us_per_request,compute_infer_us_per_exec,"
          "pending_requests,cpu_util_pct,cpu_memory_gib,gpu_util_pct,gpu_memory_gib,gpu_power_w")
# recorded: resnet18 (small preset, Python backend, 1 instance) swept on a shared 2-core VM
RECORDED_CPU = HEADER + """
1,1,105.963,35,7.305,102.5303,3.348,1.0,212.9052,8575.8598,8575.8598,0.0,71.4867,1.6083,,,
1,2,118.621,12,5.465,117.6657,0.8119,1.3858,3858.7278,11722.4961,16244.7522,0.5,52.3925,1.6026,,,
1,4,150.134,52,5.665,144.0424,4.229,2.3314,7763.7831,17022.3676,39686.4343,1.2308,86.6261,1.6093,,,
1,8,175.208,12,5.5,173.6271,0.9105,4.4836,14328.7058,28734.2534,128831.9812,1.75,90.638,1.395,,,
"""


def reading(n: int, gb: float, spread: float = 0.0) -> MemoryReading:
    return MemoryReading(n, gb * GB, "GPU", f"x{n}", spread * GB)


# ---- the line ------------------------------------------------------------------------------------

def test_two_instance_counts_give_the_cost_of_an_extra_instance():
    m = memory_model([reading(1, 3.0), reading(2, 4.5)])
    assert m.fixed == pytest.approx(1.5 * GB) and m.per_instance == pytest.approx(1.5 * GB) and m.grows
    assert m.steps() == [(1, 2, pytest.approx(1.5 * GB))]
    assert m.used(4) == pytest.approx(7.5 * GB)  # an unmeasured count from the line
    assert "1.50 GB fixed + 1.50 GB per instance" in m.text()


def test_more_counts_are_a_least_squares_line_and_repeats_keep_the_largest():
    m = memory_model([reading(1, 2.0), reading(2, 3.1), reading(4, 4.9), reading(2, 2.9)])
    assert m.counts == [1, 2, 4] and m.used(2) == pytest.approx(3.1 * GB)
    # least squares over (1, 2.0) (2, 3.1) (4, 4.9): means 7/3 and 10/3, Sxy = 40.2/9, Sxx = 42/9
    assert m.per_instance == pytest.approx(40.2 / 42 * GB)
    assert m.fixed == pytest.approx((10 / 3 - 40.2 / 42 * 7 / 3) * GB)
    assert m.readings[1].spread == pytest.approx(0.2 * GB)  # the repeats' disagreement is noise


def test_one_count_has_no_line_and_nothing_is_no_model():
    one = memory_model([reading(2, 4.0)])
    assert one.fixed is None and one.per_instance is None and not one.grows and "not known" in one.text()
    assert memory_model([]).readings == () and "no GPU memory measured" in memory_model([]).text()


def test_a_rise_smaller_than_the_gauges_own_movement_is_not_resolved():
    m = memory_model([reading(1, 1.60, 0.23), reading(2, 1.70, 0.05), reading(3, 1.75, 0.1)])
    assert m.per_instance > 0 and not m.grows  # +0.15 GB over the counts, the gauge moved 0.23 GB in one run
    assert "not resolved" in m.text()
    falling = memory_model([reading(1, 1.73), reading(2, 1.41)])
    assert falling.per_instance < 0 and not falling.grows


# ---- the fit ---------------------------------------------------------------------------------------

def test_how_many_instances_fit_a_device():
    m = memory_model([reading(1, 3.0), reading(2, 4.5)])
    f = fit(m, 2, 80 * GB, "batch 1, concurrency 4")
    assert f.fits and f.used == pytest.approx(4.5 * GB) and f.max_instances == 52  # (80 - 1.5) / 1.5 = 52.3
    assert f.reason.startswith("x2 used 4.50 GB of GPU memory (batch 1, concurrency 4), which fits 80.00 GB")
    small = fit(m, 2, 4 * GB)
    assert small.fits is False and small.max_instances == 1 and "more than 4.00 GB" in small.reason
    none = fit(m, 1, 2 * GB)
    assert none.fits is False and none.max_instances == 0 and "not even one instance fits" in none.reason
    predicted = fit(m, 4, 7 * GB)
    assert predicted.fits is False and "would use (from the line) 7.50 GB" in predicted.reason


def test_a_measured_reading_wins_over_the_line():
    m = memory_model([reading(1, 3.0), reading(2, 4.6), reading(3, 5.5)])  # the line says 2 -> 4.37 GB
    f = fit(m, 2, 4.55 * GB)
    assert f.fits is False and f.max_instances == 1  # the line alone would allow 2


def test_nothing_measured_is_said_never_guessed():
    f = fit(memory_model([], "GPU"), 2, 80 * GB)
    assert f.fits is None and f.used is None and f.max_instances is None and "not checked" in f.reason
    one = fit(memory_model([reading(1, 3.0)]), 1, 80 * GB)
    assert one.fits and one.max_instances is None and "one instance count measured" in one.reason
    unresolved = fit(memory_model([reading(1, 1.6, 0.3), reading(2, 1.7)]), 4, 80 * GB)
    assert unresolved.fits is None and "do not resolve" in unresolved.reason


# ---- readings from recorded summaries ---------------------------------------------------------------

def test_host_memory_at_a_point_of_a_recorded_cpu_sweep(tmp_path):
    (tmp_path / "online_server.csv").write_text(RECORDED_CPU)
    memories = sweep_memories(tmp_path, "online", gpu=False)
    assert memories[(1, 4)] == pytest.approx(1.6093 * GIB) and len(memories) == 4
    at = at_point(memories, False, 1, 4)
    assert at.device == "host" and at.where == "batch 1, concurrency 4"
    peak = at_point(memories, False, 1, 16)  # a point without a summary: the sweep's peak, said so
    assert peak.bytes == pytest.approx(1.6093 * GIB) and "peak over the sweep" in peak.where
    assert sweep_memories(tmp_path, "offline", gpu=False) == {}


def gpu_run(tmp_path: Path, fixture: str, busiest_gb: dict[int, float], idle_gb: float = 0.5) -> Path:
    """A copy of a handmade GPU run with a server summary per point and a series of two GPUs: GPU-0 carries the
    model (`busiest_gb` per concurrency), GPU-1 only the server's context (`idle_gb`)."""
    run = tmp_path / fixture
    shutil.copytree(FIX / fixture, run)
    rows, series = [HEADER], ["Client Batch Size,Concurrent client requests,t_s,metric,series,value"]
    for c, used in busiest_gb.items():
        rows.append(f"1,{c},100,8,4.0,100,0,1,10,100,100,0,50,2.0,60,{(used + idle_gb) * GB / GIB:.6f},250")
        for t, frac in ((0.0, 0.9), (0.5, 1.0)):
            series.append(f"1,{c},{t},nv_gpu_memory_used_bytes,GPU-0,{used * GB * frac}")
            series.append(f"1,{c},{t},nv_gpu_memory_used_bytes,GPU-1,{idle_gb * GB}")
    (run / "online_server.csv").write_text("\n".join(rows) + "\n")
    (run / "telemetry").mkdir()
    (run / "telemetry" / "online_series.csv").write_text("\n".join(series) + "\n")
    return run


@pytest.fixture()
def gpu_runs(tmp_path):
    """resnet50 on an A100 at 1 and 2 instances (SLO 10 ms: both plans rest on concurrency 4)."""
    x1 = gpu_run(tmp_path, "gpu_a100_onnx_x1", {1: 2.9, 2: 2.95, 4: 3.0, 8: 3.1, 16: 3.2})
    x2 = gpu_run(tmp_path, "gpu_a100_onnx_x2", {1: 4.4, 2: 4.45, 4: 4.5, 8: 4.6, 16: 4.7})
    return x1, x2


def test_the_busiest_gpu_counts_not_the_sum_over_the_hosts_gpus(gpu_runs):
    memories = sweep_memories(gpu_runs[0], "online", gpu=True)
    assert memories[(1, 4)] == pytest.approx(3.0 * GB)  # the summary's 3.5 GB adds GPU-1's idle context


# ---- sizing ------------------------------------------------------------------------------------------

def runs_of(*paths):
    return [r for p in paths for r in load_runs(p)]


def test_every_plan_says_its_memory_and_how_many_instances_fit(gpu_runs):
    sizing = size(runs_of(*gpu_runs), Demand(5000, 10, 0.2), Prices(gpu_hour=2.0), memory_budget=MemoryBudget(80))
    x1, x2 = sizing.plans
    assert sizing.recommendation is x2 and not sizing.rejected
    assert x2.memory.fit.max_instances == 52 and x2.memory.reading.bytes == pytest.approx(4.5 * GB)
    assert "Memory: x2 used 4.50 GB of GPU memory (batch 1, concurrency 4), which fits 80.00 GB; at most 52" \
        in sizing.reason
    row = [r for r in sizing_csv(sizing).splitlines()[1:] if "gpu_a100_onnx_x2" in r][0]
    assert row.endswith(",GPU,4.5,1.5,80,yes,52")


def test_a_plan_that_does_not_fit_is_left_out_and_the_next_recommended(gpu_runs):
    sizing = size(runs_of(*gpu_runs), Demand(5000, 10, 0.2), Prices(gpu_hour=2.0), memory_budget=MemoryBudget(4))
    x1, x2 = sizing.plans
    assert sizing.recommendation is x1 and x2.rejected and x2.rank is None and sizing.ranked == [x1]
    assert "gpu_a100_onnx_x2/online" in sizing.rejected[0] and "more than 4.00 GB" in sizing.rejected[0]
    assert "Left out, their memory does not fit" in sizing.reason and x1.memory.fit.max_instances == 1
    assert "memory_does_not_fit" in sizing_csv(sizing)
    md = "\n".join(markdown(sizing.plans, sizing.budget))
    assert "## Memory per replica" in md and "**no**" in md and "Left out of the ranking" in md


def test_nothing_fits_is_no_recommendation_with_the_reasons(gpu_runs):
    sizing = size(runs_of(*gpu_runs), Demand(5000, 10, 0.2), memory_budget=MemoryBudget(2))
    assert sizing.recommendation is None and len(sizing.rejected) == 2
    assert sizing.reason.startswith("No configuration that meets p99 <= 10 ms fits the device")


def test_old_runs_without_memory_are_unchecked_not_rejected():
    sizing = size(runs_of(FIX / "gpu_a100_onnx_x1"), Demand(5000, 10, 0.2), memory_budget=MemoryBudget(1))
    plan = sizing.plans[0]
    assert sizing.recommendation is plan and not plan.rejected and plan.memory.fit.fits is None
    assert "no GPU memory measured" in plan.memory.text() and "not checked" in sizing.reason
    assert markdown(size(runs_of(FIX / "gpu_a100_onnx_x1"), Demand(5000, 10, 0.2)).plans) == []


def test_a_budget_for_the_other_kind_of_device_is_said():
    cpu = runs_of(FIX / "cpu_host_onnx_x2")
    with pytest.raises(SizingError, match="none of the runs is on a GPU.*--host-memory-gb"):
        size(cpu, Demand(100, 100, 0.2), memory_budget=MemoryBudget(gpu_gb=80))
    mixed = size(cpu + runs_of(FIX / "gpu_a100_onnx_x1"), Demand(100, 100, 0.2), memory_budget=MemoryBudget(80))
    assert "--gpu-memory-gb does not apply to a CPU-only run" in mixed.plans[0].memory.text()
    with pytest.raises(SizingError, match="> 0"):
        MemoryBudget(gpu_gb=0)


def _cli(*args: str):
    return subprocess.run([sys.executable, "triton/size_fleet.py", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def test_cli_refuses_a_plan_that_does_not_fit_in_one_line(gpu_runs, tmp_path):
    x1, x2 = gpu_runs
    out = _cli(str(x2), "--peak-rps", "5000", "--p99-ms", "10", "--gpu-memory-gb", "4", "--output", str(tmp_path / "o"))
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: No configuration that meets p99 <= 10 ms fits"), out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "o").exists()
    ok = _cli(str(x1), str(x2), "--peak-rps", "5000", "--p99-ms", "10", "--gpu-memory-gb", "4", "--output",
              str(tmp_path / "o"))
    assert ok.returncode == 0, ok.stderr
    assert "rejected: gpu_a100_onnx_x2/online" in ok.stdout and "memory: x1 used 3.00 GB" in ok.stdout
    assert "## Memory per replica" in (tmp_path / "o" / "sizing.md").read_text()
    picked = _cli(str(x1), str(x2), "--peak-rps", "5000", "--p99-ms", "10", "--gpu-memory-gb", "4", "--output",
                  str(tmp_path / "o"), "--emit-k8s", str(tmp_path / "k8s"), "--k8s-run", str(x2))
    errors = [line for line in picked.stderr.splitlines() if line.startswith("error:")]
    assert picked.returncode == 2 and len(errors) == 1 and "Traceback" not in picked.stderr, picked.stderr
    assert errors[0].startswith("error: nothing to deploy: gpu_a100_onnx_x2/online")


def test_search_memory_per_instance_count_from_its_points(tmp_path):
    """The search's table: each instance count at its best config's best level, the peak over that level's samples."""
    from deployment_toolkit.search.memory import markdown as search_markdown, per_instance_count
    from deployment_toolkit.search.store import Point, SearchStore
    from deployment_toolkit.search.sweep import SweepResult

    store = SearchStore(tmp_path, {"model": "toy"}).open()

    def trial(key: str, instances: int, points: list[Point], best: Point | None):
        for p in points:
            store.put(p)
        cand = SimpleNamespace(instances=instances, slug=key)
        return SimpleNamespace(key=key, candidate=cand, status="measured", sweep=SweepResult(points=points), best=best)

    def pt(key, c, s, thr, mem_gb):
        return Point(key, c, s, thr, 10.0, host_memory_bytes=mem_gb * GB)

    a = [pt("i1", 1, 0, 50, 1.0), pt("i1", 2, 0, 80, 1.05), pt("i1", 2, 1, 82, 1.1)]
    b = [pt("i1t1", 1, 0, 40, 1.0), pt("i1t1", 2, 0, 60, 2.0)]  # worse config of the same count: not the reading
    c = [pt("i2", 1, 0, 60, 1.4), pt("i2", 2, 0, 100, 1.5)]
    d = [Point("i4", 1, 0, 30, 900.0)]  # over the budget and no memory recorded: no reading
    outcome = SimpleNamespace(settings=SimpleNamespace(objective="throughput"),
                              trials=[trial("i1", 1, a, a[1]), trial("i1t1", 1, b, b[1]), trial("i2", 2, c, c[1]),
                                      trial("i4", 4, d, None)])
    rows, model = per_instance_count(outcome, store)
    assert [(r.reading.instances, r.config, r.concurrency) for r in rows] == [(1, "i1", 2), (2, "i2", 2)]
    assert rows[0].reading.bytes == pytest.approx(1.1 * GB)  # the peak over the level's two samples
    assert model.per_instance == pytest.approx(0.4 * GB) and model.grows
    md = "\n".join(search_markdown(outcome, store))
    assert "| 2 | `i2`" in md.replace("  ", " ").replace("  ", " ") or "`i2`" in md
    assert "+0.40 GB" in md and "Estimate: host memory = 0.70 GB fixed + 0.40 GB per instance" in md
    assert not math.isnan(rows[1].reading.spread)
