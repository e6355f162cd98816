"""A manifest edited to lie, or another artifact copied in beside it, is refused in one line (issue 38 item 3):
config compares the artifact with what the manifest recorded at conversion (its digest, an ONNX file's own names,
dtypes and dims), the run identity never records a digest the file does not have, and the Python runtime refuses to
load an artifact that is not the manifest's (the server's load error says so)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

import deployment_toolkit as dt
from deployment_toolkit.repository import ConfigOptions, write_model
from deployment_toolkit.results.identity import artifact_digest
from deployment_toolkit.spec import SpecError


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    base = tmp_path_factory.mktemp("truth")
    x = np.random.default_rng(0).standard_normal((2, 6)).astype(np.float32)
    torch.manual_seed(0)
    dt.convert(torch.nn.Linear(6, 4), "onnx", base / "four", inputs={"x": x})
    torch.manual_seed(1)
    dt.convert(torch.nn.Linear(6, 7), "onnx", base / "seven", inputs={"x": x})
    return base


def _copy(artifacts, tmp_path, name="four"):
    shutil.copytree(artifacts / name, tmp_path / name)
    return tmp_path / name


def test_an_honest_artifact_is_configured(artifacts, tmp_path):
    write_model(tmp_path / "repo", _copy(artifacts, tmp_path), ConfigOptions("m"))
    assert (tmp_path / "repo" / "m" / "config.pbtxt").is_file()


def test_an_output_shape_edited_in_the_manifest_is_refused(artifacts, tmp_path):
    art = _copy(artifacts, tmp_path)
    meta = json.loads((art / "manifest.json").read_text())
    meta["signature"]["outputs"][0]["shape"] = [7]
    (art / "manifest.json").write_text(json.dumps(meta))
    with pytest.raises(SpecError, match=r"does not describe its artifact: .* is float32 \[4\] per sample in "
                                        r"model.onnx, float32 \[7\] in the manifest"):
        write_model(tmp_path / "repo", art, ConfigOptions("m"))
    assert not (tmp_path / "repo" / "m").exists()


def test_another_model_copied_in_is_refused_by_config_and_the_run_identity(artifacts, tmp_path):
    art = _copy(artifacts, tmp_path)
    shutil.copy(artifacts / "seven" / "model.onnx", art / "model.onnx")
    with pytest.raises(SpecError, match=r"model.onnx has sha256 .* the file was replaced or edited since"):
        write_model(tmp_path / "repo", art, ConfigOptions("m"))
    with pytest.raises(SpecError, match=r"records artifact sha256 .* but model.onnx is another file"):
        artifact_digest(art / "manifest.json")
    assert artifact_digest(artifacts / "four" / "manifest.json").startswith("sha256:")
