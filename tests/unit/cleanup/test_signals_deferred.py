"""cleanup.signals_deferred: SIGINT/SIGTERM that arrive in the body (a C-extension import, a spawn, a server's stop)
reach their handler only once the body is done, including a signal another thread took; handlers come back as they
were, an ignored signal stays ignored, and outside the main thread it stands aside."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from deployment_toolkit.cleanup import signals_deferred

ROOT = Path(__file__).resolve().parents[3]


class Stopped(Exception):
    pass


@pytest.fixture(autouse=True)
def python_handles_ctrl_c():
    """Python's own Ctrl-C handler, whatever the suite was started with: a shell starts a background job (`make test
    &`, nohup) with SIGINT ignored, and these tests are about the handler an interactive command has."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture()
def sigterm_raises():
    """SIGTERM raises Stopped (as cli's handler raises SystemExit), restored after the test."""
    def handler(signum, frame):
        raise Stopped(signum)

    previous = signal.signal(signal.SIGTERM, handler)
    yield handler
    signal.signal(signal.SIGTERM, previous)


def _bytecodes() -> int:
    """Some Python work, during which a pending handler would run."""
    return sum(range(10_000))


def test_a_signal_in_the_body_is_delivered_when_the_body_is_done(sigterm_raises):
    done = []
    with pytest.raises(Stopped):
        with signals_deferred():
            signal.raise_signal(signal.SIGTERM)  # synchronous: a process-wide kill may reach a thread left by an
            _bytecodes()  # earlier test and trip the flag only after the body (the suite once saw that)
            done.append("body")
    assert done == ["body"]
    assert signal.getsignal(signal.SIGTERM) is sigterm_raises


def test_ctrl_c_in_the_body_is_a_keyboard_interrupt_after_it():
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        with signals_deferred():
            signal.raise_signal(signal.SIGINT)
            _bytecodes()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _take_sigterm_here() -> None:
    """This thread takes a SIGTERM itself (thread-directed, so no other thread of the process can)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)


def test_a_signal_another_thread_takes_is_held_as_well(sigterm_raises):
    """A mask on the main thread is not enough: the thread that takes the signal trips Python's flag and the main
    thread runs the handler at its next bytecode; the swapped handler only records it."""
    done = []
    with pytest.raises(Stopped):
        with signals_deferred():
            old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # the main thread cannot take it
            try:
                sender = threading.Thread(target=_take_sigterm_here)
                sender.start()
                sender.join()  # the other thread took it: Python's flag is tripped, the handler runs in the main thread
                _bytecodes()
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)
            _bytecodes()  # still inside: nothing raised yet
            done.append("body")
    assert done == ["body"]


def test_nested_bodies_deliver_at_the_outer_end(sigterm_raises):
    order = []
    with pytest.raises(Stopped):
        with signals_deferred():
            with signals_deferred():
                signal.raise_signal(signal.SIGTERM)
            order.append("after inner")
    assert order == ["after inner"]


def test_an_ignored_signal_stays_ignored():
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with signals_deferred():
            assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
            signal.raise_signal(signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_an_exception_in_the_body_restores_the_handlers(sigterm_raises):
    with pytest.raises(ValueError):
        with signals_deferred():
            raise ValueError("boom")
    assert signal.getsignal(signal.SIGTERM) is sigterm_raises
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_outside_the_main_thread_it_stands_aside():
    seen = []

    def body():
        with signals_deferred():
            seen.append(signal.getsignal(signal.SIGINT))

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert seen == [signal.default_int_handler]


def test_a_ctrl_c_the_command_handled_inside_a_string_exec_exits_with_the_commands_code(tmp_path):
    """A KeyboardInterrupt raised inside exec()/eval() of a string (a dataclass being defined while the
    command imports) and handled by the command: `python -m` must exit with the command's code, not die by
    SIGINT (-2) after it, as `serve` did once in the start-up race test."""
    (tmp_path / "handled_interrupt.py").write_text(
        "from deployment_toolkit import cli\n"
        "def main():\n"
        "    try:\n"
        "        exec('raise KeyboardInterrupt')\n"
        "    except KeyboardInterrupt:\n"
        "        return 0\n"
        "cli.run(main)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run([sys.executable, "-m", "handled_interrupt"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_stop_signal_while_a_client_is_built_leaves_no_half_built_client(sigterm_raises, protocol):
    """A SIGTERM inside tritonclient's InferenceServerClient.__init__ (seen in the start-up race test) left an object
    without `_closed`, whose __del__ printed 'Exception ignored ... AttributeError': the client is built whole first,
    then the signal is raised."""
    import gc
    import unittest.mock

    from deployment_toolkit.client.connection import client_module, connect

    module = client_module(protocol)
    real_init = module.InferenceServerClient.__init__

    def signalled_init(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # the stop arrives as the constructor starts
        real_init(self, *args, **kwargs)

    unraisable = []
    with unittest.mock.patch.object(module.InferenceServerClient, "__init__", signalled_init), \
            unittest.mock.patch.object(sys, "unraisablehook", unraisable.append):
        with pytest.raises(Stopped):
            connect("127.0.0.1:9", protocol)
        gc.collect()
    assert unraisable == []
