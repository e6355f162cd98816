"""The embedded real tritonserver: lifecycle, errors a user can act on, explicit model control."""
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from deployment_toolkit.client import ServerNotReady, TritonClient
from deployment_toolkit.repository import ConfigOptions, write_model
from deployment_toolkit.server.loading import load_on_server, unload_from_server
from deployment_toolkit.server import (LocalTritonServer, ModelLoadError, PortInUseError, ServerConfig,
                                       ServerStartTimeout)

pytestmark = pytest.mark.integration

BROKEN_MODEL = textwrap.dedent('''
    class TritonPythonModel:
        def initialize(self, args):
            raise RuntimeError("weights file is corrupt: boom-7731")
        def execute(self, requests):
            return []
''')
BROKEN_CONFIG = textwrap.dedent('''
    name: "broken"
    backend: "python"
    max_batch_size: 4
    input { name: "x" data_type: TYPE_FP32 dims: [ 2 ] }
    output { name: "y" data_type: TYPE_FP32 dims: [ 2 ] }
    instance_group { kind: KIND_CPU count: 1 }
''')


def test_start_answer_stop_on_loopback(tmp_path):
    (tmp_path / "repo").mkdir()
    with LocalTritonServer(ServerConfig(tmp_path / "repo", log_dir=tmp_path / "logs")) as server:
        meta = server.metadata()
        assert meta["name"] == "triton" and meta["version"].startswith("2.")
        assert server.http_url.startswith("127.0.0.1:") and server.grpc_url.startswith("127.0.0.1:")
        cmd = " ".join(server.command())
        assert "--http-address=127.0.0.1" in cmd and "--grpc-address=127.0.0.1" in cmd
        pid = server.process.pid
    assert not server.is_alive()
    assert server.process.returncode is not None
    assert (tmp_path / "logs" / "tritonserver.log").read_text().strip()
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(pid, 0)


def test_port_in_use_is_reported(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        with pytest.raises(PortInUseError, match=f"port {busy} .*already in use"):
            LocalTritonServer(ServerConfig(tmp_path, http_port=busy)).start()


def test_model_that_fails_to_load_quotes_the_log(tmp_path):
    (tmp_path / "broken" / "1").mkdir(parents=True)
    (tmp_path / "broken" / "config.pbtxt").write_text(BROKEN_CONFIG)
    (tmp_path / "broken" / "1" / "model.py").write_text(BROKEN_MODEL)
    with pytest.raises(ModelLoadError) as info:
        LocalTritonServer(ServerConfig(tmp_path)).start()
    assert info.value.models == ["broken"]
    assert "boom-7731" in str(info.value)  # the reason, from the server log


def test_a_start_past_its_time_limit_says_which_model_failed_and_why(tmp_path):
    """A server that stays up with a model that failed (exit_on_error off, as the corpus runs it) is not ready;
    past the time limit the message says the model failed, why, and that waiting longer will not help."""
    (tmp_path / "repo" / "broken" / "1").mkdir(parents=True)
    (tmp_path / "repo" / "broken" / "config.pbtxt").write_text(BROKEN_CONFIG)
    (tmp_path / "repo" / "broken" / "1" / "model.py").write_text(BROKEN_MODEL)
    server = LocalTritonServer(ServerConfig(tmp_path / "repo", exit_on_error=False, start_timeout_s=15,
                                            log_dir=tmp_path / "logs"))
    with pytest.raises(ServerStartTimeout) as info:
        server.start()
    text = str(info.value)
    assert text.startswith("tritonserver did not become ready within 15 s: model(s) broken failed to load, so waiting "
                           "longer will not help (give it longer with --server-timeout SECONDS once the cause is fixed)")
    assert "boom-7731" in text  # the reason, from the server log
    assert not server.is_alive()


def test_explicit_load_unload_and_unknown_model(tmp_path, converted):
    repo = tmp_path / "repo"
    repo.mkdir()
    with LocalTritonServer(ServerConfig(repo, model_control_mode="explicit")) as server:
        write_model(repo, converted["onnx"][0], ConfigOptions("r18", host_has_gpu=False))
        assert not server.model_ready("r18")
        load_on_server(server.http_url, "r18", "explicit")
        assert server.model_ready("r18")
        with TritonClient(server.grpc_url) as client:
            out = client.infer("r18", {"input__0": np.zeros((1, 3, 64, 64), np.float32)}, ["output__0"])
            assert out["output__0"].shape == (1, 1000)
            with pytest.raises(ServerNotReady, match="'resnet_typo' is not ready.*r18"):
                client.require_ready("resnet_typo")
        unload_from_server(server.http_url, "r18")
        assert not server.model_ready("r18")
        with pytest.raises(ModelLoadError, match="refused to load 'missing'"):
            load_on_server(server.http_url, "missing", "explicit")


def test_serve_cli_reports_missing_repository(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "deployment_toolkit", "serve", "--model-repository",
                           str(tmp_path / "nope")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "does not exist" in proc.stderr
