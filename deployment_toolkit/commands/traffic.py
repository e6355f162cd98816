"""Show what the planner will use of each model's traffic, before anything is measured. Each FILE is a Prometheus
range-query answer (/api/v1/query_range: rates, or Triton's counters such as nv_inference_request_success turned into
rates, a drop being a reset), a request log (CSV or JSON Lines, one row per request with its time and model) or a
CSV of time,rate, told apart by its content; one file may hold every model's traffic (told apart by the `model`
label or column, --model-label). --deployment reads a deployment file's models as `plan --deployment` does (each
entry's `traffic:` and `series:`, scaled to its peak_rps where both are given; a peak alone is constant).

Prints one row per model: its peak (inferences/s), its mean, its busiest slice, and its burstiness where a request
log gives every request's time (the index of dispersion of per-second counts within each minute: 1 for Poisson;
the busiest 1-s rate over the busiest 10-s rate); then the fleet's peak of the summed rate against the sum of the
peaks (what sharing replicas saves). Writes traffic.md, a plot of every model's rate with their sum (traffic.png,
or --plot) and run.json into --result-path. A malformed file is refused in one line naming the file, the series
or line and what is wrong; exit 2."""
from __future__ import annotations

import argparse
from pathlib import Path

from deployment_toolkit import cli

EXAMPLE = """
    deployment-toolkit traffic examples/fleet/traffic/rates.json examples/fleet/traffic/fraud-counter.json
    deployment-toolkit traffic requests.jsonl --slice-s 60 --plot traffic.png
    deployment-toolkit traffic --deployment my-fleet.yaml --result-path results/local/traffic-my-fleet
"""
LOCAL_RUNS = Path("results") / "local"  # git-ignored: where a run goes without --result-path


def build_parser() -> argparse.ArgumentParser:
    from deployment_toolkit.config import add_arguments
    from deployment_toolkit.results.run_folder import add_result_path_argument
    from deployment_toolkit.traffic.read import ReadOptions

    p = cli.parser(__doc__, EXAMPLE)
    p.add_argument("files", nargs="*", metavar="FILE", help="traffic files (a Prometheus answer, a request log, a "
                                                            "CSV of time,rate); each model in them is shown")
    p.add_argument("--deployment", type=Path, metavar="FILE", help="a deployment file: its models' traffic as the "
                                                                   "planner reads it")
    add_arguments(p, ReadOptions)
    p.add_argument("--plot", type=Path, metavar="PATH", help="where the plot goes (default RESULT_PATH/traffic.png)")
    add_result_path_argument(p, help="where traffic.md, traffic.png and run.json go (default "
                                     "results/local/traffic-<first file's or the deployment's name>)")
    return p


def _models(args: argparse.Namespace, options) -> dict:
    """Every model of the files and the deployment, each once."""
    from deployment_toolkit.errors import UserInputError
    from deployment_toolkit.traffic.read import load, models

    found: dict = {}
    where: dict[str, str] = {}
    sources = [(str(f), models(load(f, options), options)) for f in args.files]
    if args.deployment is not None:
        from deployment_toolkit.deployment.file import load as load_deployment
        from deployment_toolkit.deployment.traffic import entry_traffic

        deployment = load_deployment(args.deployment)
        sources.append((str(args.deployment), {e.name: entry_traffic(e) for e in deployment.models}))
    for source, held in sources:
        for name, model in held.items():
            if name in found:
                raise UserInputError(f"{source}: model {name!r} is also in {where[name]}: show each model's traffic "
                                     "once (give one of the files, or pick its series in a deployment)")
            found[name], where[name] = model, source
    return found


def main(argv=None) -> int:
    from deployment_toolkit import committed
    from deployment_toolkit.config import from_args
    from deployment_toolkit.errors import UserInputError
    from deployment_toolkit.results.run_folder import RunFolder
    from deployment_toolkit.traffic.plot import plot
    from deployment_toolkit.traffic.read import ReadOptions
    from deployment_toolkit.traffic.stats import fleet_stats, model_stats
    from deployment_toolkit.traffic.summary import markdown

    args = build_parser().parse_args(argv)
    if not args.files and args.deployment is None:
        raise UserInputError("give a traffic FILE or --deployment FILE (run with --help for an example)")
    options = from_args(ReadOptions, args)
    found = _models(args, options)
    stats = [model_stats(m) for m in found.values()]
    series = {name: m.series for name, m in found.items()}
    text = markdown(stats, fleet_stats(series))
    first = Path(args.files[0]).stem if args.files else args.deployment.stem
    out = Path(args.result_path) if args.result_path else LOCAL_RUNS / f"traffic-{first}"
    committed.refuse_committed(out, "--result-path")
    out.mkdir(parents=True, exist_ok=True)
    named = [Path(f).name for f in args.files] + ([args.deployment.name] if args.deployment else [])
    picture = plot(series, args.plot or out / "traffic.png", title=f"{len(found)} models' traffic: {', '.join(named)}")
    (out / "traffic.md").write_text(text)
    RunFolder(out).record({"files": [str(f) for f in args.files], "deployment": str(args.deployment or ""),
                           "traffic_kind": options.traffic_kind.value, "model_label": options.model_label,
                           "time_column": options.time_column, "slice_s": options.slice_s, "plot": str(picture)})
    print(text, end="")
    print(f"\nwrote {out / 'traffic.md'}, {picture} and {out / 'run.json'}")
    return 0


if __name__ == "__main__":
    cli.run(main)
