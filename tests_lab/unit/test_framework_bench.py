"""The framework bench's logic (deployment_toolkit_lab/framework_bench/, `deployment-toolkit-lab bench`): configuration
matrix, skip reasons, resume, coverage arithmetic, the CSV."""
from __future__ import annotations

import csv
import json
import math
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deployment_toolkit.results.bench_store import BenchCSV
from deployment_toolkit_lab import framework_bench as fw
from deployment_toolkit_lab.framework_bench import BenchConfig, HostCaps

pytestmark = pytest.mark.slow  # real exports or subprocesses: `make test` runs it, `make test-unit` does not

CPU = HostCaps(device="cpu")
ROOT = Path(__file__).resolve().parents[2]


def cfg(runtime="eager", precision="fp32", compile_mode="none", batch=1, model="resnet50") -> BenchConfig:
    return BenchConfig(model, "full", runtime, precision, compile_mode, batch)


# ---------------------------------------------------------------------------------------------- enumeration

def test_enumeration_pairs_compile_with_eager_only_and_groups_batch_sizes():
    configs = fw.enumerate_configs(["resnet50", "s2_resnet50"], batch_sizes=(8, 1, 8))
    # per model: eager 4 precisions x 2 modes x 2 batches + (torchscript + onnxruntime) 4 precisions x 2 batches
    assert len(configs) == 2 * (4 * 2 * 2 + 2 * 4 * 2)
    assert all(c.runtime == "eager" for c in configs if c.compile_mode != "none")
    assert len(set(configs)) == len(configs)
    groups = fw.groups_of(configs)
    assert all([c.batch_size for c in g] == [1, 8] for g in groups)
    assert len(groups) == len(configs) // 2
    # a group's configurations are consecutive, so one prepared model serves them in a row
    assert [c for g in groups for c in g] == configs


def test_enumeration_rejects_unknown_values():
    with pytest.raises(ValueError, match="precision"):
        fw.enumerate_configs(["resnet50"], precisions=("int8",))
    with pytest.raises(ValueError, match="runtime"):
        fw.enumerate_configs(["resnet50"], runtimes=("tensorflow",))
    with pytest.raises(ValueError, match="batch"):
        fw.enumerate_configs(["resnet50"], batch_sizes=(0,))


# ---------------------------------------------------------------------------------------------- skip reasons

@pytest.mark.parametrize("precision, expected", [
    ("fp32", None), ("fp16", "CPU provider has no fp16"), ("bf16", "no bf16 kernels"), ("amp", "autocast"),
])
def test_onnxruntime_on_cpu(precision, expected):
    reason = fw.skip_reason(cfg("onnxruntime", precision), CPU)
    assert reason is None if expected is None else expected in reason


def test_torch_runtimes_run_every_precision_on_a_capable_cpu():
    for runtime in ("eager", "torchscript"):
        for precision in fw.PRECISIONS:
            assert fw.skip_reason(cfg(runtime, precision), CPU) is None


def test_compile_reasons():
    assert "eager runtime only" in fw.skip_reason(cfg("torchscript", compile_mode="default"), CPU)
    broken = HostCaps(compile_error="cannot execute 'as'")
    assert "cannot execute 'as'" in fw.skip_reason(cfg(compile_mode="default"), broken)
    assert fw.skip_reason(cfg(compile_mode="none"), broken) is None


def test_gpu_reasons():
    volta = HostCaps(device="cuda:0", bf16=False, ort_providers=("CPUExecutionProvider",))
    assert "compute capability" in fw.skip_reason(cfg(precision="bf16"), volta)
    assert fw.skip_reason(cfg(precision="amp"), volta) is None  # amp on CUDA autocasts to fp16
    assert "compute capability" in fw.skip_reason(cfg(precision="amp"), volta, amp_dtype="bf16")
    assert "CUDAExecutionProvider" in fw.skip_reason(cfg("onnxruntime"), volta)
    hopper = HostCaps(device="cuda:0", ort_providers=("CUDAExecutionProvider", "CPUExecutionProvider"))
    assert fw.skip_reason(cfg("onnxruntime", "fp16"), hopper) is None


def test_missing_kernels_skip_that_precision():
    caps = HostCaps(fp16_error="RuntimeError: not implemented for 'Half'")
    assert "Half" in fw.skip_reason(cfg(precision="fp16"), caps)
    assert fw.skip_reason(cfg(precision="bf16"), caps) is None


# ---------------------------------------------------------------------------------------------- resume

def stored(c: BenchConfig, status: str) -> dict:
    return {**fw.base_row(c, "cpu", status), "requested_batch_size": str(c.batch_size), "threads_requested": "0"}


def test_resume_skips_completed_and_retries_failed():
    a, b, c, d = cfg(batch=1), cfg(batch=8), cfg("torchscript"), cfg("onnxruntime", "bf16")
    existing = [stored(a, "ok"), stored(b, "failed"), stored(d, "skipped")]
    plan = fw.plan_run([a, b, c, d], CPU, existing)
    assert plan.done == [a, d]
    assert plan.todo == [b, c]
    assert plan.unsupported == []
    assert plan.summary() == "4 configurations: skipping 2 completed, 0 unsupported on this host, 2 to measure"
    again = fw.plan_run([a, b, c, d], CPU, existing, remeasure=True)
    assert again.todo == [a, b, c] and [x for x, _ in again.unsupported] == [d]


def test_a_skip_that_no_longer_holds_is_measured_and_a_measurement_is_never_replaced_by_a_skip():
    comp = cfg(compile_mode="default")
    existing = [stored(comp, "skipped")]
    assert fw.plan_run([comp], CPU, existing).todo == [comp]  # the host has a compiler now
    broken = HostCaps(compile_error="timed out")
    assert fw.plan_run([comp], broken, [stored(comp, "ok")]).done == [comp]


def test_new_unsupported_configs_are_listed_with_their_reason():
    plan = fw.plan_run([cfg("onnxruntime", "amp")], CPU, [])
    assert len(plan.unsupported) == 1 and "autocast" in plan.unsupported[0][1]


# ---------------------------------------------------------------------------------------------- arithmetic

def test_coverage_by_hand():
    # 224 px x 10 m = 2.24 km a side -> 5.0176 km^2 per tile; 100 tiles/s -> 501.76 km^2/s
    assert fw.coverage_km2_per_s(100.0, (224, 224), 10.0) == pytest.approx(501.76)
    # 64 x 128 px at 30 m: 1.92 km x 3.84 km = 7.3728 km^2; 2.5 tiles/s -> 18.432 km^2/s
    assert fw.coverage_km2_per_s(2.5, (64, 128), 30.0) == pytest.approx(18.432)
    assert fw.tile_pixels((13, 224, 224)) == (224, 224)
    assert fw.tile_pixels((4, 128, 128, 128)) is None  # a volume is not a map tile
    assert fw.coverage_column(10.0) == "km2_per_s_at_10m" and fw.coverage_column(0.3) == "km2_per_s_at_0.3m"


def test_summary_shows_coverage_for_geospatial_rows(table_rows):
    row = {"model": "s2_resnet50", "runtime": "onnxruntime", "precision": "fp32", "compile_mode": "none",
           "batch_size": 8, "throughput": 35.4, "unit": "tiles/s", "status": "ok", "km2_per_s_at_10m": 18.56}
    header, cells = table_rows(fw.summary_table([row]))
    assert cells[-2:] == ["18.6 at 10m", "ok"] and header[-2].startswith("km")


def test_coverage_columns_only_for_measured_geospatial_rows():
    row = {"family": "geospatial", "status": "ok", "input_shape": "13x224x224", "throughput": 100.0}
    fw.add_coverage(row, (10.0, 30.0))
    assert row["tile_px"] == "224x224"
    assert row["km2_per_s_at_10m"] == pytest.approx(501.76)
    assert row["km2_per_s_at_30m"] == pytest.approx(100 * 6.72 ** 2)
    plain = {"family": "timm", "status": "ok", "input_shape": "3x224x224", "throughput": 100.0}
    assert not any(k.startswith("km2") for k in fw.add_coverage(plain, (10.0,)))
    skipped = {"family": "geospatial", "status": "skipped", "input_shape": "13x224x224"}
    assert "tile_px" not in fw.add_coverage(skipped, (10.0,))


def test_latency_stats_by_hand():
    s = fw.latency_stats([0.1, 0.2, 0.3, 0.4], batch=8)
    assert s["throughput"] == pytest.approx(32 / 1.0)
    assert s["mean_ms"] == pytest.approx(250.0)
    assert s["p50_ms"] == pytest.approx(250.0)
    assert s["p99_ms"] == pytest.approx(397.0)  # numpy's linear interpolation: 0.3 + 0.97 * 0.1
    assert s["iterations"] == 4 and s["timed_s"] == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------- OOM

def test_batch_halving_until_it_fits():
    tried = []

    def measure(batch):
        tried.append(batch)
        if batch > 4:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return f"ok at {batch}"

    assert fw.with_batch_halving(measure, 32) == ("ok at 4", 4)
    assert tried == [32, 16, 8, 4]


def test_batch_halving_gives_up_at_one_and_passes_other_errors():
    with pytest.raises(MemoryError):
        fw.with_batch_halving(lambda b: (_ for _ in ()).throw(MemoryError()), 4)
    with pytest.raises(ValueError, match="shape"):
        fw.with_batch_halving(lambda b: (_ for _ in ()).throw(ValueError("bad shape")), 4)
    assert fw.is_oom(RuntimeError("[enforce fail at alloc_cpu.cpp] DefaultCPUAllocator: can't allocate memory"))
    assert not fw.is_oom(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))


# ---------------------------------------------------------------------------------------------- the CSV

def ok_row(batch: int, throughput: float = 1.0, **extra) -> dict:
    return {**fw.base_row(cfg(batch=batch), "cpu", "ok"), "throughput": throughput, **extra}


def read_csv(path: Path) -> tuple[list[str], list[dict]]:
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        return reader.fieldnames, list(reader)


def test_upsert_replaces_a_configuration_and_unions_coverage_columns(tmp_path):
    store = BenchCSV(tmp_path / "dev.csv")
    store.upsert([ok_row(1, 1.0), ok_row(8, 2.0)])
    store.upsert([ok_row(8, 3.0, km2_per_s_at_30m=9.0, km2_per_s_at_10m=1.0)])
    header, rows = read_csv(store.path)
    assert header[-2:] == ["km2_per_s_at_10m", "km2_per_s_at_30m"]  # numeric GSD order
    assert header.count("model") == 1
    assert [(r["requested_batch_size"], r["throughput"]) for r in rows] == [("1", "1"), ("8", "3")]
    assert rows[0]["km2_per_s_at_10m"] == ""


def test_a_crash_while_writing_leaves_the_previous_file_intact(tmp_path, monkeypatch):
    store = BenchCSV(tmp_path / "dev.csv")
    store.upsert([ok_row(1)])
    before = store.path.read_text()

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        store.upsert([ok_row(8)])
    monkeypatch.undo()
    assert store.path.read_text() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def _append_many(path: str, start: int, count: int) -> None:
    store = BenchCSV(path)
    for i in range(start, start + count):
        store.upsert([ok_row(i)])


def test_concurrent_writers_lose_no_rows(tmp_path):
    path = str(tmp_path / "dev.csv")
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(path, 1 + 100 * k, 15)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    header, rows = read_csv(Path(path))
    assert len(rows) == 60
    assert sorted(int(r["requested_batch_size"]) for r in rows) == sorted(
        1 + 100 * k + i for k in range(4) for i in range(15))
    assert all(r["status"] == "ok" for r in rows)


# ---------------------------------------------------------------------------------------------- isolation

def _sleeper(configs, opts, conn):
    conn.send({**fw.base_row(configs[0], "cpu", "ok"), "requested_batch_size": configs[0].batch_size})
    time.sleep(60)


def _killed(configs, opts, conn):
    os.kill(os.getpid(), signal.SIGKILL)


def test_isolated_group_timeout_fails_the_rest(tmp_path):
    rows = []
    group = [cfg(compile_mode="default", batch=b) for b in (1, 8, 32)]
    t0 = time.monotonic()
    fw.run_group_isolated(group, fw.BenchOptions(), rows.append, timeout_s=1.0, target=_sleeper, context="fork")
    assert time.monotonic() - t0 < 30
    assert [r["status"] for r in rows] == ["ok", "failed", "failed"]
    assert "timed out after 1 s" in rows[1]["reason"]
    assert rows[2]["reason"].startswith("not run: timed out")


def test_isolated_group_killed_worker():
    rows = []
    fw.run_group_isolated([cfg()], fw.BenchOptions(), rows.append, timeout_s=30, target=_killed, context="fork")
    assert rows[0]["status"] == "failed" and "SIGKILL" in rows[0]["reason"]


# ---------------------------------------------------------------------------------------------- names

def test_slugs():
    assert fw.slugify("Intel(R) Xeon(R) Processor") == "intel-xeon-processor"
    assert fw.slugify("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert fw.device_slug("cpu").startswith("cpu-") and fw.device_slug("cpu").endswith("c")


# ---------------------------------------------------------------------------------------------- end to end

def test_tiny_run_writes_csv_and_hardware_json_and_resumes(tmp_path, table_rows):
    """resnet18 (small) eager fp32 at batch 1 for a fraction of a second, plus one unsupported config."""
    configs = [BenchConfig("resnet18", "small", "eager", "fp32", "none", 1),
               BenchConfig("resnet18", "small", "onnxruntime", "amp", "none", 1)]
    opts = fw.BenchOptions(warmup=1, duration_s=0.05, min_iterations=2)
    path, rows, plan = fw.run_bench(configs, opts, tmp_path, caps=CPU, isolate="none", progress=False,
                                    log=lambda m: None)
    assert [len(plan.done), len(plan.unsupported), len(plan.todo)] == [0, 1, 1]
    by_status = {r["status"]: r for r in rows}
    ok = by_status["ok"]
    assert ok["throughput"] > 0 and ok["p50_ms"] > 0 and ok["iterations"] >= 2
    assert ok["peak_mem_metric"] in ("rss_peak_delta", "ru_maxrss_delta (lower bound)")
    assert not math.isnan(ok["loadavg_1m"])
    assert (tmp_path / f"{fw.device_slug('cpu')}_hardware.json").exists()
    assert json.loads((tmp_path / "run.json").read_text())["runs"][-1]["config"]
    _, stored_rows = read_csv(path)
    assert sorted(r["status"] for r in stored_rows) == ["ok", "skipped"]
    md = path.with_suffix(".md").read_text()
    firsts = [r[:5] for r in table_rows(md)]
    assert ["resnet18", "eager", "fp32", "none", "1"] in firsts and any(r[:3] == ["resnet18", "onnxruntime", "amp"]
                                                                        for r in firsts)
    _, rows2, plan2 = fw.run_bench(configs, opts, tmp_path, caps=CPU, isolate="none", progress=False,
                                   log=lambda m: None)
    assert rows2 == [] and len(plan2.done) == 2
    hardware = json.loads((tmp_path / f"{fw.device_slug('cpu')}_hardware.json").read_text())
    assert len(hardware["runs"]) == 1  # a run that measured nothing leaves the record alone
    assert hardware["hardware"]["cpu"]["usable_cores"] >= 1


def test_dry_run_lists_the_plan(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "deployment_toolkit_lab", "bench", "--models", "resnet18", "--preset", "small",
         "--precisions", "fp32", "bf16", "--compile-modes", "none", "--batch-sizes", "1", "--result-dir",
         str(tmp_path), "--dry-run"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "6 configurations" in out.stdout
    assert "skip     resnet18/small onnxruntime bf16 b1: ONNX Runtime has no bf16" in out.stdout
    assert "measure  resnet18/small torchscript bf16 b1" in out.stdout
