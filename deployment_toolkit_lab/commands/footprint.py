"""The size of the repository's files and of each run folder under results/, as the next commit of the working
tree would hold them (tracked or not ignored, on disk). --write FILE writes the statement the README's Layout
section quotes (`deployment-toolkit-lab embed-results README.md` then copies it in); exit 1 when a run folder is over
the limit for a committed run.
"""
from __future__ import annotations

from pathlib import Path

from deployment_toolkit import cli
from deployment_toolkit_lab.housekeeping import footprint
from deployment_toolkit.spec import size_text

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = """
  deployment-toolkit-lab footprint
  deployment-toolkit-lab footprint --write docs/repository_size.md && deployment-toolkit-lab embed-results README.md
"""


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser(__doc__, EXAMPLE)
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this checkout)")
    parser.add_argument("--write", type=Path, metavar="FILE", help="write the README's size statement here")
    args = parser.parse_args(argv)
    fp = footprint.measure(args.root)
    for name, size in sorted(fp.run_folders.items(), key=lambda kv: -kv[1]):
        print(f"{size:>12,} bytes  results/{name}/")
    print(f"{fp.results_bytes:>12,} bytes  results/ ({fp.results_files} files)")
    print(f"{fp.bytes:>12,} bytes  the repository ({fp.files} files, without its git history)")
    if args.write:
        print(f"wrote {footprint.write(args.write, fp)}")
    over = fp.over()
    for name, size in over.items():
        print(f"results/{name}/ holds {size_text(size)}, over {size_text(footprint.RUN_FOLDER_LIMIT)}: "
              f"deployment-toolkit-lab compact-results results/{name}")
    return 1 if over else 0


if __name__ == "__main__":
    cli.run(main)
