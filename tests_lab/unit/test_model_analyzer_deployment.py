"""Model Analyzer on a deployment: the YAML it gets for an ensemble and for several models at once, its checkpoint
read for several models and ensembles, its own ranking mirrored, its pick applied to a repository config and its
refusals said in one line. No Model Analyzer run: synthetic checkpoints are cut from a real one (MA 1.58.0)."""
from __future__ import annotations

import copy
import csv
import json
from pathlib import Path

import pytest
import yaml

from deployment_toolkit_lab.versus.model_analyzer import (MAModel, MAPoint, MARequest, MARunConfig, MASettings,
                                                      apply_settings, best_run_config, explain_failure, ma_config,
                                                      read_checkpoint, read_run_configs)

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "results" / "search-vs-ma-resnet18-cpu" / "model_analyzer"
PORTS = (8100, 8101, 8102)


def _config(request: MARequest) -> dict:
    cfg = ma_config(request, PORTS, Path("/b"), Path("/pa"))
    assert yaml.safe_load(yaml.safe_dump(cfg, sort_keys=False)) == cfg  # plain YAML types only
    return cfg


# ---- the YAML ----------------------------------------------------------------------------------------------------

def test_ensemble_on_cpu_gets_its_input_data_its_own_budget_and_cpu_composing_models(tmp_path):
    data = tmp_path / "input_data.json"
    ens = MAModel("pipe", 250.4, input_data=data, composing=("pipe_pre", "net", "pipe_post"))
    cfg = _config(MARequest(binary=None, model_name="pipe", repository=tmp_path / "repo", work_dir=tmp_path,
                            budget_ms=250.4, cpu_only=True, shared_memory="system", output_shm_bytes=4096,
                            models=(ens,)))
    entry = cfg["profile_models"]["pipe"]
    assert list(cfg["profile_models"]) == ["pipe"]  # composing models are found by Model Analyzer, not profiled
    assert entry["constraints"] == {"perf_latency_p99": {"max": 250}}
    assert "latency_budget" not in cfg  # it would overwrite every per-model constraint
    assert entry["perf_analyzer_flags"] == {"shared-memory": "system", "output-shared-memory-size": "4096",
                                            "input-data": str(data.resolve())}
    # a list of one-model mappings: as one mapping, Model Analyzer 1.58 parses it over profile_models (the ensemble
    # is never profiled); each with its counts (without `count`: KeyError: 'count')
    assert cfg["ensemble_composing_models"] == [
        {m: {"model_config_parameters": {"instance_group": [{"kind": "KIND_CPU", "count": [1, 2, 3, 4, 5]}]}}}
        for m in ("pipe_pre", "net", "pipe_post")]
    assert cfg["run_config_search_mode"] == "quick"
    assert "run_config_profile_models_concurrently_enable" not in cfg
    on_gpu = _config(MARequest(binary=None, model_name="pipe", repository=tmp_path, work_dir=tmp_path, budget_ms=1.0,
                               cpu_only=False, models=(ens,)))
    assert "ensemble_composing_models" not in on_gpu  # Model Analyzer's own KIND_GPU is right there


def test_two_models_concurrent_each_under_its_own_constraint_with_every_flag_in_its_own_entry(tmp_path):
    a, b = MAModel("a", 50.0), MAModel("b", 200.0)
    cfg = _config(MARequest(binary=None, model_name="a", repository=tmp_path, work_dir=tmp_path, budget_ms=50.0,
                            shared_memory="system", models=(a, b), concurrent=True))
    assert cfg["run_config_profile_models_concurrently_enable"] is True
    assert cfg["run_config_search_mode"] == "quick"  # explicit: its default, brute, refuses concurrency
    assert "latency_budget" not in cfg and "perf_analyzer_flags" not in cfg
    assert {n: e["constraints"]["perf_latency_p99"]["max"] for n, e in cfg["profile_models"].items()} == {
        "a": 50, "b": 200}
    assert all(e["perf_analyzer_flags"] == {"shared-memory": "system"} and e["cpu_only"] is True
               for e in cfg["profile_models"].values())
    assert "ensemble_composing_models" not in cfg
    with pytest.raises(ValueError, match="quick"):
        MARequest(binary=None, model_name="a", repository=tmp_path, work_dir=tmp_path, budget_ms=1.0,
                  search_mode="brute", models=(a, b), concurrent=True)


def test_the_single_model_config_is_unchanged(tmp_path):
    cfg = _config(MARequest(binary=None, model_name="m", repository=tmp_path, work_dir=tmp_path, budget_ms=499.6))
    assert cfg["latency_budget"] == 500 and cfg["profile_models"] == {"m": {"cpu_only": True}}
    assert "run_config_profile_models_concurrently_enable" not in cfg and "ensemble_composing_models" not in cfg


@pytest.mark.parametrize("bad", ["/data/my inputs.json", "/data/a=b.json"])
def test_an_input_data_path_model_analyzer_would_split_is_refused(bad):
    with pytest.raises(ValueError, match="space or '='"):
        MAModel("pipe", 100.0, input_data=Path(bad))


# ---- checkpoints in Model Analyzer's layout ----------------------------------------------------------------------

def _real() -> dict:
    return json.loads((REAL / "checkpoints" / "0.ckpt").read_text())


def _template() -> tuple[dict, dict]:
    """The real checkpoint's default run config and its first measurement (MA's exact layout)."""
    run_config, measurements = _real()["ResultManager.results"]["_results"]["resnet18_ma"][
        "resnet18_ma_config_default"]
    return run_config, next(iter(measurements.values()))


def _variant(model_config: dict, variant_name: str) -> dict:
    return {"model_config": model_config, "variant_name": variant_name, "cpu_only": False}


def _model_run_config(name: str, model_config: dict, variant_name: str, composing: list | None = None) -> dict:
    mrc = copy.deepcopy(_template()[0]["_model_run_configs"][0])
    mrc["_model_name"] = name
    mrc["_model_config_variant"] = _variant(model_config, variant_name)
    mrc["_perf_config"]["_options"]["-m"] = name
    mrc["_composing_config_variants"] = composing or []
    return mrc


def _measurement(name: str, concurrency, throughput: float, p99: float) -> dict:
    mcm = copy.deepcopy(_template()[1]["_model_config_measurements"][0])
    mcm["_model_config_name"] = name
    mcm["_model_specific_pa_params"]["concurrency-range"] = concurrency
    for tag, value in (("perf_throughput", throughput), ("perf_latency_p99", p99)):
        record = [tag, {"_value": value, "_timestamp": 0}]
        mcm["_non_gpu_data_from_tag"][tag] = record
        mcm["_non_gpu_data"] = [record if r[0] == tag else r for r in mcm["_non_gpu_data"]]
    return mcm


def _run_config(mrcs: list, points: list[list[tuple]], variants: str) -> list:
    """[run_config, {key: rcm}] with one rcm per entry of `points` (each a (name, conc, thr, p99) per model)."""
    run_config = copy.deepcopy(_template()[0])
    run_config["_model_run_configs"] = mrcs
    out = {}
    for i, per_model in enumerate(points):
        rcm = copy.deepcopy(_template()[1])
        rcm["_model_variants_name"] = variants
        rcm["_model_config_measurements"] = [_measurement(*p) for p in per_model]
        out[f"{variants} -m x --concurrency-range={i}"] = rcm
    return [run_config, out]


def _write(path: Path, results: dict) -> Path:
    doc = _real()
    doc["ResultManager.results"]["_results"] = results
    path.mkdir(parents=True, exist_ok=True)
    (path / "0.ckpt").write_text("{}")  # an older checkpoint: the highest number is read
    (path / "3.ckpt").write_text(json.dumps(doc))
    return path


ENSEMBLE = {"name": "pipe", "platform": "ensemble", "maxBatchSize": 1,
            "input": [{"name": "image", "dataType": "TYPE_STRING", "dims": ["1"]}],
            "ensembleScheduling": {"step": [{"modelName": m, "modelVersion": "-1"} for m in ("pipe_pre", "net",
                                                                                              "pipe_post")]}}


def _composing(pre_count: int, net_count: int, net_mbs: int) -> list:
    pre = {"name": "pipe_pre", "maxBatchSize": 8, "backend": "python",
           "instanceGroup": [{"count": pre_count, "kind": "KIND_CPU"}],
           "dynamicBatching": {"maxQueueDelayMicroseconds": "100", "preferredBatchSize": [4, 8]}}
    net = {"name": "net", "maxBatchSize": net_mbs, "instanceGroup": [{"count": net_count, "kind": "KIND_CPU"}],
           "dynamicBatching": {}}
    post = {"name": "pipe_post", "backend": "python", "instanceGroup": [{"kind": "KIND_CPU"}]}  # count 1 omitted
    return [_variant(pre, f"pipe_pre_config_{pre_count}"), _variant(net, f"net_config_{net_count}"),
            _variant(post, "pipe_post_config_0")]


def _ensemble_checkpoint(path: Path) -> Path:
    default = _run_config([_model_run_config("pipe", {**ENSEMBLE, "maxBatchSize": 0}, "pipe_config_default",
                                             _composing(1, 1, 8))],
                          [[("pipe", 0, 30.0, 90.0)]], "pipe_config_default")
    searched = _run_config([_model_run_config("pipe", ENSEMBLE, "pipe_config_0", _composing(2, 3, 4))],
                           [[("pipe", 4, 55.0, 120.0)], [("pipe", 8, 70.0, 260.0)]], "pipe_config_0")
    return _write(path, {"pipe": {"pipe_config_default": default, "pipe_config_0": searched}})


def test_an_ensemble_checkpoint_gives_the_ensembles_points_and_every_composing_config(tmp_path):
    found = read_run_configs(_ensemble_checkpoint(tmp_path / "checkpoints"))
    assert [(rc.variants, rc.points["pipe"].concurrency, rc.points["pipe"].throughput) for rc in found] == [
        ("pipe_config_default", 1, 30.0),  # concurrency-range 0: perf_analyzer ran at its default, 1
        ("pipe_config_0", 4, 55.0), ("pipe_config_0", 8, 70.0)]
    assert all(rc.models == ("pipe",) for rc in found)  # only the ensemble is driven by perf_analyzer
    configs = found[1].configs
    assert set(configs) == {"pipe", "pipe_pre", "net", "pipe_post"}
    assert configs["pipe_pre"] == MASettings(2, "KIND_CPU", 8, True, 100, (4, 8))
    assert configs["net"] == MASettings(3, "KIND_CPU", 4, True, None, ())
    assert configs["pipe_post"] == MASettings(1, "KIND_CPU", 0, False)
    assert configs["pipe"] == MASettings(1, None, 1, False)  # the ensemble: its forced max batch, no instances
    assert found[0].configs["net"].instances == 1 and found[0].configs["pipe"].max_batch_size == 0
    best = best_run_config(found, {"pipe": 200.0})
    assert best is found[1]  # 70 inf/s at 260 ms is over the budget


def _concurrent_checkpoint(path: Path) -> Path:
    a = {"name": "a", "maxBatchSize": 8, "instanceGroup": [{"count": 1, "kind": "KIND_CPU"}], "dynamicBatching": {}}
    b = {"name": "b", "maxBatchSize": 4, "instanceGroup": [{"count": 2, "kind": "KIND_CPU"}]}

    def run(name_a: str, name_b: str, points: list[list[tuple]]) -> list:
        return _run_config([_model_run_config("a", a, name_a), _model_run_config("b", b, name_b)], points,
                           f"{name_a},{name_b}")

    return _write(path, {"a,b": {
        "a_config_default,b_config_default": run("a_config_default", "b_config_default", [
            [("a", 4, 100.0, 40.0), ("b", 4, 10.0, 150.0)]]),  # more in total...
        "a_config_0,b_config_1": run("a_config_0", "b_config_1", [
            [("a", 4, 80.0, 45.0), ("b", 4, 20.0, 160.0)],  # ...but this one gains more, model by model
            [("a", 8, 200.0, 49.0), ("b", 8, 30.0, 201.0)]]),  # b misses its budget
    }})


def test_a_concurrent_checkpoint_pairs_each_measurement_with_its_model(tmp_path):
    found = read_run_configs(_concurrent_checkpoint(tmp_path / "checkpoints"))
    assert len(found) == 3 and all(rc.models == ("a", "b") for rc in found)
    assert found[1].variants == "a_config_0,b_config_1"
    assert found[1].points == {"a": MAPoint(80.0, 45.0, 4), "b": MAPoint(20.0, 160.0, 4)}
    assert found[1].configs["b"] == MASettings(2, "KIND_CPU", 4, False)
    assert found[1].configs["a"].dynamic_batching


def test_best_run_config_ranks_as_model_analyzer_not_by_total_throughput(tmp_path):
    found = read_run_configs(_concurrent_checkpoint(tmp_path / "checkpoints"))
    budgets = {"a": 50.0, "b": 200.0}
    # MA's score of (a 80, b 20) against (a 100, b 10): 0.5 * -20/90 + 0.5 * 10/15 = +0.22: better, though 100 < 110
    assert best_run_config(found, budgets) is found[1]
    assert best_run_config(found, {"a": 50.0, "b": 210.0}) is found[2]  # now within b's budget: far ahead
    assert best_run_config(found, {"a": 42.0, "b": 200.0}) is found[0]  # a's p99 45 is over 42
    assert best_run_config(found, {"a": 30.0, "b": 200.0}) is None
    with pytest.raises(ValueError, match="different models"):
        best_run_config([found[0], MARunConfig("x_config_0", {"x": MAPoint(1.0, 1.0, 1)}, {})], budgets)


def test_the_real_checkpoint_ranks_as_model_analyzers_own_summary():
    """MA's metrics-model-inference.csv (same run, latency_budget 50) lists its configs best first."""
    found = read_run_configs(REAL / "checkpoints")
    assert len(found) == len(read_checkpoint(REAL / "checkpoints")) == 21  # 8 variants, 1 to 5 concurrencies each
    with open(REAL / "export" / "results" / "metrics-model-inference.csv") as f:
        rows = list(csv.DictReader(f))
    their_order = list(dict.fromkeys(r["Model Config Path"] for r in rows if r["Satisfies Constraints"] == "Yes"))
    ours, left = [], list(found)
    while (best := best_run_config(left, {"resnet18_ma": 50.0})) is not None:
        ours.append(best.variants)
        left = [rc for rc in left if rc.variants != best.variants]
    assert ours == their_order == ["resnet18_ma_config_default", "resnet18_ma_config_3", "resnet18_ma_config_2",
                                   "resnet18_ma_config_0"]
    best = best_run_config(found, {"resnet18_ma": 50.0})
    assert best.points["resnet18_ma"].concurrency == 8 and round(best.points["resnet18_ma"].throughput, 1) == 336.6
    assert best.configs == {"resnet18_ma": MASettings(1, "KIND_CPU", 8, True)}


# ---- its pick on a repository config ----------------------------------------------------------------------------

NET = """name: "net"
backend: "python"
max_batch_size: 32
input { name: "x" data_type: TYPE_FP32 dims: [3, 8, 8] }
output { name: "y" data_type: TYPE_FP32 dims: [10] }
instance_group { name: "net_group" count: 1 kind: KIND_GPU gpus: [0] }
dynamic_batching { max_queue_delay_microseconds: 500 preserve_ordering: true }
parameters { key: "artifact" value { string_value: "model.onnx" } }
"""


def test_apply_settings_sets_what_model_analyzer_chose_and_keeps_the_rest():
    from deployment_toolkit.repository.config import mc, parse_text, to_text

    cpu = mc.ModelInstanceGroup.Kind.KIND_CPU
    base = parse_text(NET)
    out = parse_text(to_text(apply_settings(base, MASettings(3, "KIND_CPU", 8, True, None, (4, 8)))))
    assert base.max_batch_size == 32 and base.instance_group[0].count == 1  # the original is untouched
    assert out.max_batch_size == 8
    assert [(g.name, g.count, g.kind, list(g.gpus)) for g in out.instance_group] == [("net_group", 3, cpu, [])]
    assert out.dynamic_batching.max_queue_delay_microseconds == 0  # not in MA's config: the default it ran with
    assert list(out.dynamic_batching.preferred_batch_size) == [4, 8] and out.dynamic_batching.preserve_ordering
    assert out.parameters["artifact"].string_value == "model.onnx" and out.input == base.input
    plain = apply_settings(base, MASettings(2, "KIND_GPU", 0, False))
    assert not plain.HasField("dynamic_batching") and list(plain.instance_group[0].gpus) == [0]
    ensemble = parse_text('name: "pipe" platform: "ensemble" max_batch_size: 0')
    assert to_text(apply_settings(ensemble, MASettings(1, None, 4, False))) == \
        'name: "pipe"\nplatform: "ensemble"\nmax_batch_size: 4\n'


# ---- its refusals in one line -----------------------------------------------------------------------------------

TRACEBACK = """[Model Analyzer] Starting a local Triton Server
[Model Analyzer] Loaded model pipe
Traceback (most recent call last):
  File "/tmp/ma-venv/bin/model-analyzer", line 8, in <module>
    sys.exit(main())
             ^^^^^^
  File "/tmp/ma-venv/lib/python3.11/site-packages/model_analyzer/entrypoint.py", line 278, in main
    analyzer.profile(
  File "/tmp/ma-venv/lib/python3.11/site-packages/model_analyzer/model_manager.py", line 207, in _check
    raise TritonModelAnalyzerException(
model_analyzer.model_analyzer_exceptions.TritonModelAnalyzerException: {message}
"""


@pytest.mark.parametrize("message, said", [
    ("\nProfiling of multiple models is not supported for ensemble models",
     "Profiling of multiple models is not supported for ensemble models"),
    ("perf_analyzer binary not found : [Errno 2] No such file or directory: 'mpiexec'",
     "perf_analyzer binary not found : [Errno 2] No such file or directory: 'mpiexec'"),
])
def test_a_refusal_that_escapes_as_a_traceback_is_said_in_its_own_words(message, said):
    assert explain_failure(TRACEBACK.format(message=message), 1) == said


def test_another_exception_keeps_its_type_and_a_plain_exit_keeps_the_tail():
    tail = "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nKeyError: 'perf_throughput'\n"
    assert explain_failure(tail, 1) == "KeyError: 'perf_throughput'"
    assert explain_failure("[Model Analyzer] a\n[Model Analyzer] b\n", 2) == \
        "exit code 2: [Model Analyzer] a | [Model Analyzer] b"
