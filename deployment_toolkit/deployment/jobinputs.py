"""A deployment's inputs staged for pods that have none of this machine's paths: `plan --write-job DIR` copies the
deployment file and every file it names (above its folder too: `../models/x.onnx`) under `DIR/inputs/`, and writes
the deployment file again there (`inputs/deployment.yaml`) with each path relative to it, so a pod that mounts the
folder anywhere reads `<mount>/deployment.yaml` and every path resolves under `<mount>`. Every other key is kept as
written; `name:` is written out (a file without it is named after its own file name, which the staged copy
changes).

Layout: each distinct file or folder the file names is one entry `files/NN-<its name>` (NN: the order in which the
file first names it); a path under a folder already staged points into that folder. Folders a key names (data,
raw_data, a checkpoint or artifact folder) are copied whole. A Python file (model.py, a dataloader, a pre- or
post-processing step) imports neighbours and reads files beside it (a vocabulary, a tokenizer): its whole folder
travels with it, subfolders included, except hidden entries, `__pycache__` and files over SMALL_FILE (a checkpoint
there is named by `checkpoint:`); those left out are listed. A Python file's folder holding more than FOLDER_CAP of
such small files is refused in one line (a model.py in a home folder would copy the home folder). Symlinks are
followed: the pods get the files, not the links; what is not a regular file (a named pipe, a socket) is left out
and listed.

Beside the copies: `staged.json` (each file's original path, staged path, size and sha256; the keys rewritten; what
was left out) and `SHA256SUMS` (`sha256sum -c` checks the copy on the claim). Everything is decided and checked
(`plan_inputs`) before anything is written (`stage_inputs`, into a new folder swapped in at the end).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import UserInputError
from ..inputfile import MIB

if TYPE_CHECKING:
    from .file import Deployment

SMALL_FILE = 16 * MIB  # a Python file's folder: files up to this size travel with it (vocabularies, configs)
FOLDER_CAP = 256 * MIB  # ... and at most this much of them in all
INPUTS, FILES = "inputs", "files"
DEPLOYMENT_FILE, STAGED_FILE, SUMS_FILE = "deployment.yaml", "staged.json", "SHA256SUMS"
WRITTEN_BY = "deployment-toolkit plan --write-job"
_SKIPPED = ("__pycache__",)


@dataclass
class _Root:
    """One entry under files/: a file, a folder copied whole, or a Python file's folder (filtered)."""

    path: Path  # resolved
    whole: bool
    key: str  # the first key that named it (messages)
    forced: list[Path] = field(default_factory=list)  # named paths inside a filtered folder: always copied
    staged: str = ""


@dataclass(frozen=True)
class StagedFile:
    source: Path
    staged: str  # relative to inputs/
    size: int


@dataclass(frozen=True)
class InputsPlan:
    """What --write-job stages, decided before anything is written: the files, the staged deployment file's text,
    the keys it rewrote (`models[i].key` -> staged path), and what was left out (source, why)."""

    name: str
    source: Path
    text: str
    files: tuple[StagedFile, ...]
    dirs: tuple[str, ...]
    keys: Mapping[str, str]
    left_out: tuple[tuple[str, str], ...] = ()

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files) + len(self.text.encode())


def path_keys() -> tuple[str, ...]:
    """The keys of a model entry that name a path (ModelEntry's `Path | None` fields: a key added there is staged
    here without a word)."""
    from .file import ModelEntry

    return tuple(f.name for f in dataclasses.fields(ModelEntry) if "Path" in str(f.type))


def _model_path(ref: str) -> tuple[Path, str] | None:
    """A model reference that is a file or folder (the deployment file made it absolute) and its `:factory` tail."""
    head, sep, tail = ref.partition(".py:")
    path = Path(f"{head}.py" if sep else ref)
    return (path, f":{tail}" if sep else "") if path.is_absolute() else None


def _uses(deployment: "Deployment") -> list[tuple[str, Path, str]]:
    """Each path the file names: (its key, the path, the reference's tail)."""
    uses = []
    for i, entry in enumerate(deployment.models):
        if (named := _model_path(entry.model)) is not None:
            uses.append((f"models[{i}].model", named[0], named[1]))
        for key in path_keys():
            if (value := getattr(entry, key)) is not None:
                uses.append((f"models[{i}].{key}", Path(value), ""))
    return uses


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _roots(uses: list[tuple[str, Path, str]]) -> list[_Root]:
    """The entries under files/, in the order the file first names them: a path inside a folder copied whole is
    that folder's; one inside a Python file's folder is copied with it (forced, whatever its size)."""
    roots: list[_Root] = []
    candidates = []
    for key, path, _ in uses:
        real = path.resolve()
        if real.suffix == ".py" and real.is_file():
            candidates.append(_Root(real.parent, False, key, [real]))
        else:
            candidates.append(_Root(real, True, key))
    for candidate in sorted(candidates, key=lambda c: len(c.path.parts)):  # outer folders first
        outer = next((r for r in roots if _under(candidate.path, r.path)), None)
        if outer is None:
            roots.append(candidate)
        elif candidate.path == outer.path and candidate.whole:
            outer.whole = True
        elif not outer.whole:
            outer.forced.extend([candidate.path] if candidate.whole else candidate.forced)
    roots.sort(key=lambda r: min(i for i, c in enumerate(candidates) if _under(c.path, r.path)))
    for n, root in enumerate(roots, 1):
        root.staged = f"{FILES}/{n:02d}-{root.path.name or 'root'}"
    return roots


def _kind(mode: int) -> str:
    return "a named pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def _listing(root: _Root) -> tuple[list[StagedFile], list[str], list[tuple[str, str]]]:
    """The root's files (links followed, loops cut), its folders, and what is left out and why."""
    if not root.path.is_dir():
        return [StagedFile(root.path, root.staged, root.path.stat().st_size)], [], []
    files, dirs, left, seen = [], [root.staged], [], set()
    for folder, subdirs, names in os.walk(root.path, followlinks=True):
        here = Path(folder)
        st = here.stat()
        if (st.st_dev, st.st_ino) in seen:  # a link back up the tree
            subdirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        forced_here = any(_under(here, f) for f in root.forced)
        subdirs[:] = sorted(d for d in subdirs if root.whole or forced_here or not _hidden(d)
                            or any(_under(f, here / d) for f in root.forced))
        rel = here.relative_to(root.path)
        dirs += [f"{root.staged}/{(rel / d).as_posix()}" for d in subdirs]
        for name in sorted(names):
            path, staged = here / name, f"{root.staged}/{(rel / name).as_posix()}"
            keep = root.whole or forced_here or path in root.forced
            if not keep and _hidden(name):
                continue
            try:
                info = path.stat()
            except OSError as err:
                left.append((str(path), f"unreadable ({err.strerror}; a link to nothing?)"))
                continue
            if not stat.S_ISREG(info.st_mode):
                left.append((str(path), _kind(info.st_mode)))
            elif not keep and info.st_size > SMALL_FILE:
                left.append((str(path), f"{info.st_size / MIB:,.1f} MiB, over the {SMALL_FILE // MIB} MiB a file "
                                        "beside a Python file travels with it (name it by its key)"))
            else:
                files.append(StagedFile(path, staged, info.st_size))
    return files, dirs, left


def _hidden(name: str) -> bool:
    return name.startswith(".") or name in _SKIPPED or name.endswith(".pyc")


def _check_cap(root: _Root, files: list[StagedFile]) -> None:
    if root.whole:
        return
    small = sum(f.size for f in files if not any(_under(f.source, p) for p in root.forced))
    if small > FOLDER_CAP:
        raise UserInputError(f"{root.key}: the folder of a Python file travels with it to the pods, and "
                             f"{root.path} holds {small / MIB:,.0f} MiB besides it (over {FOLDER_CAP // MIB} MiB): "
                             "move the file (and what it imports) into a folder of its own")


def plan_inputs(deployment: "Deployment") -> InputsPlan:
    """What staging the deployment's inputs copies, and the staged deployment file's text; refused in one line
    (naming the key) where a Python file's folder is too big to be its own."""
    if deployment.source is None:
        raise UserInputError("--write-job stages the deployment file's inputs: give the deployment as a file")
    uses = _uses(deployment)
    roots = _roots(uses)
    files, dirs, left = [], [], []
    for root in roots:
        got, folders, out = _listing(root)
        _check_cap(root, got)
        files += got
        dirs += folders
        left += out
    keys = {}
    for key, path, tail in uses:
        real = path.resolve()
        root = next(r for r in roots if _under(real, r.path))
        rel = real.relative_to(root.path).as_posix()
        keys[key] = (root.staged if rel == "." else f"{root.staged}/{rel}") + tail
    text = staged_text(deployment, keys)
    return InputsPlan(deployment.name, Path(deployment.source), text, tuple(files), tuple(dirs), keys, tuple(left))


def staged_text(deployment: "Deployment", keys: Mapping[str, str]) -> str:
    """The deployment file as written, each path key replaced by its staged path (relative to the staged file),
    `name:` written out; YAML without anchors."""
    import yaml

    from ..config.yamlfile import load_yaml
    from ..inputfile import read_text
    from .file import FILE_LIMIT

    source = Path(deployment.source or DEPLOYMENT_FILE)
    raw: dict[str, Any] = dict(load_yaml(read_text(source, "--deployment", FILE_LIMIT), str(source)))
    raw = {"name": deployment.name, **raw}
    models = [dict(m) for m in raw["models"]]
    for key, staged in keys.items():
        index, _, name = key.partition("].")
        models[int(index.removeprefix("models["))][name] = staged
    raw["models"] = models

    class _Plain(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    body = yaml.dump(raw, Dumper=_Plain, sort_keys=False, width=1000, allow_unicode=True)
    return (f"# staged by {WRITTEN_BY} from {source.name}: every path is relative to this file (the staged copies "
            f"beside it, {STAGED_FILE} says where each came from)\n{body}")


def inputs_problem(out: Path, force: bool) -> tuple[str | None, str | None]:
    """(refusal, note) for DIR/inputs: one an earlier --write-job staged is replaced (noted); anything else there
    is refused unless --force."""
    inputs = out / INPUTS
    if not inputs.exists() and not inputs.is_symlink():
        return None, None
    try:
        ours = json.loads((inputs / STAGED_FILE).read_text()).get("written_by") == WRITTEN_BY
    except (OSError, ValueError, AttributeError):
        ours = False
    if ours and inputs.is_dir() and not inputs.is_symlink():
        return None, None  # stage_inputs says whether what it staged differs
    if force:
        return None, f"{INPUTS}/: replaced {inputs}, which --write-job had not staged (--force)"
    return (f"--write-job {out}: {inputs} is there and was not staged by --write-job: move it away, or pass --force "
            "to replace it"), None


def stage_inputs(plan: InputsPlan, out: Path) -> tuple[Path, str | None]:
    """Copy the planned files (each hashed as it is copied) into a new folder, write the staged deployment file,
    staged.json and SHA256SUMS, and swap it in as DIR/inputs; returns that folder and a note when it replaced
    inputs an earlier --write-job staged that differ (by their SHA256SUMS)."""
    from ..spec import atomic_write_text

    out.mkdir(parents=True, exist_ok=True)
    new = out / f".{INPUTS}-staging-{os.getpid()}"
    shutil.rmtree(new, ignore_errors=True)
    new.mkdir()
    for folder in plan.dirs:
        (new / folder).mkdir(parents=True, exist_ok=True)
    records = [_copy(f, new) for f in plan.files]
    (new / DEPLOYMENT_FILE).write_text(plan.text)
    records.insert(0, {"source": str(plan.source), "staged": DEPLOYMENT_FILE, "size": len(plan.text.encode()),
                       "sha256": hashlib.sha256(plan.text.encode()).hexdigest(), "rewritten": True})
    record = {"written_by": WRITTEN_BY, "deployment": plan.name, "bytes": sum(r["size"] for r in records),
              "keys": dict(plan.keys), "files": records,
              "left_out": [{"source": s, "why": why} for s, why in plan.left_out]}
    atomic_write_text(new / STAGED_FILE, json.dumps(record, indent=1) + "\n")
    sums = "".join(f"{r['sha256']}  {r['staged']}\n" for r in records)
    atomic_write_text(new / SUMS_FILE, sums)
    try:
        before: str | None = (out / INPUTS / SUMS_FILE).read_text()
    except (OSError, UnicodeDecodeError):
        before = None
    _swap(new, out / INPUTS)
    changed = before is not None and before != sums
    return out / INPUTS, f"{INPUTS}/: replaced the inputs an earlier --write-job staged there" if changed else None


def _copy(file: StagedFile, into: Path) -> dict[str, Any]:
    """One file copied and hashed in one read; readable by any user (a pod need not run as this one)."""
    target = into / file.staged
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    with open(file.source, "rb") as src, open(target, "wb") as dst:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
            dst.write(chunk)
            size += len(chunk)
    target.chmod((file.source.stat().st_mode & 0o777) | 0o444)
    return {"source": str(file.source), "staged": file.staged, "size": size, "sha256": digest.hexdigest()}


def _swap(new: Path, inputs: Path) -> None:
    """DIR/inputs becomes `new`; the old one (checked by inputs_problem) is removed after the rename."""
    old = inputs.with_name(f".{INPUTS}-old-{os.getpid()}")
    if inputs.is_symlink() or inputs.is_file():
        inputs.unlink()
    elif inputs.exists():
        inputs.rename(old)
    new.rename(inputs)
    shutil.rmtree(old, ignore_errors=True)


__all__ = ["DEPLOYMENT_FILE", "FOLDER_CAP", "INPUTS", "InputsPlan", "SMALL_FILE", "STAGED_FILE", "SUMS_FILE",
           "StagedFile", "inputs_problem", "path_keys", "plan_inputs", "stage_inputs", "staged_text"]
