"""No command rewrites committed results unless told to: a folder git tracks (a committed example run, a test
fixture) is refused as an output, in one line, unless the command got --update-committed. A rerun there would
replace figures measured on another host under that host's run.json.

What a run folder keeps is the same concern: perf_analyzer's per-request profile exports and the arrival
schedules behind them (tens of MB a run) are summarised and dropped where they are written, unless the command got
--keep-raw (perf/analyzer/profile_summary.py), so a run stays small enough to commit. A leaf: imports only
`errors`."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .errors import UserInputError

_state = {"allowed": False, "keep_raw": False}


def allow(update_committed: bool) -> None:
    """Set from --update-committed (cli's parser does it for every command)."""
    _state["allowed"] = bool(update_committed)


def is_allowed() -> bool:
    """Whether this command got --update-committed (a composite step passes it on to the steps it parses)."""
    return _state["allowed"]


def keep_raw(keep: bool) -> None:
    """Set from --keep-raw (cli's parser, every command). Only ever switched on by a flag: a composite command
    that parses its steps' flags again must not switch off what its own command line asked for."""
    _state["keep_raw"] = _state["keep_raw"] or bool(keep)


def reset_keep_raw() -> None:
    """Back to the default (dropping raw files): for tests that run several commands in one process."""
    _state["keep_raw"] = False


def keeping_raw() -> bool:
    """Whether raw per-request files (profile exports, schedule files) are kept beside their summaries."""
    return _state["keep_raw"]


def tracked_files(path: str | Path) -> list[str]:
    """Files git tracks at or under `path` ([] outside a repository, or without git)."""
    path = Path(path).resolve()
    probe = path if path.is_dir() else path.parent
    while not probe.exists():
        probe = probe.parent
    git = shutil.which("git")
    if git is None:
        return []
    try:
        proc = subprocess.run([git, "-C", str(probe), "ls-files", "--full-name", "--", str(path)],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [ln for ln in proc.stdout.splitlines() if ln.strip()] if proc.returncode == 0 else []


def refuse_committed(path: str | Path, flag: str = "the output folder") -> None:
    """Raise UserInputError when `path` holds files git tracks and --update-committed was not given."""
    if _state["allowed"]:
        return
    tracked = tracked_files(path)
    if tracked:
        raise UserInputError(
            f"{path} ({flag}) holds {len(tracked)} file(s) committed to git, e.g. {tracked[0]}: this run would rewrite "
            "them with figures measured here. Write somewhere new (results/local/ is git-ignored), or pass "
            "--update-committed to regenerate the committed example on purpose")
