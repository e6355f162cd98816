"""The lab's tests (`make test-lab`): the toolkit's own benchmarks, the corpus, the comparisons with Model Analyzer and
the housekeeping of the committed runs, apart from `make test` (which collects tests/ only). The toolkit's test
helpers and fixtures are tests/conftest.py's, loaded here under their own name so `from conftest import ...` in a
lab test finds the same helpers; `run_script` runs the lab's scripts (deployment_toolkit_lab/scripts/)."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("toolkit_conftest", ROOT / "tests" / "conftest.py")
_toolkit = importlib.util.module_from_spec(_spec)
sys.modules["toolkit_conftest"] = _toolkit
_spec.loader.exec_module(_toolkit)  # also puts the checkout first on sys.path and imports deployment_toolkit

# fixtures (pytest finds them by name here) and helpers the lab's tests import from `conftest`
console_logging = _toolkit.console_logging
repo_root = _toolkit.repo_root
converted = _toolkit.converted
table_rows = _toolkit.table_rows
under_ci = _toolkit.under_ci
require_tool = _toolkit.require_tool
require_triton_tools = _toolkit.require_triton_tools
wait_until = _toolkit.wait_until
parsed_vs_defaults = _toolkit.parsed_vs_defaults


@pytest.fixture(scope="session", autouse=True)
def lab_console_logging(console_logging):
    """The lab's library logs (deployment_toolkit_lab.*) reach the console as a lab command shows them."""
    from deployment_toolkit_lab import console_logging as lab_console

    lab_console()


def run_script(name: str, *args, check: bool = True, timeout: float = 300):
    """A deployment_toolkit_lab/scripts/<name> script as a user runs it (from the checkout, output captured);
    AssertionError with its output when it fails and `check`."""
    proc = subprocess.run([sys.executable, str(ROOT / "deployment_toolkit_lab" / "scripts" / name),
                           *map(str, args)], capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{name} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def toolkit_test(rel: str):
    """A module of the toolkit's tests (tests/<rel>), for the fakes a lab test shares with it (the search's
    FakeMeasurer and `run`, say), loaded once under its own name."""
    name = "toolkit_" + rel.removesuffix(".py").replace("/", "_")
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / rel)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
