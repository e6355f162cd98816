"""Where perf_analyzer is and whether it starts: the binary next to this interpreter or on PATH, the environment
it needs (libcudart.so.12 from the pip wheel), and a one-line hint for each missing library.

A leaf (imports nothing of the toolkit): perf runs it, doctor checks it and run.json (results.runinfo) records
its version, without results depending on perf."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .errors import UserError

PERF_ANALYZER = "perf_analyzer"
_MISSING_LIB = re.compile(r"error while loading shared libraries: (\S+?):")


class PerfAnalyzerNotFound(UserError, RuntimeError):
    """perf_analyzer is missing or cannot start; the message says what to install."""


INSTALL_HINT = (
    "perf_analyzer ships in the tritonclient 2.50.0 wheel (later wheels dropped it): "
    "`pip install 'tritonclient[all]==2.50.0'`; it also needs `apt-get install libb64-0d` and "
    "`pip install nvidia-cuda-runtime-cu12` (libcudart.so.12, even on CPU hosts)"
)
_LIB_HINTS = {
    "libcudart": "`pip install nvidia-cuda-runtime-cu12` (the toolkit puts its lib/ on LD_LIBRARY_PATH itself)",
    "libb64": "`apt-get install libb64-0d`",
}


def find_perf_analyzer() -> Path:
    """perf_analyzer next to this interpreter (the venv's bin/), else on PATH."""
    here = Path(sys.executable).parent / PERF_ANALYZER
    if here.exists():
        return here
    found = shutil.which(PERF_ANALYZER)
    if found:
        return Path(found)
    raise PerfAnalyzerNotFound(f"perf_analyzer not found next to {sys.executable} nor on PATH. {INSTALL_HINT}")


def cuda_runtime_lib_dirs() -> list[str]:
    """lib/ folders of the pip CUDA runtime wheel (nvidia-cuda-runtime-cu12) in this environment."""
    dirs = []
    for base in map(Path, sys.path):
        candidate = base / "nvidia" / "cuda_runtime" / "lib"
        if (candidate / "libcudart.so.12").exists() and str(candidate) not in dirs:
            dirs.append(str(candidate))
    return dirs


def perf_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment perf_analyzer needs: libcudart.so.12 from the pip wheel on LD_LIBRARY_PATH."""
    env = dict(os.environ if base is None else base)
    parts = [*cuda_runtime_lib_dirs(), *[p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(dict.fromkeys(parts))
    return env


def missing_libraries(text: str) -> list[str]:
    """Shared libraries named in a loader error or as `=> not found` in ldd output."""
    libs = _MISSING_LIB.findall(text)
    libs += re.findall(r"^\s*(\S+) => not found", text, re.M)
    return list(dict.fromkeys(libs))


def check_perf_analyzer(binary: str | Path | None = None) -> tuple[Path, str]:
    """Return (binary, version line); raise PerfAnalyzerNotFound naming any missing .so and how to get it."""
    path = Path(binary) if binary else find_perf_analyzer()
    env = perf_environment()
    try:
        proc = subprocess.run([str(path), "--version"], capture_output=True, text=True, env=env, timeout=30)
    except OSError as err:
        raise PerfAnalyzerNotFound(f"cannot execute {path}: {err}. {INSTALL_HINT}") from err
    text = proc.stdout + proc.stderr
    libs = missing_libraries(text)
    if not libs and proc.returncode != 0 and shutil.which("ldd"):
        ldd = subprocess.run(["ldd", str(path)], capture_output=True, text=True, env=env, timeout=30)
        libs = missing_libraries(ldd.stdout + ldd.stderr)
    if libs:
        hints = [f"{lib}: " + next((h for k, h in _LIB_HINTS.items() if lib.startswith(k)), "install the package providing it")
                 for lib in libs]
        raise PerfAnalyzerNotFound(f"{path} cannot start, missing shared libraries:\n  " + "\n  ".join(hints))
    if proc.returncode != 0:
        raise PerfAnalyzerNotFound(f"`{path} --version` failed (exit {proc.returncode}): {text.strip()}. {INSTALL_HINT}")
    version = next((line.strip() for line in text.splitlines() if "version" in line.lower()), text.strip())
    return path, version
