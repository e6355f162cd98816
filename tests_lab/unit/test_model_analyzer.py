"""Running Triton's Model Analyzer for the comparisons (deployment_toolkit_lab/versus/model_analyzer.py): its
checkpoint read with our latency budget applied, its config matching our server and budget, and a missing install
said in one line with the way to install it."""
from __future__ import annotations

from pathlib import Path


def _ma_checkpoint(path: Path) -> None:
    import json

    def measurement(conc, thr, p99):
        tags = {"perf_throughput": ["perf_throughput", {"_value": thr}],
                "perf_latency_p99": ["perf_latency_p99", {"_value": p99}]}
        return {"_model_config_measurements": [{"_model_specific_pa_params": {"concurrency-range": conc},
                                                "_non_gpu_data_from_tag": tags}]}

    def variant(count, mb, points):
        mc = {"maxBatchSize": mb, "instanceGroup": [{"count": count, "kind": "KIND_CPU"}]}
        return [{"_model_run_configs": [{"_model_config_variant": {"model_config": mc}}]},
                {f"-m x --concurrency-range={c}": measurement(c, t, p) for c, t, p in points}]

    doc = {"ResultManager.results": {"_results": {"resnet50_ma": {
        "resnet50_ma_config_default": variant(1, 32, [(16, 22.0, 900.0)]),
        "resnet50_ma_config_0": variant(2, 1, [(2, 19.0, 140.0), (4, 20.5, 410.0)]),
    }}}}
    path.mkdir(parents=True)
    (path / "0.ckpt").write_text(json.dumps(doc))


def test_model_analyzer_checkpoint_is_read_and_budget_applied(tmp_path):
    from deployment_toolkit_lab.versus.model_analyzer import MAResult, read_checkpoint

    _ma_checkpoint(tmp_path / "checkpoints")
    found = read_checkpoint(tmp_path / "checkpoints")
    assert len(found) == 3
    result = MAResult(ran=True, measurements=found)
    best = result.best_within(500.0)
    assert (best.variant, best.instances, best.concurrency, best.throughput) == ("resnet50_ma_config_0", 2, 4, 20.5)
    assert result.configs == 2
    assert result.best_within(100.0) is None


def test_model_analyzer_config_matches_our_server_and_budget(tmp_path):
    from deployment_toolkit_lab.versus.model_analyzer import MARequest, explain_failure, ma_command, ma_config

    cfg = ma_config(MARequest(binary=None, model_name="m", repository=tmp_path / "repo", work_dir=tmp_path,
                              budget_ms=500.0, cpu_only=True), (8100, 8101, 8102), Path("/b"), Path("/pa"))
    assert cfg["latency_budget"] == 500 and cfg["run_config_search_mode"] == "quick"
    assert cfg["profile_models"]["m"]["cpu_only"] is True
    assert cfg["triton_server_flags"]["backend-directory"] == "/b"
    assert cfg["triton_grpc_endpoint"] == "127.0.0.1:8101"  # never the default 8001 another server may hold
    cmd = ma_command(Path("/ma/bin/model-analyzer"), tmp_path / "c.yaml", Path("/srv/tritonserver"))
    assert cmd[1] == "profile" and cmd[cmd.index("--triton-launch-mode") + 1] == "local"
    assert cmd[cmd.index("--triton-server-path") + 1] == "/srv/tritonserver"
    out = "[Model Analyzer] Starting\n[Model Analyzer] Model Analyzer encountered an error: \nIf `x` then `y`\n"
    assert explain_failure(out, 1) == "If `x` then `y`"


def test_model_analyzer_missing_says_how_to_install(tmp_path):
    from deployment_toolkit_lab.versus.model_analyzer import MARequest, run_model_analyzer

    result = run_model_analyzer(MARequest(binary=None, model_name="m", repository=tmp_path, work_dir=tmp_path,
                                          budget_ms=1.0, max_minutes=1.0, cpu_only=True))
    assert not result.ran and "pip install triton-model-analyzer" in result.error
