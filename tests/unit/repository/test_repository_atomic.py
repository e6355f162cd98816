"""A model repository is never half-written (issue 30): rewriting a model whose config.pbtxt cannot be replaced
(immutable), or into a read-only or full filesystem, leaves the previous version folder AND config exactly as they
were, says so in one line, and the old pair still loads. Fault injection needs root (chattr, a tiny tmpfs)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from deployment_toolkit.repository import ConfigError, ConfigOptions, write_model
from deployment_toolkit.repository.config import read_config
from deployment_toolkit.spec import Manifest, ModelSignature, TensorSpec

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="fault injection (chattr +i, mounting a tmpfs) needs root")


def make_artifact(folder: Path, width: int, size: int = 1000) -> Path:
    folder.mkdir(parents=True)
    (folder / "model.onnx").write_bytes(b"w" * size)
    sig = ModelSignature(inputs=(TensorSpec("x", (3, width, width)),), outputs=(TensorSpec("y", (width,)),))
    Manifest(model="m", preset="small", family="test", task="classification", metric="top1", format="onnx",
             artifact="model.onnx", signature=sig, max_batch_size=4, artifact_files=["model.onnx"]).save(folder)
    return folder


def snapshot(model_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(model_dir)): p.read_bytes() for p in sorted(model_dir.rglob("*")) if p.is_file()}


def rewrite_fails_and_keeps_the_old_pair(repo: Path, new: Path, says: str) -> None:
    model_dir = repo / "m"
    before = snapshot(model_dir)
    with pytest.raises(ConfigError, match=says) as err:
        write_model(repo, new, ConfigOptions(model_name="m", host_has_gpu=False))
    assert "the repository still holds the previous model and config, unchanged" in str(err.value)
    assert "\n" not in str(err.value)
    assert snapshot(model_dir) == before  # the old version and the old config, byte for byte
    assert [d.dims for d in read_config(model_dir / "config.pbtxt").input] == [[3, 16, 16]]
    assert not [p for p in model_dir.iterdir() if p.name.startswith(".")], "staging leftovers"


@pytest.fixture()
def old_pair(tmp_path):
    repo = tmp_path / "repo"
    write_model(repo, make_artifact(tmp_path / "old", 16), ConfigOptions(model_name="m", host_has_gpu=False))
    return repo, make_artifact(tmp_path / "new", 8)


@ROOT_ONLY
def test_an_immutable_config_keeps_the_old_version_too(old_pair):
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed (e2fsprogs)")
    repo, new = old_pair
    config = repo / "m" / "config.pbtxt"
    if subprocess.run(["chattr", "+i", str(config)], capture_output=True).returncode != 0:
        pytest.skip("this filesystem does not support the immutable attribute")
    try:
        rewrite_fails_and_keeps_the_old_pair(repo, new, "could not write the model into")
    finally:
        subprocess.run(["chattr", "-i", str(config)], check=True)


@pytest.fixture()
def tiny_fs(tmp_path):
    mount = tmp_path / "fs"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


@ROOT_ONLY
def test_a_full_filesystem_keeps_the_old_pair(tiny_fs, tmp_path):
    repo = tiny_fs / "repo"
    write_model(repo, make_artifact(tmp_path / "old", 16, size=1000), ConfigOptions(model_name="m", host_has_gpu=False))
    rewrite_fails_and_keeps_the_old_pair(repo, make_artifact(tmp_path / "big", 8, size=400_000),
                                         "No space left on device")


@ROOT_ONLY
def test_a_read_only_filesystem_keeps_the_old_pair(tiny_fs, tmp_path):
    repo = tiny_fs / "repo"
    write_model(repo, make_artifact(tmp_path / "old", 16), ConfigOptions(model_name="m", host_has_gpu=False))
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_fs)], check=True)
    rewrite_fails_and_keeps_the_old_pair(repo, make_artifact(tmp_path / "new", 8), "Read-only file system")


def test_a_successful_rewrite_replaces_both(old_pair):
    repo, new = old_pair
    write_model(repo, new, ConfigOptions(model_name="m", host_has_gpu=False))
    assert [d.dims for d in read_config(repo / "m" / "config.pbtxt").input] == [[3, 8, 8]]
    assert Manifest.load(repo / "m" / "1").inputs[0].shape == (3, 8, 8)
    assert sorted(p.name for p in (repo / "m").iterdir()) == ["1", "config.pbtxt"]
