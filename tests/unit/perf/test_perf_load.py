"""perf on the typed core (issue 37): a load level is one tagged value, a sweep takes where the server is as one value
and its settings as one dataclass, shared memory and protocol are the config enums everywhere (strings still taken)."""
from __future__ import annotations

import pytest

from deployment_toolkit.config import Concurrency, Protocol, RequestRate, Reuse, Schedule, SharedMemory
from deployment_toolkit.perf.analyzer import PerfOptions, PerfTarget, build_command, load_args
from deployment_toolkit.perf.analyzer.flags import add_perf_arguments, perf_options_from_args, shared_memory_for
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


def test_the_flags_default_to_the_options_fields():
    import argparse

    parser = argparse.ArgumentParser()
    add_perf_arguments(parser)
    args = parser.parse_args([])
    opts = perf_options_from_args(args, shared_memory=shared_memory_for("127.0.0.1:8001", args.shared_memory))
    assert opts == PerfOptions(shared_memory=SharedMemory.SYSTEM)
    assert shared_memory_for("grpc://10.0.0.2:8001", "auto") is SharedMemory.NONE
    assert shared_memory_for("10.0.0.2:8001", "cuda") is SharedMemory.CUDA


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
