import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import deployment_toolkit  # noqa: E402,F401  (before torch: hides the triton/ scripts folder from torch)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def converted(tmp_path_factory):
    """Small resnet18 converted once per session to ONNX and TorchScript (trace)."""
    from deployment_toolkit.export import convert

    base = tmp_path_factory.mktemp("converted")
    return {fmt: (base / fmt, convert("resnet18", fmt, base / fmt)) for fmt in ("onnx", "ts-trace")}


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", help="rewrite golden config files")


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
