"""Copy generated result files into the Markdown that quotes them (the README, results/*/README.md).

A quoted file sits between `<!-- generated from PATH -->` and `<!-- end generated -->` (PATH relative to the
repository root); this rewrites every such block from its file, so no figure in a README is typed by hand.
`--check` changes nothing and exits 1 when a block differs from its file (the unit tests run it).
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

import argparse  # noqa: E402

from deployment_toolkit import cli  # noqa: E402
from ..housekeeping.embed import embed_generated, stale_blocks  # noqa: E402

EXAMPLE = """examples:
  deployment-toolkit-lab embed-results README.md results/*/README.md
  deployment-toolkit-lab embed-results --check README.md
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("markdown", type=Path, nargs="+")
    p.add_argument("--check", action="store_true", help="report stale blocks, change nothing")
    p.add_argument("--root", type=Path, default=ROOT, help="what block paths are relative to")
    args = p.parse_args(argv)
    stale = 0
    for md in args.markdown:
        changed = stale_blocks(md, args.root) if args.check else embed_generated(md, args.root)
        for rel in changed:
            print(f"{md}: {'stale' if args.check else 'updated'} block from {rel}")
        stale += len(changed)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    cli.run(main)
