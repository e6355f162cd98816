"""Triton's metrics text read with prometheus_client's parser, and a point summarised from its active samples."""
from deployment_toolkit.perf.telemetry import Sample, active, foreign, metrics_url_for, parse, summarise

TEXT = """# HELP nv_inference_count Number of inferences performed
# TYPE nv_inference_count counter
nv_inference_count{{model="m",version="1"}} {count}
nv_inference_count{{model="other",version="1"}} 999
# TYPE nv_inference_exec_count counter
nv_inference_exec_count{{model="m",version="1"}} {execs}
# TYPE nv_inference_request_success counter
nv_inference_request_success{{model="m",version="1"}} {count}
# TYPE nv_inference_queue_duration_us counter
nv_inference_queue_duration_us{{model="m",version="1"}} {queue}
# TYPE nv_inference_compute_infer_duration_us counter
nv_inference_compute_infer_duration_us{{model="m",version="1"}} {compute}
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{{model="m",version="1"}} 2
# TYPE nv_cpu_utilization gauge
nv_cpu_utilization 0.25
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{{gpu_uuid="GPU-1"}} 0.5
# TYPE nv_gpu_memory_used_bytes gauge
nv_gpu_memory_used_bytes{{gpu_uuid="GPU-1"}} 2147483648
"""


def scrape(t, count, execs, queue, compute):
    return Sample(t, parse(TEXT.format(count=count, execs=execs, queue=queue, compute=compute), "m"))


def test_counters_of_the_model_only_and_gauges_per_gpu():
    values = parse(TEXT.format(count=10, execs=5, queue=1, compute=2), "m")
    assert values["nv_inference_count"] == {"1": 10.0}  # the other model's series is left out
    assert values["nv_gpu_utilization"] == {"GPU-1": 0.5} and values["nv_cpu_utilization"] == {"": 0.25}


def test_a_point_is_summarised_over_its_active_samples_only():
    idle_head = [scrape(0, 0, 0, 0, 0), scrape(1, 0, 0, 0, 0)]
    busy = [scrape(2, 100, 25, 5_000, 400_000), scrape(3, 200, 50, 10_000, 800_000)]
    idle_tail = [scrape(4, 200, 50, 10_000, 800_000), scrape(5, 200, 50, 10_000, 800_000)]
    samples = idle_head + busy + idle_tail
    assert [s.t for s in active(samples)] == [1, 2, 3]
    out = summarise(samples, client_infer_per_s=95.0)
    assert out["samples"] == 6 and out["server_infer_per_s"] == 100.0  # 200 inferences over the 2 active seconds
    assert out["avg_batch"] == 4.0 and out["queue_us_per_request"] == 50.0
    assert out["compute_infer_us_per_request"] == 4000.0 and out["compute_infer_us_per_exec"] == 16000.0
    assert out["client_vs_server_pct"] == -5.0 and out["pending_requests"] == 2.0
    assert out["cpu_util_pct"] == 25.0 and out["gpu_util_pct"] == 50.0 and out["gpu_memory_gib"] == 2.0


def test_where_the_metrics_are():
    assert metrics_url_for("10.0.0.5:8001") == "http://10.0.0.5:8002/metrics"
    assert metrics_url_for("grpc://h:9001", explicit="none") is None
    assert metrics_url_for("h:8001", explicit="http://x:1/metrics") == "http://x:1/metrics"


def test_the_report_gets_a_server_table_and_timeline_from_the_stored_telemetry(tmp_path):
    from deployment_toolkit.perf.telemetry import record_point
    from deployment_toolkit.report.server import summary_table, timeline_plot

    busy = [scrape(0, 0, 0, 0, 0), scrape(0.5, 50, 20, 2_000, 200_000), scrape(1.0, 100, 40, 4_000, 400_000)]
    for c in (1, 2):
        key = {"Client Batch Size": 1, "Concurrent client requests": c, "client_infer_per_s": 100.0}
        record_point(tmp_path, "online", key, summarise(busy, 100.0), busy)
    table = summary_table(tmp_path, "online")
    assert "server inf/s" in table and "GPU %" in table and table.count("\n") == 3  # header, rule, 2 points
    path = timeline_plot(tmp_path, "online")
    assert path.name == "online_server_timeline.png" and path.stat().st_size > 10_000
    assert timeline_plot(tmp_path, "offline") is None


def test_a_run_comparison_includes_the_servers_figures(tmp_path):
    from deployment_toolkit.perf.telemetry import record_point
    from deployment_toolkit.report.server import server_comparison

    for run, work in (("a", 400_000), ("b", 200_000)):
        busy = [scrape(0, 0, 0, 0, 0), scrape(1.0, 100, 40, 4_000, work)]
        record_point(tmp_path / run, "online", {"Client Batch Size": 1, "Concurrent client requests": 2,
                                                "client_infer_per_s": 100.0}, summarise(busy, 100.0), busy)
    text = server_comparison(tmp_path / "a", tmp_path / "b", "online")
    assert "compute us/req" in text and "4e+03 -> 2e+03 (-2e+03)" in text


# ---- whose endpoint (issue 38): scrapes count only when they are the measured server's -------------------------

def test_scrapes_of_a_server_that_does_not_serve_the_model_are_foreign():
    other = [Sample(0, parse(TEXT.format(count=5, execs=5, queue=0, compute=0), "absent")),
             Sample(1, parse(TEXT.format(count=9, execs=9, queue=0, compute=0), "absent"))]
    assert foreign(other, "absent") == "no model 'absent' is served there"


def test_a_request_count_that_does_not_move_while_the_client_measured_is_foreign():
    idle = [scrape(0, 40, 10, 0, 0), scrape(1, 40, 10, 0, 0), scrape(2, 40, 10, 0, 0)]
    assert foreign(idle, "m") == "'m' there answered no request (40 before and after) while the client measured it"


def test_a_server_counting_far_less_than_the_client_is_foreign_and_one_that_agrees_is_not():
    busy = [scrape(0, 0, 0, 0, 0), scrape(1, 100, 25, 0, 0), scrape(2, 200, 50, 0, 0)]
    assert foreign(busy, "m", client_infer_per_s=110.0) == ""
    assert foreign(busy, "m") == "" and foreign(busy, None) == "" and foreign(busy[:1], "m") == ""
    assert foreign(busy, "m", client_infer_per_s=686.0) == ("'m' there counted 100.0 inferences/s while the client "
                                                            "measured 686.0")


def test_a_run_turns_telemetry_off_at_the_first_foreign_point_and_says_it_once():
    from deployment_toolkit.perf.telemetry import RunTelemetry, Scraper

    said: list[str] = []
    run = RunTelemetry("http://127.0.0.1:8002/metrics", "m", log=said.append)
    ours = Scraper(run.url, "m", samples=[scrape(0, 0, 0, 0, 0), scrape(1, 100, 25, 0, 0)])
    assert run.owned(ours, 100.0) == ours.samples and not run.off and not said
    idle = Scraper(run.url, "m", samples=[scrape(0, 100, 25, 0, 0), scrape(1, 100, 25, 0, 0)])
    assert run.owned(idle, 100.0) == [] and run.off
    assert run.owned(Scraper(run.url, "m", foreign="no model 'm' is served there"), 100.0) == []
    assert len(said) == 1 and said[0].startswith("telemetry off for this run: the metrics endpoint "
                                                 "http://127.0.0.1:8002/metrics is not the measured server's")
    with run.scrape() as scraper:  # off: the next points are not scraped at all
        assert scraper is None
