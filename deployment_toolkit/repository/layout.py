"""Write a model into a Triton model repository:

    <repository>/<model-name>/config.pbtxt
    <repository>/<model-name>/<version>/<artifact files> + manifest.json  (+ model.py, runtimes.py for the Python
                                        runtime); the artifact files: the artifact and its side files, e.g. the
                                        external weights (model.onnx.data) of a > 2 GB ONNX model

The model name is checked first (a name, never a path). A version folder and the config are built beside the old
ones and swapped in together: a server polling the repository never sees half a version or a new version under
an old config, a failed write leaves the old pair as it was, and a folder this toolkit did not write is never
deleted (the command stops and says so instead).
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

from ..export.check import check_artifact
from ..export.files import copy_artifact_files
from ..spec import Manifest, check_repository_path, default_file_mode
from .config import ConfigError, ConfigOptions, build_config, read_config, to_text
from .names import check_model_name
from .python_runtime import RUNTIME_FILES

# A version folder holding this file (or, written before the marker existed, a manifest.json) was written here
WRITTEN_MARK = ".deployment_toolkit"


def write_model(repository: str | Path, artifact_dir: str | Path, opts: ConfigOptions, version: int = 1,
                hardlink: bool = False) -> Path:
    """Returns the model directory. The version folder and config.pbtxt are staged beside the model and become
    visible together: a failure at any step (a read-only or full filesystem, an immutable config) leaves the
    previous pair exactly as it was and says so in one line.

    `hardlink`: the repository's artifact files share the workspace's inode and both are made read-only
    (only on the user's explicit request: a repository is edited, synced and mounted, and a writable shared
    inode leaks every edit back into the workspace)."""
    check_model_name(opts.model_name)
    if opts.runtime == "python":  # the Python backend's stub cannot take every path (spec.check_repository_path)
        check_repository_path(repository)
    manifest = Manifest.load(artifact_dir)
    check_artifact(manifest, artifact_dir)  # a manifest edited to lie, or another artifact copied in
    cfg = build_config(manifest, opts)
    model_dir = Path(repository) / opts.model_name
    with _os_errors(model_dir), staged_version(model_dir, version, cfg) as staging:
        copy_artifact_files(manifest, artifact_dir, staging, hardlink=hardlink)
        manifest.save(staging)
        if opts.runtime == "python":
            for name, path in RUNTIME_FILES.items():
                shutil.copy2(path, staging / name)
    return model_dir


@contextmanager
def _os_errors(model_dir: Path) -> Iterator[None]:
    """An OS error while writing (read-only, full, immutable) is one line: nothing of the old model changed."""
    try:
        yield
    except OSError as err:
        raise ConfigError(f"could not write the model into {model_dir}: {err.strerror or err}"
                          + (f" ({err.filename})" if err.filename else "")
                          + "; the repository still holds the previous model and config, unchanged") from err


def write_config(model_dir: Path, cfg) -> Path:
    """config.pbtxt, atomically, checked to parse back to the same protobuf."""
    config_path = model_dir / "config.pbtxt"
    os.replace(_stage_config(model_dir, cfg), config_path)
    return model_dir


def _stage_config(model_dir: Path, cfg) -> Path:
    """config.pbtxt's text in a temporary file beside it, checked to parse back to the same protobuf."""
    model_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=model_dir, prefix=".config.pbtxt.", suffix=".tmp")
    try:
        os.fchmod(fd, default_file_mode())
        with os.fdopen(fd, "w") as fh:
            fh.write(to_text(cfg))
            fh.flush()
            os.fsync(fh.fileno())
        if read_config(Path(tmp)) != cfg:  # the written text must parse back to the same protobuf
            raise ConfigError(f"{model_dir / 'config.pbtxt'} does not round-trip through Triton's ModelConfig schema")
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def written_here(version_dir: Path) -> bool:
    return (version_dir / WRITTEN_MARK).is_file() or (version_dir / "manifest.json").is_file()


@contextmanager
def staged_version(model_dir: Path, version: int, cfg=None) -> Iterator[Path]:
    """Yield an empty folder beside `<model_dir>/<version>`; when the body succeeds, swap it into place, with
    `cfg` (a ModelConfig) as config.pbtxt in the same step: both new, or (on any failure) both old.

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
    config = None
    try:
        os.chmod(staging, 0o755)  # mkdtemp's 0700 would hide the model from a server running as another user
        yield staging
        (staging / WRITTEN_MARK).write_text("written by deployment_toolkit; replaced on the next write\n")
        config = _stage_config(model_dir, cfg) if cfg is not None else None
        old = swap_in(staging, version_dir)
        try:
            if config is not None:
                os.replace(config, model_dir / "config.pbtxt")
        except BaseException:
            swap_back(version_dir, old)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if config is not None:
            config.unlink(missing_ok=True)
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


def swap_in(staging: Path, target: Path) -> Path | None:
    """Put `staging` at `target`; returns where the old `target` now is (None if there was none), for the caller
    to remove once everything else is in place, or to put back (swap_back)."""
    if not target.exists():
        os.rename(staging, target)
        return None
    if _exchange(staging, target):
        return staging  # now the old version
    # two renames: `target` is missing for an instant, never half-written
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    os.rename(target, old / target.name)
    os.rename(staging, target)
    return old / target.name


def swap_back(target: Path, old: Path | None) -> None:
    """Undo swap_in: the old version back at `target` (or no version, if there was none)."""
    if old is None:
        shutil.rmtree(target, ignore_errors=True)
    elif not _exchange(old, target):
        aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.undo-", dir=target.parent))
        os.rename(target, aside / target.name)
        os.rename(old, target)
        shutil.rmtree(aside, ignore_errors=True)
    else:
        shutil.rmtree(old, ignore_errors=True)
