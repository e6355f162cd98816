"""A model name is a name, never a path; the repository holds its own copies; a version folder is swapped in
whole and a folder this toolkit did not write is never deleted (issue 16, items 1-2)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from deployment_toolkit.export.files import clone_or_copy
from deployment_toolkit.repository import ConfigOptions, ModelNameError, check_model_name, write_model
from deployment_toolkit.repository.layout import WRITTEN_MARK, staged_version
from deployment_toolkit.spec import Manifest, ModelSignature, SpecError, TensorSpec

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture()
def artifact(tmp_path: Path) -> Path:
    """A manifest and a (fake) ONNX file: enough for write_model, which copies and never parses it."""
    src = tmp_path / "workspace" / "onnx"
    src.mkdir(parents=True)
    (src / "model.onnx").write_bytes(b"weights" * 1000)
    sig = ModelSignature(inputs=(TensorSpec("input__0", (4,)),), outputs=(TensorSpec("output__0", (2,)),))
    Manifest(model="tiny", preset="small", family="test", task="classification", metric="top1", format="onnx",
             artifact="model.onnx", signature=sig, max_batch_size=4, artifact_files=["model.onnx"]).save(src)
    return src


def _opts(name: str) -> ConfigOptions:
    return ConfigOptions(model_name=name, host_has_gpu=False)


@pytest.mark.parametrize("name", ["/tmp/x/victim", "../evil", "a/b", "..", ".", "", "  ", "a\\b", "x\0y", " lead"])
def test_bad_names_are_refused(name):
    with pytest.raises(ModelNameError, match="model name|empty"):
        check_model_name(name)


@pytest.mark.parametrize("name", ["resnet50", "sd_pipeline_denoiser", "model-v1.2", "dofa_vit__b8_i2"])
def test_good_names_pass(name):
    assert check_model_name(name) == name


def test_absolute_name_touches_nothing_outside_the_repository(tmp_path, artifact):
    victim = tmp_path / "x" / "victim"
    (victim / "1").mkdir(parents=True)
    (victim / "1" / "precious.txt").write_text("keep me")
    with pytest.raises(ModelNameError):
        write_model(tmp_path / "repo", artifact, _opts(str(victim)))
    assert (victim / "1" / "precious.txt").read_text() == "keep me"
    assert not (victim / "config.pbtxt").exists()


def test_dotdot_name_writes_nothing_outside(tmp_path, artifact):
    with pytest.raises(ModelNameError):
        write_model(tmp_path / "repo", artifact, _opts("../evil"))
    assert not (tmp_path / "evil").exists() and not (tmp_path / "repo").exists()


def test_script_exits_2_with_one_line(tmp_path, artifact):
    victim = tmp_path / "victim"
    (victim / "1").mkdir(parents=True)
    out = subprocess.run([sys.executable, str(ROOT / "triton" / "config_model_on_triton.py"), "--model-repository",
                          str(tmp_path / "repo"), "--model-path", str(artifact), "--model-name", str(victim)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("error: --model-name") and "Traceback" not in out.stderr
    assert (victim / "1").is_dir() and not (victim / "config.pbtxt").exists()


def test_repository_gets_its_own_copy(tmp_path, artifact):
    model_dir = write_model(tmp_path / "repo", artifact, _opts("a"))
    other = write_model(tmp_path / "repo", artifact, _opts("b"))
    copy = model_dir / "1" / "model.onnx"
    assert copy.stat().st_ino != (artifact / "model.onnx").stat().st_ino
    with open(copy, "r+b") as fh:  # an edit in the repository ...
        fh.truncate(3)
    assert (artifact / "model.onnx").stat().st_size == 7000  # ... stays there
    assert (other / "1" / "model.onnx").stat().st_size == 7000


def test_clone_or_copy_keeps_content_and_mode(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(10000))
    os.chmod(src, 0o640)
    how = clone_or_copy(src, tmp_path / "dst.bin")
    assert how in ("reflink", "copy")
    assert (tmp_path / "dst.bin").read_bytes() == src.read_bytes()
    assert (tmp_path / "dst.bin").stat().st_mode & 0o777 == 0o640


def test_hardlink_only_on_request_and_read_only_on_both_sides(tmp_path, artifact):
    model_dir = write_model(tmp_path / "repo", artifact, _opts("a"), hardlink=True)
    linked, original = model_dir / "1" / "model.onnx", artifact / "model.onnx"
    assert linked.stat().st_ino == original.stat().st_ino
    assert linked.stat().st_mode & 0o222 == 0 and original.stat().st_mode & 0o222 == 0
    if os.geteuid() != 0:  # root writes through any mode
        with pytest.raises(PermissionError):
            open(linked, "r+b")


def test_rewrite_swaps_the_version_and_keeps_nothing_stale(tmp_path, artifact):
    model_dir = write_model(tmp_path / "repo", artifact, _opts("a"))
    (model_dir / "1" / "stale.txt").write_text("from the old version")
    write_model(tmp_path / "repo", artifact, _opts("a"))
    assert not (model_dir / "1" / "stale.txt").exists() and (model_dir / "1" / WRITTEN_MARK).is_file()
    assert sorted(p.name for p in model_dir.iterdir()) == ["1", "config.pbtxt"]  # no staging or old folder left


def test_a_foreign_version_folder_is_never_deleted(tmp_path, artifact):
    foreign = tmp_path / "repo" / "a" / "1"
    foreign.mkdir(parents=True)
    (foreign / "model.savedmodel").write_text("the user's own model")
    with pytest.raises(ValueError, match="not written by this toolkit"):
        write_model(tmp_path / "repo", artifact, _opts("a"))
    assert (foreign / "model.savedmodel").read_text() == "the user's own model"
    assert sorted(p.name for p in foreign.parent.iterdir()) == ["1"]


def test_a_failed_write_leaves_the_old_version(tmp_path, artifact):
    model_dir = write_model(tmp_path / "repo", artifact, _opts("a"))
    before = sorted(p.name for p in (model_dir / "1").iterdir())
    with pytest.raises(RuntimeError):
        with staged_version(model_dir, 1) as staging:
            (staging / "half.bin").write_text("x")
            raise RuntimeError("disk full")
    assert sorted(p.name for p in (model_dir / "1").iterdir()) == before
    assert sorted(p.name for p in model_dir.iterdir()) == ["1", "config.pbtxt"]


@pytest.mark.parametrize("content, what", [
    ('{"model": "tiny", "preset"', "not valid JSON"),
    ("[1, 2]", "not a manifest object"),
    ('{"model": "tiny"}', "lacks the field"),
    (b"\xff\xfe\x00garbage", "not text"),
])
def test_unreadable_manifest_is_one_clear_error(tmp_path, content, what):
    path = tmp_path / "manifest.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(SpecError, match=what) as info:
        Manifest.load(tmp_path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_every_writer_checks_the_name_first(tmp_path):
    """The other places a name meets the filesystem: the diffusion pipeline, the search, the demo."""
    from deployment_toolkit.demo import main as demo_main
    from deployment_toolkit.diffusion.pipeline import PipelineOptions, read_pipeline, write_diffusion_pipeline
    from deployment_toolkit.search.triton import TritonMeasurer

    with pytest.raises(ModelNameError):
        write_diffusion_pipeline(tmp_path / "repo", tmp_path / "missing", "../sd")
    with pytest.raises(ModelNameError):
        write_diffusion_pipeline(tmp_path / "repo", tmp_path / "missing", "sd",
                                 PipelineOptions(denoiser_name="/abs/denoiser"))
    with pytest.raises(ModelNameError):
        read_pipeline(tmp_path / "repo", "../sd")
    with pytest.raises(ModelNameError):
        TritonMeasurer({}, "../m", tmp_path / "work", options=None)
    assert demo_main(["--model", "../../elsewhere"]) == 2
    assert not (tmp_path / "repo").exists() and not (tmp_path / "work").exists()


@pytest.mark.parametrize("name, says", [("résnet_模型", "non-ASCII characters: Triton's Python backend"),
                                        ("m" * 300, "300 bytes long")])
def test_names_the_server_or_the_filesystem_cannot_take_are_refused_up_front(tmp_path, name, says):
    """Both were accepted and failed later: the server could not encode the path, the filesystem refused it."""
    from deployment_toolkit.repository import ModelNameError, check_model_name

    with pytest.raises(ModelNameError, match=says):
        check_model_name(name)
