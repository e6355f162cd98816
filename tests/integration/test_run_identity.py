"""Reuse follows the run identity, on the real server: a point is reused only when it was measured under the same
host, server version, loaded config, artifact, perf options, input data and toolkit; otherwise the old rows are
kept aside and the point is measured anew; a folder that mixes identities says so in its report."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_perf_runners import DOUBLE_CONFIG, DOUBLE_MODEL, FAST, SIG, _start, _write_model

from deployment_toolkit.perf import check_perf_analyzer, run_offline, run_online
from deployment_toolkit.perf import sweep as sweep_module
from deployment_toolkit.binaries import PerfAnalyzerNotFound
from deployment_toolkit.results import IdentityMismatch
from deployment_toolkit.results.identity import host_identity
from deployment_toolkit.results.store import read_store_csv

pytestmark = [pytest.mark.integration, pytest.mark.long]  # long: collected first (conftest)


@pytest.fixture()
def repo(tmp_path) -> Path:
    try:
        check_perf_analyzer()
    except PerfAnalyzerNotFound as err:
        pytest.fail(f"perf_analyzer is part of the toolkit's install (make install): {err}")
    repo = tmp_path / "repo"
    _write_model(repo, "double", DOUBLE_CONFIG, DOUBLE_MODEL)
    return repo


def _aside(run_dir: Path, kind: str) -> list[Path]:
    return sorted((run_dir / "superseded").glob(f"*/{kind}.csv"))


def test_changed_instance_count_is_measured_anew_and_old_rows_kept(repo, tmp_path, capsys):
    run_dir = tmp_path / "run"
    server = _start(repo, tmp_path / "log1")
    try:
        first = run_online("double", None, SIG, [1, 2], FAST, run_dir, server=server, progress=False,
                           build_report=False)
        again = run_online("double", None, SIG, [1, 2, 3], FAST, run_dir, server=server, progress=False,
                           build_report=False)
    finally:
        server.stop()
    assert [p.concurrency for p in again.skipped] == [1, 2] and [p.concurrency for p in again.measured] == [3], \
        "same identity: completed points are reused, a new point extends the sweep"
    old_ids = {r["identity"] for r in first.rows}

    config = (repo / "double" / "config.pbtxt").read_text().replace("count: 1", "count: 2")
    (repo / "double" / "config.pbtxt").write_text(config)
    server = _start(repo, tmp_path / "log2")
    try:
        with pytest.raises(IdentityMismatch, match="model_config.instance_group"):
            run_online("double", None, SIG, [1], FAST, run_dir, server=server, progress=False, reuse="resume")
        assert len(read_store_csv(run_dir / "online.csv")) == 3, "a refused --resume moves nothing"
        capsys.readouterr()
        outcome = run_online("double", None, SIG, [1], FAST, run_dir, server=server, progress=False)
    finally:
        server.stop()
    said = capsys.readouterr().out
    assert "measured under another identity" in said and "model_config.instance_group" in said
    assert outcome.skipped == [] and [p.concurrency for p in outcome.measured] == [1]
    rows = read_store_csv(run_dir / "online.csv")
    assert len(rows) == 1 and rows[0]["Triton Instances"] == 2 and rows[0]["identity"] not in old_ids
    kept = _aside(run_dir, "online")
    assert len(kept) == 1 and len(read_store_csv(kept[0])) == 3, "the old rows are kept aside, never deleted"
    identities = json.loads((run_dir / "run.json").read_text())["identities"]
    assert rows[0]["identity"] in identities and old_ids <= set(identities)


def test_other_host_is_not_reused_and_a_mixed_folder_says_so(repo, tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    server = _start(repo, tmp_path / "log")
    try:
        run_offline("double", None, SIG, [1], FAST, run_dir, server=server, progress=False, build_report=False)
        other = {**host_identity(), "cpu_model": "Simulated CPU 9000", "usable_cores": 64}
        monkeypatch.setattr(sweep_module, "host_identity", lambda: other)
        moved = run_offline("double", None, SIG, [1], FAST, run_dir, server=server, progress=False,
                            build_report=False)
        assert moved.skipped == [] and len(_aside(run_dir, "offline")) == 1, "another host's point is not reused"
        # online under the simulated host, offline (above) too; move offline back to the real host's rows
        run_online("double", None, SIG, [1], FAST, run_dir, server=server, progress=False, build_report=False)
        monkeypatch.undo()
        run_offline("double", None, SIG, [1], FAST, run_dir, server=server, progress=False, build_report=True)
    finally:
        server.stop()
    offline, online = read_store_csv(run_dir / "offline.csv"), read_store_csv(run_dir / "online.csv")
    assert offline[0]["identity"] != online[0]["identity"]
    hardware = (run_dir / "hardware.md").read_text()
    assert "mixes rows measured under 2 identities" in hardware
    assert "Simulated CPU 9000 (64 cores usable)" in hardware and f"identity {online[0]['identity']}: 1 row(s)" in hardware
    assert "mixes rows" in (run_dir / "report.html").read_text()


def test_a_run_against_a_dead_server_writes_nothing(tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(sweep_module.ServerNotReady):
        run_online("double", "127.0.0.1:1", SIG, [1], FAST, run_dir, progress=False, ready_timeout_s=0.5)
    assert not run_dir.exists(), "a run that never started leaves no folder behind"
