"""What server telemetry costs the measured throughput: the same online sweep with the metrics endpoint scraped on
its period and without, in alternating rounds on one embedded server, and scraped / not scraped per concurrency
(the target: within noise, >= 0.99). Converts the model, serves it, writes telemetry_cost.md, .csv and run.json to
--result-path. A benchmark: it prints the ratios; it does not pass or fail."""
import argparse
import time
from pathlib import Path

from deployment_toolkit import cli
from deployment_toolkit.config import add_arguments, from_args
from deployment_toolkit.results.run_folder import add_result_path_argument


def _parser() -> argparse.ArgumentParser:
    p = cli.parser(__doc__, """
        deployment-toolkit-lab bench-telemetry --model resnet18 --preset small --concurrency 1,2,4 --rounds 3 \\
            --result-path results/telemetry-cost-cpu
    """)
    from deployment_toolkit.export import ConvertOptions
    from ..scrape_cost import ScrapePlan

    p.add_argument("--model", default="resnet18", help="any model reference convert takes (default: resnet18)")
    add_arguments(p, ConvertOptions, only=("preset",))
    add_arguments(p, ScrapePlan)  # --concurrency, --rounds, --period, --measurement-interval
    p.add_argument("--workspace", default=None, help="artifact, repository, sweeps (default workspace/telemetry-cost)")
    add_result_path_argument(p, help="default: results/local/telemetry-cost-<model>-<UTC time>")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from ..scrape_cost import ScrapePlan

    plan = from_args(ScrapePlan, args)  # a bad value: refused before the conversion

    from deployment_toolkit.api import convert
    from deployment_toolkit.export import ConvertOptions
    from deployment_toolkit.config import SharedMemory
    from deployment_toolkit.committed import refuse_committed
    from deployment_toolkit.perf.analyzer import PerfOptions
    from ..scrape_cost import CSV_SCHEMA, MODES, measure
    from deployment_toolkit.repository import ConfigOptions, write_model
    from deployment_toolkit.results.rows import to_csv
    from deployment_toolkit.results.run_folder import RunFolder
    from deployment_toolkit.server import LocalTritonServer, ServerConfig
    from deployment_toolkit.spec import atomic_write_text
    from deployment_toolkit.tables import markdown_table

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = Path(args.result_path or f"results/local/telemetry-cost-{Path(args.model).stem}-{stamp}")
    refuse_committed(out, "--result-path")
    ws = Path(args.workspace or "workspace/telemetry-cost")
    manifest = convert(args.model, "onnx", ws / "onnx", from_args(ConvertOptions, args))  # --preset
    name = "model"
    write_model(ws / "repository", ws / "onnx", ConfigOptions(model_name=name, runtime="python"))
    options = PerfOptions(shared_memory=SharedMemory.SYSTEM, measurement_interval_ms=plan.measurement_interval_ms,
                          max_trials=6)
    with LocalTritonServer(ServerConfig(ws / "repository", log_dir=ws / "logs")) as server:
        server.require_models([name])
        cost = measure(server, name, manifest, options, ws / "sweeps", plan)
    headers = ["concurrency", *(f"{m} (inf/s, median [min..max])" for m in MODES), "scraped / not scraped",
               "paired by round, median [min..max]"]
    table = markdown_table(headers, cost.rows(), "lrrrr")
    verdict = f"Verdict: {cost.verdict()}."
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "telemetry_cost.csv", to_csv(CSV_SCHEMA, cost.records()))  # every round's throughput
    atomic_write_text(out / "telemetry_cost.md", f"# What scraping the metrics endpoint costs\n\n{args.model} "
                      f"({args.preset}), ONNX in the embedded server's Python backend; the same online sweep scraped "
                      f"every {plan.period_s:g} s and not scraped, {plan.rounds} rounds alternating the order, "
                      f"{plan.measurement_interval_ms} ms windows. Paired: scraped / not scraped within each round "
                      f"(the two sweeps of a round ran back to back).\n\n{table}\n\n{verdict}\n")
    RunFolder(out).record({"kind": "telemetry-cost", **{k: v for k, v in vars(args).items()},
                           "throughput": cost.throughput})
    print(table)
    print(verdict)
    print(f"wrote {out / 'telemetry_cost.md'}")
    return 0


if __name__ == "__main__":
    cli.run(main)
