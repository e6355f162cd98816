"""`triton/search_config.py`: flags, wiring and the final answer of a config search."""
from __future__ import annotations

from importlib import metadata

import shlex
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Sequence

from .. import cli
from ..config import add_arguments, from_args
from ..repository.names import check_model_name
from .engine import Search
from .progress import format_seconds
from .capacity import rate_point_estimate
from .request import DEFAULT_PERF_OPTIONS, FINISH_RESERVE_S, SEARCH_MAX_MINUTES, SearchRequest, SearchServer
from .trials import OBJECTIVES, SearchError, SearchOutcome, SearchRun, SearchSettings, objective_fields
from .space import host_cores
from .store import SearchStore, StoreMismatch
from ..errors import UserInputError
from ..results.identity import RunIdentity, host_identity, input_data_digest, library_versions, toolkit_version
from ..committed import refuse_committed
from ..results.run_folder import add_result_path_argument

EXAMPLE = """
    deployment-toolkit search --model resnet50 --preset full --p99-ms 500 --max-minutes 20 \\
        --formats onnx,ts-trace --model-repository model_repository --model-name resnet50 \\
        --result-path results/search-resnet50-cpu
    # rerun the same command to resume: measured points are reused, not measured again
"""
EXIT_NO_CONFIG = cli.EXIT_NOT_MET  # no configuration meets the budget: a bound not met (README: exit codes)


def build_parser():
    from ..perf.analyzer import add_perf_arguments
    from ..server.startup import add_server_timeout

    p = cli.parser(__doc__ or "", EXAMPLE)
    p.description = ("Search instances x max batch x preferred batch sizes x queue delay x runtime threads x formats "
                     "for the best config under a p99 budget, measured on the embedded tritonserver with "
                     "perf_analyzer, never oversubscribing the host's cores.")
    from ..sources.cli import add_source_arguments

    add_source_arguments(p)  # --model / --input-path / --manifest and the source's flags
    g = p.add_argument_group("model and budget")
    g.add_argument("--preset", default="small", help="small (CI size) or full (benchmark size)")
    add_arguments(g, SearchSettings, only=("budget_ms",))
    g.add_argument("--objective", choices=OBJECTIVES, default="capacity",
                   help="capacity: the finalists ranked by open-loop capacity, the highest Poisson arrival rate one "
                        "replica sustains within the budget (what a fleet plan uses); closed-loop (or throughput): "
                        "most inferences/s at a concurrency within the budget; latency: lowest p99 "
                        "(default: %(default)s)")
    add_arguments(g, SearchSettings, only=("capacity_trials", "open_loop_window_ms"))
    g.add_argument("--formats", default="onnx",
                   help="comma-separated artifact formats to try, each converted and verified first "
                        "(e.g. onnx,ts-trace; default: %(default)s)")
    g.add_argument("--workspace", default=None, metavar="DIR",
                   help="where artifacts live (<DIR>/<format>); default workspace/<model>-<preset>")
    s = p.add_argument_group("search")
    add_arguments(s, SearchSettings, only=("max_minutes", "max_configs", "allow_oversubscribe", "max_concurrency",
                                           "refine_steps", "noise_repeats", "confirm_samples", "min_noise",
                                           "queue_delays_us"), max_minutes=SEARCH_MAX_MINUTES)
    s.add_argument("--fresh", action="store_true",
                   help="set the checkpointed points in --result-path aside (kept under superseded/) and start over")
    s.add_argument("--resume", action="store_true",
                   help="refuse to go on (exit 2) if the checkpoint was measured under another identity, instead of "
                        "setting it aside")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    o = p.add_argument_group("output")
    o.add_argument("--model-repository", default="model_repository", help="where the winner is written")
    o.add_argument("--model-name", default=None, help="name of the winner in the repository (default: --model)")
    add_result_path_argument(o, help="search.csv, search.md, search_frontier.png and the checkpoint "
                                      "(default: results/search-<model>-<preset>); rerunning into it resumes")
    v = p.add_argument_group("server (the embedded tritonserver, started in explicit model-control mode)")
    v.add_argument("--http-port", type=int, default=0, help="0 picks a free port (default)")
    v.add_argument("--grpc-port", type=int, default=0)
    v.add_argument("--metrics-port", type=int, default=0)
    v.add_argument("--log-verbose", type=int, default=0, help="tritonserver --log-verbose")
    add_server_timeout(v)
    v.add_argument("--metrics-period", type=float, default=0.5, metavar="SECONDS",
                   help="scrape the server's metrics endpoint this often during every point (0: never); "
                        "search_server.csv and telemetry/ hold the result, search.md the memory per instance count "
                        "(default %(default)s s)")
    add_perf_arguments(p)
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
    p.set_defaults(measurement_mode=d.measurement_mode, measurement_request_count=d.measurement_request_count,
                   measurement_interval=d.measurement_interval_ms, stability_percentage=d.stability_percentage,
                   max_trials=d.max_trials, max_attempts=d.max_attempts)
    return p


def settings_from_args(args) -> SearchSettings:
    """The flags' SearchSettings (each checked by its own range: config.check_numbers)."""
    return from_args(SearchSettings, args, **objective_fields(args.objective), cores=host_cores(),
                     rate_point_s=rate_point_estimate(args.open_loop_window_ms), finish_reserve_s=FINISH_RESERVE_S)


def search_identity(model: str, preset: str, options, infos) -> RunIdentity:
    """What defines the stored points (results.identity); the budget is not in it (a point is a fact whatever the
    budget), nor the candidates' configs (each point's key names its candidate)."""
    try:
        server = f"embedded tritonserver (nvidia-pytriton {metadata.version('nvidia-pytriton')})"
    except metadata.PackageNotFoundError:
        server = None
    digests = ";".join(sorted(f"{i.format}:{i.digest}" for i in infos if getattr(i, "digest", None)))
    return RunIdentity(host=host_identity(), server_version=server, model_config=None, artifact_digest=digests or None,
                       perf_options=options.measurement_fields(), input_data=input_data_digest(options.input_data),
                       toolkit_version=toolkit_version(), libraries=library_versions(),
                       extra={"model": model, "preset": preset, "batch_size": 1})


def _with_real_input_data(request: SearchRequest, options, infos, result_dir: Path):
    """The user's samples (--data-dir/--dataloader): perf_analyzer sends them (its digest is part of the
    checkpoint's run identity, so points measured on other data are never reused)."""
    from ..perf.analyzer.flags import sample_input_data

    manifest = next((i.manifest for i in infos if i.manifest is not None), None)
    if manifest is None or not request.data.user_data:
        return options
    path = sample_input_data(request.data, manifest, result_dir / "raw", request.perf_samples,
                             precision=manifest.precision, batched=manifest.max_batch_size > 0,
                             input_data=options.input_data)
    return replace(options, input_data=path) if path else options


def _metrics_period(args) -> float | None:
    if args.metrics_period < 0:
        raise UserInputError(f"--metrics-period {args.metrics_period:g}: seconds >= 0 (0 turns scraping off)")
    return args.metrics_period or None


def request_from_args(args, command: str | None = None) -> SearchRequest:
    """The search the flags ask for (bad input said here, before anything is converted or measured)."""
    from ..data.samples import DataSpec
    from ..perf.analyzer import perf_options_from_args
    from ..sources.cli import source_from_args

    settings = settings_from_args(args)
    server = SearchServer(args.http_port, args.grpc_port, args.metrics_port, args.log_verbose, _metrics_period(args),
                          args.server_timeout)
    formats = tuple(f.strip() for f in args.formats.split(",") if f.strip())
    if not formats:
        raise UserInputError("--formats needs at least one format, e.g. onnx")
    shm = "system" if args.shared_memory == "auto" else args.shared_memory
    if command is None:
        command = shlex.join([Path(sys.argv[0]).name if sys.argv else "search_config.py", *sys.argv[1:]])
    return SearchRequest(
        source=source_from_args(args, args.preset), settings=settings,
        options=perf_options_from_args(args, shared_memory=shm), preset=args.preset, formats=formats,
        data=DataSpec.from_args(args), perf_samples=getattr(args, "perf_samples", None),
        result_dir=Path(args.result_path) if args.result_path else None,
        workspace=Path(args.workspace) if args.workspace else None,
        model_repository=Path(args.model_repository) if args.model_repository else None, model_name=args.model_name, server=server,
        fresh=args.fresh, resume=args.resume,
        progress=not args.no_progress, command=command)


def run_search(args) -> int:
    """The command: the search step, then its answer on the console."""
    run = search_step(request_from_args(args))
    if run.outcome is None:
        print(f"error: {run.error}", file=sys.stderr)
        return run.code
    return _print_answer(run.outcome, run.written, run.csv_path, run.report)


def search_step(request: SearchRequest) -> SearchRun:
    """One search, its result in memory: the outcome, the files written and the exit code. A search that cannot
    start is a result with `error`, not an exit."""
    from ..results.runinfo import cpu_info
    from ..results.ledger import record_run
    from .artifacts import prepare_formats
    from ..report.build import build_report
    from .output import plot_frontier, write_csvs, write_markdown, write_winner
    from .triton import TritonMeasurer

    started = time.monotonic()  # --max-minutes counts the server's start and the artifacts too
    settings = request.settings
    if not request.formats:
        raise UserInputError("--formats needs at least one format, e.g. onnx")
    options = request.options
    # with --max-attempts > 1 an unstable point is retried with a window twice as long (the runners add 2 s)
    options = replace(options, retry_interval_step_ms=options.measurement_interval_ms,
                      retry_request_count_step=options.measurement_request_count)
    from ..data.infer import with_data_inputs
    from ..sources import resolve

    # a model.py without get_signature takes its inputs from --dataloader/--data-dir, as convert does
    resolved = resolve(with_data_inputs(request.source, request.data))
    label = resolved.name
    preset = request.preset
    result_dir = Path(request.result_dir or Path("results") / f"search-{resolved.slug}-{preset}")
    refuse_committed(result_dir, "--result-path")
    workspace = Path(request.workspace or Path("workspace") / f"{resolved.slug}-{preset}")
    model_name = check_model_name(request.model_name or resolved.slug)
    cpu = cpu_info()
    host = f"{settings.cores} usable cores ({cpu['model']}; sched_getaffinity)"
    limit = f"{settings.max_minutes:g} min" if settings.max_minutes is not None else "none"
    print(f"host: {host}; p99 budget {settings.budget_ms:g} ms; objective {settings.objective_name}; "
          f"time limit {limit}", flush=True)

    formats = list(request.formats)
    infos = prepare_formats(resolved, preset, formats, workspace, log=lambda m: print(m, flush=True))
    options = _with_real_input_data(request, options, infos, result_dir)
    identity = search_identity(label, preset, options, infos)
    store = SearchStore(result_dir, identity)
    try:
        store.open(fresh=request.fresh, policy="resume" if request.resume else "auto")
    except StoreMismatch as err:
        return SearchRun(None, result_dir, 2, time.monotonic() - started, error=str(err))
    stored = len(store.points)
    if stored:
        print(f"checkpoint: {stored} measured points in {store.path} (reused where the search needs them)", flush=True)
    by_format = {i.format: i for i in infos}
    from ..sizing.ratestore import RateStore
    from .triton import RATE_FILE

    rates = RateStore(result_dir, RATE_FILE, identity=identity,
                      policy="fresh" if request.fresh else "resume" if request.resume else "auto")
    srv = request.server
    with TritonMeasurer(by_format, model_name, result_dir, options, http_port=srv.http_port,
                        grpc_port=srv.grpc_port, metrics_port=srv.metrics_port,
                        log_verbose=srv.log_verbose, metrics_period_s=srv.metrics_period_s or None, rate_store=rates,
                        start_timeout_s=srv.start_timeout_s,
                        open_loop_window_ms=request.settings.open_loop_window_ms) as measurer:
        search = Search(infos, measurer, store, settings, progress=request.progress, started=started)
        try:
            outcome = search.run()
        except SearchError as err:  # nothing to search, or the default config cannot be measured
            return SearchRun(None, result_dir, 2, time.monotonic() - started, error=str(err))
    print(f"reused {outcome.reused_points} measured points from the checkpoint; measured {outcome.measured_points} "
          f"new ones", flush=True)

    written = write_winner(outcome, by_format, Path(request.model_repository or "model_repository"), model_name,
                           result_dir)
    csv_path, _ = write_csvs(outcome, store, result_dir)
    title = f"Config search: {label} ({preset}), p99 <= {settings.budget_ms:g} ms, {settings.objective_name}"
    plot = plot_frontier(outcome, result_dir / "search_frontier.png",
                         f"{label} ({preset}) on {settings.cores} cores: throughput vs p99 per config")
    write_markdown(outcome, result_dir, title=title, host=host, command=request.command, written=written, plot=plot,
                   reused_failures=store.reused_failures, store=store)
    from .memory import record as memory_record

    record_run(result_dir, {
        "kind": "search", "model_name": model_name, "model": label, "preset": preset,
        "source": resolved.source.to_dict(),
        "formats": formats, "settings": asdict(settings), "perf_options": options.measurement_fields(),
        "input_data_digest": input_data_digest(options.input_data),
        "winner": outcome.decision.winner.candidate.to_dict() if outcome.decision.winner else None,
        "decision": outcome.decision.message, "wall_s": round(outcome.wall_s, 1), "notes": list(outcome.notes),
        "memory_per_instance": memory_record(outcome, store),
    }, identity.server_version, identity)
    report = build_report(result_dir)["report.html"]  # the search as a section of the run's report
    code = 0 if outcome.decision.winner is not None else EXIT_NO_CONFIG
    return SearchRun(outcome, result_dir, code, time.monotonic() - started, csv_path, written, report,
                     model_name=model_name, formats=infos, options=options)


def _print_answer(outcome: SearchOutcome, written: Path | None, csv_path: Path, report: Path) -> int:
    d = outcome.decision
    print(f"\nsearch finished in {format_seconds(outcome.wall_s)}: {len(outcome.trials)} configs considered, "
          f"{sum(t.status == 'measured' for t in outcome.trials)} measured")
    print(f"every config and why it was dropped: {csv_path}\nreport: {report}")
    if d.winner is None:
        print(f"NO CONFIG: {d.message}", file=sys.stderr)
        return EXIT_NO_CONFIG
    c = d.winner.confirmation
    numbers = f" - {c.throughput.text()} inf/s, p99 {c.p99.text()} ms at concurrency {c.concurrency}" if c else ""
    print(f"winner: {d.winner.candidate.label()}{numbers}\n{d.message}\nwritten: {written}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from ..binaries import PerfAnalyzerNotFound

    args = build_parser().parse_args(argv)
    try:
        return run_search(args)
    except (StoreMismatch, PerfAnalyzerNotFound) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


__all__ = ["main", "build_parser", "request_from_args", "run_search", "search_step", "EXIT_NO_CONFIG"]
