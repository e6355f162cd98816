"""Open-loop capacity, confirmation and a fleet behind nginx, for real and short.

The model sleeps SERVICE_MS per request (one instance, no batching): a replica serves at most about
1000 / SERVICE_MS requests/s whatever the host's load, so the numbers hold on a busy 2-core CI machine, and the
replicas of a fleet do not compete for cores (a sleeping replica uses none), so two behind nginx must carry
about twice what one does. Windows are short: this checks the search, the store, the derating and the balancer,
not the figures.
"""
from __future__ import annotations

import csv
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import require_tool, require_triton_tools
from test_perf_runners import _write_model

from deployment_toolkit.perf import PerfOptions, run_online
from deployment_toolkit.sizing import load_runs
from deployment_toolkit.sizing.capacity import search
from deployment_toolkit.sizing.ratepoint import ClientLimited, RatePoint, Target, measure, open_loop_options
from deployment_toolkit.sizing.ratestore import RateKey, RateStore, read_rows
from deployment_toolkit.spec import ModelSignature, TensorSpec

# long: collected first (conftest). Not exclusive: the model sleeps, so what a replica carries does not depend on
# how busy the cores are (see above)
pytestmark = [pytest.mark.integration, pytest.mark.long]
ROOT = Path(__file__).resolve().parents[2]
SERVICE_MS = 10
SIG = ModelSignature(inputs=(TensorSpec("INPUT__0", (16,)),), outputs=(TensorSpec("OUTPUT__0", (16,)),))
FAST = PerfOptions(protocol="grpc", shared_memory="none", measurement_interval_ms=500, stability_percentage=50,
                   max_trials=6, max_attempts=2)
CONFIG = """
name: "slow"
backend: "python"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 16 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
MODEL = f'''
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            time.sleep({SERVICE_MS / 1000.0})
            x = pb_utils.get_input_tensor_by_name(request, "INPUT__0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT__0", (x * 2).astype(np.float32))]))
        return responses
'''
SMALL = ["--capacity-window-ms", "700", "--capacity-trials", "2", "--capacity-max-points", "6",
         "--capacity-resolution", "0.1", "--capacity-stability-percentage", "50"]


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    require_triton_tools()  # part of `make install`: missing fails, never skips
    repo = tmp_path_factory.mktemp("model_repository")
    _write_model(repo, "slow", CONFIG, MODEL)
    return repo


@pytest.fixture(scope="module")
def server(repo, tmp_path_factory):
    from deployment_toolkit.server.local import LocalTritonServer, ServerConfig

    srv = LocalTritonServer(ServerConfig(model_repository=repo, log_dir=tmp_path_factory.mktemp("log")))
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def swept(server, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("runs") / "slow-online"
    run_online("slow", None, SIG, [1, 2, 4], FAST, run_dir, protocol="grpc", server=server, progress=False,
               build_report=False)
    return run_dir


def size_fleet(*args, timeout=240):
    return subprocess.run([sys.executable, str(ROOT / "triton" / "size_fleet.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_capacity_search_plans_and_resumes(server, swept):
    started = time.monotonic()
    (run,) = load_runs(swept)
    ceiling = 1000.0 / SERVICE_MS
    common = [swept, "--peak-rps", "100", "--p99-ms", "200", "--host-hour-cost", "0.5", *SMALL]
    out = size_fleet(*common, "--capacity", server.grpc_url)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = read_rows(swept / "openloop.csv")
    assert rows and all(r["timestamp"] and r["command"] and "--request-intervals" in r["command"] for r in rows)
    assert all("--async" in r["command"] and r["distribution"] == "poisson" for r in rows)
    # each rate driven by a seeded schedule the toolkit wrote, latency also from the intended send time
    assert not any("--request-rate-range" in r["command"] or "--request-distribution" in r["command"] for r in rows)
    assert all(r["schedule_seed"] is not None and Path(r["profile_export"]).is_file() for r in rows)
    stable = [r for r in rows if r["stable"]]
    assert stable and all(r["sched_p99_ms"] >= 0 and 0 <= r["late_pct"] <= 100 for r in stable), stable
    with open(swept / "sizing.csv") as fh:
        (plan,) = list(csv.DictReader(fh))
    cap = float(plan["open_loop_capacity"])
    # one instance sleeping SERVICE_MS per request cannot carry more than its ceiling; a sane search finds most of it
    assert 0.4 * ceiling <= cap <= 1.05 * ceiling, plan
    assert plan["basis"] == "open loop" and float(plan["replica_capacity"]) == pytest.approx(cap)
    headroom = float(plan["headroom"])
    assert headroom >= 0.1  # at least the search's resolution (0.1 here), more if the two searches disagree
    import math

    assert int(plan["replicas"]) == math.ceil(round(100 * (1 + headroom) / cap, 9))
    md = (swept / "sizing.md").read_text()
    assert "## Open-loop capacity next to closed-loop" in md and "Headroom" in md and "derived" in md

    # rerun: every point comes from openloop.csv, nothing is measured again, same plan
    before = (swept / "openloop.csv").read_text()
    again = size_fleet(*common, "--capacity", server.grpc_url)
    assert again.returncode == 0, again.stderr
    assert (swept / "openloop.csv").read_text() == before
    with open(swept / "sizing.csv") as fh:
        assert list(csv.DictReader(fh))[0]["open_loop_capacity"] == plan["open_loop_capacity"]
    # and without a server, the stored points alone give the same plan
    offline = size_fleet(*common)
    assert offline.returncode == 0 and "warning: no open-loop" not in offline.stderr
    assert time.monotonic() - started < 150


def test_confirm_derates_and_reconfirms(server, swept, tmp_path, table_rows):
    """A plan that rests on an overstated capacity (closed loop, --include-unreliable off, no open-loop points)
    fails its confirmation at a rate above the ceiling, is derated to what the replica carried, and passes."""
    run_dir = tmp_path / "overstated"
    run_dir.mkdir()
    for name in ("online.csv", "run.json"):
        (run_dir / name).write_text((swept / name).read_text())
    # the closed-loop sweep's best point, inflated: a replica "sustains" 1.6 x its ceiling
    text = (run_dir / "online.csv").read_text().splitlines()
    header = text[0].split(",")
    col = header.index("Inferences/second")
    rows = [line.split(",") for line in text[1:]]
    for r in rows:
        r[col] = f"{float(r[col]) * 1.6:.3f}"
    (run_dir / "online.csv").write_text("\n".join([text[0], *[",".join(r) for r in rows]]) + "\n")
    out = size_fleet(run_dir, "--peak-rps", "100", "--p99-ms", "1000", "--headroom", "0", "--include-unreliable",
                     "--confirm", server.grpc_url, "--confirm-interval-ms", "700", "--confirm-stability-percentage",
                     "50", "--confirm-rounds", "3", "--burst-factor", "1.5", "--burst-seconds", "2")
    md = (run_dir / "sizing.md").read_text()
    cells = table_rows(md)
    assert ["Round", "Trial", "Replicas"] in [r[:3] for r in cells] and "1" in [r[0] for r in cells], md
    store = read_rows(run_dir / "confirm" / "confirm.csv")
    trials = sorted((r for r in store if r["config"] == "overstated/online"), key=lambda r: r["trial"])
    offered = [r["offered"] for r in trials]
    assert len(set(offered)) >= 2, out.stdout  # the first round failed and a derated plan was confirmed
    assert offered[-1] < offered[0]  # derated: each replica gets less
    assert offered[:2] == [offered[0]] * 2  # a round is decided by most of its trials, not by one
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PASS after derating" in out.stdout and "after derating" in md
    with open(run_dir / "sizing.csv") as fh:
        (plan,) = list(csv.DictReader(fh))
    assert plan["basis"] == "confirmed" and float(plan["derated_from"]) > float(plan["replica_capacity"])
    assert "**Burst check**" in md and "during: p99" in md and "after: p99" in md
    assert "**Predicted capacity check**" in md  # the derated capacity itself, offered once more


def test_client_limit_is_named(server, tmp_path):
    """A client that cannot send the rate: one synchronous perf_analyzer thread waits SERVICE_MS for every answer,
    so it sends at most about 1000 / SERVICE_MS requests/s, far below the rate asked (the mechanism behind the
    committed example's old FAIL: perf_analyzer's default 4 sync threads). The search stops and blames the client,
    with the server idle most of the time."""
    from dataclasses import replace

    opts = open_loop_options(PerfOptions(protocol="grpc"), "constant", 500, 50.0)
    opts = replace(opts, async_mode=False, extra_args=(*opts.extra_args, "--max-threads", "1"))
    target = Target("slow/limit", "slow", server.grpc_url, 1, SIG, opts, "constant")
    store = RateStore(tmp_path)
    with pytest.raises(ClientLimited, match="client, not the server"):
        search(lambda r: measure(target, r, store, tmp_path), 4000.0 / SERVICE_MS, 1000.0)
    (row,) = read_rows(tmp_path / "openloop.csv")
    assert row["client_limited"] and row["send_rate"] < 0.5 * row["offered"] and row["delayed_pct"] >= 50
    # coordinated omission, for real: perf_analyzer's p99 (from the actual send) is the service time, while the
    # requests went out later and later; from their intended send times the wait is there
    assert row["stable"] and row["late_pct"] >= 50 and row["sched_p99_ms"] > 5 * row["p99_ms"], row


def test_fleet_behind_nginx(repo, swept, tmp_path):
    from deployment_toolkit.sizing.fleet import NginxMissing, find_nginx

    # optional without root (the Makefile's system-deps): skips here, fails under CI
    require_tool("nginx", "", find=find_nginx, missing=NginxMissing)
    started = time.monotonic()
    out = size_fleet(swept, "--peak-rps", "100", "--p99-ms", "200", *SMALL, "--output", tmp_path,
                     "--confirm-fleet", "2", "--fleet-model-repository", repo, "--fleet-window-ms", "700",
                     "--fleet-max-points", "6")
    assert out.returncode == 0, out.stdout + out.stderr
    md = (tmp_path / "sizing.md").read_text()
    assert "## 2 replicas behind a load balancer" in md and "behind nginx" in md
    points = [RatePoint(RateKey.from_row(r), r) for r in read_rows(tmp_path / "fleet" / "fleet.csv")]
    alone = max((p.offered for p in points if p.key.config.endswith("/replica-alone") and p.passes(200)), default=0)
    fleet = max((p.offered for p in points if p.key.config.endswith("/fleet-2-nginx") and p.passes(200)), default=0)
    rows = [p.row for p in points]
    assert alone > 0 and fleet > 0, rows
    # sleeping replicas do not share cores: through the balancer, two carry well over what one does
    assert fleet >= 1.5 * alone, (alone, fleet)
    assert "CPU at the capacity points" in md
    # nginx was stopped: nothing of ours listens any more, no nginx process left from its temp prefix
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "nginx-grpc-lb-" not in ps
    assert time.monotonic() - started < 200
