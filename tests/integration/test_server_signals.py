"""The embedded tritonserver never outlives the script that started it: SIGTERM to a script run through
cli.run stops the server and its Python-backend stubs, and stop() clears the process group even when
the server itself died first."""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import wait_until

from deployment_toolkit.cleanup import regions_with_prefix
from deployment_toolkit.server import LocalTritonServer, ServerConfig
from deployment_toolkit.server.local import group_members

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
IDENTITY_CONFIG = textwrap.dedent('''
    name: "identity"
    backend: "python"
    max_batch_size: 4
    input { name: "x" data_type: TYPE_FP32 dims: [ 2 ] }
    output { name: "y" data_type: TYPE_FP32 dims: [ 2 ] }
    instance_group { kind: KIND_CPU count: 2 }
''')
IDENTITY_MODEL = textwrap.dedent('''
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            return [pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("y", pb_utils.get_input_tensor_by_name(r, "x").as_numpy())]) for r in requests]
''')
SCRIPT = textwrap.dedent('''
    import signal, sys
    sys.path.insert(0, {root!r})
    from deployment_toolkit import cli
    from deployment_toolkit.server import LocalTritonServer, ServerConfig

    def main():
        with LocalTritonServer(ServerConfig({repo!r}, log_dir={logs!r})) as server:
            print(server.process.pid, flush=True)
            while True:
                signal.pause()

    cli.run(main)
''')


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """A repository with one Python-backend model of two instances: two stubs in the server's group."""
    (tmp_path / "repo" / "identity" / "1").mkdir(parents=True)
    (tmp_path / "repo" / "identity" / "config.pbtxt").write_text(IDENTITY_CONFIG)
    (tmp_path / "repo" / "identity" / "1" / "model.py").write_text(IDENTITY_MODEL)
    return tmp_path / "repo"


def test_sigterm_to_a_script_stops_its_embedded_server(tmp_path, repo):
    script = tmp_path / "serve_and_block.py"
    script.write_text(SCRIPT.format(root=str(ROOT), repo=str(repo), logs=str(tmp_path / "logs")))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pgid = None
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 180)
        assert ready, "the script never reported a ready server"
        line = proc.stdout.readline().strip()
        assert line.isdigit(), f"unexpected output {line!r} (exit code {proc.poll()})"
        pgid = int(line)
        assert len(group_members(pgid)) >= 3  # tritonserver + two Python-backend stubs
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 143, err
        wait_until(lambda: not group_members(pgid), 30, "the server's process group is still alive")
        with pytest.raises(ProcessLookupError):
            os.kill(pgid, 0)
    finally:
        proc.kill()
        if pgid is not None and group_members(pgid):
            os.killpg(pgid, signal.SIGKILL)


def test_stop_clears_the_group_when_the_server_died_first(tmp_path, repo):
    server = LocalTritonServer(ServerConfig(repo, log_dir=tmp_path / "logs")).start()
    pgid = server.process.pid
    try:
        stubs = [p for p in group_members(pgid) if p != pgid]
        assert len(stubs) == 2
        assert regions_with_prefix(server.shm_prefix), "the Python backend's regions carry this server's prefix"
        os.kill(pgid, signal.SIGKILL)  # the server alone dies, as in a crash
        server.stop()
        assert group_members(pgid) == []
        assert regions_with_prefix(server.shm_prefix) == []  # a killed server never unlinks them itself
    finally:
        if group_members(pgid):
            os.killpg(pgid, signal.SIGKILL)
