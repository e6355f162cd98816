"""No single model ends a plan (issue 54, item 2): a deployment with one model that cannot be served (an ONNX file
with an operator ONNX Runtime lacks) is planned for the others, exit 1, naming that model and why; its step says
failed, never ok; a rerun of the same command measures only what is missing (the other model's search resumes)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

# a tiny MLP (about 1,800 inf/s alone) planned for 20 inf/s at p99 300 ms meets its budget many times over, so it
# runs beside the other worker (make test-e2e's first phase; conftest). In test-e2e, not make test: its 80 s put
# make test over 15 minutes on a fresh 2-core clone (issue 56)
pytestmark = [pytest.mark.integration, pytest.mark.long]
ROOT = Path(__file__).resolve().parents[2]
FAST = ["--preset", "small", "--formats", "onnx", "--max-minutes", "1", "--measurement-mode", "time_windows",
        "--measurement-interval", "500", "--stability-percentage", "100", "--max-trials", "3", "--max-attempts", "1",
        "--noise-repeats", "1", "--refine-steps", "0", "--max-concurrency", "4", "--max-configs", "1",
        "--capacity-trials", "1", "--capacity-resolution", "0.2", "--open-loop-window-ms", "500", "--retests", "1",
        "--confirm-rounds", "1", "--confirm-trials", "1", "--confirm-window-ms", "500", "--burst-factor", "0",
        "--no-progress"]


def _onnx(path: Path, op: str = "Relu", domain: str = "") -> None:
    """A 16 -> 4 MLP made elsewhere; `op` from `domain` after its MatMul (an unknown one: ONNX Runtime cannot load
    it)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node(op, ["h"], ["y"],
                                                                                               domain=domain)],
                              "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], [w])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    onnx.save(model, path)


def _plan(base: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "deployment_toolkit", "plan", "--deployment",
                           str(base / "deployment.yaml"), *FAST, "--result-path", str(base / "plan"), "--workspace",
                           str(base / "ws")], capture_output=True, text=True, cwd=ROOT, timeout=900)


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    base = tmp_path_factory.mktemp("unplanned")
    _onnx(base / "scorer.onnx")
    _onnx(base / "broken.onnx", "NoSuchOp", "com.example")
    (base / "deployment.yaml").write_text(
        "name: partial\nmodels:\n  - {name: broken, model: broken.onnx, peak_rps: 10, p99_ms: 300}\n"
        "  - {name: scorer, model: scorer.onnx, peak_rps: 20, p99_ms: 300}\ncosts: {host_hour: 0.4}\n")
    return base, _plan(base)


def test_the_others_are_planned_and_the_one_that_cannot_be_served_is_named(planned):
    base, proc = planned
    out = base / "plan"
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr
    assert "left out: broken:" in proc.stdout and "cannot be loaded by ONNX Runtime" in proc.stdout
    run = json.loads((out / "run.json").read_text())["config"]
    assert set(run["unplanned"]) == {"broken"} and "NoSuchOp" in run["unplanned"]["broken"]
    assert set(run["models"]) == {"scorer"} and [g["models"] for g in run["groups"]] == [["scorer"]]
    text = (out / "plan.md").read_text()
    assert "## Left out of the plan" in text and "1 model(s) could not be planned" in text
    steps = {s["name"]: s["status"] for s in json.loads((out / "steps.json").read_text())}
    assert steps["broken: convert, verify and search under p99 <= 300 ms"] == "failed"
    assert not any(status == "ok" and name.startswith("broken") for name, status in steps.items())
    assert steps["scorer: capacity alone, held 1 of 1"] == "ok"


def test_a_rerun_measures_only_what_is_missing(planned):
    base, _ = planned
    proc = _plan(base)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    log = proc.stdout + proc.stderr
    assert "measured 0 new" in log or "all points from the checkpoint" in log, "the scorer's search resumed"
