"""`deployment-toolkit check-plan` against the real embedded tritonserver, with a plan folder written here.

Three tiny Python-backend models: `double` (FP32 [16]), `ids` (INT64 with a dynamic dim) and `text_pipeline` (a
TYPE_STRING input, standing for the ensemble of a plan's pipeline `text`). The plan: `double` and `ids` share a
replica at 20 and 10 inf/s, `text` alone at 5 inf/s, every p99 SLO 500 ms: what a 2-core host carries whatever else
runs on it. The same plan with an SLO of 0.001 ms cannot hold (exit 1); a plan naming a model the server lacks is
refused before any load (exit 2), as is a pipeline without its raw samples. Windows are short: this checks the
command, the sender against a real server and the verdicts, not the figures.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import require_triton_tools

pytestmark = [pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[2]
FAST = ["--rounds", "2", "--window-s", "2"]

MODELS = {
    "double": ("""
name: "double"
backend: "python"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 16 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
""", "INPUT__0", "OUTPUT__0", "(x * 2).astype(np.float32)"),
    "ids": ("""
name: "ids"
backend: "python"
max_batch_size: 8
input [ { name: "IDS" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "COUNT" data_type: TYPE_INT64 dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
""", "IDS", "COUNT", "np.full((x.shape[0], 1), x.shape[1], np.int64)"),
    "text_pipeline": ("""
name: "text_pipeline"
backend: "python"
max_batch_size: 8
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "LENGTH" data_type: TYPE_INT64 dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
""", "TEXT", "LENGTH", "np.array([[len(v)] for v in x.reshape(-1)], np.int64)"),
}
CODE = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "{inp}").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("{out}", {expr})]))
        return responses
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from deployment_toolkit.server.local import LocalTritonServer, ServerConfig

    require_triton_tools()  # part of `make install`: missing fails, never skips
    repo = tmp_path_factory.mktemp("repo")
    for name, (config, inp, out, expr) in MODELS.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(config.lstrip())
        (repo / name / "1" / "model.py").write_text(CODE.format(inp=inp, out=out, expr=expr).lstrip())
    with LocalTritonServer(ServerConfig(repo, log_dir=tmp_path_factory.mktemp("log"))) as srv:
        srv.require_models(list(MODELS))
        yield srv


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> Path:
    """The pipeline's raw samples, as its clients send them: one text file each."""
    folder = tmp_path_factory.mktemp("samples")
    (folder / "text").mkdir()
    for i, words in enumerate(["a short review", "a longer review of the thing it bought", "ok"]):
        (folder / "text" / f"{i}.txt").write_text(words)
    return folder


def _plan(folder: Path, slo_ms: float, models=("double", "ids")) -> Path:
    folder.mkdir(parents=True)
    shared = list(models)
    groups = [{"models": shared, "replicas": 2, "rates": dict(zip(shared, (20.0, 10.0)))},
              {"models": ["text"], "replicas": 1, "rates": {"text": 5.0}}]
    doc = {"config": {"kind": "deployment-plan", "confirmed": True, "groups": groups,
                      "models": {m: {"p99_ms": slo_ms} for m in [*shared, "text"]}}}
    (folder / "run.json").write_text(json.dumps(doc))
    return folder


def _check(plan: Path, server, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "deployment_toolkit", "check-plan", str(plan), "--url",
                           server.grpc_url, *args], cwd=ROOT, capture_output=True, text=True, timeout=180)


def test_a_plan_the_server_carries_holds_and_says_so_per_group_and_model(server, samples, tmp_path):
    started = time.monotonic()
    proc = _check(_plan(tmp_path / "plan", 500.0), server, *FAST, "--samples", str(samples),
                  "--result-path", str(tmp_path / "check"))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    for words in ("### double-ids", "### text", "| round ", "target/s", "offered/s", "answered/s", "p99 ms",
                  "within SLO", "client CPU", "(group)", "**double-ids: holds** (held in 2 of 2",
                  "**text: holds**", "text as text_pipeline", "3 request(s) from", "4 seeded random request(s)",
                  "check-plan: 2 of 2 group(s) hold at 1x the planned per-replica rates", "(exit 0)",
                  "host's others", "Neighbours: the server's processes (pid", "tritonserver, and those below it"):
        assert words in out, words
    doc = json.loads((tmp_path / "check" / "check.json").read_text())
    assert doc["holds"] is True and [g["verdict"] for g in doc["groups"]] == ["holds", "holds"]
    rounds = doc["groups"][0]["rounds"]
    assert len(rounds) == 2 and all(r["cpu_share"] < doc["client_cpu_limit"] for r in rounds)
    for r in rounds:
        by_model = {m["model"]: m for m in r["models"]}
        assert by_model["double"]["offered"] == pytest.approx(40, abs=3 * 40 ** 0.5)  # 20/s over 2 s
        assert by_model["ids"]["offered"] == pytest.approx(20, abs=3 * 20 ** 0.5)
        assert all(m["errors"] == 0 and m["p99_ms"] < 500 and m["within_slo"] == 1.0 for m in r["models"])
    run = json.loads((tmp_path / "check" / "run.json").read_text())
    assert "check-plan" in run["command"] and run["config"]["kind"] == "plan-check"
    assert (tmp_path / "check" / "check.md").read_text().count("| (group)") == 4
    assert time.monotonic() - started < 40


def test_an_slo_no_server_meets_fails_with_exit_1(server, samples, tmp_path):
    proc = _check(_plan(tmp_path / "plan", 0.001), server, "--rounds", "1", "--window-s", "1", "--group",
                  "double-ids", "--result-path", str(tmp_path / "check"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "**double-ids: fails** (held in 0 of 1" in proc.stdout
    assert "ms > SLO 0.001 ms" in proc.stdout and "0 of 1 group(s) hold" in proc.stdout


def test_a_model_the_server_lacks_is_named_in_one_line_before_any_load(server, tmp_path):
    plan = _plan(tmp_path / "plan", 500.0, models=("double", "ghost"))
    proc = _check(plan, server, *FAST)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr
    assert "does not serve the plan's model(s) ghost" in lines[0] and "double" in lines[0]
    assert not list(plan.glob("check-*"))  # nothing measured, nothing written


def test_a_pipeline_without_its_raw_samples_is_refused_in_one_line(server, tmp_path):
    proc = _check(_plan(tmp_path / "plan", 500.0), server, *FAST, "--group", "text")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "text (text_pipeline: TEXT) take TYPE_STRING inputs" in lines[0]
