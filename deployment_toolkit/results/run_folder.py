"""THE run folder: the one output flag that names it (`--result-path`, with each command's older spelling as an
alias), its run.json (results.runinfo / results.ledger write and read it; this is their one door), the run identity
its rows are measured under, and its row stores (results.rows), so every command that writes results lays them
out, stamps them and reuses them the same way."""
from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from . import ledger
from .identity import RunIdentity
from .rows import Row, RowSchema, RowStore
from .runinfo import RUN_JSON, read_run_json, write_run_json
from ..config import Reuse

log = logging.getLogger(__name__)

RESULT_PATH_FLAG = "--result-path"
# the spellings commands had before --result-path: still accepted where a command had one
OLD_RESULT_PATH_FLAGS = ("--output", "--result-dir", "--results-dir")


def add_result_path_argument(parser: argparse.ArgumentParser | Any, *aliases: str, dest: str = "result_path",
                             default: Any = None, help: str | None = None, **kwargs: Any) -> argparse.Action:
    """THE output flag: `--result-path DIR` (plus `aliases`, the spelling a command had before, kept working).

    `parser` is a parser or an argument group; `kwargs` pass on to add_argument (type, required, metavar)."""
    unknown = [a for a in aliases if a not in OLD_RESULT_PATH_FLAGS]
    if unknown:
        raise ValueError(f"{unknown}: an alias of {RESULT_PATH_FLAG} is one of {', '.join(OLD_RESULT_PATH_FLAGS)}")
    kwargs.setdefault("metavar", "DIR")
    return parser.add_argument(RESULT_PATH_FLAG, *aliases, dest=dest, default=default,
                               help=help or "the run folder", **kwargs)


@dataclass
class RunFolder:
    """A results folder and the identity its rows are measured under (None: reading, or a folder whose rows carry
    no identity). Owns run.json (through results.runinfo and results.ledger) and hands out its row stores."""

    path: Path
    identity: RunIdentity | None = None

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    def file(self, name: str) -> Path:
        return self.path / name

    # ---- run.json ----
    @property
    def run_json_path(self) -> Path:
        return self.path / RUN_JSON

    def run_json(self) -> dict[str, Any]:
        """run.json as a dict ({} where there is none; a user error where it is not a run record)."""
        return read_run_json(self.path)

    def write_run_json(self, meta: Mapping[str, Any]) -> Path:
        return write_run_json(self.path, dict(meta))

    def record(self, config: dict[str, Any], server_version: str | None = None) -> dict[str, Any]:
        """Write run.json for the invocation now going on (keeping earlier identities) and register this one."""
        return ledger.record_run(self.path, config, server_version, self.identity)

    def register(self) -> None:
        """Make sure run.json resolves this folder's identity (before its first row is written)."""
        if self.identity is not None:
            ledger.ensure_registered(self.path, self.identity)

    # ---- identities ----
    def identities(self) -> dict[str, dict[str, Any]]:
        """run.json's identities: {id: {"identity": {...}, "invocations": [...]}}."""
        return ledger.identities(self.path)

    def stored_identity(self, identity_id: str) -> dict[str, Any] | None:
        return ledger.stored_identity(self.path, identity_id)

    def reconcile(self, label: str, rows: list[Row], policy: Reuse | str, files: Iterable[str | Path],
                  say: Callable[[str], None] = log.info, stored: Mapping[str, Any] | None = None) -> list[Row]:
        """results.ledger.reconcile under this folder's identity: the rows that may be reused; `files` are set
        aside when any may not (`policy` auto | resume | fresh)."""
        if self.identity is None:
            raise ValueError(f"{self.path}: reconciling rows needs the run identity")
        return ledger.reconcile(self.path, label, rows, self.identity, policy, files, say=say, stored=stored)

    # ---- row stores ----
    def table(self, name: str, schema: RowSchema, *, lock: bool = False, label: str | None = None) -> RowStore:
        """The row store `<folder>/<name>` of `schema`, stamped with this folder's identity (not yet read: call
        `open()` to load and reconcile it)."""
        return RowStore(self.path / name, schema, self.identity, lock=lock, label=label)


__all__ = ["OLD_RESULT_PATH_FLAGS", "RESULT_PATH_FLAG", "RunFolder", "add_result_path_argument"]
