"""What scraping the server's metrics costs the measured throughput: the same online sweep with the metrics endpoint
scraped on its period and without, in alternating rounds on one server (a change in the host's load hits both
alike), and the ratio of the medians per concurrency. A benchmark, not a test: `bench-telemetry` prints it."""
from __future__ import annotations

import logging
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from deployment_toolkit.config import Reuse, check_numbers, setting
from deployment_toolkit.config.fields import int_list
from deployment_toolkit.results.rows import RowSchema
from deployment_toolkit.results.schema import THROUGHPUT
from deployment_toolkit.perf.analyzer import PerfOptions
from deployment_toolkit.perf.online import run_online
from deployment_toolkit.perf.sweep_config import ServerAt, SweepSettings
from deployment_toolkit.perf.telemetry import DEFAULT_PERIOD_S

log = logging.getLogger(__name__)

MODES = ("scraped", "not scraped")
CSV_SCHEMA = RowSchema(("concurrency", "round", "mode", "throughput"), key=("concurrency", "round", "mode"),
                       types={"concurrency": int, "round": int, "throughput": float})
TARGET = 0.99  # issue 29: telemetry costs the measured throughput nothing measurable (<= 1%)


@dataclass(frozen=True)
class ScrapePlan:
    """What one scrape-cost run measures; each default written once (bench-telemetry's flags are built from these
    fields)."""

    concurrencies: tuple[int, ...] = setting((1, 2, 4), flag="--concurrency", type=int_list, help="sweep levels")
    rounds: int = setting(3, flag="--rounds", help="rounds of (scraped, not scraped), alternating")
    period_s: float = setting(DEFAULT_PERIOD_S, flag="--period", unit="s",
                              help="scrape period in s (the sweeps' own unless given)")
    # short windows: the run sweeps every level 2 x rounds times
    measurement_interval_ms: int = setting(3000, flag="--measurement-interval", unit="ms",
                                           help="perf_analyzer window, ms")

    def __post_init__(self) -> None:
        object.__setattr__(self, "concurrencies", tuple(self.concurrencies))
        check_numbers(self)


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

    def paired(self, concurrency: int | None = None) -> list[float]:
        """scraped / not scraped within each round (the two sweeps of a round ran minutes apart at most, so the
        host's drift between rounds cancels), at one concurrency or at all."""
        levels = [concurrency] if concurrency is not None else sorted(self.throughput[MODES[0]])
        out = []
        for c in levels:
            a, b = (self.throughput[m].get(c, []) for m in MODES)
            out += [x / y for x, y in zip(a, b) if y > 0]
        return out

    def verdict(self, target: float = TARGET) -> str:
        """One line against the target (scraped / not scraped >= `target`): met, within the noise but not resolved to
        the target (the paired ratios straddle 1 with a spread wider than the allowance), or not met."""
        ratios = self.paired()
        if not ratios:
            return "no paired rounds: nothing to compare"
        med, lo, hi = statistics.median(ratios), min(ratios), max(ratios)
        figures = f"median paired ratio {med:.3f} [{lo:.3f}..{hi:.3f}] over {len(ratios)} pairs"
        # how finely the pairs resolve the ratio: two standard errors of their mean
        resolution = 2 * statistics.stdev(ratios) / math.sqrt(len(ratios)) if len(ratios) > 1 else math.inf
        if med >= target and resolution <= 1 - target:
            return f"met: {figures}, resolved to +-{resolution:.1%} (target: at least {target:g})"
        if med >= target:
            return (f"met by the median, not resolved to {1 - target:.0%}: {figures}; the pairs resolve the ratio to "
                    f"+-{resolution:.1%} only (two standard errors), so a cost below that is not visible on this host "
                    "(rerun on a quiet host, more rounds)")
        if hi >= 1.0:
            return (f"not resolved: {figures}; the pairs straddle 1 and spread wider than the {1 - target:.0%} "
                    "allowance, so the host's noise hides the cost either way (rerun on a quiet host, more rounds)")
        return f"not met: {figures}; every pair was slower with scraping (target: at least {target:g})"

    def records(self) -> list[dict[str, object]]:
        """Every measured throughput as a row (CSV_SCHEMA): concurrency, round, mode."""
        return [{"concurrency": c, "round": r, "mode": m, "throughput": tp}
                for m in MODES for c, values in sorted(self.throughput[m].items()) for r, tp in enumerate(values, 1)]

    def rows(self) -> list[list[str]]:
        out = []
        for c in sorted(self.throughput[MODES[0]]):
            vals = [self.throughput[m].get(c, []) for m in MODES]
            r = self.ratio(c)
            pairs = self.paired(c)
            out.append([str(c), *(f"{statistics.median(v):,.1f} [{min(v):,.1f}..{max(v):,.1f}]" if v else "-"
                                  for v in vals), f"{r:.3f}" if r else "-",
                        f"{statistics.median(pairs):.3f} [{min(pairs):.3f}..{max(pairs):.3f}]" if pairs else "-"])
        return out


def measure(server, model: str, manifest, options: PerfOptions, work_dir: Path,
            plan: ScrapePlan = ScrapePlan()) -> ScrapeCost:
    """`plan.rounds` rounds on the embedded `server`, each the sweep scraped and not scraped, the order alternating
    between rounds (each round said in the log). `options` is how perf_analyzer measures (the command sets its
    window to `plan.measurement_interval_ms`)."""
    rounds, period_s = plan.rounds, plan.period_s
    cost = ScrapeCost(period_s, rounds)
    settings = SweepSettings(progress=False, build_report=False, reuse=Reuse.FRESH, metrics_period_s=period_s)
    for r in range(1, rounds + 1):
        order = MODES if r % 2 else tuple(reversed(MODES))
        for mode in order:
            log.info(f"round {r}/{rounds}: {mode} ...")
            at = ServerAt(server.grpc_url, server, server.metrics_url if mode == "scraped" else "none")
            outcome = run_online(model, at, manifest, list(plan.concurrencies), options,
                                 work_dir / f"round{r}_{mode.replace(' ', '_')}", settings=settings)
            for row in outcome.rows:
                c = int(row["Concurrent client requests"])
                cost.throughput[mode].setdefault(c, []).append(float(row[THROUGHPUT]))
    return cost


__all__ = ["CSV_SCHEMA", "MODES", "TARGET", "ScrapeCost", "ScrapePlan", "measure"]
