"""Search the serving config (instances, runtime threads, max batch, preferred batch sizes, queue delay,
format) that gives the most throughput within a p99 budget on this host, measured on the real server.

The flags are the fields of the search's typed settings (search.trials.SearchSettings, search.request.SearchJob and
SearchServer), parsed into them and handed to `dt.search_config`, the function the Python API exposes; this module
prints its answer and maps its outcome to the exit code (0 a winner, 1 no config meets the budget, 2 the search
could not start)."""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any, Sequence

from deployment_toolkit import cli
from deployment_toolkit.config import add_arguments, from_args

EXAMPLE = """
    deployment-toolkit search --model resnet50 --preset full --p99-ms 500 --max-minutes 20 \\
        --formats onnx,ts-trace --model-repository model_repository --model-name resnet50 \\
        --result-path results/search-resnet50-cpu
    # rerun the same command to resume: measured points are reused, not measured again
"""
EXIT_NO_CONFIG = cli.EXIT_NOT_MET  # no configuration meets the budget: a bound not met (README: exit codes)
# the perf_analyzer flags whose defaults are the search request's (DEFAULT_PERF_OPTIONS), not PerfOptions'
SEARCH_PERF_DEFAULTS = ("measurement_mode", "measurement_request_count", "measurement_interval_ms",
                        "stability_percentage", "max_trials", "max_attempts")


def build_parser(**defaults: Any) -> argparse.ArgumentParser:
    """The search's flags; `defaults` override a field's default for a command built on it (the plan's limit)."""
    from deployment_toolkit.perf.analyzer import add_perf_arguments
    from deployment_toolkit.results.run_folder import add_result_path_argument
    from deployment_toolkit.search.request import DEFAULT_PERF_OPTIONS, SearchJob, SearchServer
    from deployment_toolkit.search.trials import SearchSettings
    from deployment_toolkit.server.startup import add_server_timeout
    from deployment_toolkit.sources.cli import add_source_arguments

    p = cli.parser(__doc__ or "", EXAMPLE)
    p.description = ("Search instances x max batch x preferred batch sizes x queue delay x runtime threads x formats "
                     "for the best config under a p99 budget, measured on the embedded tritonserver with "
                     "perf_analyzer, never oversubscribing the host's cores.")
    add_source_arguments(p)  # --model / --input-path / --manifest and the source's flags
    g = p.add_argument_group("model and budget")
    add_arguments(g, SearchJob, only=("preset",))
    add_arguments(g, SearchSettings, only=("budget_ms", "objective", "capacity_trials", "capacity_resolution",
                                           "open_loop_window_ms"))
    add_arguments(g, SearchJob, only=("formats", "workspace"))
    s = p.add_argument_group("search")
    add_arguments(s, SearchSettings, only=("max_minutes", "max_configs", "allow_oversubscribe", "max_concurrency",
                                           "refine_steps", "noise_repeats", "confirm_samples", "min_noise",
                                           "queue_delays_us"), **defaults)
    add_arguments(s, SearchJob, only=("fresh", "resume", "progress"))
    o = p.add_argument_group("output")
    add_arguments(o, SearchJob, only=("model_repository", "model_name"))
    add_result_path_argument(o, help="search.csv, search.md, search_frontier.png and the checkpoint "
                                      "(default: results/search-<model>-<preset>); rerunning into it resumes")
    v = p.add_argument_group("server (the embedded tritonserver, started in explicit model-control mode)")
    add_arguments(v, SearchServer, only=("http_port", "grpc_port", "metrics_port", "log_verbose"))
    add_server_timeout(v)
    add_arguments(v, SearchServer, only=("metrics_period_s",))
    # Shorter perf_analyzer windows and a looser stability check than the runners': a search measures many
    # points and judges gains against its own noise estimate from repeated samples, so perf_analyzer's check
    # only has to reject gross outliers. Retrying an unstable point with longer windows cost 30-60 s a point on
    # a 2-core host; an unstable one now gets one final run with the check off, and is marked unstable.
    # Windows of 40 requests (perf_analyzer's count_windows: at least 1 s, longer until 40 requests are done):
    # a fast model gets 1-s windows (a point in about 4 s instead of 7 s with 2-s windows, which left a
    # resnet18 search on a short limit no time to climb past concurrency 1). The price is on a slow model:
    # resnet50 full at ~30 inf/s gets 1.3-s windows, fewer requests than 2-s windows gave it, and its measured
    # p99 noise rose (42.9% against 30.8% in the Model Analyzer comparison), which makes the search step down
    # further from the knee. --measurement-request-count raises it for such a model.
    d = DEFAULT_PERF_OPTIONS  # the request's defaults, so that the API and the command measure alike
    add_perf_arguments(p, **{name: getattr(d, name) for name in SEARCH_PERF_DEFAULTS})
    return p


def request_from_args(args: argparse.Namespace, command: str | None = None):
    """The search the flags ask for, as the typed request (bad input said here, before anything is converted or
    measured)."""
    from deployment_toolkit.data.samples import DataSpec
    from deployment_toolkit.perf.analyzer import perf_options_from_args
    from deployment_toolkit.search.request import SearchJob, SearchRequest, SearchServer
    from deployment_toolkit.search.trials import SearchSettings
    from deployment_toolkit.sources.cli import source_from_args

    if command is None:
        command = shlex.join([Path(sys.argv[0]).name if sys.argv else "search_config.py", *sys.argv[1:]])
    server = from_args(SearchServer, args, start_timeout_s=args.server_timeout)
    job = from_args(SearchJob, args, result_dir=args.result_path, perf_samples=getattr(args, "perf_samples", None),
                    server=server, command=command)
    shm = "system" if args.shared_memory == "auto" else args.shared_memory
    return SearchRequest(source=source_from_args(args, args.preset), settings=from_args(SearchSettings, args),
                         job=job, options=perf_options_from_args(args, shared_memory=shm),
                         data=DataSpec.from_args(args))


def print_answer(run) -> int:
    """The search's answer on the console; the exit code its outcome maps to."""
    from deployment_toolkit.search.progress import format_seconds

    outcome, d = run.outcome, run.outcome.decision
    print(f"\nsearch finished in {format_seconds(outcome.wall_s)}: {len(outcome.trials)} configs considered, "
          f"{sum(t.status == 'measured' for t in outcome.trials)} measured")
    print(f"every config and why it was dropped: {run.csv_path}\nreport: {run.report}")
    if d.winner is None:
        print(f"NO CONFIG: {d.message}", file=sys.stderr)
        return EXIT_NO_CONFIG
    c = d.winner.confirmation
    numbers = f" - {c.throughput.text()} inf/s, p99 {c.p99.text()} ms at concurrency {c.concurrency}" if c else ""
    print(f"winner: {d.winner.candidate.label()}{numbers}\n{d.message}\nwritten: {run.written}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the flags into the typed request, run `dt.search_config` (api.search_config) on it, print the answer."""
    from deployment_toolkit import api
    from deployment_toolkit.binaries import PerfAnalyzerNotFound
    from deployment_toolkit.search.store import StoreMismatch
    from deployment_toolkit.search.trials import SearchError

    request = request_from_args(build_parser().parse_args(argv))
    try:
        run = api.search_config(request.source, request.settings, request.job, data=request.data,
                                options=request.options)
    except (SearchError, StoreMismatch, PerfAnalyzerNotFound) as err:  # it could not start: nothing to answer
        print(f"error: {err}", file=sys.stderr)
        return cli.EXIT_USER_ERROR
    return print_answer(run)


__all__ = ["EXIT_NO_CONFIG", "build_parser", "main", "print_answer", "request_from_args"]

if __name__ == "__main__":
    cli.run(main)
