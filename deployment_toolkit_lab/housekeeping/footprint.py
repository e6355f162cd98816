"""How much a clone carries: the size of the repository's files and of each committed run folder under results/.

Every committed run adds its files to every clone (and to the history for good), so a run folder is held under
RUN_FOLDER_LIMIT (tests/unit/results/test_results_footprint.py): raw per-request data is summarised where it is written
and git-ignored (perf/analyzer/profile_summary.py), older runs are compacted (`deployment-toolkit-lab compact-results`).
The files counted are those the next commit of the working tree holds: tracked or not ignored, present on disk
(`git ls-files --cached --others --exclude-standard`), so a summary written but not yet added counts, and a raw
file untracked but still on disk does not. `deployment-toolkit-lab footprint --write docs/repository_size.md` writes
the figures the README's Layout section quotes.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

from deployment_toolkit.spec import atomic_write_text, size_text

MIB = 2**20  # sizes here are binary, as spec.size_text writes them
RUN_FOLDER_LIMIT = 2 * MIB  # bytes a committed run folder may hold: 2 MiB
RESULTS = "results"


def committed_files(root: str | Path, under: str = "") -> list[Path]:
    """Files of the repository at `root` (under `under`, relative) that a commit of the working tree would hold,
    as paths relative to `root`; [] without git or outside a repository."""
    git = shutil.which("git")
    if git is None:
        return []
    cmd = [git, "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    proc = subprocess.run([*cmd, *(["--", under] if under else [])], capture_output=True, timeout=60)
    if proc.returncode != 0:
        return []
    names = sorted({n for n in proc.stdout.decode().split("\0") if n})
    return [Path(n) for n in names if (Path(root) / n).is_file()]


@dataclass(frozen=True)
class Footprint:
    """The repository's files and each run folder's, in bytes (and file counts)."""

    files: int
    bytes: int
    results_files: int
    results_bytes: int
    run_folders: dict[str, int]  # results/<name> -> bytes

    @property
    def largest(self) -> tuple[str, int]:
        return max(self.run_folders.items(), key=lambda kv: kv[1], default=("", 0))

    def over(self, limit: int = RUN_FOLDER_LIMIT) -> dict[str, int]:
        """Run folders holding more than `limit` bytes."""
        return {name: size for name, size in self.run_folders.items() if size > limit}


def measure(root: str | Path) -> Footprint:
    """The footprint of the repository at `root`."""
    root = Path(root)
    files = committed_files(root)
    sizes = {f: (root / f).stat().st_size for f in files}
    folders: dict[str, int] = {}
    for f, size in sizes.items():
        if len(f.parts) > 2 and f.parts[0] == RESULTS:  # results/<run>/...: a run folder's file
            folders[f.parts[1]] = folders.get(f.parts[1], 0) + size
    in_results = [f for f in files if f.parts[0] == RESULTS]
    return Footprint(len(files), sum(sizes.values()), len(in_results), sum(sizes[f] for f in in_results),
                     dict(sorted(folders.items())))


def markdown(fp: Footprint) -> str:
    """The README's statement of the repository's size (what `footprint --write` writes), wrapped as the README is."""
    name, size = fp.largest
    text = (f"A checkout holds {size_text(fp.bytes)} (its git history comes on top); results/ {size_text(fp.results_bytes)} "
            f"of it, in {len(fp.run_folders)} run folders, the largest {size_text(size)} (`results/{name}/`). A run folder "
            f"stays under {size_text(RUN_FOLDER_LIMIT)} (`tests_lab/unit/test_results_footprint.py`): perf_analyzer's "
            "per-request exports are summarised where they are written and git-ignored (`--keep-raw` keeps them "
            "compressed), and an older run is compacted with `deployment-toolkit-lab compact-results results/<run>`. "
            "Written by `deployment-toolkit-lab footprint --write docs/repository_size.md`.")
    return textwrap.fill(text, width=118, break_on_hyphens=False, break_long_words=False) + "\n"


_STATED = re.compile(r"holds (?P<all>[\d.]+) MiB.*?results/ (?P<results>[\d.]+) MiB", re.S)


def stale(text: str, fp: Footprint, tolerance: float = 0.10) -> list[str]:
    """What the written statement gets wrong by more than `tolerance` (relative) or 0.5 MiB, whichever is larger:
    the repository's size and results/'. Small edits do not make it stale; a run added or a raw file committed
    does."""
    m = _STATED.search(text)
    if m is None:
        return ["no size statement found"]
    wrong = []
    for label, stated, now in (("repository", float(m["all"]), fp.bytes / MIB),
                               ("results/", float(m["results"]), fp.results_bytes / MIB)):
        if abs(stated - now) > max(tolerance * now, 0.5):
            wrong.append(f"{label}: stated {stated:.1f} MiB, now {now:.1f} MiB")
    return wrong


def write(path: str | Path, fp: Footprint) -> Path:
    atomic_write_text(path, markdown(fp))
    return Path(path)
