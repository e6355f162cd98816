"""Write a model into a Triton model repository:

    <repository>/<model-name>/config.pbtxt
    <repository>/<model-name>/<version>/<artifact files> + manifest.json  (+ model.py, runtimes.py for the Python
                                        runtime); the artifact files: the artifact and its side files, e.g. the
                                        external weights (model.onnx.data) of a > 2 GB ONNX model

The model name is checked first (a name, never a path). A version folder is built beside the old one and
swapped in: a server polling the repository never sees half a version, a failed write leaves the old one as
it was, and a folder this toolkit did not write is never deleted (the command stops and says so instead).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..export.files import copy_artifact_files
from ..spec import Manifest, atomic_write_text
from .config import ConfigError, ConfigOptions, build_config, read_config, to_text
from .names import check_model_name
from .python_runtime import RUNTIME_FILES

# A version folder holding this file (or, written before the marker existed, a manifest.json) was written here
WRITTEN_MARK = ".deployment_toolkit"


def write_model(repository: str | Path, artifact_dir: str | Path, opts: ConfigOptions, version: int = 1,
                hardlink: bool = False) -> Path:
    """Returns the model directory. The config is written last, so a half-copied model never looks complete.

    `hardlink`: the repository's artifact files share the workspace's inode and both are made read-only
    (only on the user's explicit request: a repository is edited, synced and mounted, and a writable shared
    inode leaks every edit back into the workspace)."""
    check_model_name(opts.model_name)
    manifest = Manifest.load(artifact_dir)
    cfg = build_config(manifest, opts)
    model_dir = Path(repository) / opts.model_name
    with staged_version(model_dir, version) as staging:
        copy_artifact_files(manifest, artifact_dir, staging, hardlink=hardlink)
        manifest.save(staging)
        if opts.runtime == "python":
            for name, path in RUNTIME_FILES.items():
                shutil.copy2(path, staging / name)
    return write_config(model_dir, cfg)


def write_config(model_dir: Path, cfg) -> Path:
    """config.pbtxt, atomically, checked to parse back to the same protobuf."""
    config_path = model_dir / "config.pbtxt"
    atomic_write_text(config_path, to_text(cfg))
    if read_config(config_path) != cfg:  # the written text must parse back to the same protobuf
        raise ConfigError(f"{config_path} does not round-trip through Triton's ModelConfig schema")
    return model_dir


def written_here(version_dir: Path) -> bool:
    return (version_dir / WRITTEN_MARK).is_file() or (version_dir / "manifest.json").is_file()


@contextmanager
def staged_version(model_dir: Path, version: int) -> Iterator[Path]:
    """Yield an empty folder beside `<model_dir>/<version>`; when the body succeeds, swap it into place.

    The old version folder is removed only when this toolkit wrote it; a foreign one stops the write
    before anything is touched. On failure the staged folder goes and the old version stays.
    """
    version_dir = model_dir / str(version)
    if version_dir.is_symlink() or (version_dir.exists() and not (version_dir.is_dir() and written_here(version_dir))):
        raise ConfigError(
            f"{version_dir} exists and was not written by this toolkit (no {WRITTEN_MARK} or manifest.json in it): "
            "nothing was changed. Move it away, or pass another --model-version")
    model_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{version}.new-", dir=model_dir))
    os.chmod(staging, 0o755)  # mkdtemp's 0700 would hide the model from a server running as another user
    try:
        yield staging
        (staging / WRITTEN_MARK).write_text("written by deployment_toolkit; replaced on the next write\n")
        swap_in(staging, version_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (renameat2 RENAME_EXCHANGE); False where the OS or filesystem cannot."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0


def swap_in(staging: Path, target: Path) -> None:
    """Put `staging` at `target`; the old `target` (if any) is removed after the swap."""
    if not target.exists():
        os.rename(staging, target)
        return
    if not _exchange(staging, target):  # two renames: `target` is missing for an instant, never half-written
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        os.rename(target, old / target.name)
        os.rename(staging, target)
        staging = old
    shutil.rmtree(staging)  # now the old version, written by this toolkit (checked by staged_version)
