"""Which libpython the Python backend's stub runs, so that steps load on the Python the user runs.

The stub in the nvidia-pytriton wheel links `libpython3.X.so.1.0` by name and finds it the way the dynamic linker
does: on a Debian host, the system's build. A venv on another build of the same minor version (pyenv, conda, uv)
then imports its own standard library into the system's interpreter, and extensions that need newer symbols fail
(`_ssl`: `undefined symbol: _PyModule_Add`), so a step importing `ssl`, `requests` or `transformers` cannot load.
Pointing the linker at the interpreter's own library folder first makes the stub run the same build as the user.
A build without a shared libpython (a static one) cannot be matched that way: its version is compared with the
library the stub will find, and a difference is said in one line naming both.
"""
from __future__ import annotations

import ctypes.util
import functools
import platform
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class StubPython:
    """The libpython the stub will run and how it compares with this interpreter."""

    interpreter: str  # this interpreter's version, e.g. 3.11.7
    library: Path | None  # the libpython the stub loads (None: none found)
    library_version: str | None  # its version where it could be read
    libdir: Path | None  # the folder to put first on LD_LIBRARY_PATH (the interpreter's own), None: leave it

    @property
    def matches(self) -> bool:
        return self.library is not None and self.library_version == self.interpreter

    def mismatch(self) -> str:
        """One line naming both builds where they differ, '' where they match."""
        if self.matches:
            return ""
        if self.library is None:
            return (f"the Python backend's stub needs libpython{_minor()}.so.1.0 and finds none, and this interpreter "
                    f"(Python {self.interpreter}, {sys.executable}) has no shared libpython: use a Python built with "
                    "--enable-shared (pyenv: PYTHON_CONFIGURE_OPTS=--enable-shared; conda and uv Pythons have one)")
        return (f"the Python backend's stub runs libpython {self.library_version or 'of unknown version'} "
                f"({self.library}) but this interpreter is Python {self.interpreter} ({sys.executable}) without a "
                "shared libpython of its own: steps importing ssl, requests or transformers may fail to load; use a "
                "Python built with --enable-shared (pyenv: PYTHON_CONFIGURE_OPTS=--enable-shared)")


def _minor() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def own_library() -> Path | None:
    """This interpreter's own shared libpython, if it was built with one (pyenv --enable-shared, conda, uv, Debian)."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        return None
    libdir = sysconfig.get_config_var("LIBDIR")
    names = [sysconfig.get_config_var("INSTSONAME"), f"libpython{_minor()}.so.1.0", sysconfig.get_config_var("LDLIBRARY")]
    for name in filter(None, names):
        path = Path(libdir or "") / name
        if libdir and path.is_file():
            return path
    return None


def library_version(path: Path) -> str | None:
    """The version a libpython reports (Py_GetVersion), read in a child process: loading a second libpython into
    this one is not safe."""
    code = ("import ctypes,sys; lib = ctypes.CDLL(sys.argv[1]); lib.Py_GetVersion.restype = ctypes.c_char_p; "
            "print(lib.Py_GetVersion().decode().split()[0])")
    try:
        done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def stub_python() -> StubPython:
    """The libpython the stub will run: the interpreter's own where it has one (its folder goes first on the
    linker's path), else the one the linker finds by name, with its version."""
    version = platform.python_version()
    own = own_library()
    if own is not None:
        return StubPython(version, own, version, own.parent)
    found = ctypes.util.find_library(f"python{_minor()}")
    path = None
    if found:
        path = Path(found)
        if not path.is_absolute():
            path = next((Path(d) / found for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/lib64",
                                                      "/usr/lib", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu")
                         if (Path(d) / found).exists()), path)
    return StubPython(version, path, library_version(path) if path is not None else None, None)


__all__ = ["StubPython", "library_version", "own_library", "stub_python"]
