#!/usr/bin/env python3
"""Write what the fleet example's deployment file names but the repository does not hold: eight ONNX scorers made
"elsewhere" (small MLPs exported with torch.onnx, random weights, a dynamic batch axis), the text pipeline's raw
reviews, the image pipeline's raw images, and a day's traffic (5-minute rates) for the scorers that peak by day or by
night. Seeded: every run writes the same files."""
from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# name, input features, hidden widths, peak inferences/s, 'day' | 'night' | '' (its peak alone)
SCORERS = (("scorer_eu", 64, (256, 256), 900, "day"), ("scorer_us", 64, (256, 256), 900, "night"),
           ("scorer_apac", 64, (256, 256), 600, "night"), ("fraud", 128, (512, 512, 256), 400, ""),
           ("churn", 32, (128,), 300, "day"), ("ranker", 256, (1024, 512), 250, ""),
           ("pricing", 48, (256, 128), 500, "day"), ("spam", 96, (384, 192), 350, "night"))


def export_scorer(path: Path, features: int, widths: tuple[int, ...], seed: int) -> None:
    import torch

    torch.manual_seed(seed)
    layers, last = [], features
    for width in widths:
        layers += [torch.nn.Linear(last, width), torch.nn.ReLU()]
        last = width
    model = torch.nn.Sequential(*layers, torch.nn.Linear(last, 1), torch.nn.Sigmoid()).eval()
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # the exporter's deprecation notices: not the user's to act on
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(4, features),), str(path), input_names=["features"],
                          output_names=["score"],
                          dynamic_axes={"features": {0: "batch"}, "score": {0: "batch"}}, dynamo=False)


def day_profile(path: Path, peak: float, when: str) -> None:
    """A raised cosine over the day peaking at 14:00 (day) or 02:00 (night), floor 10 % of the peak."""
    centre = 14 if when == "day" else 2
    rows = ["time,rate"]
    for k in range(288):
        hour = k * 5 / 60
        shape = 0.5 * (1 + math.cos(2 * math.pi * (hour - centre) / 24))
        rows.append(f"{int(hour):02d}:{k * 5 % 60:02d},{peak * (0.1 + 0.9 * shape):.2f}")
    path.write_text("\n".join(rows) + "\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, epilog="example:\n  python examples/fleet/make_fleet.py",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output", type=Path, default=ROOT / "workspace" / "plan-fleet" / "inputs")
    out = p.parse_args().output
    sys.path.insert(0, str(ROOT / "examples" / "image_pipeline"))
    sys.path.insert(0, str(ROOT / "examples" / "text_pipeline"))
    from make_images import write_images
    from make_texts import write_texts

    for i, (name, features, widths, peak, when) in enumerate(SCORERS):
        if not (out / "scorers" / f"{name}.onnx").exists():
            export_scorer(out / "scorers" / f"{name}.onnx", features, widths, seed=i)
        if when:
            (out / "traffic").mkdir(parents=True, exist_ok=True)
            day_profile(out / "traffic" / f"{name}.csv", peak, when)
    write_texts(out / "reviews")
    write_images(out / "images")
    print(f"fleet inputs in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
