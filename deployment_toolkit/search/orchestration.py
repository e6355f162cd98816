"""One config search as a step: `search_step(SearchRequest) -> SearchRun`. It resolves the model, prepares and
verifies the formats, opens the checkpoint under the run's identity, measures on the embedded tritonserver, then
writes the winner, search.csv/md, the frontier plot, run.json (with the run's identity, through the run folder) and
the report section. Its progress goes to the `deployment_toolkit.search.orchestration` logger; a search that
cannot start raises (a SearchError, or a UserError for bad input); a search that ran is a SearchRun, with or without
a winner. A rerun of the same search into the same folder replays it and measures nothing (search.clock).

The search command (commands/search_config.py), the planner (deployment.plan) and the Python API
(`dt.search_config`) all run this one function."""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

from ..committed import refuse_committed
from ..repository.names import check_model_name
from ..results.identity import (RunIdentity, host_identity, input_data_digest, key_fields, library_versions,
                                toolkit_version)
from .request import FINISH_RESERVE_S, SearchRequest
from .store import SearchStore, StoreMismatch
from .trials import FormatInfo, SearchError, SearchRun

log = logging.getLogger(__name__)


@dataclass
class _Run:
    """What the step settles before it measures, handed to the stages after it."""

    request: SearchRequest
    settings: Any  # trials.SearchSettings, with the step's finishing time reserved
    options: Any  # perf.analyzer.PerfOptions, the user's samples as its input data
    resolved: Any  # sources.ResolvedModel
    result_dir: Path
    model_name: str
    host: str
    started: float
    infos: list[FormatInfo]
    identity: RunIdentity | None = None


def search_identity(model: str, preset: str, options: Any, infos: Sequence[FormatInfo]) -> RunIdentity:
    """What defines the stored points (results.identity); the budget is not in it (a point is a fact whatever the
    budget), nor the candidates' configs (each point's key names its candidate)."""
    try:
        server = f"embedded tritonserver (nvidia-pytriton {metadata.version('nvidia-pytriton')})"
    except metadata.PackageNotFoundError:
        server = None
    digests = ";".join(sorted(f"{i.format}:{i.digest}" for i in infos if getattr(i, "digest", None)))
    return RunIdentity(host=host_identity(), server_version=server, model_config=None, artifact_digest=digests or None,
                       perf_options=key_fields(options.measurement_fields()),
                       input_data=input_data_digest(options.input_data),
                       toolkit_version=toolkit_version(), libraries=library_versions(),
                       extra={"model": model, "preset": preset, "batch_size": 1})


def _with_real_input_data(request: SearchRequest, options: Any, infos: Sequence[FormatInfo], result_dir: Path):
    """The user's samples (--data-dir/--dataloader): perf_analyzer sends them (its digest is part of the
    checkpoint's run identity, so points measured on other data are never reused)."""
    from ..perf.analyzer.flags import sample_input_data

    manifest = next((i.manifest for i in infos if i.manifest is not None), None)
    if manifest is None or not request.data.user_data:
        return options
    path = sample_input_data(request.data, manifest, result_dir / "raw", request.job.perf_samples,
                             precision=manifest.precision, batched=manifest.max_batch_size > 0,
                             input_data=options.input_data)
    return replace(options, input_data=path) if path else options


def search_step(request: SearchRequest) -> SearchRun:
    """One search, its result in memory: the outcome, the files written and the artifacts searched."""
    from ..data.infer import with_data_inputs
    from ..results.runinfo import cpu_info
    from ..sources import resolve
    from .artifacts import prepare_formats

    started = time.monotonic()  # --max-minutes counts the server's start and the artifacts too
    job = request.job
    # the step writes the winner, the CSVs, the plot and the report after the search: it keeps time for them
    settings = replace(request.settings, finish_reserve_s=max(request.settings.finish_reserve_s, FINISH_RESERVE_S))
    # with --max-attempts > 1 an unstable point is retried with a window twice as long (the runners add 2 s)
    options = replace(request.options, retry_interval_step_ms=request.options.measurement_interval_ms,
                      retry_request_count_step=request.options.measurement_request_count)
    # a model.py without get_signature takes its inputs from --dataloader/--data-dir, as convert does
    resolved = resolve(with_data_inputs(request.source, request.data))
    result_dir = Path(job.result_dir or Path("results") / f"search-{resolved.slug}-{job.preset}")
    refuse_committed(result_dir, "--result-path")
    workspace = Path(job.workspace or Path("workspace") / f"{resolved.slug}-{job.preset}")
    model_name = check_model_name(job.model_name or resolved.slug)
    host = f"{settings.cores} usable cores ({cpu_info()['model']}; sched_getaffinity)"
    limit = f"{settings.max_minutes:g} min" if settings.max_minutes is not None else "none"
    log.info(f"host: {host}; p99 budget {settings.budget_ms:g} ms; objective {settings.objective_name}; "
             f"time limit {limit}")

    run = _Run(request, settings, options, resolved, result_dir, model_name, host, started,
               prepare_formats(resolved, job.preset, list(job.formats), workspace))
    run.options = _with_real_input_data(request, options, run.infos, result_dir)
    run.identity = search_identity(resolved.name, job.preset, run.options, run.infos)
    store = SearchStore(result_dir, run.identity)
    try:
        store.open(fresh=job.fresh, policy="resume" if job.resume else "auto")
    except StoreMismatch as err:
        raise SearchError(str(err)) from None
    if store.points:
        log.info(f"checkpoint: {len(store.points)} measured points in {store.path} (reused where the search needs "
                 "them)")
    return _write(run, _measure(run, store), store)


def _measure(run: _Run, store: SearchStore) -> Any:
    """The search on the embedded server (explicit model control), its open-loop rates stored beside its points."""
    from ..perf.openloop.ratestore import RateStore
    from .engine import Search
    from .triton import RATE_FILE, TritonMeasurer

    job = run.request.job
    rates = RateStore(run.result_dir, RATE_FILE, identity=run.identity, policy=job.reuse.value)
    with TritonMeasurer({i.format: i for i in run.infos}, run.model_name, run.result_dir, run.options,
                        server=job.server, rate_store=rates,
                        open_loop_window_ms=run.settings.open_loop_window_ms) as measurer:
        outcome = Search(run.infos, measurer, store, run.settings, progress=job.progress, started=run.started).run()
    log.info(f"reused {outcome.reused_points} measured points from the checkpoint; measured {outcome.measured_points} "
             "new ones" + (f"; open-loop rates: reused {outcome.reused_rates}, measured {outcome.measured_rates}"
                           if outcome.reused_rates or outcome.measured_rates else ""))
    return outcome


def _write(run: _Run, outcome: Any, store: SearchStore) -> SearchRun:
    """The winner into the model repository, search.csv/md, the frontier plot, run.json and the report."""
    from ..report.build import build_report
    from ..results.run_folder import RunFolder
    from .memory import record as memory_record
    from .output import plot_frontier, write_csvs, write_markdown, write_winner

    job, settings, label, result_dir = run.request.job, outcome.settings, run.resolved.name, run.result_dir
    written = write_winner(outcome, {i.format: i for i in run.infos},
                           Path(job.model_repository or "model_repository"), run.model_name, result_dir)
    csv_path, _ = write_csvs(outcome, store, result_dir)
    plot = plot_frontier(outcome, result_dir / "search_frontier.png",
                         f"{label} ({job.preset}) on {settings.cores} cores: throughput vs p99 per config")
    title = f"Config search: {label} ({job.preset}), p99 <= {settings.budget_ms:g} ms, {settings.objective_name}"
    write_markdown(outcome, result_dir, title=title, host=run.host, command=run.request.job.command,
                   written=written, plot=plot, store=store)
    RunFolder(result_dir, run.identity).record({
        "kind": "search", "model_name": run.model_name, "model": label, "preset": job.preset,
        "source": run.resolved.source.to_dict(),
        "formats": list(job.formats), "settings": asdict(settings), "perf_options": run.options.measurement_fields(),
        "input_data_digest": input_data_digest(run.options.input_data),
        "winner": outcome.decision.winner.candidate.to_dict() if outcome.decision.winner else None,
        "decision": outcome.decision.message, "wall_s": round(outcome.wall_s, 1), "notes": list(outcome.notes),
        "memory_per_instance": memory_record(outcome, store),
    }, run.identity.server_version)
    report = build_report(result_dir)["report.html"]  # the search as a section of the run's report
    return SearchRun(outcome, result_dir, time.monotonic() - run.started, csv_path, written, report,
                     model_name=run.model_name, formats=run.infos, options=run.options)


__all__ = ["search_identity", "search_step"]
