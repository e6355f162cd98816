"""The files an artifact consists of, and copying them together (into a model repository version directory).

Most artifacts are one file. An ONNX model above the protobuf limit (2 GB, e.g. the full `sd_unet`) keeps its
weights in a side file (`model.onnx.data`); a copy without it fails to load, so every copy goes through here.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import stat
from pathlib import Path
from typing import Callable

from ..spec import Manifest, check_free_space, disk_full
from ..errors import UserFileNotFoundError


def onnx_external_files(path: str | Path) -> list[str]:
    """External data files an ONNX model points to (relative to its directory), without loading the weights."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return sorted({e.value for t in model.graph.initializer for e in t.external_data if e.key == "location"})


def artifact_files(manifest: Manifest, directory: str | Path) -> list[str]:
    """The manifest's `artifact_files`; for an ONNX manifest written before that field existed (compat), the
    artifact plus the external data files it points to."""
    if manifest.artifact_files or manifest.format != "onnx":
        return manifest.files
    return [manifest.artifact, *onnx_external_files(Path(directory) / manifest.artifact)]


FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int)
READ_ONLY = 0o444


def clone_or_copy(src: Path, dst: Path) -> str:
    """Give `dst` its own copy of `src`: a reflink (copy-on-write clone: instant, no extra space) where the
    filesystem offers it (XFS, Btrfs, ...), else a byte copy. Returns "reflink" or "copy".

    Never a hard link: a repository is edited, synced and mounted into containers, and a shared inode carries
    every edit (a truncation, a `sed -i`) back into the workspace and into other models' copies."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.unlink(missing_ok=True)
    how = "copy"
    try:
        with open(src, "rb") as fin, open(dst, "wb") as fout:
            fcntl.ioctl(fout.fileno(), FICLONE, fin.fileno())
        how = "reflink"
    except OSError:  # EOPNOTSUPP / EXDEV / EINVAL: no clones here
        shutil.copyfile(src, dst)
    shutil.copystat(src, dst)
    return how


def hard_link_read_only(src: Path, dst: Path) -> None:
    """A hard link, asked for explicitly (`--hardlink`): both names are made read-only first, so neither side
    can change the other's content in place (replacing the file by a rename stays possible)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.unlink(missing_ok=True)
    os.chmod(src, stat.S_IMODE(os.stat(src).st_mode) & READ_ONLY)
    try:
        os.link(src, dst)
    except OSError as err:
        raise OSError(f"cannot hard-link {src} to {dst} ({err.strerror}): they must be on one filesystem; "
                      "leave out --hardlink to copy instead") from err


def copy_artifact_files(manifest: Manifest, src_dir: str | Path, dst_dir: str | Path,
                        hardlink: bool = False) -> list[str]:
    """Copy every file of the artifact from `src_dir` to `dst_dir` (its own copies; read-only hard links only
    with `hardlink`); returns their names. Raises
    FileNotFoundError naming the first missing one (a half-copied artifact would fail later, at load time)."""
    src, dst = Path(src_dir), Path(dst_dir)
    names = artifact_files(manifest, src)
    missing = [n for n in names if not (src / n).is_file()]
    if missing:
        raise UserFileNotFoundError(f"artifact file(s) {missing} listed for {manifest.model} are missing from {src}: "
                                "reconvert with triton/convert_model.py")
    for name in names:
        (hard_link_read_only if hardlink else clone_or_copy)(src / name, dst / name)
    return names


def write_replacing(path: str | Path, write: Callable[[Path], None], size: int | None = None) -> None:
    """Call `write` on a temporary name beside `path`, then rename it over `path`: a copy of the old file in
    a model repository (a read-only hard link made with --hardlink) keeps its content. For writers that need a
    path (a file copy, an engine's bytes); `size` (where known) is checked against the free space first, and a full
    disk is one NoSpaceError line that leaves no temporary file (spec.atomic_write does the same for file objects)."""
    path = Path(path)
    if size is not None:
        check_free_space(path, size)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # not mkstemp: the artifact keeps the umask's mode
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException as err:
        written = tmp.stat().st_size if tmp.exists() else 0
        tmp.unlink(missing_ok=True)
        full = disk_full(err, path, size, written)
        if full is not None:
            raise full from err
        raise
