"""`deployment-toolkit plan --deployment` end to end (issue 36) on the real embedded tritonserver and perf_analyzer,
kept short (two small zoo models, short windows, one re-test and one confirmation round): each model searched
under its own SLO, capacities held, the layout chosen by cost, the fleet confirmed under mixed traffic, manifests
per group. Then the bad input a deployment can have, each one line and exit 2, on the stored points."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
FAST = ["--preset", "small", "--formats", "onnx", "--max-minutes", "1", "--measurement-mode", "time_windows",
        "--measurement-interval", "500", "--stability-percentage", "100", "--max-trials", "3", "--max-attempts", "1",
        "--noise-repeats", "1", "--refine-steps", "0", "--max-concurrency", "4", "--max-configs", "1",
        "--capacity-trials", "1", "--capacity-resolution", "0.2", "--open-loop-window-ms", "500", "--retests", "1",
        "--confirm-trials", "1", "--confirm-window-ms", "500", "--no-progress"]


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


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    base = tmp_path_factory.mktemp("deployment")
    out, ws = base / "plan", base / "ws"
    return base, out, ws, _plan(_deployment(base / "deployment.yaml"), out, ws)


def test_two_models_planned_as_one_fleet_confirmed_under_mixed_traffic(planned):
    _, out, _, proc = planned
    assert proc.returncode in (0, 1), proc.stdout[-4000:] + proc.stderr[-4000:]  # 1: a round missed an SLO
    text = (out / "plan.md").read_text()
    for section in ("## The fleet", "## Per model", "## Layouts compared", "## Confirmation under mixed open-loop"):
        assert section in text
    run = json.loads((out / "run.json").read_text())["config"]
    assert set(run["models"]) == {"classifier", "mobile"}
    assert all(m["capacity_held"] and m["capacity_held"] <= m["capacity_found"] for m in run["models"].values())
    layout = run["layout"]
    assert sorted(m for g in layout for m in g["models"]) == ["classifier", "mobile"]
    # every group of the layout has its manifests, and its server loads exactly its models
    for group in layout:
        label = "-".join(group["models"])
        deployment = yaml.safe_load((out / "k8s" / label / "deployment.yaml").read_text())
        assert deployment["spec"]["replicas"] == group["replicas"]
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        assert sorted(a.split("=", 1)[1] for a in args if a.startswith("--load-model=")) == sorted(group["models"])
    steps = json.loads((out / "steps.json").read_text())
    assert [s["status"] for s in steps] == ["ok"] * len(steps)
    # the two peaks are small next to one replica: sharing one is the estimate's pick, so its mix was measured (a
    # busy host can still make the mix miss; then the dedicated layout is chosen and said)
    assert "Shared groups measured: classifier + mobile" in text
    if len(layout) == 1:
        assert "fleet: classifier + mobile (shared): 1 replica(s)" in proc.stdout


def test_a_peak_no_fleet_within_max_replicas_meets_is_one_line(planned):
    base, out, ws, first = planned
    assert first.returncode in (0, 1)
    proc = _plan(_deployment(base / "huge.yaml", peak=1e6, limits={"max_replicas": 2}), out, ws)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "more than limits.max_replicas 2" in errors[0] and "Traceback" not in proc.stderr


def test_a_model_that_does_not_fit_the_host_memory_is_named(planned):
    base, out, ws, first = planned
    assert first.returncode in (0, 1)
    proc = _plan(_deployment(base / "small-host.yaml", limits={"host_memory_gb": 0.001}), out, ws)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "does not fit one replica alone: out of memory" in errors[0]
    assert "--host-memory-gb 0.001" in errors[0] and "Traceback" not in proc.stderr
