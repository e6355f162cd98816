"""The offline/online runners against the real embedded tritonserver and the real perf_analyzer.

A tiny Python-backend model (OUTPUT__0 = 2 * INPUT__0) keeps every point around two seconds; windows are
short (500 ms) and the stability bar loose, because these tests check the plumbing (CSV, resume, server
death, run.json, report), not the numbers.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import require_triton_tools

from deployment_toolkit.perf import (
    PerfOptions,
    ServerDiedError,
    ServerNotReady,
    run_offline,
    run_online,
)
from deployment_toolkit.perf.sweep import SweepPoint
from deployment_toolkit.results.schema import STORE_COLUMNS
from deployment_toolkit.results.store import read_store_csv
from deployment_toolkit.spec import ModelSignature, TensorSpec

pytestmark = [pytest.mark.integration, pytest.mark.long]  # long: collected first (conftest)
ROOT = Path(__file__).resolve().parents[2]
SIG = ModelSignature(inputs=(TensorSpec("INPUT__0", (16,)),), outputs=(TensorSpec("OUTPUT__0", (16,)),))
# the seed's perf_analyzer columns (DLE names, ms), then the toolkit's bookkeeping and provenance columns
STORE_HEADER = [
    "Precision", "Client Batch Size", "Concurrent client requests", "Inferences/second", "Client Send",
    "Network+server Send/recv", "Server Queue", "Server Compute Input", "Server Compute Infer",
    "Server Compute Output", "Client Recv", "P50 Latency", "P90 Latency", "P95 Latency", "P99 Latency",
    "Avg Latency", "Triton Instances", "stable", "residual_clamped", "attempts", "window", "note", "measured_at",
    "identity",
]
FAST = PerfOptions(protocol="grpc", shared_memory="system", measurement_interval_ms=500, stability_percentage=50,
                   max_trials=6, max_attempts=2)

DOUBLE_CONFIG = """
name: "double"
backend: "python"
max_batch_size: 8
dynamic_batching { }
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 16 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
DOUBLE_MODEL = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT__0").as_numpy()
            out = pb_utils.Tensor("OUTPUT__0", (x * 2).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
'''
# SCALE is a non-data input (like band wavelengths): the model refuses any value but 3, so random data fails
SCALED_CONFIG = """
name: "scaled"
backend: "python"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "SCALE" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
"""
SCALED_MODEL = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT__0").as_numpy()
            s = pb_utils.get_input_tensor_by_name(request, "SCALE").as_numpy()
            if not np.all(s == 3.0):
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"SCALE must be 3, got {s.ravel()[:2]}")))
                continue
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT__0", (x * s).astype(np.float32))]))
        return responses
'''


def _write_model(repo: Path, name: str, config: str, code: str) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(textwrap.dedent(config).lstrip())
    (repo / name / "1" / "model.py").write_text(code.lstrip())


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> Path:
    require_triton_tools()  # part of `make install`: missing fails, never skips
    repo = tmp_path_factory.mktemp("model_repository")
    _write_model(repo, "double", DOUBLE_CONFIG, DOUBLE_MODEL)
    _write_model(repo, "scaled", SCALED_CONFIG, SCALED_MODEL)
    return repo


def _start(repo: Path, log_dir: Path):
    from deployment_toolkit.server.local import LocalTritonServer, ServerConfig

    server = LocalTritonServer(ServerConfig(model_repository=repo, log_dir=log_dir))
    server.start()  # waits on /v2/health/ready, no fixed sleep
    return server


@pytest.fixture(scope="module")
def server(repository, tmp_path_factory):
    srv = _start(repository, tmp_path_factory.mktemp("server_log"))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def online_run(server, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("results") / "run"
    outcome = run_online("double", None, SIG, [1, 2], FAST, run_dir, protocol="grpc", server=server, progress=False)
    return run_dir, outcome


def test_online_sweep_writes_csv_tables_run_json_and_report(online_run, table_rows):
    run_dir, outcome = online_run
    assert [p.concurrency for p in outcome.measured] == [1, 2]
    rows = read_store_csv(run_dir / "online.csv")
    header = (run_dir / "online.csv").read_text().splitlines()[0].split(",")
    assert header == STORE_HEADER  # written out here, not the module's own constant compared with itself
    assert [(r["Client Batch Size"], r["Concurrent client requests"]) for r in rows] == [(1, 1), (1, 2)]
    for r in rows:
        assert r["Inferences/second"] > 50
        assert 0 < r["Avg Latency"] < 1000 and 0 < r["P50 Latency"] <= r["P99 Latency"]
        assert r["Server Compute Infer"] > 0 and r["Triton Instances"] == 1 and r["Precision"] == "FP32"
        assert isinstance(r["stable"], bool)
    for c in (1, 2):
        assert (run_dir / "raw" / f"online_b1_c{c}.csv").exists() and (run_dir / "raw" / f"online_b1_c{c}.log").exists()
    md = (run_dir / "online.md").read_text()
    assert ["Concurrent client requests", "Inferences/second", "Client Send"] in [r[:3] for r in table_rows(md)]
    meta = json.loads((run_dir / "run.json").read_text())
    cfg = meta["config"]
    assert cfg["model_config"]["instance_group"][0]["count"] == 1 and cfg["triton_instances"] == 1
    assert cfg["sweeps"]["online"]["completed"] == 2
    assert "--verbose-csv" in cfg["sweeps"]["online"]["perf_command_example"]
    assert meta["versions"]["tritonserver"] and meta["versions"]["numpy"].startswith("1.")
    assert meta["hardware"]["cpu"]["logical_cores"] >= 1 and "sha" in meta["git"]
    assert (run_dir / "report.html").exists() and (run_dir / "online_latency_breakdown.png").exists()


def test_offline_cli_into_the_same_run_folder(online_run, server, table_rows):
    run_dir, _ = online_run
    cmd = [sys.executable, str(ROOT / "triton" / "run_offline_performance_test_on_triton.py"),
           "--server-url", server.grpc_url, "--model-name", "double", "--batch-sizes", "1,2",
           "--measurement-interval", "500", "--stability-percentage", "50", "--max-trials", "6", "--max-attempts", "2",
           "--number-of-model-instances", "1", "--result-path", str(run_dir), "--no-progress"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    header = ["Precision", "Client Batch Size", "Inferences/second", "P90 Latency"]
    assert header in [r[:4] for r in table_rows(out.stdout)]
    rows = read_store_csv(run_dir / "offline.csv")
    assert [r["Client Batch Size"] for r in rows] == [1, 2] and all(r["Concurrent client requests"] == 1 for r in rows)
    meta = json.loads((run_dir / "run.json").read_text())
    assert set(meta["config"]["sweeps"]) == {"online", "offline"}, "the online section survives the offline run"
    assert "run_offline_performance_test_on_triton.py" in meta["command"]
    report = (run_dir / "report.md").read_text()
    assert "## Offline scenario" in report and "## Online scenario" in report


def test_resume_measures_only_the_missing_point(online_run, server, tmp_path, capsys):
    src, _ = online_run
    run_dir = tmp_path / "copy"
    shutil.copytree(src, run_dir)
    lines = (run_dir / "online.csv").read_text().splitlines()
    (run_dir / "online.csv").write_text("\n".join(l for l in lines if not l.startswith("FP32,1,2,")) + "\n")
    outcome = run_online("double", None, SIG, [1, 2], FAST, run_dir, server=server, progress=False, build_report=False)
    assert outcome.measured == [SweepPoint(1, 2)] and outcome.skipped == [SweepPoint(1, 1)]
    assert "skipping 1 completed points" in capsys.readouterr().out
    assert [r["Concurrent client requests"] for r in read_store_csv(run_dir / "online.csv")] == [1, 2]


def test_fixed_value_inputs_get_their_values_and_dynamic_dims_a_shape(server, tmp_path):
    sig = ModelSignature(
        inputs=(TensorSpec("INPUT__0", (-1,), example_shape=(4,)), TensorSpec("SCALE", (1,), value=[3.0])),
        outputs=(TensorSpec("OUTPUT__0", (-1,), example_shape=(4,)),),
    )
    outcome = run_offline("scaled", server.grpc_url, sig, [2], FAST, tmp_path / "run", progress=False,
                          build_report=False)
    (row,) = outcome.rows
    assert row["Inferences/second"] > 0 and row["Triton Instances"] == 2
    assert json.loads((tmp_path / "run" / "raw" / "offline_input_data.json").read_text())["data"][0]["SCALE"]


def test_unknown_model_fails_fast_with_the_reason(server, tmp_path):
    t0 = time.monotonic()
    with pytest.raises(ServerNotReady, match="'nope' is not ready") as info:
        run_online("nope", server.grpc_url, SIG, [1], FAST, tmp_path / "run", progress=False, ready_timeout_s=30)
    assert "it has double, scaled" in str(info.value)
    assert time.monotonic() - t0 < 10, "a model the repository does not hold fails at once, without waiting"


def test_cli_unknown_model_exits_2_listing_the_models(server, tmp_path):
    cmd = [sys.executable, str(ROOT / "triton" / "run_offline_performance_test_on_triton.py"),
           "--server-url", server.grpc_url, "--model-name", "nope", "--batch-sizes", "1",
           "--result-path", str(tmp_path / "run"), "--no-progress"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 2, out.stderr
    assert "it has double, scaled" in out.stderr and "Traceback" not in out.stderr


def test_server_killed_mid_sweep_keeps_points_and_resumes(repository, tmp_path):
    run_dir = tmp_path / "run"
    first = _start(repository, tmp_path / "log1")

    def kill_after_first(point, result):
        if point.concurrency == 1:
            os.killpg(first.process.pid, signal.SIGKILL)
            first.process.wait(timeout=30)

    try:
        with pytest.raises(ServerDiedError) as info:
            run_online("double", None, SIG, [1, 2], FAST, run_dir, server=first, progress=False,
                       on_point_done=kill_after_first, build_report=False)
    finally:
        first.stop()
    msg = str(info.value)
    assert "concurrency 2" in msg and "1 completed point(s) are kept" in msg and "rerun the same command" in msg
    assert "Server log tail" in msg and "double" in msg
    assert [r["Concurrent client requests"] for r in read_store_csv(run_dir / "online.csv")] == [1]

    second = _start(repository, tmp_path / "log2")  # new ports: the URL is not part of the fingerprint
    try:
        outcome = run_online("double", None, SIG, [1, 2], FAST, run_dir, server=second, progress=False)
    finally:
        second.stop()
    assert outcome.measured == [SweepPoint(1, 2)] and outcome.skipped == [SweepPoint(1, 1)]
    assert [r["Concurrent client requests"] for r in outcome.rows] == [1, 2]
    assert (run_dir / "report.html").exists()


def test_cli_exits_non_zero_when_the_server_is_gone(repository, tmp_path):
    cmd = [sys.executable, str(ROOT / "triton" / "run_online_performance_test_on_triton.py"),
           "--server-url", "127.0.0.1:1", "--model-name", "double", "--concurrency", "1:2:1",
           "--result-path", str(tmp_path / "run"), "--ready-timeout", "0.5", "--no-progress"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 2, out.stderr  # the README's exit-code table: unusable input or server
    assert "does not answer" in out.stderr and "Traceback" not in out.stderr


def _perf_analyzers_against(url: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"perf_analyzer") and url.encode() in argv:
                pids.append(int(entry.name))
    return pids


def test_sigterm_mid_sweep_kills_perf_analyzer_keeps_points_and_resumes(server, tmp_path):
    run_dir = tmp_path / "run"
    cmd = [sys.executable, str(ROOT / "triton" / "run_online_performance_test_on_triton.py"),
           "--server-url", server.grpc_url, "--model-name", "double", "--concurrency", "1:3:1",
           "--measurement-interval", "500", "--stability-percentage", "50", "--max-trials", "6",
           "--result-path", str(run_dir), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "online.csv").exists() or len(read_store_csv(run_dir / "online.csv")) < 1:
            assert proc.poll() is None and time.monotonic() < deadline, "no point completed"
            time.sleep(0.1)  # polling interval
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, err[-2000:]
    assert "Traceback" not in err
    assert _perf_analyzers_against(server.grpc_url) == []
    kept = len(read_store_csv(run_dir / "online.csv"))
    assert 1 <= kept < 3
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"skipping {kept} completed points" in out.stdout
    assert [r["Concurrent client requests"] for r in read_store_csv(run_dir / "online.csv")] == [1, 2, 3]


def test_every_point_has_the_servers_own_metrics_beside_the_clients(online_run):
    """Issue 29: Triton's metrics endpoint scraped during each point (at least 4 samples), summarised beside
    perf_analyzer's row: the server's own throughput agrees with the client's, queue and compute are there."""
    import csv

    run_dir, _ = online_run
    with open(run_dir / "online_server.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["Client Batch Size"], r["Concurrent client requests"]) for r in rows] == [("1", "1"), ("1", "2")]
    for r in rows:
        assert int(r["samples"]) >= 4, r
        client, server = float(r["client_infer_per_s"]), float(r["server_infer_per_s"])
        # the scrape spans perf_analyzer's whole run (warm-up and every trial), the client row its last windows
        assert abs(client / server - 1) < 0.35, (client, server)
        assert float(r["compute_infer_us_per_exec"]) > 0 and float(r["queue_us_per_request"]) >= 0
        assert 1.0 <= float(r["avg_batch"]) <= 8.0 and r["cpu_memory_gib"] != ""
    with open(run_dir / "telemetry" / "online_series.csv", newline="") as fh:
        series = list(csv.DictReader(fh))
    assert {s["metric"] for s in series} >= {"nv_inference_count", "nv_inference_exec_count"}
    assert "What the server measured" in (run_dir / "report.md").read_text()


def test_a_metrics_endpoint_that_does_not_answer_is_said_once_and_the_sweep_goes_on(server, tmp_path, capsys):
    run_dir = tmp_path / "run"
    outcome = run_online("double", None, SIG, [1, 2], FAST, run_dir, protocol="grpc", server=server, progress=False,
                         metrics_url="http://127.0.0.1:1/metrics", build_report=False)
    assert len(outcome.measured) == 2 and not (run_dir / "online_server.csv").exists()
    said = capsys.readouterr()
    assert (said.out + said.err).count("server metrics at http://127.0.0.1:1/metrics not available") == 1
