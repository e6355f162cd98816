"""A server URL names its protocol; a bare host:port takes the one given; contradictions are one-line errors."""
from __future__ import annotations

import pytest

from deployment_toolkit.client import ServerUrl, TritonClient, config_from_json, instance_count
from deployment_toolkit.errors import UserInputError


@pytest.mark.parametrize(("text", "protocol", "expected"), [
    ("grpc://127.0.0.1:8001", None, ("grpc", "127.0.0.1", 8001)),
    ("http://localhost:8000/", None, ("http", "localhost", 8000)),
    ("127.0.0.1:9000", "http", ("http", "127.0.0.1", 9000)),
    ("127.0.0.1:9000", None, ("grpc", "127.0.0.1", 9000)),
    ("triton", "http", ("http", "triton", 8000)),
    ("[::1]:8001", None, ("grpc", "::1", 8001)),
    ("GRPC://h:1", "grpc", ("grpc", "h", 1)),
])
def test_parse(text, protocol, expected):
    url = ServerUrl.parse(text, protocol)
    assert (url.protocol, url.host, url.port) == expected
    assert ServerUrl.parse(str(url)) == url  # round trip


@pytest.mark.parametrize(("text", "protocol", "message"), [
    ("grpc://h:8001", "http", "says grpc but --protocol is http"),
    ("https://h:8000", None, "TLS is not supported"),
    ("ftp://h:1", None, "grpc:// or http://"),
    ("h:port", None, "expected host:port"),
    ("h:70000", None, "expected host:port"),
    ("http://h:8000/v2/models", None, "no path"),
])
def test_bad_urls_are_one_line(text, protocol, message):
    with pytest.raises(UserInputError, match=message) as info:
        ServerUrl.parse(text, protocol)
    assert "\n" not in str(info.value)


def test_client_takes_its_protocol_from_the_url():
    with TritonClient("http://127.0.0.1:1") as client:
        assert client.protocol == "http" and client.url.address == "127.0.0.1:1"
        assert not client.live() and not client.ready("m")  # nothing answers: False, not an exception
        assert "does not answer" in client.health_reason("m")


def test_config_is_the_typed_model_config():
    cfg = config_from_json({"name": "m", "max_batch_size": 8, "instance_group": [{"count": 2, "kind": "KIND_CPU"}],
                            "parameters": {"format": {"string_value": "onnx"}}, "some_future_field": 1})
    assert cfg.max_batch_size == 8 and cfg.parameters["format"].string_value == "onnx"
    assert instance_count(cfg) == 2 and instance_count({"instance_group": [{"count": 2}, {"count": 3}]}) == 5
    assert instance_count({}) == 1
