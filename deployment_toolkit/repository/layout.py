"""Write a model into a Triton model repository:

    <repository>/<model-name>/config.pbtxt
    <repository>/<model-name>/<version>/<artifact files> + manifest.json  (+ model.py, runtimes.py for the Python
                                        runtime); the artifact files: the artifact and its side files, e.g. the
                                        external weights (model.onnx.data) of a > 2 GB ONNX model
"""
from __future__ import annotations

import shutil
from pathlib import Path

from ..export.files import copy_artifact_files
from ..spec import Manifest, atomic_write_text
from .config import ConfigError, ConfigOptions, build_config, read_config, to_text
from .python_runtime import RUNTIME_DIR, RUNTIME_FILES


def write_model(repository: str | Path, artifact_dir: str | Path, opts: ConfigOptions, version: int = 1) -> Path:
    """Returns the model directory. The config is written last, so a half-copied model never looks complete."""
    manifest = Manifest.load(artifact_dir)
    cfg = build_config(manifest, opts)
    model_dir = Path(repository) / opts.model_name
    version_dir = model_dir / str(version)
    if version_dir.exists():
        shutil.rmtree(version_dir)
    version_dir.mkdir(parents=True)
    copy_artifact_files(manifest, artifact_dir, version_dir)  # hard links when possible
    manifest.save(version_dir)
    if opts.runtime == "python":
        for name in RUNTIME_FILES:
            shutil.copy2(RUNTIME_DIR / name, version_dir / name)
    text = to_text(cfg)
    config_path = model_dir / "config.pbtxt"
    atomic_write_text(config_path, text)
    if read_config(config_path) != cfg:  # the written text must parse back to the same protobuf
        raise ConfigError(f"{config_path} does not round-trip through Triton's ModelConfig schema")
    return model_dir
