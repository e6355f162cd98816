"""The one artifact-reuse rule (export/reuse.py) that the search, the overhead benchmark and the diffusion
deployment share: reuse only an artifact made from this source, with these options, by these library versions,
verified, and unchanged since it was exported."""
from __future__ import annotations

import json
import shutil

import pytest

from deployment_toolkit.export.reuse import reusable_artifact
from deployment_toolkit.sources import resolve

pytestmark = pytest.mark.slow  # real exports or subprocesses: `make test` runs it, `make test-unit` does not


@pytest.fixture()
def onnx_copy(converted, tmp_path):
    src, _ = converted["onnx"]
    dst = tmp_path / "onnx"
    shutil.copytree(src, dst)
    return dst


def _edit_manifest(directory, **changes):
    path = directory / "manifest.json"
    doc = json.loads(path.read_text())
    for key, value in changes.items():
        if isinstance(value, dict):
            doc[key] = {**doc.get(key, {}), **value}
        else:
            doc[key] = value
    path.write_text(json.dumps(doc))


def test_the_same_source_and_options_are_reused(onnx_copy):
    reuse = reusable_artifact(onnx_copy, resolve("resnet18", preset="small"), "onnx", "small")
    assert reuse and reuse.manifest.format == "onnx" and "reusing the verified artifact" in reuse.reason


@pytest.mark.parametrize("kwargs, why", [
    (dict(fmt="ts-trace"), "it is onnx/small/fp32, not ts-trace/small/fp32"),
    (dict(preset="full"), "not onnx/full/fp32"),
    (dict(precision="fp16"), "not onnx/small/fp16"),
    (dict(min_max_batch_size=10_000), "max batch size"),
])
def test_other_options_are_converted_again(onnx_copy, kwargs, why):
    args = dict(fmt="onnx", preset="small") | kwargs
    reuse = reusable_artifact(onnx_copy, resolve("resnet18", preset="small"), args.pop("fmt"), args.pop("preset"),
                              **args)
    assert not reuse and why in reuse.reason


def test_another_source_is_not_reused(onnx_copy):
    reuse = reusable_artifact(onnx_copy, resolve("resnet50", preset="small"), "onnx", "small")
    assert not reuse and "another model source" in reuse.reason


def test_other_library_versions_or_an_unverified_artifact_are_not_reused(onnx_copy):
    source = resolve("resnet18", preset="small")
    _edit_manifest(onnx_copy, verification={"passed": False})
    assert "not verified" in reusable_artifact(onnx_copy, source, "onnx", "small").reason
    assert reusable_artifact(onnx_copy, source, "onnx", "small", require_verified=False)
    _edit_manifest(onnx_copy, versions={"torch": "1.0.0"})
    reuse = reusable_artifact(onnx_copy, source, "onnx", "small", require_verified=False)
    assert not reuse and "other library or toolkit versions" in reuse.reason


def test_an_edited_artifact_is_converted_again(onnx_copy):
    artifact = onnx_copy / "model.onnx"
    artifact.write_bytes(artifact.read_bytes()[:-16])
    reuse = reusable_artifact(onnx_copy, resolve("resnet18", preset="small"), "onnx", "small")
    assert not reuse and "model.onnx changed since it was exported" in reuse.reason
