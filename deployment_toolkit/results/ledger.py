"""A run folder's provenance: which identities its rows were measured under, and what happens to rows that do
not match the identity of the run now going on.

Rows carry two columns, `measured_at` (UTC) and `identity` (a short id); run.json's `identities` maps each id to
the full identity and to the invocations that measured under it. Rows of another identity are never reused and
never deleted: the files holding them move to `<run>/superseded/<UTC time>/`, and one line says what differed.
"""
from __future__ import annotations

import datetime as _dt
import logging
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from .runinfo import read_run_json, run_metadata, write_run_json
from .identity import RunIdentity, summary
from ..config import Reuse
from ..errors import UserError, UserInputError

log = logging.getLogger(__name__)

IDENTITY_COLUMN = "identity"
MEASURED_AT_COLUMN = "measured_at"
PROVENANCE_COLUMNS = (MEASURED_AT_COLUMN, IDENTITY_COLUMN)
SUPERSEDED_DIR = "superseded"
POLICIES = Reuse.values()  # what a rerun does with stored rows: config.Reuse


class IdentityMismatch(UserError, ValueError):
    """--resume was asked for, but the stored rows were measured under another identity (a user error)."""


def add_reuse_arguments(parser, what: str = "points") -> None:
    """--resume / --fresh (dest `reuse`, default "auto"): the same two flags on every tool that reuses results."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--resume", dest="reuse", action="store_const", const=Reuse.RESUME,
                       help=f"reuse the stored {what}, and refuse (exit 2) if they were measured under another run "
                            "identity instead of moving them aside")
    group.add_argument("--fresh", dest="reuse", action="store_const", const=Reuse.FRESH,
                       help=f"move the stored {what} aside (kept under superseded/) and measure everything anew")
    parser.set_defaults(reuse=Reuse.AUTO)


def now_utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def identities(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """run.json's identities: {id: {"identity": {...}, "invocations": [...]}}."""
    return dict(read_run_json(run_dir).get("identities") or {})


def stored_identity(run_dir: str | Path, identity_id: str) -> dict[str, Any] | None:
    entry = identities(run_dir).get(identity_id)
    return entry.get("identity") if entry else None


def register(run_dir: str | Path, identity: RunIdentity, meta: Mapping[str, Any]) -> None:
    """Record in run.json that an invocation (its command, time, load, git state) measures under `identity`.

    The rest of run.json (the latest invocation's metadata and config) is left as the caller wrote it.
    """
    doc = read_run_json(run_dir)
    ids = dict(doc.get("identities") or {})
    entry = dict(ids.get(identity.id) or {"identity": identity.to_dict(), "invocations": []})
    invocation = {k: meta.get(k) for k in ("timestamp", "command", "git")}
    invocation["load_average_1_5_15m"] = (meta.get("hardware") or {}).get("load_average_1_5_15m")
    invocation["pid"] = os.getpid()
    previous = list(entry.get("invocations", []))
    if previous and previous[-1].get("pid") == invocation["pid"] and previous[-1].get("command") == meta.get("command"):
        previous.pop()  # the same invocation recording again (at its end): keep its latest state once
    entry["invocations"] = [*previous, invocation]
    entry["hardware"] = meta.get("hardware")
    entry["versions"] = meta.get("versions")
    ids[identity.id] = entry
    doc["identities"] = ids
    write_run_json(run_dir, doc)


def ensure_registered(run_dir: str | Path, identity: RunIdentity) -> None:
    """Make sure run.json resolves `identity` (a store calls this before writing its first row of it)."""
    doc = read_run_json(run_dir)
    ids = dict(doc.get("identities") or {})
    if identity.id not in ids:
        ids[identity.id] = {"identity": identity.to_dict(), "invocations": []}
        doc["identities"] = ids
        write_run_json(run_dir, doc)


def record_run(run_dir: str | Path, config: dict[str, Any], server_version: str | None,
               identity: RunIdentity | None = None) -> dict[str, Any]:
    """Write run.json for the invocation now going on, keeping the identities of earlier ones."""
    previous = read_run_json(run_dir)
    meta = run_metadata(config, server_version)
    if previous.get("identities"):
        meta["identities"] = previous["identities"]
    write_run_json(run_dir, meta)
    if identity is not None:
        register(run_dir, identity, meta)
    return meta


def set_aside(run_dir: str | Path, files: Iterable[str | Path]) -> Path | None:
    """Move `files` (those that exist) into `<run_dir>/superseded/<UTC time>/`; returns that folder."""
    files = [Path(f) for f in files if Path(f).exists()]
    if not files:
        return None
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    dest = Path(run_dir) / SUPERSEDED_DIR / stamp
    dest.mkdir(parents=True, exist_ok=False)
    for f in files:
        shutil.move(str(f), str(dest / f.name))
    return dest


def reuse_policy(policy: Reuse | str) -> Reuse:
    """`policy` as a Reuse (its value from a flag or a caller's string), or one line naming the choices."""
    try:
        return Reuse(policy)
    except ValueError:
        raise UserInputError(f"unknown reuse policy {policy!r}; choose one of {', '.join(POLICIES)}") from None


def reconcile(run_dir: str | Path, label: str, rows: list[dict[str, Any]], identity: RunIdentity,
              policy: Reuse | str, files: Iterable[str | Path], say: Callable[[str], None] = log.info,
              stored: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The rows that may be reused under `identity`; sets the store's files aside when any row may not.

    policy (config.Reuse): auto reuses matching rows and sets mismatching ones aside (saying what differs); resume
    refuses to go on when any row mismatches; fresh sets every stored row aside. `stored`: the rows' identity when
    the store keeps it itself (else run.json resolves it). `say`: where the line about rows set aside goes (this
    module's logger unless a caller collects it).
    """
    policy = reuse_policy(policy)
    if not rows:
        return []
    foreign = Counter(str(r.get(IDENTITY_COLUMN) or "") for r in rows if r.get(IDENTITY_COLUMN) != identity.id)
    if policy is not Reuse.FRESH and not foreign:
        return rows
    if policy is Reuse.RESUME:
        raise IdentityMismatch(f"{label}: cannot resume in {run_dir}: " + _why(run_dir, identity, foreign, stored)
                               + " (drop --resume to set them aside and measure anew)")
    dest = set_aside(run_dir, files)
    if policy is Reuse.FRESH:
        say(f"{label}: --fresh: {len(rows)} stored row(s) moved to {dest}; measuring every point anew")
    else:
        say(f"{label}: {sum(foreign.values())} stored row(s) were measured under another identity "
            f"({_why(run_dir, identity, foreign, stored)}); moved to {dest}; measuring them anew")
    return []


def _why(run_dir: str | Path, identity: RunIdentity, foreign: Counter, stored: Mapping[str, Any] | None = None) -> str:
    old_id, count = foreign.most_common(1)[0]
    stored = stored or (stored_identity(run_dir, old_id) if old_id else None)
    if stored is None:
        return (f"{count} row(s) carry identity {old_id or '(none)'}, which run.json does not resolve: "
                "measured before row provenance, or copied from elsewhere")
    return f"{count} row(s) of identity {old_id}, which differs in {summary(identity.differences(stored))}"


def row_identities(rows: Iterable[Mapping[str, Any]]) -> Counter:
    """How many rows each identity id holds ('' for rows measured before row provenance)."""
    return Counter(str(r.get(IDENTITY_COLUMN) or "") for r in rows)
