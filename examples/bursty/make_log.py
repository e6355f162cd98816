#!/usr/bin/env python3
"""Write what the bursty example's deployment file names: two of the fleet example's ONNX scorers (fraud and churn,
made "elsewhere" by examples/fleet/make_fleet.py's exporter) and a gateway's request log of five minutes, one row per
request (time in epoch seconds, model). fraud's requests arrive as a Poisson stream; churn's come in 1-second bursts
every 5 seconds (a batch job upstream flushing its queue): BURST_SHARE of its requests in the burst second, the rest
spread over the other four, the same mean rate. Seeded: every run writes the same files."""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
START = 1_780_000_000.0  # epoch seconds of the log's first second
SECONDS = 300
RATES = {"fraud": 120.0, "churn": 60.0}  # mean requests/s over the log
PERIOD_S, BURST_SHARE = 5, 0.6  # churn: every 5 s, 60 % of the period's requests within its first second


def fraud_times(rng: np.random.Generator) -> np.ndarray:
    gaps = rng.exponential(1 / RATES["fraud"], size=int(RATES["fraud"] * SECONDS * 1.2))
    times = np.cumsum(gaps)
    return times[times < SECONDS]


def churn_times(rng: np.random.Generator) -> np.ndarray:
    per_period = RATES["churn"] * PERIOD_S
    out = []
    for start in range(0, SECONDS, PERIOD_S):
        burst = rng.poisson(per_period * BURST_SHARE)
        calm = rng.poisson(per_period * (1 - BURST_SHARE))
        out += [start + rng.uniform(0, 1, burst), start + 1 + rng.uniform(0, PERIOD_S - 1, calm)]
    return np.sort(np.concatenate(out))


def write_log(path: Path, seed: int = 0) -> int:
    rng = np.random.default_rng(seed)
    rows = [(t, "fraud") for t in fraud_times(rng)] + [(t, "churn") for t in churn_times(rng)]
    rows.sort()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time", "model"])
        w.writerows((f"{START + t:.4f}", m) for t, m in rows)
    return len(rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, epilog="example:\n  python examples/bursty/make_log.py",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output", type=Path, default=ROOT / "workspace" / "plan-bursty" / "inputs")
    out = p.parse_args().output
    sys.path.insert(0, str(ROOT / "examples" / "fleet"))
    from make_fleet import SCORERS, export_scorer

    for i, (name, features, widths, *_) in enumerate(SCORERS):
        if name in RATES and not (out / f"{name}.onnx").exists():
            export_scorer(out / f"{name}.onnx", features, widths, seed=i)
    n = write_log(out / "requests.csv")
    print(f"bursty inputs in {out}: {n:,} requests logged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
