"""`deployment-toolkit plan` end to end on the real embedded tritonserver and perf_analyzer, kept short: resnet18's
small preset, short windows, one capacity search per finalist, one confirmation round without the burst. One model is
a deployment of one (issue 44): the same planner as `plan --deployment`, its stages, report and manifests. Checks
the plumbing and the report (the search ranked by open-loop capacity, the capacity held, packed, confirmed and
deployed), then that a peak beyond --max-replicas is refused in one line naming the flag and that the rerun
resumes."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.integration, pytest.mark.exclusive]  # one at a time under xdist (conftest)
ROOT = Path(__file__).resolve().parents[2]
FAST = ["--model", "resnet18", "--preset", "small", "--formats", "onnx", "--p99-ms", "200", "--max-minutes", "1.5",
        "--measurement-mode", "time_windows", "--measurement-interval", "500", "--stability-percentage", "100",
        "--max-trials", "3", "--max-attempts", "1", "--noise-repeats", "1", "--refine-steps", "0",
        "--max-concurrency", "4", "--max-configs", "2", "--capacity-trials", "1", "--capacity-resolution", "0.2",
        "--open-loop-window-ms", "500", "--confirm-rounds", "1", "--confirm-trials", "1", "--confirm-window-ms", "500",
        "--burst-factor", "0", "--retests", "1", "--host-hour-cost", "0.4", "--no-progress"]


def _plan(out: Path, ws: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "deployment_toolkit", "plan", *FAST, "--result-path", str(out),
                           "--workspace", str(ws), *extra], capture_output=True, text=True, cwd=ROOT, timeout=900)


def expected_code(run_json: Path) -> int:
    """The exit code the plan whose run.json this is must have given (README): 0 confirmed with every model
    planned, else 1. The first plan's is read from the copy its fixture took: later tests plan into its folder."""
    run = json.loads(run_json.read_text())["config"]
    return 0 if run["confirmed"] is not False and not run["unplanned"] else 1


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    base = tmp_path_factory.mktemp("plan")
    out, ws = base / "plan", base / "ws"
    proc = _plan(out, ws, "--peak-rps", "300")
    if (out / "run.json").exists():  # what the plan recorded, before later tests plan into the same folder
        shutil.copy(out / "run.json", base / "first-run.json")
    return out, ws, proc


def test_plan_from_a_model_to_confirmed_replicas_and_manifests(planned):
    out, _, proc = planned
    assert (out / "run.json").exists(), proc.stdout[-4000:] + proc.stderr[-4000:]
    first = out.parent / "first-run.json"
    assert proc.returncode == expected_code(first), proc.stdout[-4000:] + proc.stderr[-4000:]  # 1: confirmation missed
    text = (out / "plan.md").read_text()
    assert text.startswith("# Fleet plan: resnet18, peak 300 inf/s at p99 <= 200 ms")
    for section in ("## The fleet", "## The packing", "## Per model", "## What was tried",
                    "## Confirmation under mixed open-loop traffic", "## Kubernetes", "## Stages"):
        assert section in text, section
    assert "random inputs" in text, "no user data: the report says the numbers come from random inputs"
    assert (out / "plan.html").read_text().startswith("<!doctype html>")
    steps = json.loads((out / "steps.json").read_text())
    assert [s["status"] for s in steps] == ["ok"] * len(steps) and len(steps) >= 6
    search = (out / "models" / "resnet18" / "search" / "search.md").read_text()
    assert "objective: capacity" in search and "Open-loop capacity (the ranking)" in search
    deployment = yaml.safe_load((out / "k8s" / "deployment.yaml").read_text())
    replicas = deployment["spec"]["replicas"]
    assert f"**{replicas} replica(s)**" in text
    run = json.loads((out / "run.json").read_text())["config"]
    assert run["replicas"] == replicas and run["packing"]["lower_bound"] <= replicas
    (model,) = run["models"].values()
    assert model["capacity_held"] <= model["capacity_found"]



def _headings(plan_md: Path) -> list[str]:
    return [line for line in plan_md.read_text().splitlines() if line.startswith("## ")]


def test_size_on_the_plans_search_plans_the_same_fleet_with_the_same_report(planned):
    """Issue 56: `size` is plan's front end on a search already run. On this plan's search, with its holds copied
    (the same measurements: fresh ones would compare two noisy runs), it replays the search without measuring it
    and gives the same winner, the same packing and the same report sections, with plan's exit-code rule."""
    out, _, proc = planned
    sized = out.parent / "size"
    sized.mkdir()
    shutil.copytree(out / "alone", sized / "alone")
    search = out / "models" / "resnet18" / "search"
    flags = ["--peak-rps", "300", "--host-hour-cost", "0.4", "--confirm-rounds", "1", "--confirm-trials", "1",
             "--confirm-window-ms", "500", "--burst-factor", "0", "--retests", "1", "--result-path", str(sized)]
    size = subprocess.run([sys.executable, "-m", "deployment_toolkit", "size", str(search), *flags],
                          capture_output=True, text=True, cwd=ROOT, timeout=900)
    log = size.stdout + size.stderr
    assert (sized / "run.json").exists(), log[-4000:]
    assert size.returncode == expected_code(sized / "run.json"), log[-4000:]
    assert "measured 0 new ones" in log, "size searched again instead of replaying the stored search"
    planned_run = json.loads((out.parent / "first-run.json").read_text())["config"]
    sized_run = json.loads((sized / "run.json").read_text())["config"]
    assert sized_run["models"]["resnet18"]["config"] == planned_run["models"]["resnet18"]["config"]
    assert sized_run["packing"]["replicas"] == planned_run["packing"]["replicas"]
    assert _headings(sized / "plan.md") == _headings(out / "plan.md")
    command = json.loads((sized / "run.json").read_text())["command"]
    assert command.startswith("deployment-toolkit size ") and f"Command: `{command}`" in (sized / "plan.md").read_text()

def test_a_peak_beyond_max_replicas_is_refused_and_the_rerun_resumes(planned):
    out, ws, _ = planned
    proc = _plan(out, ws, "--peak-rps", "1000000", "--max-replicas", "2", "--no-confirm")
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]  # the search's log is there too
    assert len(errors) == 1 and errors == proc.stderr.strip().splitlines()[-1:] and "Traceback" not in proc.stderr
    assert "more than --max-replicas 2" in errors[0] and "limits." not in errors[0]
    search = json.loads((out / "models" / "resnet18" / "search" / "run.json").read_text())
    log = proc.stdout + proc.stderr
    assert "measured 0 new" in log or "all points from the checkpoint" in log, "the search resumed, not measured"
    assert search["config"]["winner"], search


def test_the_python_api_plans_from_the_commands_points(planned):
    """Issue 27 item 6: dt.plan is the command's door from Python. With the command's settings it resumes the
    points the command measured (same run identity: the same search, not a second implementation) and plans the
    same winner; dt.search_config on the same request answers the same way."""
    import deployment_toolkit as dt
    from deployment_toolkit.config import StepStatus
    from deployment_toolkit.perf.analyzer import PerfOptions

    out, ws, proc = planned
    assert proc.returncode == expected_code(out.parent / "first-run.json"), proc.stderr[-3000:]
    options = PerfOptions(protocol="grpc", shared_memory="system", measurement_mode="time_windows",
                          measurement_interval_ms=500, measurement_request_count=40, stability_percentage=100,
                          max_trials=3, max_attempts=1)
    settings = dict(max_minutes=1.5, noise_repeats=1, refine_steps=0, max_concurrency=4, max_configs=2,
                    capacity_trials=1, capacity_resolution=0.2)
    api_out = out.parent / "api-plan"
    api_out.mkdir()
    # the command's checkpoint and holds, copied: the API's plan must find every point there rather than measure
    # again (a fresh hold, beside the other test worker, once answered 60 of 109 inf/s and stopped the plan)
    shutil.copytree(out / "models", api_out / "models")
    shutil.copytree(out / "alone", api_out / "alone")
    result = dt.plan("resnet18", dt.Demand(peak_rps=300, p99_ms=200, host_hour_cost=0.4),
                     dt.SearchSettings(budget_ms=200, open_loop_window_ms=500, **settings),
                     dt.SearchJob(preset="small", workspace=ws, result_dir=api_out), options=options,
                     checks=dt.Checks(confirm=False, retests=1, window_ms=500))
    command_plan = json.loads((out / "models" / "resnet18" / "search" / "run.json").read_text())["config"]["winner"]
    assert result.search.outcome.measured_points == 0, "the API measured again: its request differs from the command's"
    assert result.search.outcome.decision.winner.candidate.to_dict() == command_plan
    assert isinstance(result, dt.DeploymentPlan), "one planner: a plan of one model is a deployment of one"
    assert result.replicas >= 1 and (api_out / "plan.md").is_file()
    assert set(result.manifests) and (api_out / "k8s" / "deployment.yaml").is_file()
    skipped = result.stage("confirmation of each replica group under its mixed traffic")
    assert result.confirmed is None and skipped is StepStatus.SKIPPED  # --no-confirm: a stage skipped, with why
    run = dt.search_config("resnet18", dt.SearchSettings(budget_ms=200, open_loop_window_ms=500, **settings),
                           dt.SearchJob(result_dir=api_out / "models" / "resnet18" / "search", preset="small",
                                        workspace=ws, model_repository=api_out / "repo"), options=options)
    assert run.found and run.outcome.measured_points == 0 and run.written.name == "config.pbtxt"
    assert run.written.is_file() and run.written.parent.parent == api_out / "repo"
