"""The GPU acceptance's (`deployment-toolkit-lab gpu-check`) orchestration end to end on CPU: the same plan builder,
runner and server factory with a small model, CPU instances and system shared memory, through the real scripts,
tritonserver and perf_analyzer.

It checks the plumbing a GPU run depends on (commands that parse and run, the server started between the
steps that need it and its URL filled in, statuses, the stages' files, the README) - not GPU behaviour.
"""
from __future__ import annotations

import json
import pytest

from deployment_toolkit_lab.acceptance.check import _server_factory
from deployment_toolkit_lab.acceptance.plan import DEFAULT_BUDGETS, PlanOptions, build_plan
from deployment_toolkit_lab.acceptance.report import write_readme
from deployment_toolkit_lab.acceptance.runner import SERVER_STEP, Runner

pytestmark = pytest.mark.integration

STAGES = {"convert", "configure", "accuracy", "offline", "online"}


def test_serving_stages_run_through_the_real_scripts_on_cpu(tmp_path):
    result, ws = tmp_path / "results", tmp_path / "ws"
    budgets = {**DEFAULT_BUDGETS, "convert": 240.0, "configure": 60.0, "accuracy": 120.0, "offline": 240.0,
               "online": 240.0}
    plan = build_plan(PlanOptions(result_dir=result, workspace=ws, device="cpu", budgets=budgets,
                                  bench_models=("resnet18",), preset="small", served_model="resnet18",
                                  served_max_batch=8, instance_kind="cpu", shared_memory="system",
                                  offline_batches="1,8", online_concurrency="1,2", measurement_interval_ms=500,
                                  max_attempts=1))
    steps = [s for s in plan if s.stage in STAGES and "onnx" not in s.name]
    runner = Runner(result, 1800, {"tensorrt": "`import tensorrt` fails here"},
                    _server_factory(ws / "model_repository", result / "logs" / "tritonserver", 120.0))
    results = runner.run(steps, fill=lambda a: a.replace("{grpc_url}", runner.server.grpc_url)
                         if "{grpc_url}" in a and runner.server is not None else a)
    status = {r.name: (r.status, r.reason) for r in results}
    assert status[SERVER_STEP] == ("ok", "")
    assert status["convert resnet18 trt fp16"] == ("skipped", "`import tensorrt` fails here")
    failed = {n: s for n, s in status.items() if s[0] == "failed"}
    assert not failed, failed
    assert all(s == "ok" for n, (s, _) in status.items() if "trt" not in n), status
    served = result / "serving" / "resnet18"
    assert (served / "accuracy_metrics.csv").exists()
    for kind in ("offline", "online"):
        assert (served / f"{kind}.csv").exists() and (served / f"{kind}.md").exists()
    perf = [r for r in results if r.stage in ("offline", "online")]
    assert all(runner_url_filled(r.command) for r in perf)
    assert runner.server is None  # stopped after the last step that needed it
    readme = write_readme(result).read_text()
    assert "resnet18` online: [online.md](resnet18/online.md)" in readme and "**failed**" not in readme
    assert [r["name"] for r in json.loads((result / "steps.json").read_text())] == [r.name for r in results]


def runner_url_filled(command: str) -> bool:
    """The server's gRPC URL replaced the plan's placeholder."""
    return "{grpc_url}" not in command and "--server-url 127.0.0.1:" in command
