"""What `import deployment_toolkit as dt` offers (issue 37): every name it lists resolves, the package and the API
list the same names, the functions say what they return, importing the package does not import the API, and what
dt.convert made from a live nn.Module says in one line why a later step cannot rebuild it."""
from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import deployment_toolkit as dt
from deployment_toolkit import api


def test_every_listed_name_resolves_and_both_lists_agree():
    assert dt.__all__ == api.__all__
    for name in dt.__all__:
        assert getattr(dt, name) is getattr(api, name), name
    assert set(dt.__all__) <= set(dir(dt))
    assert (Path(dt.__file__).parent / "py.typed").is_file()


def test_every_function_says_what_it_returns():
    functions = [getattr(dt, n) for n in dt.__all__ if inspect.isfunction(getattr(dt, n))]
    assert len(functions) >= 8
    missing = [f.__name__ for f in functions if inspect.signature(f).return_annotation is inspect.Signature.empty]
    assert not missing, f"no return annotation: {missing}"


def test_an_unknown_name_is_an_attribute_error():
    try:
        dt.no_such_thing  # noqa: B018
    except AttributeError as err:
        assert "no_such_thing" in str(err)
    else:
        raise AssertionError("dt.no_such_thing resolved")


def test_importing_the_package_does_not_import_the_api():
    code = "import sys, deployment_toolkit; print('deployment_toolkit.api' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


# ---- the commands are skins over the API (issue 37) ------------------------------------------------------------

class Called(Exception):
    """What a stand-in API function raises: the arguments the command handed it."""

    def __init__(self, *args, **kwargs):
        super().__init__("called")
        self.args_, self.kwargs = args, kwargs


def _stand_in(*args, **kwargs):
    raise Called(*args, **kwargs)


def test_the_search_command_calls_the_apis_search_config_with_the_defaults_the_api_has(monkeypatch, tmp_path):
    import pytest

    from deployment_toolkit.commands import search_config as command

    monkeypatch.setattr(api, "search_config", _stand_in)
    with pytest.raises(Called) as called:
        command.main(["--model", "resnet18", "--p99-ms", "50", "--result-path", str(tmp_path / "r")])
    source, settings, job = called.value.args_
    assert source.ref == "resnet18" and source.preset == "small"
    # every default written once: the flags' defaults are the dataclasses' own, as dt.search_config gets them
    assert settings == dt.SearchSettings(budget_ms=50)
    assert job == dt.SearchJob(result_dir=tmp_path / "r", command=job.command)
    assert job.server == dt.SearchServer() and settings.objective is dt.Objective.CAPACITY
    from deployment_toolkit.search.request import DEFAULT_PERF_OPTIONS

    assert called.value.kwargs["options"] == DEFAULT_PERF_OPTIONS  # what dt.search_config measures with by default


def test_the_plan_command_calls_the_apis_plan_with_the_defaults_the_api_has(monkeypatch, tmp_path):
    import pytest

    from deployment_toolkit.commands import plan_fleet as command
    from deployment_toolkit.search.trials import PLAN_MAX_MINUTES

    monkeypatch.setattr(api, "plan", _stand_in)
    with pytest.raises(Called) as called:
        command.main(["--model", "resnet18", "--p99-ms", "50", "--peak-rps", "100", "--result-path", str(tmp_path)])
    source, demand, settings, job = called.value.args_
    assert demand == dt.Demand(peak_rps=100, p99_ms=50) and source.ref == "resnet18"
    assert settings == dt.SearchSettings(budget_ms=50, max_minutes=PLAN_MAX_MINUTES)  # what dt.plan defaults to
    assert called.value.kwargs["checks"] == dt.Checks() and called.value.kwargs["deploy"] == dt.Deploy()
    assert job.result_dir == tmp_path and job.model_repository is None


def test_the_settings_refuse_a_bad_value_in_one_line_naming_the_flag():
    import pytest

    from deployment_toolkit.errors import UserInputError

    with pytest.raises(UserInputError, match="--p99-ms must be > 0"):
        dt.SearchSettings(budget_ms=0)
    with pytest.raises(UserInputError, match="unknown format 'onx'"):
        dt.SearchJob(formats=("onx",))
    with pytest.raises(UserInputError, match="objective 'fast'"):
        dt.SearchSettings(budget_ms=50, objective="fast")
    assert dt.SearchSettings(budget_ms=50, objective="throughput").objective is dt.Objective.CLOSED_LOOP


def test_the_convert_command_calls_the_apis_convert_with_the_defaults_the_api_has(monkeypatch, tmp_path):
    import pytest

    from deployment_toolkit.commands import convert_model as command
    from deployment_toolkit.sources import ResolvedModel

    monkeypatch.setattr(api, "convert", _stand_in)
    with pytest.raises(Called) as called:
        command.main(["--model", "resnet18", "--output-type", "onnx", "--output-path", str(tmp_path / "onnx")])
    resolved, fmt, output_dir, options = called.value.args_
    assert isinstance(resolved, ResolvedModel) and resolved.source.ref == "resnet18"
    assert (fmt, output_dir) == ("onnx", str(tmp_path / "onnx"))
    assert options == dt.ConvertOptions()  # every flag's default is ConvertOptions' own


def test_the_serve_command_starts_the_server_the_api_would_on_the_same_repository(tmp_path):
    from deployment_toolkit.commands import serve as command
    from deployment_toolkit.server.local import ServerConfig

    args = command.build_parser().parse_args(["--model-repository", str(tmp_path)])
    usual = ServerConfig(tmp_path, **command.USUAL_PORTS)  # dt.serve(repo, ...) with tritonserver's ports
    assert command._config(args) == usual
    args = command.build_parser().parse_args(["--model-repository", str(tmp_path), "--http-port", "0",
                                              "--grpc-port", "0", "--metrics-port", "0"])
    assert command._config(args) == ServerConfig(tmp_path)  # what dt.serve(repo) starts


@pytest.mark.parametrize("kind", ["online", "offline"])
def test_the_perf_commands_run_the_sweep_the_apis_measure_functions_run(monkeypatch, tmp_path, kind):
    """perf-online/perf-offline and dt.measure_online/measure_offline end in one function with the same options."""
    import importlib

    module = importlib.import_module(f"deployment_toolkit.perf.{kind}")
    runner = getattr(module, f"run_{kind}")
    assert getattr(api, f"run_{kind}") is runner  # the API's door is the sweep itself
    monkeypatch.setattr(module, f"run_{kind}", _stand_in)
    monkeypatch.setattr(api, f"run_{kind}", _stand_in)
    script = {"online": "run_online_performance_test_on_triton", "offline": "run_offline_performance_test_on_triton"}
    command = importlib.import_module(f"deployment_toolkit.commands.{script[kind]}")
    with pytest.raises(Called) as from_command:
        command.main(["--server-url", "127.0.0.1:8001", "--model-name", "m", "--result-path", str(tmp_path)])
    artifact = tmp_path / "artifact"
    signature = dt.ModelSignature(inputs=(dt.TensorSpec("x", (3,)),), outputs=(dt.TensorSpec("y", (2,)),))
    dt.Manifest(model="m", preset="small", family="test", task="classification", metric="top1", format="onnx",
                artifact="model.onnx", signature=signature, max_batch_size=8).save(artifact)
    with pytest.raises(Called) as from_api:
        getattr(dt, f"measure_{kind}")("127.0.0.1:8001", "m", artifact, "1", tmp_path)
    name_c, where_c, _, _, options_c, _ = from_command.value.args_
    name_a, where_a, _, _, options_a, _ = from_api.value.args_
    assert (name_c, where_c.url) == (name_a, where_a.url) == ("m", "127.0.0.1:8001")
    assert options_c == options_a  # the same perf_analyzer settings by default, shared memory included


def test_the_pipeline_command_calls_the_apis_deploy_pipeline(monkeypatch, tmp_path):
    from deployment_toolkit.commands import deploy_pipeline as command

    monkeypatch.setattr(api, "deploy_pipeline", _stand_in)
    with pytest.raises(Called) as called:
        command.main(["--model", "resnet18", "--raw-data", str(tmp_path), "--result-path", str(tmp_path / "r")])
    (request,) = called.value.args_
    assert isinstance(request, dt.PipelineRequest) and request.model.ref == "resnet18"
    from deployment_toolkit.pipeline.run import PIPELINE_PERF

    # every flag's default is the request's own (and the network's, the conversion's, perf_analyzer's)
    assert request == dt.PipelineRequest(model=request.model, raw_data=tmp_path, result_path=tmp_path / "r",
                                         network=dt.ConfigOptions(model_name="model"), perf=PIPELINE_PERF)


def test_the_config_command_writes_what_dt_deploy_writes(monkeypatch, tmp_path):
    import deployment_toolkit.repository as repository
    from deployment_toolkit.commands import config_model_on_triton as command

    assert api.write_model is repository.write_model  # dt.deploy's door is the repository writer itself
    monkeypatch.setattr(repository, "write_model", _stand_in)
    monkeypatch.setattr(api, "write_model", _stand_in)
    with pytest.raises(Called) as from_command:
        command.main(["--model-repository", str(tmp_path / "repo"), "--model-path", str(tmp_path / "a"),
                      "--model-name", "m"])
    with pytest.raises(Called) as from_api:
        dt.deploy(tmp_path / "a", tmp_path / "repo", "m")
    assert from_command.value.args_[2] == from_api.value.args_[2] == dt.ConfigOptions(model_name="m")


def test_one_naming_scheme_across_the_api():
    """The same thing has one parameter name everywhere: a model's name is `model_name`, never `name`."""
    for fn in (getattr(dt, n) for n in dt.__all__ if inspect.isfunction(getattr(dt, n))):
        params = set(inspect.signature(fn).parameters)
        assert "name" not in params, f"{fn.__name__}: call it model_name"
        assert not params & {"out_dir", "output_path", "result_path", "outdir"}, f"{fn.__name__}: output_dir/result_dir"


@pytest.mark.slow  # a real ONNX export
def test_a_live_module_artifact_says_in_one_line_why_it_cannot_be_rebuilt(tmp_path):
    import numpy as np
    import torch

    from deployment_toolkit.framework import framework_predictor
    from deployment_toolkit.sources import SourceError

    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())
    dt.convert(model, "onnx", tmp_path / "onnx", inputs={"x": np.ones((2, 4), np.float32)})
    with pytest.raises(SourceError, match="converted from a live nn.Module .*Sequential.*records no file"):
        framework_predictor(tmp_path / "onnx", "framework")
