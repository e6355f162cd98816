"""`deployment-toolkit size` is library-first (issue 27): the flags become a typed SizeRequest and
`sizing.step.size_fleet(request)` does the job, returning a typed SizeResult the command only prints.

The runs are the committed sizing example's two sweeps (results/sizing-example-cpu/resnet18_i{1,2}: online.csv
and run.json, copied so nothing is written beside them). Their committed openloop.csv predates the current
point key, so the open-loop points are written here, as a replica that keeps up with a known rate would have
answered them; planning then replays them (no server, no perf_analyzer)."""
from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from deployment_toolkit.commands.size_fleet import _build_parser, exit_code, request_from_args
from deployment_toolkit.perf.analyzer import PerfOptions
from deployment_toolkit.sizing import load_runs, sustainable
from deployment_toolkit.sizing.capacity import repeat_search
from deployment_toolkit.sizing.ratepoint import RatePoint, Target, open_loop_options, point_key
from deployment_toolkit.sizing.ratestore import RateStore
from deployment_toolkit.sizing.request import CapacitySpec, ConfirmSpec, CostSpec, CoverageSpec, DemandSpec, \
    FleetCheckSpec, K8sSpec, MemorySpec, SizeRequest
from deployment_toolkit.sizing.step import Line, SizeResult, confirm_input_data, size_fleet

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "results" / "sizing-example-cpu"
SLO_MS = 50.0


def parse(*flags: str) -> SizeRequest:
    return request_from_args(_build_parser().parse_args(["run_a", "run_b", *flags]), command="size run_a run_b")


def test_flags_map_onto_the_request_groups():
    r = parse("--peak-rps", "400", "--p99-ms", "50", "--headroom", "0.1", "--gpus-per-node", "4",
              "--include-unreliable", "--host-hour-cost", "0.4", "--prices", "p.yaml", "--gsd-m", "10", "30",
              "--area-km2", "1000", "--host-memory-gb", "16", "--output", "out/x",
              "--capacity", "127.0.0.1:8001", "--capacity-protocol", "http", "--capacity-trials", "2",
              "--capacity-resolution", "0.05", "--distribution", "constant",
              "--confirm", "127.0.0.1:8002", "--confirm-run", "run_b", "--confirm-input-data", "zero",
              "--confirm-trials", "5", "--burst-factor", "0",
              "--confirm-fleet", "2", "--fleet-model-repository", "repo", "--fleet-window-ms", "999",
              "--nginx", "/usr/sbin/nginx",
              "--emit-k8s", "deploy/", "--k8s-run", "run_a", "--pvc", "models", "--max-replicas", "9",
              "--image", "img:1", "--autoscale-on", "queue-ratio")
    assert r.runs == ("run_a", "run_b") and r.command == "size run_a run_b"
    assert r.demand == DemandSpec(peak_rps=400.0, p99_ms=50.0, headroom=0.1, gpus_per_node=4, include_unreliable=True)
    assert r.costs == CostSpec(gpu_hour=None, host_hour=0.4, prices_file="p.yaml")
    assert r.coverage == CoverageSpec(gsd_m=(10.0, 30.0), area_km2=1000.0)
    assert r.memory == MemorySpec(gpu_gb=None, host_gb=16.0)
    assert r.output == Path("out/x") and r.distribution == "constant"
    c = r.capacity
    assert (c.url, c.protocol, c.trials, c.resolution, c.window_ms) == ("127.0.0.1:8001", "http", 2, 0.05, 3000)
    v = r.confirm
    assert (v.url, v.run, v.input_data, v.trials, v.burst_factor, v.rounds) == (
        "127.0.0.1:8002", "run_b", "zero", 5, 0.0, 3)
    f = r.fleet
    assert (f.replicas, f.model_repository, f.window_ms, f.nginx, f.run) == (2, "repo", 999, "/usr/sbin/nginx", None)
    k = r.k8s
    assert (k.out_dir, k.run, k.pvc, k.max_replicas, k.image, k.autoscale_on, k.memory) == (
        "deploy/", "run_a", "models", 9, "img:1", "queue-ratio", "8Gi")  # printed as given: "wrote ... to deploy/"


def test_the_request_defaults_are_the_flag_defaults():
    """A Python caller that builds SizeRequest(runs, DemandSpec(...)) gets what the command does without flags."""
    assert parse("--peak-rps", "400", "--p99-ms", "50") == SizeRequest(
        runs=("run_a", "run_b"), demand=DemandSpec(400.0, 50.0), costs=CostSpec(), coverage=CoverageSpec(),
        memory=MemorySpec(), capacity=CapacitySpec(), confirm=ConfirmSpec(), fleet=FleetCheckSpec(), k8s=K8sSpec(),
        command="size run_a run_b")


def _copy_run(name: str, dest: Path) -> Path:
    """The example's sweep without its (stale) openloop.csv."""
    run_dir = dest / name
    run_dir.mkdir(parents=True)
    for f in ("online.csv", "run.json"):
        shutil.copy(EXAMPLE / name / f, run_dir / f)
    return run_dir


def _store_open_loop_points(run_dir: Path, capacity: float) -> None:
    """openloop.csv as three searches against a replica that keeps up with `capacity` inferences/s would leave
    it, keyed exactly as the step replays it (the defaults of CapacitySpec, the run's protocol and samples)."""
    (run,) = load_runs(run_dir)
    cfg = run.meta.get("config") or {}
    spec = CapacitySpec()
    options = open_loop_options(PerfOptions(protocol=cfg.get("protocol") or "grpc", shared_memory=spec.shared_memory,
                                            input_data=confirm_input_data(None, cfg)),
                                "poisson", spec.window_ms, spec.stability_percentage)
    point = sustainable(run, SLO_MS).point
    target = Target(run.name, run.model, "", point.batch, None, options, "poisson")
    store = RateStore(run_dir)

    def at(rate: float, trial: int) -> RatePoint:
        over = rate * point.batch > capacity
        key = point_key(target, rate, trial)
        store.put(key, {"offered": rate * point.batch, "answered": capacity if over else rate * point.batch,
                        "send_rate": rate * point.batch, "p99_ms": SLO_MS * (4 if over else 0.5), "avg_ms": 5.0,
                        "window_latency_ms": [5.0, 10.0, 20.0] if over else [5.0, 5.0, 5.0],
                        "queue_growing": over, "client_limited": False, "stable": True,
                        "timestamp": "2026-11-25T00:00:00+00:00"})
        return RatePoint(key, store.get(key))

    repeat_search(at, point.throughput / point.batch, SLO_MS, point.batch, spec.trials, spec.resolution,
                  spec.max_points)


def test_size_fleet_plans_on_stored_open_loop_points(tmp_path):
    runs = [_copy_run(name, tmp_path / "runs") for name in ("resnet18_i1", "resnet18_i2")]
    _store_open_loop_points(runs[0], 100.0)
    _store_open_loop_points(runs[1], 250.0)
    echoed: list[Line] = []
    request = SizeRequest(runs=tuple(runs), demand=DemandSpec(peak_rps=400.0, p99_ms=SLO_MS),
                          costs=CostSpec(host_hour=0.10), output=tmp_path / "out",
                          k8s=K8sSpec(out_dir=tmp_path / "k8s"))
    result = size_fleet(request, echo=echoed.append)

    assert isinstance(result, SizeResult) and result.met and exit_code(result) == 0
    caps = {name: c.capacity for name, c in result.capacities.items()}
    assert caps.keys() == {"resnet18_i1/online", "resnet18_i2/online"}
    assert 0.95 * 100 <= caps["resnet18_i1/online"] <= 100 and 0.95 * 250 <= caps["resnet18_i2/online"] <= 250
    best = result.recommendation
    assert best is not None and best.run.name == "resnet18_i2/online" and best.basis == "open loop"
    assert best.replicas == math.ceil(round(400 * (1 + result.headroom) / best.replica_capacity, 9))
    assert result.headroom == pytest.approx(0.03)  # identical searches: the headroom is the search's resolution
    assert [p.run.name for p in result.sizing.ranked] == ["resnet18_i2/online", "resnet18_i1/online"]
    assert result.confirmation is None and result.fleet is None and result.fleet_skipped == ""

    out = tmp_path / "out"
    assert result.out_dir == out
    assert result.files == {name: out / name for name in ("sizing.png", "sizing.md", "sizing.csv", "sizing.html",
                                                          "run.json")}
    assert all(p.is_file() for p in result.files.values())
    assert "## Autoscaling" in (out / "sizing.md").read_text()
    assert result.k8s_plan is best and set(result.manifest_files) >= {"deployment.yaml", "hpa.yaml"}
    assert result.manifests["deployment.yaml"]["spec"]["replicas"] == best.replicas

    # the console output is in the result, in order, and each line went to echo as it was produced
    assert echoed == result.lines and not any(line.err for line in result.lines)
    texts = [line.text for line in result.lines]
    assert texts[0].startswith("open-loop capacity of resnet18_i1/online: ")
    assert texts[2] == result.sizing.reason
    assert texts[3].startswith(f"  #1 resnet18_i2/online: {best.replica_capacity:.1f} inf/s per replica (open loop")
    assert "wrote " + ", ".join(str(p) for p in result.files.values()) in texts
    wrote = next(i for i, t in enumerate(texts) if t.startswith("wrote 5 manifests"))
    assert texts[wrote].startswith(f"wrote 5 manifests to {tmp_path / 'k8s'} ({best.replicas} replicas of")
    assert texts[wrote + 1].startswith("the HPA scales on requests/s per pod")


def test_size_fleet_without_open_loop_points_plans_on_closed_loop_and_warns(tmp_path):
    run = _copy_run("resnet18_i1", tmp_path)
    result = size_fleet(SizeRequest(runs=(run,), demand=DemandSpec(peak_rps=400.0, p99_ms=SLO_MS)))
    assert result.capacities == {"resnet18_i1/online": None} and result.headroom == 0.2
    assert result.recommendation.basis == "closed loop" and exit_code(result) == 0
    assert result.out_dir == run and "run.json" not in result.files  # a run folder keeps its own run.json
    (warning,) = [line for line in result.lines if line.err]
    assert warning.text.startswith("warning: no open-loop capacity measured (--capacity URL)")


def test_no_plan_meeting_the_slo_is_exit_1_and_nothing_to_deploy(tmp_path):
    run = _copy_run("resnet18_i1", tmp_path)
    result = size_fleet(SizeRequest(runs=(run,), demand=DemandSpec(peak_rps=400.0, p99_ms=0.01),
                                    output=tmp_path / "out", k8s=K8sSpec(out_dir=tmp_path / "k8s")))
    assert result.recommendation is None and not result.met and exit_code(result) == 1
    assert Line("no configuration meets the SLO: nothing to confirm or deploy", err=True) in result.lines
    assert not result.manifest_files and not (tmp_path / "k8s").exists()
