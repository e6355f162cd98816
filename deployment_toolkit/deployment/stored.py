"""A search already run, as `size` plans from it: the folder `deployment-toolkit search` (or a plan's
`models/<name>/search`) left, read before anything starts: its run.json names the command that searched it, the SLO
its open-loop capacity was measured under and its winner. `size` is the one planner on such a folder: the search is
replayed from its stored points (refused, not measured again, where they were measured under another identity)."""
from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserInputError
from ..inputfile import Expect, check_path
from ..results.runinfo import read_run_json


FOLDER_FLAGS = ("--update-committed", "--fresh", "--resume")


@dataclass(frozen=True)
class StoredSearch:
    folder: Path
    argv: tuple[str, ...]  # the flags the search was run with (its command less the program's words)
    program: str  # "search" or "plan": whose parser reads `argv`
    budget_ms: float  # the p99 SLO its capacities were measured under
    winner: str  # the winner's config, in words
    cwd: str  # where the command ran: its relative paths are relative to it

    def relative_paths_ok(self) -> str | None:
        """Why the recorded command's relative paths would not read the same files from here (None: they would)."""
        if not self.cwd or Path(self.cwd).resolve() == Path.cwd().resolve():
            return None
        for word in self.argv:
            if not word.startswith("-") and not Path(word).is_absolute() and (Path(self.cwd) / word).exists() \
                    and not Path(word).exists():
                return (f"its command read {word} relative to {self.cwd}, where it ran: run size from there")
        return None

    def copy_to(self, folder: Path) -> None:
        """The stored points where the planner's search replays them (nothing copied when it is the same folder)."""
        if folder.resolve() == self.folder.resolve():
            return
        folder.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(self.folder, folder, dirs_exist_ok=True)


def stored_search(path: str | Path) -> StoredSearch:
    """The search in `path` (the SEARCH argument), refused in one line where it is not a finished open-loop capacity
    search of one model."""
    folder = check_path(path, "SEARCH", Expect.FOLDER)
    try:
        meta = read_run_json(folder)
    except (OSError, ValueError):
        meta = {}
    config = meta.get("config") or {}
    if config.get("kind") != "search":
        raise UserInputError(f"SEARCH {path}: no search's run.json there: give the folder `deployment-toolkit "
                             "search --result-path DIR` wrote (or a plan's models/<name>/search)")
    objective = (config.get("settings") or {}).get("objective")
    if objective != "capacity":
        raise UserInputError(f"SEARCH {path} ranked its configs by {objective}: size plans on open-loop capacity: "
                             "search again with --objective capacity (the default)")
    if not config.get("winner"):
        raise UserInputError(f"SEARCH {path} has no winner (no config held its SLO, or it did not finish): nothing "
                             "to size; search again or rerun it to finish")
    words = shlex.split(meta.get("command") or config.get("command") or "")
    first_flag = next((i for i, w in enumerate(words) if w.startswith("--")), len(words))
    program = "plan" if any(w.split()[-1] == "plan" for w in words[:first_flag] if w.strip()) else "search"
    # what said how that run treated its own folder, not what it measured: left out (--update-committed, parsed
    # here, would let size write into a committed folder)
    argv = tuple(w for w in words[first_flag:] if w not in FOLDER_FLAGS)
    if program == "plan" and "--deployment" in argv:
        raise UserInputError(f"SEARCH {path} is a search of a deployment's model: plan the deployment from its "
                             "searches with `deployment-toolkit plan --deployment FILE --gather`")
    return StoredSearch(folder, argv, program, float(config["settings"]["budget_ms"]), _winner(config["winner"]),
                        str(meta.get("cwd") or ""))


def _winner(winner: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in winner.items() if v not in (None, [], ""))


__all__ = ["StoredSearch", "stored_search"]
