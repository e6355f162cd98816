"""Issue 57, item 1: a Prometheus range-query answer is read as it is saved: rates already taken, and Triton's raw
counters turned into rates with Prometheus' semantics (a drop is a reset; the sample after it counts from zero);
series matched to models by the `model` label (versions summed) or by a selector."""
from __future__ import annotations

import numpy as np
import pytest

from deployment_toolkit.errors import UserInputError
from deployment_toolkit.traffic.prometheus import SeriesKind, counter_rates
from deployment_toolkit.traffic.read import Format, ReadOptions, load, models, select
from deployment_toolkit.traffic.stats import model_stats
from traffic_fixtures import write  # noqa: F401  (a fixture)
from traffic_fixtures import START, alpha_rate, beta_rate, gamma_rate, prometheus_answer, true_peak


def test_each_model_s_peak_is_within_1_percent_of_the_true_peak(write):
    path = write("prom.json", prometheus_answer())
    file = load(path)
    assert file.format is Format.PROMETHEUS
    found = models(file)
    assert list(found) == ["alpha", "beta", "gamma"]
    for name, rate in (("alpha", alpha_rate), ("beta", beta_rate), ("gamma", gamma_rate)):
        assert found[name].series.peak == pytest.approx(true_peak(rate), rel=0.01), name
    assert "2 series" in found["alpha"].what and "counter" in found["gamma"].what


def test_a_counter_with_a_reset_gives_the_true_rate_everywhere(write):
    """The sample after the restart counts from zero: no negative rate at the drop, no spike after it."""
    gamma = models(load(write("prom.json", prometheus_answer(reset_at=5400))))["gamma"].series
    t = np.asarray(gamma.times)
    assert t[0] == START and len(t) == 7200 // 15  # one rate per scrape interval
    assert np.allclose(gamma.rates, gamma_rate(t), rtol=1e-9)


def test_counter_rates_follow_prometheus_increase():
    times = np.array([0.0, 10, 20, 30, 40])
    values = np.array([100.0, 150, 30, 80, 80])  # a reset between 10 and 20: 30 counted since
    assert counter_rates(times, values).tolist() == [5.0, 3.0, 5.0, 0.0]


def test_a_version_is_chosen_by_the_selector_and_versions_are_summed_without_one(write):
    file = load(write("prom.json", prometheus_answer()))
    both = select(file, "alpha")
    v2 = select(file, "alpha_canary", {"model": "alpha", "version": "2"})
    assert v2.series.peak == pytest.approx(0.3 * both.series.peak)
    assert model_stats(both).mean == pytest.approx(float(np.mean(alpha_rate(np.arange(START, START + 7200, 1.0)))),
                                                   rel=0.01)
    with pytest.raises(UserInputError, match=r"prom.json: no series with model='delta' .*alpha, beta, gamma"):
        select(file, "delta")


def test_the_kind_can_be_stated_where_the_name_does_not_say(write):
    doc = prometheus_answer()
    del doc["data"]["result"][3]["metric"]["__name__"]  # a recording rule's counter, say: read as a rate...
    assert models(load(write("prom.json", doc)))["gamma"].series.peak > 1e6  # the count itself, not a rate
    gamma = models(load(write("prom2.json", doc), ReadOptions(traffic_kind=SeriesKind.COUNTER)),
                   ReadOptions(traffic_kind=SeriesKind.COUNTER))["gamma"]  # ...unless stated
    assert gamma.series.peak == pytest.approx(true_peak(gamma_rate), rel=0.01)


@pytest.mark.parametrize("change, says", [
    (lambda d: d["data"]["result"][2]["values"][5].__setitem__(1, "abc"),
     "series 2 {model=\"beta\", version=\"1\"} at 2026-05-04T00:02:30+00:00: value 'abc' is not a number"),
    (lambda d: d["data"]["result"][3]["values"][3].__setitem__(1, "many"), "value 'many' is not a number"),
    (lambda d: d["data"]["result"][1]["values"][4].__setitem__(0, START), "is not after the sample before"),
    (lambda d: d["data"].__setitem__("resultType", "vector"), "resultType 'vector' is not 'matrix'"),
    (lambda d: d.__setitem__("status", "error"), "Prometheus answered status 'error'"),
    (lambda d: d["data"]["result"][0].__setitem__("values", []),
     "series 0 {model=\"alpha\", version=\"1\"}: no samples"),
])
def test_a_malformed_answer_is_one_line_naming_the_file_and_series(write, change, says):
    doc = prometheus_answer()
    change(doc)
    path = write("prom.json", doc)
    with pytest.raises(UserInputError) as err:
        models(load(path))
    message = str(err.value)
    assert message.startswith(f"{path}: ") and says in message and "\n" not in message, message


def test_a_series_with_no_model_label_is_refused_when_models_are_told_apart_by_it(write):
    doc = prometheus_answer()
    doc["data"]["result"][2]["metric"] = {"job": "triton"}
    path = write("prom.json", doc)
    with pytest.raises(UserInputError, match=r"prom.json: series 2 \{job=\"triton\"\} has no 'model' label"):
        models(load(path))
    assert select(load(path), "beta", {"job": "triton"}).series.peak == 250  # a selector names it instead
