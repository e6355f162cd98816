#!/usr/bin/env python3
"""Write the fleet's traffic as Prometheus keeps it (the files beside this script are its output, committed): a
day of Triton's metrics for the fleet example's scorers, saved as the HTTP API answers them.

- rates.json: /api/v1/query_range?query=sum by (model, version) (rate(nv_inference_request_success[5m]))
  &start=2026-05-04T00:00:00Z&end=2026-05-05T00:00:00Z&step=300: seven models' rates already taken, the day
  models peaking at 14:00 and the night models at 02:00 (make_fleet.py's profiles), scorer_eu as two versions (a
  10 % canary);
- fraud-counter.json: /api/v1/query_range?query=nv_inference_request_success{model="fraud"}&step=60: fraud's raw
  counter, scraped every minute, with a restart at 16:40 (the counter drops to what it counted since), busiest in a
  midday promotion.
Seeded: every run writes the same files."""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
START = int(dt.datetime(2026, 5, 4, tzinfo=dt.timezone.utc).timestamp())
DAY = 86_400
# model, version, peak inferences/s, 'day' | 'night' | '' (flat)
RATES = (("scorer_eu", "1", 810, "day"), ("scorer_eu", "2", 90, "day"), ("scorer_us", "1", 900, "night"),
         ("scorer_apac", "1", 600, "night"), ("churn", "1", 300, "day"), ("pricing", "1", 500, "day"),
         ("spam", "1", 350, "night"), ("ranker", "1", 250, ""))
RESTART = START + 16 * 3600 + 40 * 60


def shape(t: float, when: str) -> float:
    """make_fleet.py's day profile: a raised cosine peaking at 14:00 (day) or 02:00 (night), floor 10 %."""
    if not when:
        return 0.9
    hour = (t - START) % DAY / 3600
    centre = 14 if when == "day" else 2
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(2 * math.pi * (hour - centre) / 24))


def answer(result: list[dict]) -> dict:
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def rates(rng: random.Random) -> dict:
    result = []
    for model, version, peak, when in RATES:
        values = [[t, repr(round(peak * shape(t, when) * rng.uniform(0.97, 1.0), 4))]
                  for t in range(START, START + DAY + 1, 300)]
        result.append({"metric": {"model": model, "version": version}, "values": values})
    return answer(result)


def fraud_rate(t: float) -> float:
    """Flat 260/s, 400/s in a midday promotion (11:30-12:30)."""
    return 400.0 if START + 41_400 <= t < START + 45_000 else 260.0


def fraud_counter(rng: random.Random) -> dict:
    labels = {"__name__": "nv_inference_request_success", "model": "fraud", "version": "1",
              "instance": "triton-0:8002", "job": "triton"}
    count, values, restarted = 4_812_330.0, [], False
    for t in range(START, START + DAY + 1, 60):
        if t > START:
            count += round(fraud_rate(t - 60) * 60 * rng.uniform(0.98, 1.02))
        if not restarted and t >= RESTART:  # the pod restarted at the sample before: counting from zero since
            count, restarted = round(fraud_rate(t - 60) * 60), True
        values.append([t, str(int(count))])
    return answer([{"metric": labels, "values": values}])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="example:\n  python examples/fleet/traffic/make_exports.py")
    p.add_argument("--output", type=Path, default=HERE)
    out = p.parse_args().output
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(57)
    (out / "rates.json").write_text(json.dumps(rates(rng)) + "\n")
    (out / "fraud-counter.json").write_text(json.dumps(fraud_counter(rng)) + "\n")
    print(f"wrote {out / 'rates.json'} and {out / 'fraud-counter.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
