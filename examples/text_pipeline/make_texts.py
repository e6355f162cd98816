#!/usr/bin/env python3
"""Write a few raw text samples for the text pipeline example, one UTF-8 .txt file per sample (some with accents,
an emoji and words the tokenizer has never seen)."""
from __future__ import annotations

import argparse
from pathlib import Path

TEXTS = (
    "The staff were friendly and the coffee was wonderful.",
    "Terrible: the delivery was late and the box was damaged.",
    "An average café, nothing special.",
    "Would buy again, great value 👍",
    "The instructions were confusing but it works.",
    "Très bien! The room was clean and comfortable.",
)


def write_texts(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, text in enumerate(TEXTS):
        path = folder / f"review_{i:02d}.txt"
        path.write_text(text + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--output", type=Path, default=Path("workspace/text_pipeline/texts"), help="folder to write")
    for path in write_texts(p.parse_args().output):
        print(path)


if __name__ == "__main__":
    main()
