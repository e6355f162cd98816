"""What the server did while a point was measured: Triton's own metrics endpoint, scraped on a fixed period into a
time series, and summarised per point beside perf_analyzer's client-side row.

Triton's counters are cumulative (`nv_inference_count` inferences, `nv_inference_exec_count` executions,
`nv_inference_request_success` requests, `nv_inference_queue_duration_us` / `..._compute_infer_duration_us` summed
over requests), so a point's figures are differences between its first and last sample: server throughput,
average queue and compute per request, compute per execution, the average executed batch. Gauges
(`nv_inference_pending_request_count`, `nv_cpu_utilization`, `nv_cpu_memory_used_bytes`, and on GPU hosts
`nv_gpu_utilization`, `nv_gpu_memory_used_bytes`, `nv_gpu_power_usage` per GPU) are averaged, memory also as its
peak. The text format is read by prometheus_client's parser. An endpoint that does not answer is said once and
the measurement goes on without it.

An endpoint found by guessing (Triton's default port on the server's host) may be another server's: its figures
would be stored as the measured server's. So a point's scrapes count only when the measured model is served there
and its request count moved while the client measured it (`foreign`); else telemetry is off for the run, said in
one line, and no server figures are written (the client's rows are kept).
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..client.metrics import fetch_metrics
from ..results.server_metrics import SUMMARY_COLUMNS, record_point  # noqa: F401  (record_point re-exported)

DEFAULT_PERIOD_S = 0.5
COUNTERS = ("nv_inference_count", "nv_inference_exec_count", "nv_inference_request_success",
            "nv_inference_queue_duration_us", "nv_inference_compute_input_duration_us",
            "nv_inference_compute_infer_duration_us", "nv_inference_compute_output_duration_us",
            "nv_inference_request_duration_us")
MODEL_GAUGES = ("nv_inference_pending_request_count",)
HOST_GAUGES = ("nv_cpu_utilization", "nv_cpu_memory_used_bytes", "nv_cpu_memory_total_bytes")
GPU_GAUGES = ("nv_gpu_utilization", "nv_gpu_memory_used_bytes", "nv_gpu_memory_total_bytes", "nv_gpu_power_usage")

_log = logging.getLogger(__name__)


@dataclass
class Sample:
    """One scrape: when (monotonic seconds) and {metric name: {label string: value}}."""

    t: float
    values: dict[str, dict[str, float]]


def parse(text: str, model: str | None = None) -> dict[str, dict[str, float]]:
    """The metrics we use from one scrape. Model metrics keep only `model`'s series (any version); GPU gauges are
    keyed by GPU uuid; host gauges have one series."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = set(COUNTERS) | set(MODEL_GAUGES) | set(HOST_GAUGES) | set(GPU_GAUGES)
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            name = s.name.removesuffix("_total") if family.type == "counter" else s.name  # the parser adds _total
            if name not in wanted:
                continue
            if model is not None and "model" in s.labels and s.labels["model"] != model:
                continue
            key = s.labels.get("gpu_uuid") or s.labels.get("version") or ""
            series = out.setdefault(name, {})
            series[key] = series.get(key, 0.0) + float(s.value) if name in COUNTERS else float(s.value)
    return out


@dataclass
class Scraper:
    """Scrapes `url` every `period_s` on a thread between start() and stop(); `samples` is the time series."""

    url: str
    model: str | None = None
    period_s: float = DEFAULT_PERIOD_S
    samples: list[Sample] = field(default_factory=list)
    error: str = ""
    foreign: str = ""  # why the scrapes are not the measured server's (then `samples` is emptied)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def scrape_once(self) -> None:
        try:
            self.samples.append(Sample(time.monotonic(), parse(fetch_metrics(self.url), self.model)))
        except Exception as err:  # noqa: BLE001 - any failure of the endpoint: recorded, the measurement goes on
            self.error = self.error or f"{type(err).__name__}: {err}"

    def start(self) -> "Scraper":
        self.scrape_once()

        def loop() -> None:
            while not self._stop.wait(self.period_s):
                self.scrape_once()

        self._thread = threading.Thread(target=loop, name="metrics-scraper", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.scrape_once()
        return self.samples


class _Once:
    """'Said once' for an endpoint that does not answer, or that is not the measured server's."""

    def __init__(self) -> None:
        self.said: set[str] = set()

    def __call__(self, url: str, why: str, log: Callable[[str], None]) -> None:
        if url not in self.said:
            self.said.add(url)
            log(f"server metrics at {url} not available ({why}); measuring without them")

    def foreign(self, url: str, why: str, log: Callable[[str], None]) -> None:
        if f"foreign:{url}" not in self.said:
            self.said.add(f"foreign:{url}")
            log(f"telemetry off for this run: the metrics endpoint {url} is not the measured server's ({why}); "
                "the client's rows are kept, no server figures are written")


_warn_once = _Once()


def _requests(sample: Sample) -> float | None:
    """The model's request count in one scrape (inferences where requests are not exported); None: not served."""
    for name in ("nv_inference_request_success", "nv_inference_count"):
        if sample.values.get(name):
            return sum(sample.values[name].values())
    return None


def foreign(samples: list[Sample], model: str | None, client_infer_per_s: float | None = None) -> str:
    """Why a point's scrapes are not the measured server's ('' when they are, or cannot be judged): `model` is not
    served at the endpoint, its request count did not move while the client measured it, or (given the client's
    throughput) the server counted under a fifth of it, far below any scrape's timing error."""
    if model is None or len(samples) < 2:
        return ""
    counts = [c for c in map(_requests, samples) if c is not None]
    if not counts:
        return f"no model {model!r} is served there"
    if counts[-1] <= counts[0]:
        return f"{model!r} there answered no request ({counts[-1]:g} before and after) while the client measured it"
    if client_infer_per_s:
        server = summarise(samples)["server_infer_per_s"]
        if server is not None and server < 0.2 * client_infer_per_s:
            return (f"{model!r} there counted {server:.1f} inferences/s while the client measured "
                    f"{client_infer_per_s:.1f}")
    return ""


def scrape_during(url: str | None, model: str | None, period_s: float = DEFAULT_PERIOD_S,
                  log: Callable[[str], None] | None = None, once: _Once | None = None):
    """Context manager: the Scraper running for the body (None without a URL). Scrapes that are not the measured
    server's (`foreign`) are dropped, said once per endpoint (per `once`: the process by default) through `log`
    (default: this module's logger, as a warning)."""
    import contextlib

    once = once or _warn_once
    log = log or _log.warning

    @contextlib.contextmanager
    def run() -> Iterator[Scraper | None]:
        if not url:
            yield None
            return
        scraper = Scraper(url, model, period_s).start()
        try:
            yield scraper
        finally:
            scraper.stop()
            if not scraper.samples:
                once(url, scraper.error or "no sample", log)
            elif why := foreign(scraper.samples, model):
                scraper.foreign, scraper.samples = why, []
                once.foreign(url, why, log)

    return run()


class RunTelemetry:
    """One run's scrapes of one endpoint: each point's are kept only when they are the measured server's; the
    first point whose are not turns telemetry off for the rest of the run, said in one line."""

    def __init__(self, url: str | None, model: str | None, period_s: float = DEFAULT_PERIOD_S,
                 log: Callable[[str], None] | None = None):
        self.url, self.model, self.period_s, self.log = url, model, period_s, log or _log.warning
        self.off = ""  # why telemetry is off for this run
        self._once = _Once()

    def scrape(self):
        """Context manager: the point's Scraper (None while telemetry is off or without an endpoint)."""
        return scrape_during(None if self.off else self.url, self.model, self.period_s, self.log, self._once)

    def owned(self, scraper: Scraper | None, client_infer_per_s: float | None) -> list[Sample]:
        """The point's samples when they are the measured server's (checked against the client's throughput
        too), else [] (and telemetry off from here on)."""
        if scraper is None:
            return []
        why = scraper.foreign or foreign(scraper.samples, self.model, client_infer_per_s)
        if why:
            self.off = why
            self._once.foreign(self.url or "", why, self.log)
            return []
        return scraper.samples if len(scraper.samples) >= 2 else []


def _delta(first: Sample, last: Sample, name: str) -> float | None:
    a, b = first.values.get(name), last.values.get(name)
    if a is None or b is None:
        return None
    return sum(b.values()) - sum(a.values())


def _gauge(samples: list[Sample], name: str, how: str = "mean") -> float | None:
    values = [sum(s.values[name].values()) for s in samples if name in s.values and s.values[name]]
    if not values:
        return None
    return max(values) if how == "max" else sum(values) / len(values)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def active(samples: list[Sample]) -> list[Sample]:
    """The samples while the model was working: from the last one before its inference count first moves to the
    first one after it last moves (perf_analyzer's start-up and the idle tail are not the point's load)."""
    counts = [sum(s.values.get("nv_inference_count", {}).values()) for s in samples]
    moved = [i for i in range(1, len(counts)) if counts[i] > counts[i - 1]]
    return samples[moved[0] - 1:moved[-1] + 1] if moved else samples


def summarise(samples: list[Sample], client_infer_per_s: float | None = None) -> dict[str, Any]:
    """The point's server-side figures (SUMMARY_COLUMNS; None where the metric is absent or nothing ran), over the
    active samples; `samples` counts every scrape."""
    out: dict[str, Any] = {c: None for c in SUMMARY_COLUMNS}
    out["samples"] = len(samples)
    samples = active(samples)
    if len(samples) < 2:
        return out
    first, last = samples[0], samples[-1]
    seconds = last.t - first.t
    count, execs = _delta(first, last, "nv_inference_count"), _delta(first, last, "nv_inference_exec_count")
    requests = _delta(first, last, "nv_inference_request_success")
    out["seconds"] = round(seconds, 3)
    out["server_infer_per_s"] = _ratio(count, seconds)
    if out["server_infer_per_s"] and client_infer_per_s:
        out["client_vs_server_pct"] = 100.0 * (client_infer_per_s / out["server_infer_per_s"] - 1.0)
    out["avg_batch"] = _ratio(count, execs)
    out["queue_us_per_request"] = _ratio(_delta(first, last, "nv_inference_queue_duration_us"), requests)
    compute = _delta(first, last, "nv_inference_compute_infer_duration_us")
    out["compute_infer_us_per_request"] = _ratio(compute, requests)
    out["compute_infer_us_per_exec"] = _ratio(compute, execs)
    out["pending_requests"] = _gauge(samples, "nv_inference_pending_request_count")
    cpu = _gauge(samples, "nv_cpu_utilization")
    out["cpu_util_pct"] = 100.0 * cpu if cpu is not None else None
    mem = _gauge(samples, "nv_cpu_memory_used_bytes", "max")
    out["cpu_memory_gib"] = mem / 2**30 if mem is not None else None
    gpu = _gauge(samples, "nv_gpu_utilization")
    out["gpu_util_pct"] = 100.0 * gpu if gpu is not None else None
    gmem = _gauge(samples, "nv_gpu_memory_used_bytes", "max")
    out["gpu_memory_gib"] = gmem / 2**30 if gmem is not None else None
    out["gpu_power_w"] = _gauge(samples, "nv_gpu_power_usage")
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in out.items()}


TRITON_METRICS_PORT = 8002  # tritonserver's default --metrics-port


def metrics_url_for(server_url: str, server: Any = None, explicit: str | None = None) -> str | None:
    """Where the server's metrics are: the flag's URL ('none' turns scraping off), the embedded server's own, or
    Triton's default port on the server's host."""
    if explicit:
        return None if explicit == "none" else explicit
    if server is not None and getattr(server, "metrics_port", 0):
        return server.metrics_url
    host = server_url.split("://")[-1].rsplit(":", 1)[0]
    return f"http://{host}:{TRITON_METRICS_PORT}/metrics"
