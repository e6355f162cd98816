"""The multistream driver's statistics on hand-made timestamps: requests counted in the window their answer came
in, lateness from the intended send, perf_analyzer's stability rule with the first window as warm-up, the row
RatePoint judges, and the request data built from an --input-data file."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from deployment_toolkit.errors import UserInputError
from deployment_toolkit.perf.analyzer import write_input_data_json
from deployment_toolkit.perf.multistream import (DriveSpec, Stream, StreamResult, Trace, reported, request_arrays,
                                                 settled, summarise, window_figures)
from deployment_toolkit.perf.openloop.together import row_of
from deployment_toolkit.perf.openloop.ratepoint import RatePoint
from deployment_toolkit.perf.openloop.ratestore import RateKey
from deployment_toolkit.spec import ModelSignature, TensorSpec

MS = 1_000_000
X = TensorSpec("x", (4,))
STREAM = Stream("m", batch=2, rate=10.0, seed=0, inputs=(X,))


def trace(intended_ms, send_ms, end_ms, ok=None) -> Trace:
    ns = lambda v: np.asarray([-1 if t is None else round(t * MS) for t in v], dtype=np.int64)  # noqa: E731
    return Trace(ns(intended_ms), ns(send_ms), ns(end_ms),
                 np.asarray(ok if ok is not None else [e is not None for e in end_ms], bool))


def test_a_request_counts_in_the_window_its_answer_came_in():
    # window 100 ms: the request sent at 95 ms is answered at 130 ms, so it is window 1's, not window 0's
    t = trace([10, 50, 95, 150, 250], [10, 50, 95, 150, 250], [20, 60, 130, 170, None])
    fig = window_figures(t, 100 * MS, 3, STREAM.inferences_per_request)
    assert fig.throughput == [2 * 2 / 0.1, 2 * 2 / 0.1, 0.0]  # two requests of batch 2 in 0.1 s
    assert fig.avg_ms[0] == pytest.approx(10.0) and fig.avg_ms[1] == pytest.approx((35 + 20) / 2)
    assert fig.avg_ms[2] is None and fig.p99_ms[2] is None  # in flight: counted nowhere
    failed = trace([10, 50], [10, 50], [20, 60], ok=[True, False])  # an error is not an answer
    assert window_figures(failed, 100 * MS, 1, 1.0).throughput == [10.0]


def test_lateness_is_measured_from_the_intended_send():
    # 4 windows of 100 ms, reported 1..3; sends 0, 0.5, 2 and 5 ms late: two are late (over 1 ms)
    intended = [110, 150, 210, 250]
    late = [0, 0.5, 2, 5]
    send = [i + d for i, d in zip(intended, late)]
    end = [s + 10 for s in send]
    r = summarise(STREAM, trace(intended, send, end), 100, 4, 30.0)
    assert r.counted == 4 and r.late_pct == pytest.approx(50.0) and r.late_max_ms == pytest.approx(5.0)
    assert r.delayed_pct == pytest.approx(50.0)
    assert r.p50_ms == pytest.approx(10.0) and r.p99_ms == pytest.approx(10.0)
    assert r.sched_p99_ms == pytest.approx(10.0 + np.percentile(late, 99))  # the wait before sending counts
    assert r.sched_p50_ms >= r.p50_ms
    assert r.send_rate == pytest.approx(4 * 2 / 0.3) and r.answered == pytest.approx(4 * 2 / 0.3)


def test_stability_needs_three_windows_after_the_warm_up():
    assert list(reported(6)) == [3, 4, 5] and list(reported(4)) == [1, 2, 3] and list(reported(2)) == [1]
    assert list(reported(1)) == [0]
    p99 = [50.0, 10.0, 11.0, 10.5]
    assert settled([5.0, 100, 101, 99], p99, 10.0)  # the wild first window is warm-up
    assert not settled([100, 101, 99], p99[1:], 10.0)  # three windows, one of them the warm-up: not yet
    assert not settled([5.0, 100, 130, 99], p99, 10.0)  # throughput apart by more than 10%
    assert not settled([5.0, 100, 101, 99], [50.0, 10.0, 20.0, 10.5], 10.0)  # average latencies apart
    assert not settled([5.0, 100, 0.0, 99], [50.0, 10.0, None, 10.5], 10.0)  # an empty window
    # five requests a window: 4, 7 and 5 is a Poisson count's own spread, so they agree; 100 a window must hold 10 %
    assert settled([2.0, 4.0, 7.0, 5.0], [9.0, 10.0, 14.0, 11.0], 10.0, counts=[2, 4, 7, 5])
    assert not settled([5.0, 100, 130, 99], p99, 10.0, counts=[5, 100, 130, 99])


def _steady(windows: int, rate_per_window: int = 10, latency_ms: float = 5.0, jitter_window: int | None = None):
    """`rate_per_window` requests per 100-ms window, each answered `latency_ms` later (3x in `jitter_window`)."""
    intended, end = [], []
    for k in range(windows):
        for i in range(rate_per_window):
            t = k * 100 + i * 100 / rate_per_window
            intended.append(t)
            end.append(t + latency_ms * (3 if k == jitter_window else 1))
    return trace(intended, intended, end)


def test_summary_reports_the_last_three_windows_and_whether_they_settled():
    r = summarise(STREAM, _steady(6), 100, 6, 30.0)
    assert r.windows == 6 and r.reported_windows == 3 and r.stable and r.counted == 30
    assert r.window_throughput == [200.0] * 6 and r.answered == pytest.approx(200.0)
    unsettled = summarise(STREAM, _steady(6, jitter_window=4), 100, 6, 30.0)
    assert not unsettled.stable
    back = StreamResult.from_dict(json.loads(json.dumps(r.to_dict(), allow_nan=False)))
    assert back == r  # the child's OUT.json carries it whole


def test_the_row_is_judged_as_a_perf_analyzer_point():
    key = RateKey("mix/m", "constant", 100.0, 2, "{}")
    good = summarise(STREAM, _steady(6), 100, 6, 30.0)
    point = RatePoint(key, row_of(good, 200.0))
    assert point.passes(50.0) and point.p99 == pytest.approx(good.sched_p99_ms) and not point.client_limited
    assert set(point.row) == {"offered", "answered", "send_rate", "delayed_pct", "p50_ms", "p99_ms", "avg_ms",
                              "server_queue_ms", "window_throughput", "window_latency_ms", "queue_growing",
                              "client_limited", "stable", "sched_p50_ms", "sched_p90_ms", "sched_p99_ms",
                              "late_pct", "late_p99_ms", "late_max_ms"}
    # windows that never settled keep no p99 (perf_analyzer writes no CSV row then): the point fails
    shaky = RatePoint(key, row_of(summarise(STREAM, _steady(6, jitter_window=4), 100, 6, 30.0), 200.0))
    assert shaky.row["p99_ms"] is None and math.isnan(shaky.p99) and "windows never settled" in shaky.verdict(50.0)
    # a failed request: no latency figures either
    errored = summarise(STREAM, _steady(6), 100, 6, 30.0, errors=1, first_error="boom")
    assert not RatePoint(key, row_of(errored, 200.0)).passes(50.0)
    # a Poisson schedule meant 5 % fewer sends than its nominal rate within the windows and every one went out,
    # late: the client kept its schedule, so it is not the limit (against the nominal rate it would read as one)
    sparse = summarise(STREAM, _steady(6), 100, 6, 30.0)
    sparse.intended_rate = sparse.send_rate = 0.95 * 200.0
    sparse.delayed_pct = 80.0
    assert not RatePoint(key, row_of(sparse, 200.0)).client_limited
    sparse.send_rate = 0.90 * 200.0  # ... but 5 % short of its own schedule, most of it late: the client's limit
    assert RatePoint(key, row_of(sparse, 200.0)).client_limited
    # latency rising window after window: the queue grows (ratepoint's rule, first window left out)
    growing = summarise(STREAM, _steady(6), 100, 6, 30.0)
    growing.window_latency_ms = [9.0, 5.0, 10.0, 20.0, 40.0, 80.0]
    assert RatePoint(key, row_of(growing, 200.0)).queue_growing


def test_requests_come_from_the_input_data_file_as_perf_analyzer_reads_it(tmp_path):
    ids = TensorSpec("ids", (3,), "int64", value_range=(0, 50))
    t = TensorSpec("t", (), "float32")
    sig = ModelSignature((ids, t), (TensorSpec("y", (2,)),))
    path = write_input_data_json(sig, tmp_path / "data.json")
    stream = Stream("m", batch=4, rate=1.0, seed=0, input_data=str(path), inputs=sig.inputs)
    (req,) = request_arrays(stream)
    rng = np.random.default_rng(0)  # the same draws as the file and as random data
    expected = ids.example(0, rng)
    assert req["ids"].shape == (4, 3) and req["ids"].dtype == np.int64 and (req["ids"] == expected).all()
    assert req["t"].shape == (4, 1)  # a scalar per sample travels as [1]
    (generated,) = request_arrays(Stream("m", batch=4, rate=1.0, seed=0, inputs=sig.inputs))
    assert all((generated[n] == req[n]).all() for n in ("ids", "t"))
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"data": [{"ids": [1, 2, 3], "t": [0.5]}, {"ids": [4, 5, 6], "t": [1.5]}]}))
    cycled = request_arrays(Stream("m", batch=1, rate=1.0, seed=0, input_data=str(plain), inputs=sig.inputs))
    assert [r["ids"].tolist() for r in cycled] == [[[1, 2, 3]], [[4, 5, 6]]]
    plain.write_text(json.dumps({"data": [{"ids": [1, 2, 3]}]}))
    with pytest.raises(UserInputError, match="no input 't'"):
        request_arrays(Stream("m", batch=1, rate=1.0, seed=0, input_data=str(plain), inputs=sig.inputs))


def test_a_spec_round_trips_and_refuses_a_model_twice():
    spec = DriveSpec("grpc://127.0.0.1:8001", (STREAM,), 500, 6, 30.0)
    assert DriveSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec and spec.grpc_target == "127.0.0.1:8001"
    with pytest.raises(UserInputError, match="one stream per model"):
        DriveSpec("h:1", (STREAM, STREAM), 500, 6, 30.0)


def test_a_bytes_input_given_as_serialized_base64_is_sent_as_its_elements(tmp_path):
    """A pipeline's raw image bytes as the toolkit writes them for perf_analyzer ({"content": {"b64": ...}}, the
    serialized BYTES tensor: a 4-byte length, then the bytes): each request carries the image, not the dict."""
    import base64

    image = b"\xff\xd8\xff\xe0" + bytes(range(40))
    blob = base64.b64encode(len(image).to_bytes(4, "little") + image).decode()
    path = tmp_path / "images.json"
    path.write_text(json.dumps({"data": [{"image": {"content": {"b64": blob}, "shape": [1]}}]}))
    (req,) = request_arrays(Stream("p", batch=1, rate=1.0, seed=0, input_data=str(path),
                                   inputs=(TensorSpec("image", (1,), "object"),)))
    assert req["image"].dtype == object and req["image"].shape == (1, 1) and req["image"][0, 0] == image
    path.write_text(json.dumps({"data": [{"image": {"b64": base64.b64encode(b"\x09\x00\x00\x00ab").decode()}}]}))
    with pytest.raises(UserInputError, match="not a serialized BYTES tensor"):
        request_arrays(Stream("p", batch=1, rate=1.0, seed=0, input_data=str(path),
                              inputs=(TensorSpec("image", (1,), "object"),)))
