"""List the registered models: family, name, task, metric and input shapes (full preset where there is one)."""
from __future__ import annotations

from .. import cli


def build_parser():
    m = cli.parser(__doc__, """
        deployment-toolkit models
        deployment-toolkit models --family segmentation
    """)
    m.add_argument("--family", default=None)
    return m


def main(argv: list[str] | None = None) -> int:
    from ..models import list_models

    args = build_parser().parse_args(argv)
    for e in list_models(args.family):
        sig = e.signature("small")
        full = e.presets.get("full")
        shapes = ", ".join(f"{t.name}{list(t.shape)}" for t in (full.signature if full else sig).inputs)
        print(f"{e.family:<12} {e.name:<30} {e.task:<15} {e.metric:<7} {shapes}")
    return 0


if __name__ == "__main__":
    cli.run(main)
