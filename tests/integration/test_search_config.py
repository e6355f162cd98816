"""The config search end to end on the real embedded tritonserver and perf_analyzer, kept short: resnet18's
small preset, 500 ms windows with a loose stability bar, concurrency up to 4. These tests check the plumbing
(resume, a winner that loads and answers, the impossible budget), not the numbers."""
from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest

from deployment_toolkit.commands.search_config import EXIT_NO_CONFIG, main

pytestmark = [pytest.mark.integration, pytest.mark.long]  # long: collected first; judges no SLO (p99 5 s), so not exclusive
FAST = ["--measurement-mode", "time_windows", "--measurement-interval", "500", "--stability-percentage", "100",
        "--max-trials", "3", "--max-attempts", "1",
        "--noise-repeats", "1", "--confirm-samples", "2", "--refine-steps", "0", "--max-concurrency", "4",
        "--no-progress", "--objective", "closed-loop"]  # the capacity ranking: tests/integration/test_plan.py


def _search(workspace: Path, result: Path, repo: Path, *extra: str) -> list[str]:
    return ["--model", "resnet18", "--preset", "small", "--formats", "onnx", "--workspace", str(workspace),
            "--result-path", str(result), "--model-repository", str(repo), "--model-name", "resnet18_best",
            *FAST, *extra]


@pytest.fixture(scope="module")
def searched(converted, tmp_path_factory):
    """An 'interrupted' search (one config), then the same command with a larger limit, which resumes."""
    workspace = converted["onnx"][0].parent
    base = tmp_path_factory.mktemp("search")
    result, repo = base / "result", base / "repo"
    capture = {}
    import contextlib
    import io

    for run, limit in (("first", "1"), ("second", "2")):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            code = main(_search(workspace, result, repo, "--p99-ms", "5000", "--max-configs", limit))
        raw = {p.name: p.stat().st_mtime_ns for p in (result / "raw").glob("*.csv")}
        capture[run] = (code, buf.getvalue(), raw)
    return {"workspace": workspace, "result": result, "repo": repo, **capture}


def test_interrupted_search_resumes_without_remeasuring(searched):
    code1, out1, raw1 = searched["first"]
    code2, out2, raw2 = searched["second"]
    assert code1 == 0 and code2 == 0, out1 + out2
    assert "reused 0 measured points" in out1
    reused = int(re.search(r"reused (\d+) measured points", out2).group(1))
    assert reused >= 3, out2  # the baseline's sweep (c=1,2,4) at least
    assert all(raw2[name] == mtime for name, mtime in raw1.items()), "a completed point was measured again"
    assert len(raw2) > len(raw1)  # the second config was measured
    rows = list(csv.DictReader(open(searched["result"] / "search.csv")))
    statuses = {r["config"]: r["status"] for r in rows}
    assert sum(s == "measured" for s in statuses.values()) == 2
    assert statuses["onnx_i2_tdef_b8_pnone_q0"] == "oversubscribed" or "onnx_i2_tdef_b8_pnone_q0" not in statuses
    assert all(r["verdict"] and (r["verdict"] == "winner" or r["reason"]) for r in rows)
    assert (searched["result"] / "search.md").read_text().count("Winner:") == 1
    assert (searched["result"] / "search_frontier.png").stat().st_size > 10_000
    report = (searched["result"] / "report.html").read_text()  # the search is a section of the run's report
    assert report.count("<!-- search:begin -->") == 1 and "data:image/png;base64," in report


def test_every_point_has_the_servers_metrics_and_search_md_the_memory_per_instance_count(searched):
    """Issue 29 (items 1 and 3): the search scrapes its server's metrics endpoint during every point like the sweeps
    (search_server.csv, telemetry/search_series.csv), its points carry the key figures, and search.md shows the host
    memory each instance count used at its best point."""
    import json

    result = searched["result"]
    rows = list(csv.DictReader(open(result / "search_server.csv")))
    assert {r["config"] for r in rows} == {"onnx_i1_tdef_b8_pnone_q0", "onnx_i2_t1_b8_pnone_q0"}, rows
    for r in rows:
        assert int(r["samples"]) >= 2 and float(r["server_infer_per_s"]) > 0, r
        assert float(r["cpu_memory_gib"]) > 0 and float(r["compute_infer_us_per_request"]) > 0, r
    assert (result / "telemetry" / "search_series.csv").stat().st_size > 0
    points = json.loads((result / "search_points.json").read_text())["points"].values()
    assert points and all(p["host_memory_bytes"] and p["server_throughput"] for p in points)
    md = (result / "search.md").read_text()
    section = md.split("## Memory per instance count")[1].split("## ")[0]
    table = [line for line in section.splitlines() if line.startswith("|")]
    assert [line.split("|")[1].strip() for line in table[2:]] == ["1", "2"], section
    memory = json.loads((result / "run.json").read_text())["config"]["memory_per_instance"]
    assert [r["instances"] for r in memory["readings"]] == [1, 2] and memory["per_instance_bytes"] is not None
    # A shared host's used-memory gauge can move more within one instance count than an extra instance costs; then
    # the estimate says it is not resolved instead of printing a line. Which one depends on the host; both are right,
    # but the sentence must agree with the recorded verdict.
    assert "GB" in table[2] and "per extra instance" in section, section
    if memory["resolved"]:
        assert "Estimate: host memory" in section and "per instance (least squares" in section, section
    else:
        assert "Estimate: the cost of an extra instance is not resolved" in section, section


def test_winning_config_loads_and_answers(searched):
    from deployment_toolkit.server.local import LocalTritonServer, ServerConfig

    import tritonclient.http as http

    repo = searched["repo"]
    assert (repo / "resnet18_best" / "config.pbtxt").exists()
    with LocalTritonServer(ServerConfig(repo, log_dir=repo.parent / "logs")) as server:
        server.require_models(["resnet18_best"])
        client = http.InferenceServerClient(server.http_url)
        x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32)
        inp = http.InferInput("input__0", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        out = client.infer("resnet18_best", [inp]).as_numpy("output__0")
    assert out.shape == (1, 1000) and np.isfinite(out).all()


def test_impossible_budget_names_the_best_p99_seen(searched, tmp_path, capsys):
    code = main(_search(searched["workspace"], searched["result"], tmp_path / "repo", "--p99-ms", "0.01",
                        "--max-configs", "2"))
    err = capsys.readouterr().err
    assert code == EXIT_NO_CONFIG
    m = re.search(r"no configuration meets p99 <= 0.01 ms: the best p99 seen was ([\d.]+) ms", err)
    assert m and float(m.group(1)) > 0.01, err
    assert not (tmp_path / "repo" / "resnet18_best").exists()
