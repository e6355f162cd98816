"""Two perf_analyzer measurements with system shared memory at once (two sweeps on one host, each with
its own server): perf_analyzer names its regions after the tensors, so unguarded they corrupt each other
(failed registrations, a crashed server); with the guard they take turns and both succeed."""
from __future__ import annotations

import multiprocessing as mp
import sys
import textwrap
from pathlib import Path

import pytest

from deployment_toolkit.perf.analyzer import Concurrency, PerfOptions, PerfTarget, run_point
from deployment_toolkit.server import LocalTritonServer, ServerConfig
from deployment_toolkit.spec import ModelSignature, TensorSpec

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SIZE = 400_000  # floats per sample: regions span many pages, so a region resized by the other run faults
CONFIG = textwrap.dedent(f'''
    name: "identity"
    backend: "python"
    max_batch_size: 4
    input {{ name: "x" data_type: TYPE_FP32 dims: [ {SIZE} ] }}
    output {{ name: "y" data_type: TYPE_FP32 dims: [ {SIZE} ] }}
    instance_group {{ kind: KIND_CPU count: 1 }}
''')
MODEL = textwrap.dedent('''
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            return [pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("y", pb_utils.get_input_tensor_by_name(r, "x").as_numpy())]) for r in requests]
''')
SIGNATURE = ModelSignature(inputs=(TensorSpec("x", (SIZE,)),), outputs=(TensorSpec("y", (SIZE,)),))
OPTIONS = PerfOptions(shared_memory="system", measurement_interval_ms=1000, max_trials=3,
                      stability_percentage=1000.0, max_attempts=1)


def measure(url: str, batch: int, out_dir: str, results) -> None:
    """One point in a separate process, as a second sweep would be."""
    sys.path.insert(0, str(ROOT))
    try:
        point = run_point(PerfTarget("identity", url, SIGNATURE), batch, Concurrency(1), OPTIONS,
                          Path(out_dir) / "point.csv")
        results.put((batch, "ok", point.values["Inferences/second"]))
    except Exception as err:  # reported to the test, which prints it
        results.put((batch, "error", str(err)))


def test_two_runs_with_system_shared_memory_take_turns(tmp_path):
    (tmp_path / "repo" / "identity" / "1").mkdir(parents=True)
    (tmp_path / "repo" / "identity" / "config.pbtxt").write_text(CONFIG)
    (tmp_path / "repo" / "identity" / "1" / "model.py").write_text(MODEL)
    with LocalTritonServer(ServerConfig(tmp_path / "repo", log_dir=tmp_path / "logs1")) as one, \
            LocalTritonServer(ServerConfig(tmp_path / "repo", log_dir=tmp_path / "logs2")) as two:
        ctx = mp.get_context("spawn")
        results = ctx.Queue()
        procs = [ctx.Process(target=measure, args=(server.grpc_url, batch, str(tmp_path / f"run{batch}"), results))
                 for server, batch in ((one, 4), (two, 1))]
        for p in procs:
            p.start()
        outcomes = sorted(results.get(timeout=300) for _ in procs)
        for p in procs:
            p.join(timeout=60)
        assert one.is_alive() and two.is_alive(), "a server died while the other run resized its regions"
    assert [o[1] for o in outcomes] == ["ok", "ok"], outcomes
