"""perf on the typed core (issue 37): a load level is one tagged value, a sweep takes where the server is as one value
and its settings as one dataclass, shared memory and protocol are the config enums everywhere (strings still taken)."""
from __future__ import annotations

import dataclasses

import pytest

from conftest import parsed_vs_defaults
from deployment_toolkit.config import Concurrency, Protocol, RequestRate, Reuse, Schedule, SharedMemory, flag_of
from deployment_toolkit.errors import UserInputError
from deployment_toolkit.perf.analyzer import PerfOptions, PerfTarget, build_command, load_args
from deployment_toolkit.perf.analyzer.command import AUTO
from deployment_toolkit.perf.analyzer.flags import (PERF_FLAGS_SKIP, RealSamples, add_perf_arguments,
                                                    perf_options_from_args, shared_memory_for)
from deployment_toolkit.perf.sweep import ServerAt, SweepPoint, SweepSettings, sweep_arguments
from deployment_toolkit.spec import ModelSignature, TensorSpec

SIG = ModelSignature(inputs=(TensorSpec("x", (4,)),), outputs=(TensorSpec("y", (4,)),))


def test_each_kind_of_load_gives_its_own_flags():
    assert load_args(Concurrency(3)) == ["--concurrency-range", "3:3:1"]
    assert load_args(RequestRate(40.5)) == ["--request-rate-range", "40.5:40.5:1"]
    assert load_args(Schedule("r40.intervals", 40.0)) == ["--request-intervals", "r40.intervals"]
    with pytest.raises(TypeError):
        load_args(3)
    cmd = build_command(PerfTarget("m", "u", SIG, binary="pa"), 2, Schedule("s.intervals", 10.0), PerfOptions(),
                        "o.csv")
    assert "--request-intervals" in cmd and "--concurrency-range" not in cmd and "--request-rate-range" not in cmd


def test_options_take_strings_and_hold_enums():
    opts = PerfOptions(protocol="http", shared_memory="system", measurement_mode="count_windows")
    assert opts.protocol is Protocol.HTTP and opts.shared_memory is SharedMemory.SYSTEM
    assert opts.protocol == "http" and opts.shared_memory == "system"  # str enums: old comparisons keep working
    fields = opts.measurement_fields()
    assert fields["protocol"] == "http" and type(fields["protocol"]) is str  # fingerprints and run.json unchanged
    assert PerfOptions(protocol=Protocol.HTTP) == PerfOptions(protocol="http")
    with pytest.raises(ValueError, match="shared_memory='tcp': choose one of none, system, cuda"):
        PerfOptions(shared_memory="tcp")


def _perf_parser():
    import argparse

    parser = argparse.ArgumentParser()
    add_perf_arguments(parser)
    return parser


def test_the_flags_default_to_the_options_fields():
    args = _perf_parser().parse_args([])
    opts = perf_options_from_args(args, shared_memory=shared_memory_for("127.0.0.1:8001", args.shared_memory))
    assert opts == PerfOptions(shared_memory=SharedMemory.SYSTEM)
    assert shared_memory_for("grpc://10.0.0.2:8001", "auto") is SharedMemory.NONE
    assert shared_memory_for("10.0.0.2:8001", "cuda") is SharedMemory.CUDA


def _flagged(settings: type) -> set[str]:
    return {f.name for f in dataclasses.fields(settings) if flag_of(f) is not None and flag_of(f).name} - set(
        PERF_FLAGS_SKIP)


def test_each_perf_flag_is_built_from_its_field(monkeypatch):
    """Every perf_analyzer setting is declared once, in PerfOptions or RealSamples: the parsed default follows the
    field's, so a flag that restated its default (or a second hand-written flag) would fail here."""
    for settings in (PerfOptions, RealSamples):
        for field in dataclasses.fields(settings):
            if field.name in _flagged(settings) and flag_of(field).action not in ("store_true", "store_false"):
                monkeypatch.setattr(field, "default", (f"<{field.name}>",) if flag_of(field).action == "append"
                                    else _Sentinel(field.name))
    args = _perf_parser().parse_args([])
    for settings in (PerfOptions, RealSamples):
        seen, differ = parsed_vs_defaults(args, settings)
        assert seen == _flagged(settings), settings.__name__
        assert set(differ) == ({"shared_memory"} if settings is PerfOptions else set()), differ
    assert args.shared_memory == AUTO  # the flags' own default: system for a server on this host
    assert args.perf_samples == _Sentinel("perf_samples")  # not a restated DEFAULT_PERF_SAMPLES


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Sentinel) and other.name == self.name

    __hash__ = None  # type: ignore[assignment]


def _parsed(command: str, argv: list[str]):
    """The parsed flags of a command that exposes the perf_analyzer flags (minimal required flags given)."""
    import importlib

    if command in ("perf-offline", "perf-online"):
        kind = "offline" if command == "perf-offline" else "online"
        module = importlib.import_module(f"deployment_toolkit.commands.run_{kind}_performance_test_on_triton")
        seen = []
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(module, "run_cli", lambda *a, **k: seen.append(a[1]) or 0)
            module.main(["--model-name", "m", *argv])
        return seen[0]
    from deployment_toolkit.commands import plan_fleet, search_config

    build = search_config.build_parser if command == "search" else plan_fleet.build_parser
    return build().parse_args(["--model", "m", "--p99-ms", "100", *argv])


@pytest.mark.parametrize("command", ["perf-offline", "perf-online", "search", "plan"])  # bench-overhead: tests_lab
def test_the_commands_parse_their_perf_flags_into_the_fields(command):
    """Each command's perf_analyzer defaults are PerfOptions' (the search's and the plan's: the search request's
    DEFAULT_PERF_OPTIONS) and RealSamples'; the flags keep their names and forms."""
    from deployment_toolkit.commands.search_config import SEARCH_PERF_DEFAULTS
    from deployment_toolkit.search.request import DEFAULT_PERF_OPTIONS

    args = _parsed(command, [])
    seen, differ = parsed_vs_defaults(args, PerfOptions)
    assert seen == _flagged(PerfOptions)
    searching = command in ("search", "plan")
    assert set(differ) == {"shared_memory", *(SEARCH_PERF_DEFAULTS if searching else ())}
    assert {k: v for k, (v, _) in differ.items() if k != "shared_memory"} == {
        k: getattr(DEFAULT_PERF_OPTIONS, k) for k in (SEARCH_PERF_DEFAULTS if searching else ())}
    assert parsed_vs_defaults(args, RealSamples) == (_flagged(RealSamples), {})
    args = _parsed(command, ["--protocol", "http", "--shared-memory", "cuda", "--measurement-interval", "700",
                             "--perf-analyzer-arg=--verbose", "--perf-analyzer-arg=-v", "--async",
                             "--percentile", "95", "--perf-samples", "3", "--dataloader-arg", "k=v"])
    opts = perf_options_from_args(args)
    assert (opts.protocol, opts.shared_memory, opts.measurement_interval_ms) == (Protocol.HTTP, SharedMemory.CUDA, 700)
    assert (opts.extra_args, opts.async_mode, opts.percentile) == (("--verbose", "-v"), True, 95)
    assert (args.perf_samples, args.dataloader_arg) == (3, ["k=v"])
    with pytest.raises(UserInputError, match="--measurement-interval must be"):
        perf_options_from_args(_parsed(command, ["--measurement-interval", "0"]), shared_memory="none")


def test_a_sweep_point_is_a_batch_size_at_a_load():
    assert SweepPoint(1, 2) == SweepPoint(1, Concurrency(2))
    point = SweepPoint(8, 2)
    assert point.load == Concurrency(2) and point.concurrency == 2 and point.key == (8, 2) and point.name == "b8_c2"
    assert sorted([SweepPoint(2, 1), SweepPoint(1, 4), SweepPoint(1, 2)], key=lambda p: p.key)[0] == SweepPoint(1, 2)


def test_where_the_server_is_is_one_value():
    class Embedded:
        grpc_url, http_url, metrics_port, metrics_url = "grpc://127.0.0.1:1", "http://127.0.0.1:2", 3, "http://m/x"

    at = ServerAt.of(Embedded())
    assert at.url_for(Protocol.GRPC) == "grpc://127.0.0.1:1" and at.url_for("http") == "http://127.0.0.1:2"
    assert at.metrics_for(at.url_for("grpc")) == "http://m/x"
    assert ServerAt.of("h:8001").metrics_for("h:8001") == "http://h:8002/metrics"
    assert ServerAt("h:8001", metrics_url="none").metrics_for("h:8001") is None
    with pytest.raises(ValueError):
        ServerAt().url_for("grpc")


def test_sweep_keywords_are_settings_fields_and_the_old_server_protocol_and_metrics_keywords():
    at, opts, settings = sweep_arguments("h:8001", PerfOptions(), None,
                                         {"server": None, "protocol": "http", "metrics_url": "none",
                                          "progress": False, "reuse": "fresh", "model_version": "2"})
    assert at == ServerAt("h:8001", None, "none") and opts.protocol is Protocol.HTTP
    assert settings == SweepSettings(progress=False, reuse=Reuse.FRESH, model_version="2")
    with pytest.raises(TypeError, match="concurency"):
        sweep_arguments(None, PerfOptions(), None, {"concurency": 2})
    with pytest.raises(ValueError, match="--ready-timeout"):
        SweepSettings(ready_timeout_s=-1)
