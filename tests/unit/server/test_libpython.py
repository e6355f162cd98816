"""Which libpython the Python backend's stub runs (server.libpython)."""
import sys
from pathlib import Path

import pytest

from deployment_toolkit.server.libpython import StubPython, library_version, own_library, stub_python


def test_a_static_build_beside_another_library_is_one_line_naming_both():
    stub = StubPython("3.11.7", Path("/lib/x86_64-linux-gnu/libpython3.11.so.1.0"), "3.11.2", None)
    line = stub.mismatch()
    assert not stub.matches and "\n" not in line
    assert "3.11.2" in line and "3.11.7" in line and "--enable-shared" in line


def test_no_library_at_all_is_said():
    line = StubPython("3.12.3", None, None, None).mismatch()
    assert "finds none" in line and "3.12.3" in line


def test_this_interpreter_is_matched_by_its_own_library():
    stub = stub_python()
    if own_library() is None:
        pytest.skip(f"{sys.executable} has no shared libpython (a static build): the stub runs the system's")
    assert stub.matches and stub.libdir == own_library().parent
    # the version is read from the library itself, in a child process
    assert library_version(own_library()) == stub.interpreter
