"""Benchmark: this toolkit's config search and Model Analyzer's quick search on the same model, p99 budget and
embedded tritonserver; prints both best throughputs within the budget and both wall times. If Model Analyzer
cannot run, says exactly why and still runs our side."""
import argparse
import sys
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.results.run_folder import add_result_path_argument  # noqa: E402
from deployment_toolkit.committed import refuse_committed  # noqa: E402


def _minutes_or_half(text: str) -> float | str:
    if text == "half":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected minutes or 'half', got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(__doc__, """
        python3 -m venv /tmp/ma-venv && /tmp/ma-venv/bin/pip install triton-model-analyzer
        deployment-toolkit bench-vs-model-analyzer --model resnet50 --preset full --p99-ms 500 --max-minutes 10 \\
            --model-analyzer /tmp/ma-venv/bin/model-analyzer --result-path results/search-vs-ma-resnet50-cpu
        # the target: as good as Model Analyzer's best in half its time
        deployment-toolkit bench-vs-model-analyzer --model resnet50 --preset full --p99-ms 500 --our-max-minutes half
    """)
    p.add_argument("--model", required=True)
    p.add_argument("--preset", default="small")
    p.add_argument("--p99-ms", type=float, required=True, help="p99 budget in ms, the same for both sides")
    p.add_argument("--max-minutes", type=float, default=10.0, help="time limit of each side (default: %(default)s)")
    p.add_argument("--our-max-minutes", type=_minutes_or_half, default=None, metavar="MIN|half",
                   help="our search's limit: minutes, or 'half' for half of Model Analyzer's wall time (Model "
                        "Analyzer then runs first); default: --max-minutes")
    p.add_argument("--formats", default="onnx", help="our side's formats; Model Analyzer gets the first")
    p.add_argument("--workspace", default=None, help="artifacts (default workspace/<model>-<preset>)")
    add_result_path_argument(p, help="default results/search-vs-ma-<model>-<preset>")
    p.add_argument("--model-analyzer", default=None, metavar="PATH",
                   help="the model-analyzer CLI (default: /tmp/ma-venv/bin/model-analyzer, then PATH)")
    p.add_argument("--ma-search-mode", choices=("quick", "brute", "optuna"), default="quick")
    p.add_argument("--skip-model-analyzer", action="store_true")
    p.add_argument("--shared-memory", choices=("system", "none"), default="system",
                   help="tensor transport of perf_analyzer on both sides (default: %(default)s)")
    p.add_argument("--measurement-interval", type=int, default=2000,
                   help="the head-to-head re-measurement's perf_analyzer window (ms); our search measures with its "
                        "own defaults, as a user's search would")
    p.add_argument("--rounds", type=int, default=3,
                   help="head-to-head: times each side's winner is re-measured, in turns (0: skip)")
    args = p.parse_args(argv)

    from deployment_toolkit.search.head_to_head import remeasured, table
    from deployment_toolkit.search.versus import compare, summary_lines, target_lines

    result_dir = Path(args.result_path or Path("results") / f"search-vs-ma-{args.model}-{args.preset}")
    refuse_committed(result_dir, "--result-path")
    workspace = Path(args.workspace or Path("workspace") / f"{args.model}-{args.preset}")
    ours, ma, contenders = compare(
        model=args.model, preset=args.preset, budget_ms=args.p99_ms, max_minutes=args.max_minutes,
        formats=[f for f in args.formats.split(",") if f], workspace=workspace, result_dir=result_dir,
        our_extra=["--no-progress"],
        ma_binary=args.model_analyzer, ma_mode=args.ma_search_mode,
        skip_ma=args.skip_model_analyzer, shared_memory=args.shared_memory,
        measurement_interval_ms=args.measurement_interval, rounds=args.rounds,
        our_max_minutes=args.our_max_minutes)
    print("\n" + "\n".join(summary_lines(args.p99_ms, ours, ma)))
    target = target_lines(args.p99_ms, ours, ma, contenders)
    measured = remeasured(contenders)
    if measured:
        print("\nboth winners re-measured in turns:\n" + "\n".join(table(measured, args.p99_ms)))
    if target:
        print("\ntargets (our pick holds the budget in every round, with at least Model Analyzer's throughput, in at "
              "most half its time):\n" + "\n".join(target))
    if ma.error:
        print(f"\nModel Analyzer: {ma.error}")
    print(f"\nsummary: {result_dir / 'vs_model_analyzer.md'}")
    return 0


if __name__ == "__main__":
    cli.run(main)
