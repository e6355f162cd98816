"""bench-overhead's and bench-telemetry's flags are built from the settings they run (OverheadOptions, ScrapePlan,
ConvertOptions' --preset): each default written once, in the dataclass (issue 37). A flag that restated another
default would fail here."""
from __future__ import annotations

import dataclasses

import pytest

from conftest import parsed_vs_defaults
from deployment_toolkit_lab.commands import benchmark_overhead, benchmark_telemetry
from deployment_toolkit.config import flag_of, from_args
from deployment_toolkit.errors import UserInputError
from deployment_toolkit.export import ConvertOptions
from deployment_toolkit.perf import telemetry
from deployment_toolkit_lab.overhead.bench import OverheadOptions, Variant
from deployment_toolkit_lab.scrape_cost import ScrapePlan


def _flagged(settings: type) -> set[str]:
    return {f.name for f in dataclasses.fields(settings) if flag_of(f) is not None and flag_of(f).name}


def _same_defaults(args, settings: type, fields: set[str]) -> None:
    seen, differ = parsed_vs_defaults(args, settings, tuple(fields))
    assert seen == fields, settings.__name__
    assert not differ, f"{settings.__name__}: flags restate other defaults: {differ}"


def test_bench_overhead_defaults_are_the_overhead_options():
    args = benchmark_overhead._parser().parse_args([])
    _same_defaults(args, OverheadOptions, _flagged(OverheadOptions))
    assert _flagged(OverheadOptions) >= {"model", "preset", "batch_sizes", "concurrencies", "variants", "bar",
                                         "inprocess_warmup", "inprocess_seconds", "single_client_rounds",
                                         "max_queue_delay_us", "server_start_timeout_s"}
    assert from_args(OverheadOptions, args) == OverheadOptions()
    assert args.workspace is None and args.private_shm == "auto"  # the command's own


def test_bench_overhead_flags_keep_their_forms():
    args = benchmark_overhead._parser().parse_args(
        ["--concurrency", "1:7:2", "--variants", "1x2", "4x0", "--server-timeout", "60", "--batch-sizes", "2,16",
         "--inprocess-seconds", "3"])
    opts = from_args(OverheadOptions, args)
    assert opts.concurrencies == (1, 3, 5, 7) and opts.variants == (Variant(1, 2), Variant(4, 0))
    assert (opts.server_start_timeout_s, opts.batch_sizes, opts.inprocess_seconds) == (60.0, (2, 16), 3.0)
    assert from_args(OverheadOptions, benchmark_overhead._parser().parse_args(["--concurrency", "1,2,4"])
                     ).concurrencies == (1, 2, 4)
    for bad in (["--concurrency", "4:1"], ["--variants", "3"]):
        with pytest.raises(UserInputError):
            from_args(OverheadOptions, benchmark_overhead._parser().parse_args(bad))
    with pytest.raises(SystemExit) as exit_info:
        benchmark_overhead.main(["--single-client-rounds", "-1"])
    assert exit_info.value.code == 2


def test_bench_telemetry_defaults_are_the_scrape_plan():
    args = benchmark_telemetry._parser().parse_args([])
    _same_defaults(args, ScrapePlan, {"concurrencies", "rounds", "period_s", "measurement_interval_ms"})
    _same_defaults(args, ConvertOptions, {"preset"})
    assert from_args(ScrapePlan, args) == ScrapePlan()
    assert ScrapePlan.period_s == telemetry.DEFAULT_PERIOD_S  # "the sweeps' own"


def test_bench_telemetry_flags_keep_their_forms():
    args = benchmark_telemetry._parser().parse_args(
        ["--concurrency", "1,8", "--rounds", "5", "--period", "1", "--measurement-interval", "500", "--preset", "full"])
    assert from_args(ScrapePlan, args) == ScrapePlan(concurrencies=(1, 8), rounds=5, period_s=1.0,
                                                     measurement_interval_ms=500)
    assert args.preset == "full"


def test_the_scrape_cost_verdict_pairs_rounds_and_says_when_noise_hides_it():
    from deployment_toolkit_lab.scrape_cost import CSV_SCHEMA, ScrapeCost
    from deployment_toolkit.results.rows import to_csv

    cost = ScrapeCost(0.5, 3)
    # a host that drifts between rounds: each round's two sweeps agree within 0.5%, the rounds do not
    cost.throughput = {"scraped": {1: [100.0, 150.0, 120.0]}, "not scraped": {1: [100.4, 150.3, 119.8]}}
    assert cost.paired(1) == pytest.approx([100 / 100.4, 150 / 150.3, 120 / 119.8])
    assert cost.verdict().startswith("met: median paired ratio 0.998 [0.996..1.002] over 3 pairs, resolved to +-0.")
    # the committed run's shape (2026-11-25): the median passes but 15 pairs spread 0.84..1.31 resolve only +-6%
    noisy = ScrapeCost(0.5, 5)
    noisy.throughput = {"scraped": {1: [100.0, 131.0, 84.0, 102.0, 99.0]}, "not scraped": {1: [98.0, 100.0] + [100.0] * 3}}
    assert noisy.verdict().startswith("met by the median, not resolved to 1%: median paired ratio 1.020 [0.840..1.310]")
    assert "the pairs resolve the ratio to +-" in noisy.verdict()
    cost.throughput = {"scraped": {1: [100.0, 150.0], 2: [90.0]}, "not scraped": {1: [120.0, 140.0], 2: [100.0]}}
    assert cost.verdict().startswith("not resolved: median paired ratio 0.900 [0.833..1.071]")
    cost.throughput = {"scraped": {1: [95.0, 96.0]}, "not scraped": {1: [100.0, 100.0]}}
    assert cost.verdict().startswith("not met: median paired ratio 0.955")
    assert ScrapeCost(0.5, 1).verdict().startswith("no paired rounds")
    text = to_csv(CSV_SCHEMA, cost.records())
    assert text.splitlines() == ["concurrency,round,mode,throughput", "1,1,scraped,95", "1,2,scraped,96",
                                 "1,1,not scraped,100", "1,2,not scraped,100"]
    assert cost.rows() == [["1", "95.5 [95.0..96.0]", "100.0 [100.0..100.0]", "0.955", "0.955 [0.950..0.960]"]]
