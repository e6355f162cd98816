"""Our search and Model Analyzer's quick search on the same model, budget and server: best throughput within
the budget and wall time of each, side by side (a benchmark, not a test)."""
from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

from deployment_toolkit.config import Format, check_numbers, setting
from deployment_toolkit.config.fields import MAX_LATENCY_MS
from deployment_toolkit.errors import UserError, UserInputError
from deployment_toolkit.spec import atomic_write_text
from deployment_toolkit.tables import markdown_table
from .head_to_head import Contender, capacity_ratio, remeasure, remeasured, table
from .model_analyzer import MAResult, MARequest, find_model_analyzer, run_model_analyzer
from deployment_toolkit.search.request import format_list, formats_of
from deployment_toolkit.search.space import Candidate, default_candidate
from deployment_toolkit.search.trials import SearchRun

log = logging.getLogger(__name__)
OURS, THEIRS = "this toolkit's search", "Model Analyzer"  # the two sides, as the tables name them
EXIT_NO_WINNER, EXIT_NOT_STARTED = 1, 2  # OurResult.returncode: the search command's exit code for the same run


def minutes_or_half(text: str) -> float | str:
    if text == "half":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected minutes or 'half', got {text!r}") from None


@dataclass
class Comparison:
    """One comparison of our search with Model Analyzer's: each field's flag and default written once (the
    benchmark command builds its flags from these fields)."""

    model: str = setting(flag="--model", help="a zoo model name")
    budget_ms: float = setting(flag="--p99-ms", unit="ms", low=0, low_open=True, high=MAX_LATENCY_MS,
                               help="p99 budget in ms, the same for both sides")
    preset: str = setting("small", flag="--preset", help="small (CI size) or full (benchmark size)")
    max_minutes: float = setting(10.0, flag="--max-minutes", unit="min", low=0, low_open=True, high=10_080,
                                 help="time limit of each side")
    # minutes, None for --max-minutes, or "half": half of Model Analyzer's wall time (Model Analyzer then runs first)
    our_max_minutes: float | str | None = setting(
        None, flag="--our-max-minutes", type=minutes_or_half, metavar="MIN|half", low=0, low_open=True,
        help="our search's limit: minutes, or 'half' for half of Model Analyzer's wall time (Model Analyzer then "
             "runs first); default: --max-minutes")
    formats: tuple[Format, ...] = setting((Format.ONNX,), flag="--formats", type=format_list, show_default=False,
                                          metavar="FORMAT,...",
                                          help="our side's formats; Model Analyzer gets the first (default: onnx)")
    workspace: Path | None = setting(None, flag="--workspace", type=Path,
                                     help="artifacts (default workspace/<model>-<preset>)")
    result_dir: Path | None = None  # --result-path: default results/search-vs-ma-<model>-<preset>
    ma_binary: str | None = setting(None, flag="--model-analyzer", metavar="PATH",
                                    help="the model-analyzer CLI (default: /tmp/ma-venv/bin/model-analyzer, then PATH)")
    ma_mode: str = setting("quick", flag="--ma-search-mode", choices=("quick", "brute", "optuna"))
    skip_ma: bool = setting(False, flag="--skip-model-analyzer", action="store_true", help="run our side alone")
    shared_memory: str = setting("system", flag="--shared-memory", choices=("system", "none"),
                                 help="tensor transport of perf_analyzer on both sides")
    measurement_interval_ms: int = setting(
        2000, flag="--measurement-interval", unit="ms", low=100, high=600_000,
        help="the head-to-head re-measurement's perf_analyzer window (ms); our search measures with its own "
             "defaults, as a user's search would")
    rounds: int = setting(3, flag="--rounds", low=0, high=100,
                          help="head-to-head: times each side's winner is re-measured, in turns (0: skip)")

    def __post_init__(self) -> None:
        self.formats = formats_of(self.formats)
        if self.our_max_minutes not in (None, "half") and not isinstance(self.our_max_minutes, (int, float)):
            raise UserInputError(f"--our-max-minutes {self.our_max_minutes!r}: minutes, or 'half'")
        check_numbers(self)
        self.result_dir = Path(self.result_dir or Path("results") / f"search-vs-ma-{self.model}-{self.preset}")
        self.workspace = Path(self.workspace or Path("workspace") / f"{self.model}-{self.preset}")


@dataclass
class OurResult:
    returncode: int  # what the search command would exit with: 0 a winner, 1 none, 2 it could not start
    wall_s: float
    configs: int
    best_throughput: float | None  # best single point within budget, any config (as Model Analyzer reports)
    best_config: str
    best_concurrency: int | None
    best_p99_ms: float | None
    winner: str
    winner_confirmed: str  # median [min..max] of the final re-measurement (the open-loop capacity under capacity)
    error: str = ""
    limit_minutes: float | None = None
    notes: tuple[str, ...] = ()  # the search's own account of how it went (run.json), e.g. why it ran over


def run_ours(config: Comparison, limit_minutes: float) -> tuple[OurResult, SearchRun | None]:
    """Run our search step in-process on a fresh checkpoint (the wall time must be honest), as a user's search
    with its defaults would run; the result comes back in memory."""
    from deployment_toolkit.sources import parse_reference
    from deployment_toolkit.search.request import DEFAULT_PERF_OPTIONS, SearchJob, SearchRequest
    from deployment_toolkit.search.orchestration import search_step
    from deployment_toolkit.search.trials import SearchSettings

    ours_dir = config.result_dir / "ours"
    repository = config.workspace / "vs_model_analyzer" / "ours_repository"  # model copies stay out of results
    shown = ["--model", config.model, "--preset", config.preset, "--p99-ms", f"{config.budget_ms:g}", "--max-minutes",
             f"{limit_minutes:g}", "--formats", ",".join(config.formats), "--workspace", str(config.workspace),
             "--result-path", str(ours_dir), "--model-repository", str(repository), "--shared-memory",
             config.shared_memory, "--no-progress", "--fresh"]
    command = " ".join(["deployment-toolkit", "search", *shown])
    log.info(f"== our search: {' '.join(shown)}")
    request = SearchRequest(
        source=parse_reference(config.model, preset=config.preset),
        settings=SearchSettings(budget_ms=config.budget_ms, max_minutes=limit_minutes),
        job=SearchJob(preset=config.preset, formats=config.formats, workspace=config.workspace,
                      model_repository=repository, result_dir=ours_dir, fresh=True, progress=False, command=command),
        options=replace(DEFAULT_PERF_OPTIONS, shared_memory=config.shared_memory))
    t0 = time.monotonic()
    try:
        run = search_step(request)
    except UserError as err:  # the search could not start: the comparison still reports Model Analyzer's side
        return our_failure(str(err), time.monotonic() - t0), None
    return our_result(run, time.monotonic() - t0), run


def our_failure(error: str, wall_s: float) -> OurResult:
    """Our side when the search could not start."""
    return OurResult(EXIT_NOT_STARTED, wall_s, 0, None, "", None, None, "", "", error)


def our_result(run: SearchRun, wall_s: float) -> OurResult:
    """The figures the comparison reports, from the search's outcome: the best single point within the budget
    of any config (as Model Analyzer reports), the winner and its final re-measurement."""
    measured = [t for t in run.outcome.trials if t.status == "measured"]
    best = max((t for t in measured if t.best is not None), key=lambda t: t.best.throughput, default=None)
    win = run.outcome.decision.winner
    conf = win.confirmation if win else None
    cap = win.capacity.spread if win and win.capacity else None  # --objective capacity: the open-loop figure
    confirmed = (f"{conf.throughput.median:.1f} [{conf.throughput.low:.1f}..{conf.throughput.high:.1f}] inf/s at "
                 f"concurrency {conf.concurrency}") if conf else \
        f"open-loop capacity {cap.text()} inf/s" if cap is not None else ""
    code = 0 if run.found else EXIT_NO_WINNER
    return OurResult(code, wall_s, len(measured), best.best.throughput if best else None,
                     best.candidate.slug if best else "", best.best.concurrency if best else None,
                     best.best.p99_ms if best else None, win.candidate.slug if win else "", confirmed,
                     "" if code == 0 else f"exit code {code}", notes=tuple(run.outcome.notes))


def prepare_ma_repository(info, model_name: str, repository: Path) -> None:
    """The default config (what a user hands Model Analyzer) in a repository of its own."""
    from deployment_toolkit.repository.layout import write_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_model(repository, info.artifact_dir,
                    default_candidate(info.format, info.manifest.max_batch_size).config_options(model_name))


def _run_ma(config: Comparison, info) -> MAResult:
    """Model Analyzer's side on the first usable format's default config."""
    from deployment_toolkit.perf.analyzer import output_shared_memory_size
    from deployment_toolkit.repository.config import host_has_gpu

    if config.skip_ma:
        return MAResult(ran=False, error="skipped (--skip-model-analyzer)")
    binary = find_model_analyzer(config.ma_binary)
    name, scratch = f"{config.model}_ma", config.workspace / "vs_model_analyzer"
    prepare_ma_repository(info, name, scratch / "ma_repository")
    log.info(f"== Model Analyzer ({config.ma_mode} search, {config.max_minutes:g} min limit): "
             f"{binary or 'not found'}")
    shm = config.shared_memory
    result = run_model_analyzer(MARequest(
        binary=binary, model_name=name, repository=scratch / "ma_repository",
        work_dir=config.result_dir / "model_analyzer", budget_ms=config.budget_ms, max_minutes=config.max_minutes,
        cpu_only=not host_has_gpu(), search_mode=config.ma_mode, shared_memory=shm,
        output_shm_bytes=output_shared_memory_size(info.manifest.outputs) if shm != "none" else None,
        output_repository=scratch / "ma_output_repository"))
    result.limit_minutes = config.max_minutes
    return result


def compare(config: Comparison) -> tuple[OurResult, MAResult, list[Contender]]:
    """Both searches, then both winners re-measured by one harness, then vs_model_analyzer.md/json and run.json.
    `config.max_minutes` limits Model Analyzer, `config.our_max_minutes` our search (None: the same limit; "half":
    half of Model Analyzer's wall time, and Model Analyzer runs first)."""
    from deployment_toolkit.search.artifacts import prepare_formats

    infos = prepare_formats(config.model, config.preset, list(config.formats), config.workspace)
    usable = [i for i in infos if not i.error]
    if not usable:
        raise UserInputError("no format could be prepared: " + "; ".join(f"{i.format}: {i.error}" for i in infos))
    half = config.our_max_minutes == "half"
    if half and config.skip_ma:
        raise UserInputError("--our-max-minutes half needs Model Analyzer's wall time: do not skip Model Analyzer")
    if half:
        ma = _run_ma(config, usable[0])
        if not ma.ran or ma.wall_s <= 0:
            raise UserError(f"Model Analyzer did not run, so half its time is unknown: {ma.error}")
        ours, searched = _our_side(config, round(ma.wall_s / 60.0 / 2.0, 2))
    else:
        limit = config.max_minutes if config.our_max_minutes is None else float(config.our_max_minutes)
        ours, searched = _our_side(config, limit)
        ma = _run_ma(config, usable[0])
    contenders = winners(searched, ma, usable[0].format, config.budget_ms)
    if contenders and config.rounds > 0:  # also one (the same pick): whether it holds the budget is a target too
        from deployment_toolkit.perf.analyzer import PerfOptions

        log.info(f"== both winners re-measured by one harness, {config.rounds} rounds in turns")
        options = PerfOptions(protocol="grpc", shared_memory=config.shared_memory,
                              measurement_interval_ms=config.measurement_interval_ms, max_trials=6, max_attempts=2)
        remeasure(contenders, {i.format: i for i in usable}, config.result_dir / "head_to_head", options,
                  config.rounds, budget_ms=config.budget_ms)
    write_summary(config.result_dir, config.budget_ms, ours, ma, contenders)
    return ours, ma, contenders


def _our_side(config: Comparison, limit: float) -> tuple[OurResult, SearchRun | None]:
    result, run = run_ours(config, limit)
    result.limit_minutes = limit
    return result, run


def winners(ours: SearchRun | None, ma: MAResult, ma_format: str, budget_ms: float) -> list[Contender]:
    """Our winner and Model Analyzer's best config within the budget (at the concurrency each chose); one
    entry when they are the same config at the same load, none of a side that has no answer."""
    out = []
    mine = ours.winner() if ours is not None else None
    if mine is not None:
        out.append(Contender(OURS, *mine))
    best = ma.best_within(budget_ms)
    if best is not None:
        theirs = Contender(THEIRS, Candidate(ma_format, best.instances, 0, best.max_batch_size),
                           best.concurrency)
        if not out or (out[0].candidate, out[0].concurrency) != (theirs.candidate, theirs.concurrency):
            out.append(theirs)
    return out


def summary_lines(budget_ms: float, ours: OurResult, ma: MAResult) -> list[str]:
    def fmt(v, spec=".1f"):
        return "-" if v is None else format(v, spec)

    mb = ma.best_within(budget_ms)
    rows = [
        (OURS, fmt(ours.limit_minutes, "g"), fmt(ours.wall_s / 60, ".1f"), str(ours.configs),
         fmt(ours.best_throughput),
         f"{ours.best_config} c={ours.best_concurrency} p99 {fmt(ours.best_p99_ms)} ms" if ours.best_config else "-",
         ours.error or f"winner {ours.winner}: {ours.winner_confirmed}"),
        (THEIRS, fmt(ma.limit_minutes, "g"), fmt(ma.wall_s / 60 if ma.ran else None, ".1f"),
         str(ma.configs) if ma.ran else "-",
         fmt(mb.throughput if mb else None), f"{mb.label()} p99 {mb.p99_ms:.1f} ms" if mb else "-",
         ma.error or "finished"),
    ]
    head = ["side", "time limit (min)", "wall (min)", "configs measured", f"best inf/s within p99 {budget_ms:g} ms", "where", "outcome"]
    return markdown_table(head, rows, ["l", "r", "r", "r", "r", "l", "l"]).splitlines()


def _overrun_text(ours: OurResult) -> str:
    """Why our side took too long, when it ran past its own limit: the search's notes say what ran over."""
    if not ours.limit_minutes or ours.wall_s <= ours.limit_minutes * 60.0:
        return ""
    why = next((n for n in ours.notes if "past --max-minutes" in n or "past the limit" in n), "")
    return (f"; our search ran {ours.wall_s / 60 - ours.limit_minutes:.1f} min past its own limit of "
            f"{ours.limit_minutes:g} min" + (f" ({why})" if why else ""))


def target_lines(budget_ms: float, ours: OurResult, ma: MAResult, contenders: list[Contender]) -> list[str]:
    """The three targets, checked from the figures of this run, each with why when it is not met: our pick holds
    the budget in every head-to-head round, its throughput (head-to-head median) is at least Model Analyzer's,
    and our search took at most half the time of Model Analyzer's quick search."""
    if not ma.ran or ma.wall_s <= 0:
        return []
    ratio = ours.wall_s / ma.wall_s
    shown = f"{ratio:.2f}" if round(ratio, 2) != 0.5 else f"{ratio:.3f}"  # 0.504 must not read as 0.50
    lines = [f"- time: {ours.wall_s / 60:.1f} min vs Model Analyzer's {ma.wall_s / 60:.1f} min = {shown} of its "
             f"time (target: at most 0.50): " + ("met" if ratio <= 0.5 else
                                                 f"not met: {ours.wall_s / 60 - ma.wall_s / 120:.1f} min over half "
                                                 f"of Model Analyzer's time{_overrun_text(ours)}")]
    if ours.returncode != 0:
        why = f"not met: our search named no config ({ours.error})"
        return lines + [f"- budget held in every head-to-head round: {why}", f"- throughput: {why}"]
    mine = next((c for c in contenders if c.side == OURS and c.p99s), None)
    theirs = next((c for c in contenders if c.side == THEIRS and c.throughputs), None)
    if mine is None:
        lines.append("- budget held in every head-to-head round: not checked (our pick was not re-measured head to "
                     "head" + (f": {c.error}" if (c := next((c for c in contenders if c.side == OURS), None))
                               and c.error else "") + ")")
    else:
        over = [p for p in mine.p99s if p > budget_ms]
        lines.append(f"- budget: our pick's p99 within {budget_ms:g} ms in {mine.within(budget_ms)} of "
                     f"{len(mine.p99s)} head-to-head rounds (target: every round): "
                     + ("met" if not over else "not met: p99 " + ", ".join(f"{p:.1f}" for p in over)
                        + f" ms in the rounds over it, at concurrency {mine.concurrency}, although the search's own "
                        "re-measurement held it (the host's load changed between the two, or the noise is "
                        "larger than its samples showed)"))
    if mine is not None and theirs is not None:
        a, b = statistics.median(mine.throughputs), statistics.median(theirs.throughputs)
        p99 = statistics.median(mine.p99s)
        ok = a >= b and p99 <= budget_ms
        if ok:
            verdict = "met"
        elif p99 > budget_ms:
            verdict = f"not met: our pick's median p99 {p99:.1f} ms is over the budget, so its throughput does not count"
        else:
            verdict = (f"not met: {(1 - a / b) * 100:.1f}% less throughput than Model Analyzer's pick ("
                       f"{theirs.candidate.label()} at concurrency {theirs.concurrency} vs ours at "
                       f"{mine.concurrency})")
        overlap = min(mine.throughputs) <= max(theirs.throughputs) and min(theirs.throughputs) <= max(mine.throughputs)
        if not ok and p99 <= budget_ms and overlap:
            verdict += (f" (a tie within the spread of the rounds: ours {min(mine.throughputs):.1f}.."
                        f"{max(mine.throughputs):.1f}, Model Analyzer's {min(theirs.throughputs):.1f}.."
                        f"{max(theirs.throughputs):.1f} inf/s)")
        lines.append(f"- throughput within p99 {budget_ms:g} ms, both winners re-measured in turns: {a:.1f} vs "
                     f"{b:.1f} inf/s = {a / b:.3f}x, our winner's median p99 {p99:.1f} ms (target: at least 1x "
                     f"within the budget): {verdict}")
        cap = capacity_ratio(mine, theirs)
        if cap is not None and mine.candidate.key == theirs.candidate.key:
            pooled = [*mine.capacities, *theirs.capacities]
            lines.append(f"- open-loop capacity within p99 {budget_ms:g} ms (what a fleet plan uses): both tools "
                         f"picked the same config ({mine.candidate.label()}; only the concurrency differs, which open "
                         f"loop does not use), so it has one capacity, {statistics.median(pooled):,.1f} "
                         f"[{min(pooled):,.1f}..{max(pooled):,.1f}] inf/s from the {len(pooled)} searches of both "
                         f"sides: 1.000x by construction (target: at least 1x): met (the sides' medians, "
                         f"{statistics.median(mine.capacities):,.1f} vs {statistics.median(theirs.capacities):,.1f}, "
                         "differ by the host's noise alone)")
        elif cap is not None:
            lines.append(f"- open-loop capacity within p99 {budget_ms:g} ms (what a fleet plan uses), both picks "
                         f"searched in turns: {statistics.median(mine.capacities):,.1f} vs "
                         f"{statistics.median(theirs.capacities):,.1f} inf/s = {cap:.3f}x (target: at least 1x): "
                         + ("met" if cap >= 1.0 else "not met"))
    elif len(contenders) == 1 and contenders[0].side == OURS and ma.best_within(budget_ms) is not None:
        lines.append("- throughput: both tools chose the same config at the same concurrency: met")
    else:
        lines.append("- throughput: no head-to-head re-measurement of both winners (see above), so not checked")
    return lines


def write_summary(result_dir: Path, budget_ms: float, ours: OurResult, ma: MAResult,
                  contenders: list[Contender] = ()) -> Path:
    lines = ["# Config search vs Model Analyzer", "", *summary_lines(budget_ms, ours, ma), ""]
    measured = remeasured(contenders)
    if measured:
        lines += ["Both winners re-measured by this toolkit's perf harness on one server, in turns (the same "
                  "perf_analyzer settings for both; each at the concurrency its tool chose):", "",
                  *table(measured, budget_ms), ""]
    target = target_lines(budget_ms, ours, ma, contenders)
    if target:
        lines += ["The targets (our pick holds the budget in every head-to-head round, with at least Model Analyzer's "
                  "best throughput within it, in at most half the time of its quick search), checked from the "
                  "figures above:", "", *target, ""]
    if ma.command:
        lines += [f"Model Analyzer command: `{' '.join(ma.command)}` (log: `{ma.log_path}`)", ""]
    if ma.measurements:
        lines += ["Model Analyzer's measurements:", "",
                  markdown_table(["variant", "instances", "max batch", "concurrency", "inf/s", "p99 ms"],
                                 [[m.variant, m.instances, m.max_batch_size, m.concurrency, f"{m.throughput:.1f}",
                                   f"{m.p99_ms:.1f}"] for m in ma.measurements], ["l", "r", "r", "r", "r", "r"])]
        lines.append("")
    path = result_dir / "vs_model_analyzer.md"
    atomic_write_text(path, "\n".join(lines))
    from deployment_toolkit.results.run_folder import RunFolder

    head_to_head = [{"side": c.side, "config": c.candidate.key, "candidate": c.candidate.to_dict(),
                     "concurrency": c.concurrency, "throughputs": c.throughputs, "p99s_ms": c.p99s,
                     "capacities": c.capacities, "error": c.error} for c in measured]
    RunFolder(result_dir).record({"kind": "search-vs-model-analyzer", "budget_ms": budget_ms, "ours": ours.__dict__,
                                  "model_analyzer_error": ma.error, "head_to_head": head_to_head})
    atomic_write_text(result_dir / "vs_model_analyzer.json", json.dumps({
        "budget_ms": budget_ms, "ours": ours.__dict__,
        "model_analyzer": {"ran": ma.ran, "wall_s": ma.wall_s, "returncode": ma.returncode, "timed_out": ma.timed_out,
                           "error": ma.error, "command": ma.command,
                           "measurements": [m.__dict__ for m in ma.measurements]},
        "head_to_head": head_to_head,
    }, indent=2, default=str) + "\n")
    return path
