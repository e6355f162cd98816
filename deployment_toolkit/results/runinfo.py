"""What a results folder needs to be reproducible: hardware, versions, git state, command line, config.

Every measured run writes `run.json` with `run_metadata(config)`, so a number in a table can always be
traced back to the machine, the software and the exact invocation that produced it.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from ..errors import UserInputError
from ..spec import atomic_write_text

RUN_JSON = "run.json"
REPO_ROOT = Path(__file__).resolve().parents[2]
# distribution name -> key in run.json's "versions"
_DISTRIBUTIONS = {
    "torch": "torch",
    "onnxruntime": "onnxruntime",
    "onnxruntime-gpu": "onnxruntime-gpu",
    "numpy": "numpy",
    "tritonclient": "tritonclient",
    "nvidia-pytriton": "nvidia-pytriton",
    "onnx": "onnx",
    "pandas": "pandas",
}


def cpu_info() -> dict[str, Any]:
    """CPU model (from /proc/cpuinfo), logical cores, and the cores this process may use."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 0
    return {"model": model, "logical_cores": os.cpu_count() or 0, "usable_cores": usable, "arch": platform.machine()}


def memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def gpu_info() -> list[dict[str, str]] | str:
    """GPUs as nvidia-smi reports them, or "none" when there is no nvidia-smi or no GPU."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return "none"
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "none"
    gpus = []
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and out.returncode == 0:
            gpus.append({"name": parts[0], "memory": parts[1], "driver": parts[2]})
    return gpus or "none"


def serving_device(gpu: bool) -> str:
    """The device a replica runs on, as prices (costs.by_device) are keyed: the first GPU's name as nvidia-smi gives
    it on a GPU host, else the CPU's model."""
    gpus = gpu_info() if gpu else "none"
    if isinstance(gpus, list) and gpus:
        return gpus[0]["name"]
    return str(cpu_info().get("model", ""))


def hardware() -> dict[str, Any]:
    return {
        "cpu": cpu_info(),
        "memory_gib": memory_gib(),
        "gpu": gpu_info(),
        "hostname": platform.node(),
        # other work on the host skews timings: readers should see how busy it was when the run started
        "load_average_1_5_15m": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "os": platform.platform(),
    }


def package_versions() -> dict[str, str | None]:
    """Installed versions read from package metadata (importing torch just for its version is slow)."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for dist, key in _DISTRIBUTIONS.items():
        try:
            versions[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            if key in ("onnxruntime-gpu",):
                continue
            versions[key] = None
    return versions


def perf_analyzer_version() -> str | None:
    """perf_analyzer's `--version` line (the 2.50 wheel prints an empty version; tritonclient's is recorded too)."""
    try:
        from ..binaries import PerfAnalyzerNotFound, check_perf_analyzer

        path, line = check_perf_analyzer()
        return f"{' '.join(line.split())} [{path}]"
    except (ImportError, OSError):
        return None
    except PerfAnalyzerNotFound as err:
        return f"unavailable: {str(err).splitlines()[0]}"


MEASURED_OUTPUT_DIRS = ("results/", "workspace/")  # what runs write: changes there do not change the code
LISTED_CHANGES = 20


def git_state(repo: str | Path = REPO_ROOT) -> dict[str, Any]:
    """Commit sha; the tracked files with uncommitted changes, and whether any of them is code rather than a run's
    output under results/ (a tree made dirty by results being rewritten still measured the committed code); how
    many untracked files there were (a run made with uncommitted new scripts is not reproducible from the sha)."""
    git = shutil.which("git")
    if not git:
        return {"sha": None, "dirty": None}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([git, "-C", str(repo), *args], capture_output=True, text=True, timeout=20)

    try:
        sha = run("rev-parse", "HEAD")
        if sha.returncode != 0:
            return {"sha": None, "dirty": None}
        status = run("status", "--porcelain", "--untracked-files=all").stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return {"sha": None, "dirty": None}
    untracked = sum(1 for line in status if line.startswith("??"))
    changed = [line[3:].split(" -> ")[-1].strip('"') for line in status if not line.startswith("??")]
    code = [path for path in changed if not path.startswith(MEASURED_OUTPUT_DIRS)]
    return {"sha": sha.stdout.strip(), "dirty": bool(changed), "code_dirty": bool(code),
            "changed_code": code[:LISTED_CHANGES], "changed_code_files": len(code), "changed_files": len(changed),
            "untracked_files": untracked}


def commit_text(git: dict[str, Any]) -> str:
    """The commit a run measured, for reports: its sha and what was uncommitted (runs before code_dirty was
    recorded only say whether anything was)."""
    text = (git.get("sha") or "unknown")[:12]
    if git.get("code_dirty"):
        listed = (git.get("changed_code") or [])[:5]
        more = (git.get("changed_code_files") or len(listed)) - len(listed)
        return f"{text} (uncommitted changes to {', '.join(listed)}{f' and {more} more' if more > 0 else ''})"
    if git.get("code_dirty") is False and git.get("dirty"):
        return f"{text} (code as committed; uncommitted changes under results/ only)"
    return text + (" (uncommitted changes)" if git.get("dirty") else "")


def invocation(argv: "list[str] | None" = None) -> str:
    """The command line as a user types it again. An entry point sets argv[0] to "<program> <subcommand>" (argparse's
    prog): two words, which shlex.join alone quoted as one ('deployment-toolkit-lab pack-bench' --models 100, a
    command no shell finds)."""
    argv = list(sys.argv if argv is None else argv)
    head = argv[0].split(" ") if argv and re.fullmatch(r"[\w.-]+ [\w.-]+", argv[0]) else argv[:1]
    return shlex.join([*head, *argv[1:]])


def run_metadata(config: dict[str, Any], server_version: str | None = None) -> dict[str, Any]:
    """The run.json document: when, where, with what, how it was invoked, and the given config."""
    versions: dict[str, Any] = package_versions()
    versions["perf_analyzer"] = perf_analyzer_version()
    if server_version:
        versions["tritonserver"] = server_version
    return {
        "timestamp": _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds"),
        "command": invocation(),
        "cwd": os.getcwd(),
        "hardware": hardware(),
        "versions": versions,
        "git": git_state(),
        "config": config,
    }


def write_run_json(result_dir: str | Path, meta: dict[str, Any]) -> Path:
    """Write run.json atomically (temp file + rename): a crash never leaves half a file."""
    path = Path(result_dir) / RUN_JSON
    atomic_write_text(path, json.dumps(meta, indent=2, default=str) + "\n")
    return path


def read_run_json(result_dir: str | Path) -> dict[str, Any]:
    path = Path(result_dir) / RUN_JSON
    if not path.exists():
        return {}
    try:
        meta = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UserInputError(f"{path} is not valid JSON ({err}): restore it, or rerun into a new --result-path") from None
    if not isinstance(meta, dict):
        raise UserInputError(f"{path} holds JSON {type(meta).__name__}, not a run record: restore it, or rerun into "
                         "a new --result-path")
    return meta
