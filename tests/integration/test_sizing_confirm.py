"""Size a fleet from a real online sweep, then check the plan under real open-loop load.

Embedded tritonserver + real perf_analyzer + a tiny Python-backend model (OUTPUT__0 = 2 * INPUT__0): an online
sweep at concurrency 1, 2, 4 (run_online), then triton/size_fleet.py with --confirm drives the same server with
`--request-intervals` (a seeded Poisson schedule) at the per-replica rate the plan assumes and reports whether p99 stayed within the SLO,
then the burst check. No --capacity here: the closed-loop path still plans (with a warning) and confirms.
Windows are short and the stability bar loose: this checks the plumbing and the arithmetic, not the numbers.
"""
from __future__ import annotations

import csv
import math
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import require_triton_tools
from test_perf_runners import _write_model

from deployment_toolkit.perf import PerfOptions, run_online
from deployment_toolkit.sizing import Demand, load_runs, size
from deployment_toolkit.sizing.ratepoint import KEEP_UP
from deployment_toolkit.sizing.ratestore import read_rows
from deployment_toolkit.spec import ModelSignature, TensorSpec

# long: collected first (conftest). Not exclusive: the model sleeps 2 ms a request, so its rate barely depends on how
# busy the cores are, and the SLO is 1 s; the kept-up bound below allows for the Poisson count, not for a busy host
pytestmark = [pytest.mark.integration, pytest.mark.long]
ROOT = Path(__file__).resolve().parents[2]
SIG = ModelSignature(inputs=(TensorSpec("INPUT__0", (16,)),), outputs=(TensorSpec("OUTPUT__0", (16,)),))
FAST = PerfOptions(protocol="grpc", shared_memory="none", measurement_interval_ms=500, stability_percentage=50,
                   max_trials=6, max_attempts=2)
CONFIG = """
name: "double"
backend: "python"
max_batch_size: 8
dynamic_batching { }
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 16 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
# 2 ms per request: a capacity of about 500/s that does not depend on how busy the host's cores are (a model that
# only computes is CPU-bound, and open-loop confirmations of it on a loaded 2-core host are noise)
MODEL = '''
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            time.sleep(0.002)
            x = pb_utils.get_input_tensor_by_name(request, "INPUT__0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT__0", (x * 2).astype(np.float32))]))
        return responses
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from deployment_toolkit.server.local import LocalTritonServer, ServerConfig

    require_triton_tools()  # part of `make install`: missing fails, never skips
    repo = tmp_path_factory.mktemp("model_repository")
    _write_model(repo, "double", CONFIG, MODEL)
    srv = LocalTritonServer(ServerConfig(model_repository=repo, log_dir=tmp_path_factory.mktemp("log")))
    srv.start()
    yield srv
    srv.stop()


def test_measure_size_and_confirm_under_open_loop_load(server, tmp_path):
    started = time.monotonic()
    run_dir = tmp_path / "double-online"
    run_online("double", None, SIG, [1, 2, 4], FAST, run_dir, protocol="grpc", server=server, progress=False,
               build_report=False)
    (run,) = load_runs(run_dir)
    assert run.instances == 1 and run.gpu is False  # this host has no GPU: the plan counts hosts

    # a generous SLO and a peak that needs exactly two replicas at about 60% of the sustainable rate each
    slo = 1000.0
    best = size([run], Demand(1.0, slo)).plans[0].sustainable
    assert best.reachable and best.throughput > 20
    peak = round(best.throughput * 0.6 * 2 / 1.2, 1)
    plan = size([run], Demand(peak, slo, 0.2)).plans[0]
    assert plan.replicas == math.ceil(round(peak * 1.2 / best.throughput, 9)) == 2
    per_replica = peak * 1.2 / 2

    out = subprocess.run(
        [sys.executable, str(ROOT / "triton" / "size_fleet.py"), str(run_dir), "--peak-rps", str(peak),
         "--p99-ms", str(slo), "--host-hour-cost", "0.5", "--confirm", server.grpc_url,
         "--confirm-interval-ms", "1000", "--confirm-stability-percentage", "50", "--burst-seconds", "2"],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    # most of up to 3 trials pass: 2 of 2 (the third not run), or 2 of 3 when one run of this busy 2-core host
    # stalls, which is what the majority rule is for (the unit tests pin which trials run)
    verdict = re.search(r"PASS \((\d) of (\d) trials passed\): median p99", out.stdout)
    assert verdict and verdict.groups() in {("2", "2"), ("2", "3"), ("3", "3")}, out.stdout[-3000:]
    round_trials = int(verdict.group(2))

    md = (run_dir / "sizing.md").read_text()
    assert "## Confirmation under open-loop load" in md and "**PASS**" in md and "--request-intervals" in md
    rows = read_rows(run_dir / "confirm" / "confirm.csv")
    trials = [r for r in rows if r["config"] == "double-online/online"]  # one round: it passed at once
    assert sorted(r["trial"] for r in trials) == list(range(1, round_trials + 1))
    passed = [r for r in trials if r["p99_ms"] <= slo and not r["queue_growing"]]
    assert len(passed) >= 2, [(r["answered"], r["p99_ms"], r["queue_growing"]) for r in trials]
    for row in trials:
        assert row["request_rate"] == pytest.approx(per_replica, rel=1e-3)  # the rate the plan assumes
        assert "--request-intervals" in row["command"] and row["timestamp"] and row["schedule_seed"] is not None
    # the server kept up with the planned rate: what a seeded Poisson schedule puts into the three reported 1 s windows
    # varies by 1 / sqrt(count) (3 sigma: 12 % at 213/s), and a replica keeps up at KEEP_UP of what was sent; a 10 %
    # bound failed a trial the product rightly passed (191 of 213/s, with the host's other tests running)
    bound = (1 - KEEP_UP) + 3 / math.sqrt(per_replica * 3 * 1.0)
    for row in passed:
        assert row["answered"] == pytest.approx(per_replica, rel=bound), (row["answered"], per_replica, bound)
    at_capacity = [r for r in rows if r["config"].endswith("/at-capacity")]
    assert "**Burst check**" in md and "**Predicted capacity check**" in md
    assert f"{len(at_capacity)} trial(s)" in md and len(at_capacity) in (2, 3)
    # the round's trials, the predicted capacity's, the burst and the return to the peak
    assert len(rows) == round_trials + len(at_capacity) + 2
    with open(run_dir / "sizing.csv") as fh:
        (plan_row,) = list(csv.DictReader(fh))
    assert plan_row["replicas"] == "2" and plan_row["unit"] == "host" and plan_row["recommended"] == "True"
    assert time.monotonic() - started < 60
