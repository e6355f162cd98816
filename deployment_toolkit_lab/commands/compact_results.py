"""Make run folders small enough to commit, losing no figure: each perf_analyzer profile export is summarised beside
its point (*.profile.summary.json: the latency from the intended send time over the counted requests and per
window, with the raw file's digest) and kept gzip-compressed, and the server's telemetry series are
gzip-compressed (the report reads them either way). Raw exports and schedule files are git-ignored under results/.
A committed folder needs --update-committed (its raw files leave the working tree's tracked set: untrack them with
`git rm --cached`). Prints each folder's size as the next commit would hold it.
"""
from __future__ import annotations

from pathlib import Path

from deployment_toolkit import cli
from deployment_toolkit.committed import refuse_committed
from deployment_toolkit.errors import UserInputError
from ..housekeeping.footprint import RUN_FOLDER_LIMIT, committed_files
from deployment_toolkit.spec import size_text
from ..housekeeping.compact import compact_run

EXAMPLE = """
  deployment-toolkit-lab compact-results results/local/plan-resnet18
  deployment-toolkit-lab compact-results results/plan-my_model-cpu --update-committed
"""


def _repo_root(path: Path) -> Path | None:
    for p in (path.resolve(), *path.resolve().parents):
        if (p / ".git").exists():
            return p
    return None


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser(__doc__, EXAMPLE)
    parser.add_argument("runs", type=Path, nargs="+", metavar="RUN", help="run folders to compact")
    args = parser.parse_args(argv)
    for run in args.runs:
        if not run.is_dir():
            raise UserInputError(f"{run}: not a folder")
        refuse_committed(run, "a run folder compact-results rewrites")
    for run in args.runs:
        done = compact_run(run, f"deployment-toolkit-lab compact-results {run}")
        print(f"{run}: {len(done.summaries)} profile summaries written, {len(done.compressed)} files compressed")
        for raw in done.no_schedule:
            print(f"  {raw}: no schedule file beside it, not summarised (kept as it is)")
        for raw in done.unreadable:
            print(f"  {raw}: empty or cut export (its row has perf_analyzer's own p99), kept as it is")
        root = _repo_root(run)
        if root is not None:
            size = sum((root / f).stat().st_size for f in committed_files(root, str(run.resolve().relative_to(root))))
            over = " (over the limit for a committed run folder)" if size > RUN_FOLDER_LIMIT else ""
            print(f"  a commit of {run} holds {size_text(size)}{over}")
    return 0


if __name__ == "__main__":
    cli.run(main)
