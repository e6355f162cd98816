"""One builder of tritonserver's command line: the embedded server, the NGC script and the manifests agree."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from deployment_toolkit.server.args import CONTAINER_DEFAULTS, ServerArgs

REPO = Path(__file__).resolve().parents[3]


def test_script_carries_the_builders_defaults():
    text = (REPO / "scripts/docker/triton_inference_server.sh").read_text()
    line = re.search(r"^readonly SERVER_DEFAULTS=\((.*)\)$", text, re.M)
    assert line, "scripts/docker/triton_inference_server.sh lost its SERVER_DEFAULTS line"
    assert tuple(line.group(1).split()) == CONTAINER_DEFAULTS


def test_argv_order_and_user_flags_last():
    argv = ServerArgs("/m", http_port=1, address="127.0.0.1", model_control_mode="explicit", load_models=("a",),
                      backend_config=(("python", "k", "v"),), allow_gpu_metrics=False,
                      extra=("--log-verbose=2",)).argv()
    assert argv[0] == "--model-repository=/m"
    assert argv.index("--http-address=127.0.0.1") < argv.index("--http-port=1")
    assert "--grpc-port" not in " ".join(argv)  # None: tritonserver's default, not written
    assert argv.index("--load-model=a") < argv.index("--strict-readiness=true")
    assert "--backend-config=python,k=v" in argv and "--allow-gpu-metrics=false" in argv
    assert argv[-1] == "--log-verbose=2"  # tritonserver takes the last value: the user's wins


def test_poll_secs_only_in_poll_mode():
    assert "--repository-poll-secs=9" in ServerArgs("/m", model_control_mode="poll", repository_poll_secs=9).argv()
    assert not any("poll-secs" in a for a in ServerArgs("/m", repository_poll_secs=9).argv())
    with pytest.raises(ValueError, match="none, poll, explicit"):
        ServerArgs("/m", model_control_mode="auto")


def test_embedded_server_uses_the_builder(tmp_path, monkeypatch):
    import deployment_toolkit.server.local as local

    monkeypatch.setattr(local, "backend_directory", lambda _inst: tmp_path / "backends")
    inst = local.TritonInstallation(tmp_path, tmp_path / "tritonserver", tmp_path, tmp_path, tmp_path / "stub")
    config = local.ServerConfig(tmp_path, http_port=5, grpc_port=6, metrics_port=7,
                                backend_config={"shm-region-prefix-name": "pfx"})
    cmd = local.LocalTritonServer(config, inst).command()
    assert cmd[0] == str(tmp_path / "tritonserver")
    assert cmd[1:] == ServerArgs(str(tmp_path.resolve()), 5, 6, 7, address="127.0.0.1",
                                 backend_directory=str(tmp_path / "backends"),
                                 backend_config=(("python", "shm-region-prefix-name", "pfx"),),
                                 allow_gpu_metrics=False).argv()
