"""Traffic files built in the test, with known true rates: a Prometheus range-query answer, request logs drawn
from step rates; `write`, the fixture that writes them (imported by each module: a conftest.py here would shadow
tests/conftest.py for the modules that import from it)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

START = 1_777_852_800  # 2026-05-04T00:00:00Z


def alpha_rate(t: np.ndarray) -> np.ndarray:
    """A day-shaped rate peaking at 400/s one hour in."""
    return 100 + 300 * np.exp(-(((t - START) - 3600) / 900.0) ** 2)


def beta_rate(t: np.ndarray) -> np.ndarray:
    """Flat 120/s with a 30-minute plateau of 250/s."""
    return np.where((t - START >= 4200) & (t - START < 6000), 250.0, 120.0)


def gamma_rate(t: np.ndarray) -> np.ndarray:
    """A ramp from 50 to 330/s over two hours."""
    return 50 + 280 * (t - START) / 7200.0


def prometheus_answer(step: int = 30, scrape: int = 15, reset_at: int = 5400) -> dict:
    """Two models' rates already taken (alpha as two versions, 70/30) and gamma's raw counter with a restart."""
    t = np.arange(START, START + 7200 + 1, step, dtype=float)
    def series(labels: dict, rates: np.ndarray) -> dict:
        return {"metric": labels, "values": [[x, repr(r)] for x, r in zip(t, rates)]}

    result = [series({"model": "alpha", "version": "1"}, 0.7 * alpha_rate(t)),
              series({"model": "alpha", "version": "2"}, 0.3 * alpha_rate(t)),
              series({"model": "beta", "version": "1"}, beta_rate(t))]
    ts = np.arange(START, START + 7200 + 1, scrape, dtype=float)
    increase = gamma_rate(ts[:-1]) * scrape  # the rate holding over each scrape interval
    counter = [1_000_000.0]
    for x, inc in zip(ts[1:], increase):
        counter.append(inc if x - START == reset_at else counter[-1] + inc)  # a restart: counts from zero
    result.append({"metric": {"__name__": "nv_inference_request_success", "model": "gamma", "version": "1",
                              "instance": "triton-0:8002"},
                   "values": [[int(x), str(v)] for x, v in zip(ts, counter)]})
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def true_peak(rate, step: float = 1.0) -> float:
    t = np.arange(START, START + 7200, step, dtype=float)
    return float(rate(t).max())


def draw_log(rng: np.random.Generator, rates: dict, seconds: int = 1800, width: int = 60) -> list[tuple[float, str]]:
    """Poisson arrivals at each model's rate, piecewise constant per `width` seconds: (time, model) in time order."""
    rows = []
    for name, rate in rates.items():
        for k in range(0, seconds, width):
            n = rng.poisson(rate(np.asarray([START + k], dtype=float))[0] * width)
            rows += [(START + k + u, name) for u in rng.random(n) * width]
    return sorted(rows)


@pytest.fixture
def write(tmp_path):
    """A file written into the test's folder: text, or a dict as JSON."""
    def _write(name: str, content) -> Path:
        path = tmp_path / name
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        return path
    return _write
