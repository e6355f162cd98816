"""`deployment-toolkit plan --deployment` end to end (issues 36, 44) on the real embedded tritonserver and
perf_analyzer, kept short (two small zoo models, short windows, one re-test and one confirmation round): each model
searched under its own SLO, capacities held, packed by the solver, shared groups measured, each group confirmed under
its mixed traffic, manifests per group. Then the fan-out (each index's search run as its pod would, then the
gathering) gives the same plan, a rerun resumes, and the bad input a deployment can have is one line and exit 2."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.integration, pytest.mark.exclusive]  # one at a time under xdist (conftest)
ROOT = Path(__file__).resolve().parents[2]
FAST = ["--preset", "small", "--formats", "onnx", "--max-minutes", "1", "--measurement-mode", "time_windows",
        "--measurement-interval", "500", "--stability-percentage", "100", "--max-trials", "3", "--max-attempts", "1",
        "--noise-repeats", "1", "--refine-steps", "0", "--max-concurrency", "4", "--max-configs", "1",
        "--capacity-trials", "1", "--capacity-resolution", "0.2", "--open-loop-window-ms", "500", "--retests", "1",
        "--confirm-trials", "1", "--confirm-window-ms", "500", "--burst-seconds", "2", "--no-progress"]


def _deployment(path: Path, peak: float = 20, limits: dict | None = None) -> Path:
    path.write_text(yaml.safe_dump({
        "name": "pair",
        "models": [{"name": "classifier", "model": "resnet18", "peak_rps": peak, "p99_ms": 300},
                   {"name": "mobile", "model": "mobilenetv3_large_100", "peak_rps": peak / 2, "p99_ms": 300}],
        "costs": {"host_hour": 0.4}, **({"limits": limits} if limits else {})}))
    return path


def _plan(deployment: Path, out: Path, ws: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "deployment_toolkit", "plan", "--deployment", str(deployment), *FAST,
                           "--result-path", str(out), "--workspace", str(ws)],
                          capture_output=True, text=True, cwd=ROOT, timeout=1200)


def expected_code(run_json: Path) -> int:
    """The exit code the plan whose run.json this is must have given (README): 0 confirmed with every model
    planned, else 1. The first plan's is read from the copy its fixture took: later tests plan into its folder."""
    run = json.loads(run_json.read_text())["config"]
    return 0 if run["confirmed"] is not False and not run["unplanned"] else 1


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    base = tmp_path_factory.mktemp("deployment")
    out, ws = base / "plan", base / "ws"
    proc = _plan(_deployment(base / "deployment.yaml"), out, ws)
    if (out / "run.json").exists():  # what the plan recorded, before later tests plan into the same folder
        shutil.copy(out / "run.json", base / "first-run.json")
    return base, out, ws, proc


def test_two_models_planned_as_one_fleet_confirmed_under_mixed_traffic(planned):
    _, out, _, proc = planned
    assert (out / "run.json").exists(), proc.stdout[-4000:] + proc.stderr[-4000:]
    first = out.parent / "first-run.json"
    assert proc.returncode == expected_code(first), proc.stdout[-4000:] + proc.stderr[-4000:]  # 1: a round missed
    text = (out / "plan.md").read_text()
    for section in ("## The fleet", "## The packing", "## Per model", "## Confirmation under mixed open-loop"):
        assert section in text
    run = json.loads((out / "run.json").read_text())["config"]
    assert set(run["models"]) == {"classifier", "mobile"}
    assert all(m["capacity_held"] and m["capacity_held"] <= m["capacity_found"] for m in run["models"].values())
    groups = run["groups"]
    assert sorted(m for g in groups for m in g["models"]) == ["classifier", "mobile"]
    assert run["packing"]["lower_bound"] <= run["replicas"] == sum(g["replicas"] for g in groups)
    # every group has its manifests, and its server loads exactly its models
    for group in groups:
        folder = out / "k8s" / ("-".join(group["models"]) if len(groups) > 1 else "")
        deployment = yaml.safe_load((folder / "deployment.yaml").read_text())
        assert deployment["spec"]["replicas"] == group["replicas"]
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        assert sorted(a.split("=", 1)[1] for a in args if a.startswith("--load-model=")) == sorted(group["models"])
    steps = json.loads((out / "steps.json").read_text())
    assert [s["status"] for s in steps] == ["ok"] * len(steps)
    # the two peaks are small next to one replica: the solver shares one, so that group's mix was measured (a busy
    # host can make the mix miss; then the models are packed apart, and the report says what the mix held). On a
    # host busy enough that classifier's capacity alone falls under its peak with headroom (a make test beside
    # torch exports: 3 replicas of 8 inf/s), no replica carries both: nothing is shared and nothing measured.
    measured = run["packing"]["measured_groups"]
    assert measured in ([], [["classifier", "mobile"]]), measured
    if any(len(g["models"]) > 1 for g in groups) or measured:
        assert measured == [["classifier", "mobile"]] and "classifier + mobile: " in text
    else:
        assert run["packing"]["lower_bound"] >= 2 and run["packing"]["packings"] == 1, run["packing"]


def test_the_fan_out_gives_the_plan_the_sequential_run_gave(planned):
    """Each index's command of the written search job, run here as its pod would, then the gathering job's
    command: each index finds its model's search in its own folder, the gathering plans from those folders
    (nothing searched again) and, on the same measurements, decides the same plan. The pods' folders start as the
    sequential run's measurements (its searches, holds and mixes: a pod's search is the same search_step the
    sequential run measured, and measuring them again would compare two noisy runs instead of the two paths); the
    gathering skips the confirmation, which is measured fresh by design: so the two packings are compared, and the
    sequential run's groups are its packing with the groups its confirmation split (a shared group that missed)."""
    from deployment_toolkit.deployment.fanout import JOB_FILE, GATHER_FILE, index_command

    base, out, ws, first = planned
    assert first.returncode == expected_code(out.parent / "first-run.json")
    jobs, fan = base / "jobs", base / "fan"
    deployment = base / "deployment.yaml"
    wrote = subprocess.run([sys.executable, "-m", "deployment_toolkit", "plan", "--deployment", str(deployment),
                            "--write-job", str(jobs), "--job-image", "registry.local/deployment-toolkit:1",
                            "--node-selector", "kubernetes.io/hostname=ci", *FAST, "--no-confirm"],
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert wrote.returncode == 0, wrote.stderr
    job = yaml.safe_load((jobs / JOB_FILE).read_text())
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == 2

    def local(command: list[str]) -> list[str]:  # the pod's paths are this host's; the toolkit is this interpreter
        paths = {f"/inputs/{deployment.name}": str(deployment), "/results/plan-pair": str(fan),
                 "/results/workspace/plan-pair": str(ws)}
        return [sys.executable, "-m", "deployment_toolkit", *[paths.get(a, a) for a in command[1:]]]

    early = subprocess.run(local(yaml.safe_load((jobs / GATHER_FILE).read_text())["spec"]["template"]["spec"]
                                 ["containers"][0]["command"]), capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert early.returncode == 2 and "2 of 2 searches missing" in early.stderr, early.stderr[-2000:]
    shutil.copytree(out, fan, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("steps.json", "run.json", "plan.md", "plan.html", "k8s", "confirm"))
    for index in (0, 1):
        proc = subprocess.run(local(index_command(job, index)), capture_output=True, text=True, cwd=ROOT,
                              timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        # the pod's search is the sequential run's search replayed: had it measured again, the two plans would
        # stand on different measurements and could differ for that alone
        assert re.search(r"measured 0 new ones; open-loop rates: reused \d+, measured 0\b", proc.stdout + proc.stderr), \
            proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not (fan / "steps.json").exists(), "an index must not write the shared folder's steps"
    gather = yaml.safe_load((jobs / GATHER_FILE).read_text())["spec"]["template"]["spec"]["containers"][0]["command"]
    stale = fan / "k8s" / "a-group-of-an-earlier-plan"  # `kubectl apply -R k8s/` must not deploy it beside the plan
    stale.mkdir(parents=True)
    (stale / "deployment.yaml").write_text("kind: Deployment\n")
    proc = subprocess.run(local(gather), capture_output=True, text=True, cwd=ROOT, timeout=1200)
    assert proc.returncode == expected_code(fan / "run.json"), proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "measured 0 new ones" in proc.stdout + proc.stderr, "the gathering searched again"
    assert not stale.exists(), "a manifest of an earlier plan was left in k8s/"
    sequential = json.loads((out / "run.json").read_text())["config"]
    fanned = json.loads((fan / "run.json").read_text())["config"]
    assert {n: m["config"] for n, m in fanned["models"].items()} == \
        {n: m["config"] for n, m in sequential["models"].items()}
    # the same measurements, the same packing; the sequential run's confirmation may then have split a shared group
    # that missed its SLO under mixed traffic (run.json's splits), which the gathering, not confirming, cannot do
    assert sorted(fanned["packing"]["groups"]) == sorted(sequential["packing"]["groups"])
    assert sorted(g["models"] for g in fanned["groups"]) == sorted(fanned["packing"]["groups"]) and not fanned["splits"]
    split = {tuple(s["models"]): s["parts"] for s in sequential["splits"]}

    def final(group: list[str]) -> list[list[str]]:  # a part of a split group may have been split again
        return [f for part in split[tuple(group)] for f in final(part)] if tuple(group) in split else [group]
    assert sorted(g["models"] for g in sequential["groups"]) == \
        sorted(f for g in sequential["packing"]["groups"] for f in final(g))


def test_a_peak_no_fleet_within_max_replicas_meets_is_one_line(planned):
    base, out, ws, first = planned
    assert first.returncode == expected_code(out.parent / "first-run.json")
    proc = _plan(_deployment(base / "huge.yaml", peak=1e6, limits={"max_replicas": 2}), out, ws)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "more than limits.max_replicas 2" in errors[0] and "Traceback" not in proc.stderr


def test_a_model_that_does_not_fit_the_host_memory_is_named(planned):
    base, out, ws, first = planned
    assert first.returncode == expected_code(out.parent / "first-run.json")
    proc = _plan(_deployment(base / "small-host.yaml", limits={"host_memory_gb": 0.001}), out, ws)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "one replica" in errors[0]  # the server alone is over 1 MB already
    assert "the replica's 0.001 GB (limits.host_memory_gb)" in errors[0] and "Traceback" not in proc.stderr
