"""What scraping the server's metrics costs the measured throughput: the same online sweep with the metrics endpoint
scraped on its period and without, in alternating rounds on one server (a change in the host's load hits both
alike), and the ratio of the medians per concurrency. A benchmark, not a test: `bench-telemetry` prints it."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from ..results.schema import THROUGHPUT
from .analyzer import PerfOptions
from .online import run_online

MODES = ("scraped", "not scraped")


@dataclass
class ScrapeCost:
    """Throughput per concurrency and mode, one value per round."""

    period_s: float
    rounds: int
    throughput: dict[str, dict[int, list[float]]] = field(default_factory=lambda: {m: {} for m in MODES})

    def ratio(self, concurrency: int) -> float | None:
        """Median scraped / median not scraped at one concurrency (None if either is missing)."""
        a, b = (self.throughput[m].get(concurrency) for m in MODES)
        if not a or not b:
            return None
        return statistics.median(a) / statistics.median(b)

    def rows(self) -> list[list[str]]:
        out = []
        for c in sorted(self.throughput[MODES[0]]):
            vals = [self.throughput[m].get(c, []) for m in MODES]
            r = self.ratio(c)
            out.append([str(c), *(f"{statistics.median(v):,.1f} [{min(v):,.1f}..{max(v):,.1f}]" if v else "-"
                                  for v in vals), f"{r:.3f}" if r else "-"])
        return out


def measure(server, model: str, manifest, concurrencies: Sequence[int], options: PerfOptions, work_dir: Path,
            rounds: int = 3, period_s: float = 0.5, log: Callable[[str], None] = print) -> ScrapeCost:
    """`rounds` rounds, each the sweep scraped and not scraped, the order alternating between rounds."""
    cost = ScrapeCost(period_s, rounds)
    for r in range(1, rounds + 1):
        order = MODES if r % 2 else tuple(reversed(MODES))
        for mode in order:
            log(f"round {r}/{rounds}: {mode} ...")
            outcome = run_online(model, server.grpc_url, manifest, list(concurrencies), options,
                                 work_dir / f"round{r}_{mode.replace(' ', '_')}", server=server, progress=False,
                                 build_report=False, reuse="fresh", metrics_period_s=period_s,
                                 metrics_url=server.metrics_url if mode == "scraped" else "none")
            for row in outcome.rows:
                c = int(row["Concurrent client requests"])
                cost.throughput[mode].setdefault(c, []).append(float(row[THROUGHPUT]))
    return cost


__all__ = ["MODES", "ScrapeCost", "measure"]
