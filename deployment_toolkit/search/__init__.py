"""Config search under a latency budget: what Model Analyzer does, sized to the host and judged against noise.

space (candidates, cores), sweep (one candidate's concurrency sweep with early stops), stats (noise, gains
with spread), store (checkpoint), trials (the search's settings, contracts, results and errors), request (the
typed request: settings, job, server, perf options, data), orchestration (one search as a step:
`search_step(request) -> SearchRun`, what the command, the plan and the Python API run), engine (the search:
exploration, noise and knee), judge (levels against the budget and the noise), bench (measuring points through the
checkpoint), clock (--max-minutes and the time reserves), confirm (the final re-measurement in turns), decide (the
winner and the verdicts), progress (its console bar), triton (measuring on the embedded server), artifacts
(verified formats), output (search.csv/md, frontier plot, winner config). The side-by-side with Model Analyzer
is the lab's (deployment_toolkit_lab/versus/).
"""
from .engine import Search
from .trials import (
    CandidateFailed,
    CandidateRefused,
    Decision,
    FormatInfo,
    SearchError,
    SearchOutcome,
    SearchSettings,
    Trial,
)
from .space import Candidate, default_candidate, host_cores, instance_thread_pairs
from .stats import Gain, Noise, Spread
from .store import Point, SearchStore, StoreMismatch
from .sweep import SweepPolicy, SweepResult, best_point, sweep_concurrency, sweep_near

__all__ = [
    "Candidate", "CandidateFailed", "CandidateRefused", "Decision", "FormatInfo", "Gain", "Noise", "Point", "Search",
    "SearchError", "SearchOutcome", "SearchSettings", "SearchStore", "Spread", "StoreMismatch", "SweepPolicy",
    "SweepResult", "Trial", "best_point", "default_candidate", "host_cores", "instance_thread_pairs",
    "sweep_concurrency", "sweep_near",
]
