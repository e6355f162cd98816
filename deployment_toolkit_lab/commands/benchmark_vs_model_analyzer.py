"""Benchmark: this toolkit's config search and Model Analyzer's quick search on the same model, p99 budget and
embedded tritonserver; prints both best throughputs within the budget and both wall times. If Model Analyzer
cannot run, says exactly why and still runs our side."""
import sys  # noqa: F401  (kept: the seed's scripts import it from here)

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.config import add_arguments, from_args  # noqa: E402
from deployment_toolkit.results.run_folder import add_result_path_argument  # noqa: E402
from deployment_toolkit.committed import refuse_committed  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Parse the flags into the comparison's typed settings (search.versus.Comparison), run it, print the tables."""
    from ..versus.search import Comparison

    p = cli.parser(__doc__, """
        python3 -m venv /tmp/ma-venv && /tmp/ma-venv/bin/pip install triton-model-analyzer
        deployment-toolkit-lab bench-vs-model-analyzer --model resnet50 --preset full --p99-ms 500 --max-minutes 10 \\
            --model-analyzer /tmp/ma-venv/bin/model-analyzer --result-path results/search-vs-ma-resnet50-cpu
        # the target: as good as Model Analyzer's best in half its time
        deployment-toolkit-lab bench-vs-model-analyzer --model resnet50 --preset full --p99-ms 500 \\
            --our-max-minutes half
    """)
    add_arguments(p, Comparison, only=("model", "preset", "budget_ms", "max_minutes", "our_max_minutes", "formats",
                                       "workspace"))
    add_result_path_argument(p, help="default results/search-vs-ma-<model>-<preset>")
    add_arguments(p, Comparison, only=("ma_binary", "ma_mode", "skip_ma", "shared_memory", "measurement_interval_ms",
                                       "rounds"))
    args = p.parse_args(argv)
    config = from_args(Comparison, args, result_dir=args.result_path)

    from ..versus.head_to_head import remeasured, table
    from ..versus.search import compare, summary_lines, target_lines

    refuse_committed(config.result_dir, "--result-path")
    ours, ma, contenders = compare(config)
    print("\n" + "\n".join(summary_lines(config.budget_ms, ours, ma)))
    target = target_lines(config.budget_ms, ours, ma, contenders)
    measured = remeasured(contenders)
    if measured:
        print("\nboth winners re-measured in turns:\n" + "\n".join(table(measured, config.budget_ms)))
    if target:
        print("\ntargets (our pick holds the budget in every round, with at least Model Analyzer's throughput, in at "
              "most half its time):\n" + "\n".join(target))
    if ma.error:
        print(f"\nModel Analyzer: {ma.error}")
    print(f"\nsummary: {config.result_dir / 'vs_model_analyzer.md'}")
    return 0


if __name__ == "__main__":
    cli.run(main)
