"""The deployment file of several models (issue 36): typed, every mistake one line naming the key."""
from __future__ import annotations

import math

import pytest

from deployment_toolkit.config import PipelineLayout
from deployment_toolkit.deployment.file import load, parse
from deployment_toolkit.errors import UserError

GOOD = """
name: shop
models:
  - {name: classifier, model: "timm:resnet18", peak_rps: 200, p99_ms: 50}
  - name: tagger
    model: tagger.py
    model_args: {vocab_size: 1000}
    peak_rps: 40.5
    p99_ms: 100
costs: {host_hour: 1.2, by_device: {"Intel Xeon": 0.9}}
limits: {max_replicas: 20, headroom: 0.25, host_memory_gb: 64}
"""


def _write(tmp_path, text):
    (tmp_path / "tagger.py").write_text("def get_model(**kw):\n    pass\n")
    path = tmp_path / "deployment.yaml"
    path.write_text(text)
    return path


def test_a_deployment_file_reads_into_its_types(tmp_path):
    d = load(_write(tmp_path, GOOD))
    assert d.name == "shop" and [m.name for m in d.models] == ["classifier", "tagger"]
    assert d.model("classifier").model == "timm:resnet18"
    assert d.model("tagger").model == str(tmp_path / "tagger.py")  # relative to the file, not the cwd
    assert d.model("tagger").peak_rps == 40.5 and d.model("tagger").model_args == {"vocab_size": 1000}
    assert d.costs.host_hour == 1.2 and d.costs.by_device == {"Intel Xeon": 0.9}
    assert d.limits.max_replicas == 20 and d.limits.headroom == 0.25
    assert not d.model("classifier").has_pipeline
    assert d.model("classifier").layout is PipelineLayout.ENSEMBLE  # a pipeline's default layout
    fused = load(_write(tmp_path, GOOD.replace("p99_ms: 100", "p99_ms: 100\n    layout: fused")))
    assert fused.model("tagger").layout is PipelineLayout.FUSED


@pytest.mark.parametrize("change, words", [
    (("peak_rps: 200", "peak_rps: .nan"), "models[0] (classifier): peak_rps must be > 0"),
    (("peak_rps: 200", "peak_rps: 1e308"), "peak_rps must be > 0 and <= 1e+09 inferences/s"),
    (("p99_ms: 50", "p99_ms: -1"), "p99_ms must be > 0"),
    (("p99_ms: 50", "p99_ms: fast"), "p99_ms must be a number, got 'fast'"),
    (("name: tagger", "name: classifier"), "models[1] is named 'classifier' like models[0]"),
    (("max_replicas: 20", "max_replica: 20"), "limits: unknown key 'max_replica'"),
    (("host_hour: 1.2", "host_hour: .inf"), "host_hour must be >= 0 and <= 1e+06 $/h"),
    (('"Intel Xeon": 0.9', '"Intel Xeon": cheap'), "costs.by_device['Intel Xeon'] must be a price in $/h"),
    (("model_args: {vocab_size: 1000}", "checkpoint: missing.pt"), "checkpoint"),
    (("  - {name: classifier, model: \"timm:resnet18\", peak_rps: 200, p99_ms: 50}",
      "  - {name: classifier, peak_rps: 200, p99_ms: 50}"), "models[0]: 'model' is missing"),
    (("models:", "model:"), "unknown key 'model'"),
    (("p99_ms: 100", "p99_ms: 100\n    layout: merged"), "models[1] (tagger): layout must be one of ensemble, fused, "
                                                       "got 'merged'"),
])
def test_each_mistake_is_one_line_naming_the_key(tmp_path, change, words):
    with pytest.raises(UserError) as err:
        load(_write(tmp_path, GOOD.replace(*change)))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_not_yaml_and_no_models_are_one_line(tmp_path):
    with pytest.raises(UserError, match="is not valid YAML at line"):
        load(_write(tmp_path, "models: [\n"))
    with pytest.raises(UserError, match="no models"):
        parse({"models": []})
    with pytest.raises(UserError, match="does not exist"):
        load(tmp_path / "nope.yaml")
    assert math.isfinite(parse({"models": [{"name": "a", "model": "resnet18", "peak_rps": "1e3", "p99_ms": 5}]})
                         .models[0].peak_rps)


def _pipeline_file(tmp_path, second: str) -> str:
    (tmp_path / "pre.py").write_text("def preprocess(raw):\n    return raw\n")
    (tmp_path / "raw").mkdir(exist_ok=True)
    return f"""
models:
  - {{name: x, model: tagger.py, preprocess: pre.py, raw_data: raw, peak_rps: 10, p99_ms: 50}}
  - {{name: {second}, model: "timm:resnet18", peak_rps: 10, p99_ms: 50}}
"""


@pytest.mark.parametrize("second, words", [
    ("x_pipeline", "models[0] (x) writes its pipeline's ensemble as 'x_pipeline', the name models[1].name already"),
    ("x_preprocess", "models[0] (x) writes its preprocess step as 'x_preprocess', the name models[1].name"),
    ("../evil", "models[1].name '../evil' contains a path separator"),
    ("sub/a", "models[1].name 'sub/a' contains a path separator"),
])
def test_names_are_checked_against_every_name_the_plan_writes(tmp_path, second, words):
    """A model named like another's generated ensemble would replace it in the shared repository; a bad name in a
    later entry is found on read, naming its key (not a flag the user never typed)."""
    with pytest.raises(UserError) as err:
        load(_write(tmp_path, _pipeline_file(tmp_path, second)))
    text = str(err.value)
    assert words in text and "\n" not in text and "--model-name" not in text and "--model-repository" not in text


def test_a_fused_pipeline_writes_one_model_so_its_step_names_are_free(tmp_path):
    text = _pipeline_file(tmp_path, "x_preprocess").replace("raw_data: raw,", "raw_data: raw, layout: fused,")
    assert [m.name for m in load(_write(tmp_path, text)).models] == ["x", "x_preprocess"]


def test_a_model_path_is_read_from_the_files_folder_and_checked_on_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path.parent)  # elsewhere: the path must not be read from the working directory
    (tmp_path / "nets").mkdir()
    (tmp_path / "nets" / "mlp.onnx").write_bytes(b"")
    text = GOOD.replace('model: "timm:resnet18"', "model: nets/mlp.onnx")
    assert load(_write(tmp_path, text)).model("classifier").model == str(tmp_path / "nets" / "mlp.onnx")
    with pytest.raises(UserError) as err:
        load(_write(tmp_path, text.replace("nets/mlp.onnx", "nets/missing.onnx")))
    assert str(err.value).startswith(f"{tmp_path / 'deployment.yaml'}: models[0].model: "
                                     f"{tmp_path / 'nets' / 'missing.onnx'} does not exist")
    factory = text.replace("nets/mlp.onnx", "tagger.py:get_model")
    assert load(_write(tmp_path, factory)).model("classifier").model == f"{tmp_path / 'tagger.py'}:get_model"


def test_traffic_over_time_is_read_on_read_and_gives_the_peak(tmp_path):
    (tmp_path / "day.csv").write_text("time,rate\n00:00,5\n12:00,40\n18:00,10\n")
    text = GOOD.replace("peak_rps: 40.5", "traffic: day.csv")
    tagger = load(_write(tmp_path, text)).model("tagger")
    assert tagger.traffic == tmp_path / "day.csv" and tagger.peak_rps == 40 and not tagger.peak_given
    both = load(_write(tmp_path, GOOD.replace("peak_rps: 40.5", "peak_rps: 80\n    traffic: day.csv")))
    assert both.model("tagger").peak_rps == 80 and both.model("tagger").peak_given  # the shape scaled to the peak
    (tmp_path / "bad.csv").write_text("time,rate\n00:00,5\n12:00,-1\n")
    with pytest.raises(UserError) as err:
        load(_write(tmp_path, GOOD.replace("peak_rps: 40.5", "traffic: bad.csv")))
    assert "bad.csv" in str(err.value) and "line 3" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(UserError, match="models\\[1\\]: 'peak_rps' is missing: give its peak"):
        load(_write(tmp_path, GOOD.replace("    peak_rps: 40.5\n", "")))


def test_many_models_are_one_deployment(tmp_path):
    """No cap on the models of a deployment: the solver packs a hundred (the enumeration stopped at 16)."""
    models = [{"name": f"m{i}", "model": "resnet18", "peak_rps": 1 + i, "p99_ms": 50} for i in range(120)]
    assert len(parse({"models": models}).models) == 120


def test_each_limit_is_named_as_it_was_given(tmp_path):
    """A file's limits are its keys in every message; a plan of one model's are its flags (deployment_of_one sets
    given_as), and given_as is the program's, never a key of the file."""
    from deployment_toolkit.deployment.file import Limits
    from deployment_toolkit.deployment.one import FLAGS_OF_LIMITS

    assert load(_write(tmp_path, GOOD)).limits.key("max_replicas") == "limits.max_replicas"
    flags = Limits(max_replicas=3, given_as=FLAGS_OF_LIMITS)
    assert [flags.key(k) for k in ("max_replicas", "host_memory_gb", "headroom")] == \
        ["--max-replicas", "--host-memory-gb", "--headroom"]
    with pytest.raises(UserError, match="limits: unknown key 'given_as'"):
        load(_write(tmp_path, GOOD.replace("headroom: 0.25", "given_as: {max_replicas: x}")))
