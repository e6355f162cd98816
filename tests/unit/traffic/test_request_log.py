"""Issue 57, item 1: a request log (CSV or JSON Lines, one row per request) gives each model's rate counted per
slice, the same figures as the rates it was drawn from within 2 %; its malformed rows are one line naming the file
and line; its per-request times show bursts (dispersion of per-second counts, busiest 1 s over 10 s)."""
from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pytest

from deployment_toolkit.errors import UserInputError
from deployment_toolkit.traffic.read import Format, ReadOptions, load, models, select
from deployment_toolkit.traffic.requestlog import ORDER_TOLERANCE_S
from deployment_toolkit.traffic.stats import burst_ratio, dispersion, model_stats
from traffic_fixtures import write  # noqa: F401  (a fixture)
from traffic_fixtures import START, draw_log

SECONDS = 1200


def a_rate(t: np.ndarray) -> np.ndarray:
    return 100 + 300 * np.exp(-(((t - START) - 600) / 200.0) ** 2)


def b_rate(t: np.ndarray) -> np.ndarray:
    return np.where((t - START >= 300) & (t - START < 480), 200.0, 80.0)


def iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat().replace("+00:00", "Z")


def rate_csv(rate) -> str:
    """The rates the log is drawn from, as the CSV of time,rate the planner read before logs."""
    return "time,rate\n" + "".join(f"{iso(START + k)},{rate(np.asarray([START + k], float))[0]!r}\n"
                                   for k in range(0, SECONDS, 60))


@pytest.fixture(scope="module")
def rows():
    return draw_log(np.random.default_rng(57), {"a": a_rate, "b": b_rate}, seconds=SECONDS)


@pytest.mark.parametrize("form", ["csv", "jsonl"])
def test_a_log_gives_the_figures_of_the_rates_it_was_drawn_from_within_2_percent(write, rows, form):
    if form == "csv":
        path = write("requests.csv", "timestamp,model,status\n" + "".join(f"{iso(t)},{m},200\n" for t, m in rows))
    else:
        path = write("requests.jsonl", "".join(json.dumps({"time": t, "model": m}) + "\n" for t, m in rows))
    file = load(path)
    assert file.format is (Format.LOG_CSV if form == "csv" else Format.LOG_JSONL)
    logged = {name: model_stats(m) for name, m in models(file).items()}
    for name, rate in (("a", a_rate), ("b", b_rate)):
        truth = model_stats(select(load(write(f"{name}.csv", rate_csv(rate))), name))
        assert logged[name].peak == pytest.approx(truth.peak, rel=0.02), name
        assert logged[name].mean == pytest.approx(truth.mean, rel=0.02), name
        assert logged[name].busiest[:15] == truth.busiest[:15]  # the same quarter of an hour
        assert logged[name].dispersion == pytest.approx(1.0, abs=0.15)  # Poisson within each minute


def test_columns_are_named_in_the_options(write, rows):
    path = write("gateway.csv", "ts,service\n" + "".join(f"{t:.6f},{m}\n" for t, m in rows[::20]))
    options = ReadOptions(model_label="service", time_column="ts", slice_s=120)
    found = models(load(path, options), options)
    assert sorted(found) == ["a", "b"] and found["b"].series.times[1] - found["b"].series.times[0] == 120
    with pytest.raises(UserInputError, match="gateway.csv: no column 'model' for the model .*ts, service"):
        models(load(path))


def test_bursts_show_in_the_dispersion_and_the_1_s_over_10_s_ratio():
    rng = np.random.default_rng(1)
    poisson = np.sort(rng.random(60_000) * 600)  # 100/s for 10 minutes
    bursts = np.sort(np.concatenate([rng.random(6_000) * 600,  # 10/s, and a burst of 300 in one second every 10 s
                                     np.repeat(np.arange(0, 600, 10.0), 300) + rng.random(60 * 300)]))
    assert dispersion(poisson) == pytest.approx(1.0, abs=0.1) and burst_ratio(poisson) < 1.6
    assert dispersion(bursts) > 50 and burst_ratio(bursts) > 5


@pytest.mark.parametrize("name, text, line, says", [
    ("log.csv", "time,model\n2026-05-04T00:00:00Z,a\n,a\n", 3, "no time (column 'time' is empty)"),
    ("log.jsonl", '{"time": 1777852800, "model": "a"}\n{"model": "a"}\n', 2, "no time (column 'time' is empty)"),
    ("log.csv", "time,model\n2026-05-04T00:00:00Z,a\nyesterday,a\n", 3, "time 'yesterday' is not an ISO-8601"),
    ("log.csv", "time,model\n1777852810,a\n1777852800,b\n", 3, "is 10 s before line 2's: rows must be in time order"),
    ("log.csv", "time,model\n1777852810,a\n1777852800\n", 3, "1 columns, the header has 2"),
    ("log.csv", "time,model\n1777852810,a\n1777852811,\n", 3, "no 'model': every request names its model"),
    ("log.jsonl", '{"time": 1777852800, "model": "a"}\n{"time": 1777852801, "model": \n', 2, "not JSON"),
])
def test_a_malformed_log_is_one_line_naming_the_file_and_line(write, name, text, line, says):
    path = write(name, text)
    with pytest.raises(UserInputError) as err:
        models(load(path))
    message = str(err.value)
    assert message.startswith(f"{path} line {line}: ") and says in message and "\n" not in message, message


def test_rows_slightly_out_of_order_are_within_the_stated_tolerance(write):
    late = START + 5 - ORDER_TOLERANCE_S / 2
    found = models(load(write("log.csv", f"time,model\n{START + 5},a\n{late},a\n{START + 6},a\n")))
    assert found["a"].arrivals.tolist() == [late, START + 5, START + 6]  # sorted once read
