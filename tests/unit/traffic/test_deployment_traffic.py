"""Issue 57, item 1: a deployment's `traffic:` is a Prometheus export or a request log holding every model's traffic,
read with no conversion step; each entry picks its series by name or by `series:`, and the planner gets the right
peak (the deployment file's reader, as `plan --deployment` calls it)."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from deployment_toolkit.deployment.file import load
from deployment_toolkit.deployment.traffic import align, entry_series, entry_traffic, peak_of_sum
from deployment_toolkit.errors import UserError
from traffic_fixtures import write  # noqa: F401  (a fixture)
from traffic_fixtures import START, alpha_rate, beta_rate, draw_log, gamma_rate, prometheus_answer, true_peak

DEPLOYMENT = """
name: shop
models:
  - {name: alpha, model: "timm:resnet18", p99_ms: 50, traffic: prom.json}
  - {name: beta, model: "timm:resnet18", p99_ms: 50, traffic: prom.json}
  - {name: canary, model: "timm:resnet18", p99_ms: 50, traffic: prom.json, series: {model: alpha, version: 2}}
  - {name: gamma, model: "timm:resnet18", p99_ms: 50, traffic: prom.json}
  - {name: logged, model: "timm:resnet18", p99_ms: 50, traffic: requests.csv, series: fraud, slice_s: 60}
  - {name: scaled, model: "timm:resnet18", p99_ms: 50, peak_rps: 900, traffic: requests.csv, series: {model: fraud}}
"""


def fraud_rate(t: np.ndarray) -> np.ndarray:
    return np.where((t - START >= 120) & (t - START < 240), 500.0, 150.0)


@pytest.fixture
def deployment(write):
    write("prom.json", prometheus_answer())
    rows = draw_log(np.random.default_rng(3), {"fraud": fraud_rate}, seconds=600)
    write("requests.csv", "time,model\n" + "".join(
        f"{dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat()},{m}\n" for t, m in rows))
    return write("deployment.yaml", DEPLOYMENT)


def test_the_planner_gets_each_model_s_peak_from_an_export_and_a_log(deployment):
    d = load(deployment)
    peaks = {m.name: m.peak_rps for m in d.models}
    assert peaks["alpha"] == pytest.approx(true_peak(alpha_rate), rel=0.01)
    assert peaks["beta"] == pytest.approx(true_peak(beta_rate), rel=0.01)
    assert peaks["gamma"] == pytest.approx(true_peak(gamma_rate), rel=0.01)  # the raw counter, its reset read
    assert peaks["canary"] == pytest.approx(0.3 * true_peak(alpha_rate), rel=0.01)  # one version, by `series:`
    assert peaks["logged"] == pytest.approx(500, rel=0.02)  # the request log, per minute
    assert not d.model("alpha").peak_given and d.model("scaled").peak_given
    assert d.model("logged").series == {"model": "fraud"} and d.model("canary").series == {"model": "alpha",
                                                                                             "version": "2"}


def test_the_planner_s_series_are_the_file_s_scaled_to_a_given_peak(deployment):
    d = load(deployment)
    scaled = entry_traffic(d.model("scaled"))
    assert scaled.series.peak == pytest.approx(900) and scaled.scale == pytest.approx(900 / 500, rel=0.02)
    assert len(scaled.arrivals) > 100_000  # the requests as recorded, for their bursts
    traffic = align({m.name: entry_series(m) for m in d.models if m.name in ("alpha", "beta", "gamma")})
    t = np.arange(START, START + 7200, 15.0)
    assert peak_of_sum(traffic, traffic.names) == pytest.approx(
        float((alpha_rate(t) + beta_rate(t) + gamma_rate(t)).max()), rel=0.01)


@pytest.mark.parametrize("entry, says", [
    ("{name: delta, model: \"timm:resnet18\", p99_ms: 50, traffic: prom.json}",
     "models[0] (delta): traffic: {folder}/prom.json: no series with model='delta' (its 'model' labels: alpha, "
     "beta, gamma)"),
    ("{name: delta, model: \"timm:resnet18\", p99_ms: 50, peak_rps: 5, series: {model: alpha}}",
     "models[0] (delta): series says how its traffic file is read, but no 'traffic:' is given"),
    ("{name: delta, model: \"timm:resnet18\", p99_ms: 50, traffic: prom.json, traffic_kind: gauge}",
     "models[0] (delta): traffic_kind must be one of auto, counter, rate, got 'gauge'"),
    ("{name: delta, model: \"timm:resnet18\", p99_ms: 50, traffic: requests.csv, series: fraud, slice_s: 0}",
     "models[0] (delta): slice_s"),
    ("{name: delta, model: \"timm:resnet18\", p99_ms: 50, traffic: requests.csv, series: {model: fraud, zone: eu}}",
     "models[0] (delta): traffic: {folder}/requests.csv: no column 'zone'"),
])
def test_a_wrong_reading_key_is_one_line_naming_the_entry(deployment, write, entry, says):
    path = write("bad.yaml", f"name: shop\nmodels:\n  - {entry}\n")
    with pytest.raises(UserError) as err:
        load(path)
    assert str(err.value).startswith(f"{path}: ") and says.format(folder=path.parent) in str(err.value), str(err.value)
    assert "\n" not in str(err.value)
