"""An artifact replaced in the model repository after config (another model.onnx copied over it) is refused when
the real server loads it, with the cause in the load error: before, the server advertised the manifest's shapes and
answered with the other model's (issue 38 item 3)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

import deployment_toolkit as dt
from deployment_toolkit.repository import ConfigOptions, write_model
from deployment_toolkit.server import LocalTritonServer, ServerConfig
from deployment_toolkit.server.errors import ModelLoadError

pytestmark = pytest.mark.integration


def test_the_runtime_refuses_an_artifact_that_is_not_the_manifests(tmp_path):
    x = np.random.default_rng(0).standard_normal((2, 6)).astype(np.float32)
    dt.convert(torch.nn.Linear(6, 4), "onnx", tmp_path / "four", inputs={"x": x})
    dt.convert(torch.nn.Linear(6, 7), "onnx", tmp_path / "seven", inputs={"x": x})
    model_dir = write_model(tmp_path / "repo", tmp_path / "four", ConfigOptions("m"))
    shutil.copy(tmp_path / "seven" / "model.onnx", model_dir / "1" / "model.onnx")
    with pytest.raises(ModelLoadError) as err:
        LocalTritonServer(ServerConfig(tmp_path / "repo", log_dir=tmp_path / "logs", progress=False)).start()
    assert "model.onnx is not the artifact manifest.json was written for" in str(err.value)
