"""Whose search a model's folder holds: the owner record `<result>/models/<name>/owner.json` (the deployment's name and
a fingerprint of the model's definition), written when the search ran and checked by the gathering
(fanout.searches_done), so that `--gather` over a folder another deployment's searches (or another definition of the
model) left refuses in one line instead of planning from them.

The definition is what the search depends on, by content: the pods see the inputs under /inputs and a local
gathering sees them elsewhere, so a path is its file's digest (a folder's: its files' relative names and sizes).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .file import ModelEntry

OWNER_FILE = "owner.json"


def _digest_of(path: Path) -> str:
    """A file by its content; a folder by its files' relative names and sizes (a data folder can be large, and
    the gathering fingerprints every model). Never by absolute path: the pods see the inputs under /inputs, a local
    gathering elsewhere."""
    from ..results.identity import file_digest

    if not path.is_dir():
        return file_digest(path) if path.exists() else f"missing:{path.name}"
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f"{f.relative_to(path).as_posix()}\0{f.stat().st_size}\n".encode())
    return f"folder:{h.hexdigest()}"


def _reference(ref: str) -> str:
    """A model reference as its content: a file or folder (the deployment file resolved it to an absolute path) by
    its digest, keeping a model.py's factory; a zoo name or timm:<arch> as written."""
    head, sep, tail = ref.partition(".py:")
    path = Path(f"{head}.py" if sep else ref)
    if not path.is_absolute() or not path.exists():
        return ref
    return _digest_of(path) + (f":{tail}" if sep else "")


def model_definition(entry: "ModelEntry") -> dict[str, Any]:
    """What an entry's search depends on, free of where the inputs are mounted: its reference, model_args,
    checkpoint, samples and steps (their content), its SLO. Not its peak or traffic: the search ranks capacity under
    the SLO alone."""
    definition: dict[str, Any] = {"model": _reference(entry.model),
                                  "model_args": json.loads(json.dumps(dict(entry.model_args), default=str)),
                                  "p99_ms": entry.p99_ms}
    for key in ("checkpoint", "data", "dataloader", "preprocess", "postprocess", "raw_data"):
        if getattr(entry, key) is not None:
            definition[key] = _digest_of(Path(getattr(entry, key)))
    return definition


def owner_record(deployment_name: str, entry: "ModelEntry") -> dict[str, Any]:
    """The owner record of an entry's search folder: the deployment, the model, its definition and its digest."""
    definition = model_definition(entry)
    digest = hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()[:16]
    return {"deployment": deployment_name, "model": entry.name, "fingerprint": digest, "definition": definition}


def write_owner(model_dir: Path, deployment_name: str, entry: "ModelEntry") -> Path:
    """Record whose search the model's folder (`<result>/models/<name>`) holds."""
    from ..spec import atomic_write_text

    path = model_dir / OWNER_FILE
    atomic_write_text(path, json.dumps(owner_record(deployment_name, entry), indent=1, sort_keys=True) + "\n")
    return path


def owner_problem(model_dir: Path, index: int, deployment_name: str, entry: "ModelEntry") -> str:
    """Why the search in the entry's folder is not this deployment's to gather ("" when it is).

    A folder without an owner record (searched before records were written) is refused too, not accepted with a
    warning: the gathering cannot tell whose search it holds, and planning from another deployment's without a word
    is what this check exists to prevent, while a warning scrolls by in a pod's log. The remedy is cheap: rerun that
    index, which replays its checkpoint where the run identity is the same and records the owner (a search of an
    older toolkit release would not replay under this one's identity anyway: its version is part of it)."""
    where = f"models/{entry.name}/search"
    rerun = f"use another --result-path or rerun index {index} ({entry.name})"
    path = model_dir / OWNER_FILE
    if not path.exists():
        return (f"{where} has no owner record ({OWNER_FILE}; searched by an older deployment-toolkit?), so whose "
                f"search it holds cannot be told: {rerun}")
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        return f"{path} is unreadable ({err}): {rerun}"
    if not isinstance(record, dict) or not isinstance(record.get("definition"), dict):
        return f"{path} is not an owner record (a JSON object with deployment, model and definition): {rerun}"
    if record.get("deployment") != deployment_name:
        return (f"{where} was searched for deployment {record.get('deployment')!r}, not this one "
                f"({deployment_name!r}): {rerun}")
    now = model_definition(entry)
    changed = sorted(k for k in set(now) | set(record["definition"]) if now.get(k) != record["definition"].get(k))
    if record.get("model") != entry.name or changed:
        return (f"{where} was searched for another definition of {entry.name} in deployment {deployment_name!r} "
                f"(its {', '.join(changed) or 'name'} differ): {rerun}")
    return ""


__all__ = ["OWNER_FILE", "model_definition", "owner_problem", "owner_record", "write_owner"]
