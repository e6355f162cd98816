"""The seed's own nnU-Net figures (../shared/seeds/001_*.txt, NVIDIA DeepLearningExamples nnUNet/PyT README),
read from its text by a command, never typed: the acceptance puts this GPU's online table beside them.

    python -m deployment_toolkit_lab.acceptance.seed_tables ../shared/seeds/001_*.txt \\
        > deployment_toolkit_lab/acceptance/seed001_nnunet_online.csv
"""
from __future__ import annotations

import csv
import logging
import re
import sys
from pathlib import Path

from deployment_toolkit.results.rows import RowSchema, to_csv

log = logging.getLogger(__name__)

SEED_CSV = Path(__file__).with_name("seed001_nnunet_online.csv")
SOURCE = "seed 001 (NVIDIA DeepLearningExamples PyTorch/Segmentation/nnUNet README, Triton online scenario)"
_HEADING = re.compile(r"^Online: (?P<gpu>.+) with (?P<precision>FP16|FP32)\s*$")
GPU_SHORT = {"NVIDIA DGX A100 (1x A100 80GB)": "A100", "NVIDIA T4": "T4", "NVIDIA A40": "A40",
             "NVIDIA DGX-1 (1x V100 32GB)": "V100"}


def parse_online_tables(text: str) -> list[dict[str, str]]:
    """Every "Online: <GPU> with <precision>" section's "Full tabular data" rows, with gpu and precision."""
    rows: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    for line in text.splitlines():
        m = _HEADING.match(line.strip())
        if m:
            current = {"gpu": m["gpu"].strip(), "precision": m["precision"]}
            continue
        if current is None or not line.startswith("Full tabular data"):
            continue
        cells = [c.strip() for c in line.split("|")[1:]]
        rule = next(i for i, c in enumerate(cells) if c.startswith((":-", "--")))
        header = [c for c in cells[:rule] if c]
        values = [c for c in cells[rule:] if c and not set(c) <= set(":-")]
        for start in range(0, len(values) - len(header) + 1, len(header)):
            rows.append({**current, **dict(zip(header, values[start:start + len(header)]))})
        current = None
    return rows


def seed_csv(rows: list[dict[str, str]]) -> str:
    """The seed's rows as SEED_CSV holds them (through the row store's one CSV writer): where they come from, the
    GPU and its short name, the precision, then the table's own columns."""
    fields = ("source", "gpu", "gpu_short", "precision", *[k for k in rows[0] if k not in ("gpu", "precision")])
    return to_csv(RowSchema(columns=fields),
                  [{"source": SOURCE, "gpu_short": GPU_SHORT.get(r["gpu"], r["gpu"]), **r} for r in rows])


def load_seed_rows(path: Path = SEED_CSV) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_file():
        log.error("usage: python -m deployment_toolkit_lab.acceptance.seed_tables SEED_001_TEXT_FILE > CSV")
        return 2
    rows = parse_online_tables(Path(args[0]).read_text())
    if not rows:
        log.error(f"error: no 'Online: <GPU> with FP16|FP32' tables in {args[0]}")
        return 2
    sys.stdout.write(seed_csv(rows))
    return 0


if __name__ == "__main__":
    logging.basicConfig(format="%(message)s")  # the two refusals on stderr; the CSV alone on stdout
    sys.exit(main())
