"""Issue 38: a perf run without --metrics-url scrapes the port it guesses (Triton's default, 8002, on the server's
host), whatever answers there. With another server on that port its figures were stored as the measured server's
("server 0 inf/s" beside the client's 686). Two real embedded servers: the measured one, and another holding the
port the run picks (the default port is pointed at it, so the test does not depend on who holds 8002 on this host).
The run says in one line that telemetry is off and why, writes no server figures and keeps the client's rows."""
from __future__ import annotations

import csv
import re
import textwrap
from pathlib import Path

import pytest
from conftest import require_triton_tools

from deployment_toolkit.perf import PerfOptions, run_online, telemetry
from deployment_toolkit.report.build import build_report
from deployment_toolkit.results.runinfo import read_run_json
from deployment_toolkit.results.store import read_store_csv
from deployment_toolkit.spec import ModelSignature, TensorSpec

pytestmark = pytest.mark.integration

SIG = ModelSignature(inputs=(TensorSpec("INPUT__0", (16,)),), outputs=(TensorSpec("OUTPUT__0", (16,)),))
# no shared memory: these runs must not queue behind other perf_analyzer runs on the host's shared-memory lock
FAST = PerfOptions(protocol="grpc", shared_memory="none", measurement_interval_ms=500, stability_percentage=50,
                   max_trials=6, max_attempts=2)
CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 8
input [ {{ name: "INPUT__0" data_type: TYPE_FP32 dims: [ 16 ] }} ]
output [ {{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 16 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""
MODEL = '''
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("OUTPUT__0", pb_utils.get_input_tensor_by_name(r, "INPUT__0").as_numpy())])
            for r in requests]
'''


def _repository(root: Path, names: tuple[str, ...]) -> Path:
    for name in names:
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(textwrap.dedent(CONFIG.format(name=name)).lstrip())
        (root / name / "1" / "model.py").write_text(MODEL.lstrip())
    return root


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """(measured, other): the measured one serves `echo` and `double`; the other serves only its own, idle
    `double`, so one run finds its model missing there and another finds its count standing still."""
    from deployment_toolkit.server.local import LocalTritonServer, ServerConfig

    require_triton_tools()
    base = tmp_path_factory.mktemp("telemetry_owner")
    measured = LocalTritonServer(ServerConfig(_repository(base / "measured", ("echo", "double")),
                                              log_dir=base / "log_measured"))
    other = LocalTritonServer(ServerConfig(_repository(base / "other", ("double",)), log_dir=base / "log_other"))
    with measured, other:
        yield measured, other


def _run(model: str, server, port: int, run_dir: Path, monkeypatch, capsys, levels=(1,)) -> tuple[str, object]:
    """An online run against `server` by URL only (no --metrics-url, no server object), as a user's run on a
    server started elsewhere: the metrics endpoint is guessed, at `port`."""
    monkeypatch.setattr(telemetry, "TRITON_METRICS_PORT", port)
    assert telemetry.metrics_url_for(server.grpc_url) == f"http://127.0.0.1:{port}/metrics"
    outcome = run_online(model, server.grpc_url, SIG, list(levels), FAST, run_dir, protocol="grpc", progress=False,
                         build_report=False)
    said = capsys.readouterr()
    return said.out + said.err, outcome


def test_a_guessed_endpoint_that_is_the_measured_servers_gives_its_figures(servers, tmp_path, monkeypatch, capsys):
    measured, _ = servers
    text, _ = _run("double", measured, measured.metrics_port, tmp_path / "run", monkeypatch, capsys)
    assert "telemetry off" not in text
    assert read_run_json(tmp_path / "run")["config"]["sweeps"]["online"]["telemetry"]["off"] is None
    with open(tmp_path / "run" / "online_server.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 1 and float(rows[0]["server_infer_per_s"]) > 0, rows


def test_another_server_on_the_guessed_port_not_serving_the_model_turns_telemetry_off(servers, tmp_path,
                                                                                      monkeypatch, capsys):
    measured, other = servers
    text, _ = _run("echo", measured, other.metrics_port, tmp_path / "run", monkeypatch, capsys)
    lines = [line for line in text.splitlines() if "telemetry off" in line]
    assert lines == [f"telemetry off for this run: the metrics endpoint {other.metrics_url} is not the measured "
                     "server's (no model 'echo' is served there); the client's rows are kept, no server figures "
                     "are written"], text
    assert len(read_store_csv(tmp_path / "run" / "online.csv")) == 1  # the client's row is kept
    assert not (tmp_path / "run" / "online_server.csv").exists() and not (tmp_path / "run" / "telemetry").exists()
    # said where the run is read later too: run.json and the report
    said = read_run_json(tmp_path / "run")["config"]["sweeps"]["online"]["telemetry"]
    assert said == {"metrics_url": other.metrics_url, "off": "no model 'echo' is served there"}
    build_report(tmp_path / "run")
    report = (tmp_path / "run" / "report.md").read_text()
    assert re.search(r"\| Server telemetry +\| off: no model 'echo' is served there +\|", report), report


def test_another_server_on_the_guessed_port_with_an_idle_model_of_that_name_turns_telemetry_off(
        servers, tmp_path, monkeypatch, capsys):
    """The other server serves a `double` too: the name matches, but its count does not move with the client's
    requests. Off for the whole run: the second point is not scraped and the line is said once."""
    measured, other = servers
    text, _ = _run("double", measured, other.metrics_port, tmp_path / "run", monkeypatch, capsys,
                         levels=(1, 2))
    lines = [line for line in text.splitlines() if "telemetry off" in line]
    assert len(lines) == 1 and "'double' there answered no request" in lines[0], text
    assert [r["Concurrent client requests"] for r in read_store_csv(tmp_path / "run" / "online.csv")] == [1, 2]
    assert not (tmp_path / "run" / "online_server.csv").exists() and not (tmp_path / "run" / "telemetry").exists()
