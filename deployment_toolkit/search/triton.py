"""Measure candidates on the real embedded tritonserver through the perf suite.

One server runs for the whole search in explicit model-control mode on a scratch repository, started when the
first candidate is loaded (a rerun that finds every point and rate stored starts none). Each candidate
is written with `write_model` as its own model name (`<model>__<candidate slug>`), loaded, checked with one
real request, measured point by point with `run_point`, then unloaded and deleted (so the scratch repository
never holds more than one copy of the artifact). A config the server refuses is reported with the server's
own reason; if the server dies under a candidate it is restarted and the candidate recorded as failed.
The server's metrics endpoint is scraped during every point, as the sweeps do (perf.telemetry): the summary
goes to `search_server.csv` (one row per config x concurrency x sample, the scrapes to
`telemetry/search_series.csv`) and its key figures onto the point (server throughput, queue and compute per
request, peak host and GPU memory), so the memory each instance count used is known.
"""
from __future__ import annotations

import logging
import math
import shutil
import time
import warnings
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..binaries import check_perf_analyzer
from ..client import ServerNotReady, TritonClient
from ..perf import neighbours, telemetry
from ..perf.analyzer import Concurrency, PerfAnalyzerError, PerfOptions, PerfTarget, run_point
from ..results.schema import MEASURE_COLUMNS
from ..repository.config import ConfigError
from ..repository.layout import write_model
from ..repository.names import check_model_name
from ..server.errors import ModelLoadError, ServerError
from ..server.local import LocalTritonServer, ServerConfig, explain_lines
from .request import SearchServer
from .trials import CandidateFailed, CandidateRefused, FormatInfo
from .space import Candidate
from .store import Point

if TYPE_CHECKING:
    from ..perf.openloop.ratepoint import RatePoint


log = logging.getLogger(__name__)
RATE_FILE = "search_openloop.csv"  # the open-loop rates of --objective capacity, in the result folder
TELEMETRY_KIND = "search"  # search_server.csv and telemetry/search_series.csv in the result folder
POINT_KEYS = ("config", "concurrency", "sample")


def candidate_model_name(base: str, candidate: Candidate) -> str:
    return f"{base}__{candidate.slug}"


def point_figures(summary: dict[str, Any]) -> dict[str, float]:
    """The Point's fields from a telemetry summary (NaN where the metric was absent)."""
    def num(key: str, scale: float = 1.0) -> float:
        v = summary.get(key)
        return math.nan if v is None else float(v) * scale

    return {"server_throughput": num("server_infer_per_s"), "server_queue_ms": num("queue_us_per_request", 1e-3),
            "server_compute_ms": num("compute_infer_us_per_request", 1e-3),
            "host_memory_bytes": num("cpu_memory_gib", 2.0 ** 30), "gpu_memory_bytes": num("gpu_memory_gib", 2.0 ** 30)}


class TritonMeasurer:
    """`with TritonMeasurer(...) as m:` starts the server; `load/measure/release` serve the engine."""

    def __init__(self, formats: dict[str, FormatInfo], base_name: str, work_dir: str | Path, options: PerfOptions,
                 *, server: SearchServer | None = None, rate_store: Any = None, open_loop_window_ms: int | None = None,
                 load_timeout_s: float = 180.0):
        """`server`: its ports, log level, how often its metrics endpoint is scraped during a point (None or 0:
        never) and its start-up limit. `rate_store`: where open-loop rates are stored and resumed (a sizing
        RateStore; default: the work folder's search_openloop.csv); `open_loop_window_ms`: the perf_analyzer
        window of an open-loop rate (None: sized to the rate, perf.openloop.ratepoint.auto_window_ms)."""
        server = server or SearchServer()
        self.formats = formats
        self.base_name = check_model_name(base_name)
        self.work_dir = Path(work_dir)
        self.repository = self.work_dir / "scratch_repository"
        self.raw_dir = self.work_dir / "raw"
        self.options = options
        self.settings = server
        self.load_timeout_s = load_timeout_s
        self.server: LocalTritonServer | None = None
        self._running = ExitStack()  # the server now running: closing it stops that server
        self.binary: Path | None = None
        self.restarts = 0
        self.metrics_period_s = server.metrics_period_s or None
        self._rate_store = rate_store
        self.open_loop_window_ms = open_loop_window_ms

    # ---- server lifecycle -------------------------------------------------------------------
    def __enter__(self) -> "TritonMeasurer":
        self.binary, _ = check_perf_analyzer()
        if self.repository.exists():
            shutil.rmtree(self.repository)  # leftovers of an interrupted run
        self.repository.mkdir(parents=True)
        return self

    def __exit__(self, *exc) -> None:
        self._stop()
        shutil.rmtree(self.repository, ignore_errors=True)

    def _start(self) -> None:
        s = self.settings
        cfg = ServerConfig(self.repository, model_control_mode="explicit", log_dir=self.work_dir / "logs",
                           log_verbose=s.log_verbose, start_timeout_s=s.start_timeout_s, http_port=s.http_port,
                           grpc_port=s.grpc_port, metrics_port=s.metrics_port)
        self.server = self._running.enter_context(LocalTritonServer(cfg))

    def _stop(self) -> None:
        self._running.close()
        self._running = ExitStack()
        self.server = None

    @property
    def url(self) -> str:
        return self.server.grpc_url if self.options.protocol == "grpc" else self.server.http_url

    # ---- Measurer ---------------------------------------------------------------------------
    def load(self, candidate: Candidate) -> None:
        if self.server is None:
            self._start()
        info = self.formats[candidate.format]
        name = candidate_model_name(self.base_name, candidate)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                write_model(self.repository, info.artifact_dir, candidate.config_options(name))
        except ConfigError as err:
            raise CandidateRefused(f"build_config: {err}") from err
        try:
            self.server.load_model(name)
        except ModelLoadError as err:
            self._discard(name)
            self._restart_if_dead()
            raise CandidateRefused(_first_lines(str(err))) from err
        try:
            with TritonClient(self.url, self.options.protocol) as client:
                client.preflight(name, "", info.manifest, info.manifest.max_batch_size > 0, timeout_s=60.0)
        except ServerNotReady as err:
            self._discard(name)
            raise CandidateRefused(f"loaded but cannot answer: {err}") from err

    def _per_request(self, info) -> float:
        """Inferences per request: a batch-coupled model's stacked samples (data.whole), else 1."""
        from ..data.whole import samples_per_request

        return samples_per_request(info.manifest, self.options.input_data)

    def measure(self, candidate: Candidate, concurrency: int, sample: int, store_key: str) -> Point:
        name = candidate_model_name(self.base_name, candidate)
        info = self.formats[candidate.format]
        csv_path = self.raw_dir / f"{candidate.slug}_c{concurrency}_s{sample}.csv"
        t0 = time.monotonic()
        metrics = self.server.metrics_url if self.metrics_period_s and self.server.metrics_port else None
        def window() -> tuple[Any, Any]:
            with telemetry.scrape_during(metrics, name, self.metrics_period_s or telemetry.DEFAULT_PERIOD_S,
                                         log=_warn) as scraper:
                return run_point(PerfTarget(name, self.url, info.manifest, binary=self.binary,
                                            samples_per_request=self._per_request(info)), 1,
                                 Concurrency(concurrency), self.options, csv_path), scraper

        try:  # a window the host's other processes disturbed is measured again (perf.neighbours), never a figure
            result, scraper = neighbours.until_quiet(window, f"{candidate.slug} at concurrency {concurrency}",
                                                     "closed loop")
        except PerfAnalyzerError as err:
            died = self._restart_if_dead()
            what = "the server died" if died else "perf_analyzer failed"
            raise CandidateFailed(f"{what} at concurrency {concurrency}: {_first_lines(str(err))}") from err
        v = result.values
        figures = self._record(scraper, candidate, concurrency, sample, v["Inferences/second"])
        return Point(
            candidate=store_key, concurrency=concurrency, sample=sample,
            throughput=v["Inferences/second"], p99_ms=v["P99 Latency"], p50_ms=v["P50 Latency"],
            avg_ms=v["Avg Latency"], queue_ms=v["Server Queue"], compute_ms=v["Server Compute Infer"],
            stable=result.stable, note=result.note, seconds=time.monotonic() - t0, **figures,
        )

    def _record(self, scraper: telemetry.Scraper | None, candidate: Candidate, concurrency: int, sample: int,
                client: float) -> dict[str, float]:
        """The point's server summary into search_server.csv and its figures for the Point ({} without scrapes)."""
        if scraper is None or len(scraper.samples) < 2:
            return {}
        summary = telemetry.summarise(scraper.samples, client)
        key = {"config": candidate.slug, "concurrency": concurrency, "sample": sample, "client_infer_per_s": client}
        telemetry.record_point(self.work_dir, TELEMETRY_KIND, key, summary, scraper.samples, identity=POINT_KEYS)
        return point_figures(summary)

    def _rate_target(self, candidate: Candidate, rate: float, store_key: str) -> Any:
        """The open-loop target of a candidate at `rate` (perf.openloop.ratepoint.Target; its window follows the rate). The
        server's URLs are not part of a stored rate's key: without a server yet they are left empty."""
        from ..perf.openloop.ratepoint import Target, auto_window_ms, open_loop_options
        from ..perf.openloop.ratestore import RateStore

        if self._rate_store is None:
            self._rate_store = RateStore(self.work_dir, RATE_FILE)
        server = self.server
        info = self.formats[candidate.format]
        return Target(config=store_key, model_name=candidate_model_name(self.base_name, candidate),
                      url=self.url if server else "", batch=1, signature=info.manifest,
                      binary=self.binary, samples_per_request=self._per_request(info),
                      options=open_loop_options(self.options,
                                                window_ms=self.open_loop_window_ms or auto_window_ms(rate)),
                      metrics_url=server.metrics_url if server and self.metrics_period_s and server.metrics_port
                      else None)

    def stored_rate(self, candidate: Candidate, rate: float, trial: int, store_key: str) -> "RatePoint | None":
        """The rate as stored in the result folder (the key perf.openloop.ratepoint.measure looks up), or None: read
        without a server or the candidate loaded."""
        from ..perf.openloop.ratepoint import RatePoint, point_key, round_rate

        key = point_key(self._rate_target(candidate, rate, store_key), round_rate(rate), trial)
        row = self._rate_store.get(key)
        return RatePoint(key, row) if row is not None else None

    def rate_point(self, candidate: Candidate, rate: float, trial: int, store_key: str) -> "RatePoint":
        """One open-loop rate (perf.openloop.ratepoint: the toolkit's seeded Poisson schedule, p99 also from the intended
        send time), stored under the candidate's key and resumed from the store."""
        from ..perf.openloop.ratepoint import measure

        target = self._rate_target(candidate, rate, store_key)
        try:
            return measure(target, rate, self._rate_store, self.raw_dir / "open_loop", trial, tag=candidate.slug)
        except PerfAnalyzerError as err:
            died = self._restart_if_dead()
            what = "the server died" if died else "perf_analyzer failed"
            raise CandidateFailed(f"{what} at {rate:g} requests/s in open loop: {_first_lines(str(err))}") from err

    def release(self, candidate: Candidate) -> None:
        name = candidate_model_name(self.base_name, candidate)
        if self.server is not None and self.server.is_alive():
            try:
                self.server.unload_model(name)
            except ServerError:
                pass  # unloading a model that never loaded
        self._discard(name)

    # ---- helpers ----------------------------------------------------------------------------
    def _discard(self, name: str) -> None:
        shutil.rmtree(self.repository / name, ignore_errors=True)

    def _restart_if_dead(self) -> bool:
        if self.server is not None and self.server.is_alive():
            return False
        why = "\n".join(explain_lines(self.server.log_text())[-5:]) if self.server else ""
        self._stop()
        self.restarts += 1
        self._start()
        if why:
            log.warning(f"warning: tritonserver died and was restarted; its log said:\n{why}")
        return True


def _warn(message: str) -> None:
    log.warning(f"warning: {message}")


def _first_lines(text: str, n: int = 4) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[:n])


__all__ = ["TritonMeasurer", "candidate_model_name", "MEASURE_COLUMNS"]
