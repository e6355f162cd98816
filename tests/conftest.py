import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import deployment_toolkit  # noqa: E402,F401  (before torch: hides the triton/ scripts folder from torch)


@pytest.fixture(scope="session", autouse=True)
def console_logging():
    """The library logs and the command layer shows it (cli.console_logging); tests that call library functions
    read the same lines from capsys as a user reads on the console."""
    from deployment_toolkit import cli

    cli.console_logging()


@pytest.fixture(scope="module", autouse=True)
def exclusive_measurement(request):
    """A module marked `exclusive` judges what the host's cores carry (a plan's capacities held against their SLOs and
    confirmed under mixed traffic): it runs with nothing beside it. `make test` and `make test-e2e` run those modules
    last, in one process, after the others (two workers); under any other pytest-xdist run this read-write lock does
    the same, module by module (every module takes it shared, an exclusive one alone; a turnstile keeps a waiting
    exclusive module from being starved). Only keeping exclusive modules from each other was not enough: on the
    2-core CI host a one-model plan's capacity, 96 inf/s in its search, held under 51 in its hold beside the other
    worker's perf_analyzer run, and the plan stopped (exit 2)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    import fcntl
    import tempfile

    exclusive = request.node.get_closest_marker("exclusive") is not None
    folder = Path(tempfile.gettempdir())
    with open(folder / "deployment_toolkit-tests-turnstile.lock", "w") as turnstile, \
            open(folder / "deployment_toolkit-tests-exclusive.lock", "w") as lock:
        fcntl.flock(turnstile, fcntl.LOCK_EX)  # held while waiting: no module starts beside a waiting exclusive one
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def converted(tmp_path_factory):
    """Small resnet18 converted once per session to ONNX and TorchScript (trace)."""
    from deployment_toolkit.export import convert

    base = tmp_path_factory.mktemp("converted")
    return {fmt: (base / fmt, convert("resnet18", fmt, base / fmt)) for fmt in ("onnx", "ts-trace")}


def pytest_collection_modifyitems(config, items):
    """Modules marked `long` (about 35 s or more on 2 cores) first, each module's tests in their order: xdist's
    `loadfile` hands out modules in collection order when told not to reorder them by their number of tests
    (`--no-loadscope-reorder`, as the Makefile's test targets do; by default it puts the one-test modules, often the
    longest, last), so a long one does not run alone at the end while the other worker sits idle."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # a stable sort


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", help="rewrite golden config files")


# ---- what a test may skip on ----------------------------------------------------------------------
# A test skips only for a documented, detectable optional part (no GPU; nginx or shellcheck, which `make install`
# installs only as root). Under CI (env var CI set) those must be there too, so a broken CI image fails instead of
# skipping. Everything `make install` always provides (torch, onnxruntime, the embedded tritonserver,
# perf_analyzer) is imported or found directly: its absence is a failure, never a skip.

def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_tool(name: str, install_hint: str, find: "Callable[[], Path] | None" = None,
                 missing: "type[Exception]" = LookupError) -> Path:
    """The executable `name`, found on PATH (or by `find`, which raises `missing` when it is not there): skip
    when it is missing on a developer machine, fail under CI."""
    try:
        found = find() if find is not None else shutil.which(name)
    except missing as err:
        found, install_hint = None, str(err)
    if found is None:
        why = f"{name} not installed: {install_hint}"
        if under_ci():
            pytest.fail(f"{why} (CI must have it: `make install` as root installs it)")
        pytest.skip(why)
    return Path(found)


def require_triton_tools() -> None:
    """The embedded tritonserver (nvidia-pytriton) and perf_analyzer come with `make install`: missing is a failure."""
    from deployment_toolkit.binaries import PerfAnalyzerNotFound, check_perf_analyzer
    from deployment_toolkit.server.local import ServerNotFoundError, find_installation

    try:
        find_installation()
        check_perf_analyzer()
    except (ServerNotFoundError, PerfAnalyzerNotFound) as err:
        pytest.fail(f"the embedded tritonserver and perf_analyzer are part of `make install`: {err}")


def _table_rows(text: str) -> list[list[str]]:
    """The cells of every markdown table row in text (rule lines left out), as tables.markdown_table pads them."""
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("|") and line.endswith("|") and not set(line) <= set("|:- "):
            rows.append([c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line[1:-1])])
    return rows


@pytest.fixture(scope="session")
def table_rows():
    """table_rows(text): each markdown table row's cells, so a test checks values cell by cell."""
    return _table_rows


def wait_until(condition, timeout_s: float, what: str):
    """Poll `condition` (a health check, not a fixed sleep) until it is truthy; fail saying `what` after
    `timeout_s`. Returns the condition's value."""
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        assert time.monotonic() < deadline, f"{what} after {timeout_s:.0f} s"
        time.sleep(0.05)  # polling interval
    return value


def run_script(name: str, *args, check: bool = True, timeout: float = 300):
    """A triton/<name> script as a user runs it (from the checkout, output captured); AssertionError with its
    output when it fails and `check`."""
    import subprocess

    proc = subprocess.run([sys.executable, str(ROOT / "triton" / name), *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{name} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def make_n(*args: str) -> str:
    """What `make` would run for `args` (`make -n` in the checkout), printed, not run."""
    import subprocess

    out = subprocess.run(["make", "-n", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def parsed_vs_defaults(args, settings: type, only: "tuple[str, ...] | None" = None) -> "tuple[set[str], dict]":
    """The fields of settings dataclass `settings` (`only` these) whose flag the command parsed, and those whose
    parsed default differs from the field's own (a flag that restates another default)."""
    import dataclasses

    from deployment_toolkit.config import flag_of

    seen, differ = set(), {}
    for field in dataclasses.fields(settings):
        flag = flag_of(field)
        if flag is None or not flag.name or not hasattr(args, field.name) or (only and field.name not in only):
            continue
        seen.add(field.name)
        value = getattr(args, field.name)
        value = tuple(value) if isinstance(value, list) else value
        if flag.to_value is not None and value is not None:
            value = flag.to_value(value)
        default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
        if value != default:
            differ[field.name] = (value, default)
    return seen, differ
