"""Every gRPC call gives up: a server that accepts the connection and never answers (a wedged backend) must not
block the caller forever. tritonclient's gRPC calls have no deadline of their own; without one, a CI run once hung
until its 90-minute limit. A listening socket nobody reads is such a server (the kernel completes the handshake)."""
from __future__ import annotations

import socket
import threading
import time

import pytest

from deployment_toolkit.client import ServerNotReady, TritonClient
from deployment_toolkit.client.connection import close_quietly, connect


@pytest.fixture()
def silent_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def _finishes(call, within_s: float) -> BaseException:
    """Run `call` in a thread; it must raise within `within_s` (a hang fails the test instead of the suite)."""
    outcome: list[BaseException] = []

    def target():
        try:
            call()
        except BaseException as err:  # noqa: BLE001 - the error is the result
            outcome.append(err)

    thread = threading.Thread(target=target, daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(within_s)
    assert not thread.is_alive(), f"the call still waits after {within_s:.0f} s: no deadline"
    assert outcome, "a server that never answers cannot have answered"
    assert time.monotonic() - started < within_s
    return outcome[0]


def test_grpc_calls_through_connect_carry_a_deadline(silent_url):
    client = connect(silent_url, "grpc", timeout_s=1.0)
    try:
        err = _finishes(lambda: client.get_model_config("m", as_json=True), 20)
        assert "deadline" in str(err).lower(), err
        # a caller's own deadline wins over the default
        started = time.monotonic()
        _finishes(lambda: client.get_server_metadata(client_timeout=3.0), 20)
        assert time.monotonic() - started >= 2.5
    finally:
        close_quietly(client)


def test_triton_client_gives_up_on_a_silent_server(silent_url):
    with TritonClient(silent_url, "grpc", timeout_s=1.0) as client:
        err = _finishes(lambda: client.require_ready("m"), 20)
    assert isinstance(err, ServerNotReady) and "does not answer" in str(err)

