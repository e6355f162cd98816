"""The README and the docs site (issue 45, items 2 and 3): a README a newcomer reads in ten minutes, with the path
from their own model to `deployment-toolkit plan` near its top; a site that builds in strict mode (a broken link,
anchor or nav entry fails), whose references are generated from the code. The figures quoted from the committed runs
and the runs the docs cite are the lab's housekeeping (tests_lab/unit/test_committed_blocks.py, `make test-lab`)."""
from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from deployment_toolkit.errors import UserInputError

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 350
OWN_MODEL_WITHIN = 120  # the path from the user's own model to `deployment-toolkit plan` starts in these lines
QUIET = {"NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}  # the theme's and a plugin's banners


def _generator():
    """docs/gen_reference.py as a module (its functions; it writes pages only when mkdocs or python runs it)."""
    if "gen_reference" not in sys.modules:
        spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["gen_reference"] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules["gen_reference"]


# ---- the README --------------------------------------------------------------------------------------------------

def test_the_readme_is_short_and_starts_with_the_path_from_your_model_to_a_plan():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move sections to docs/ (at most {README_MAX_LINES})"
    top = "\n".join(lines[:OWN_MODEL_WITHIN])
    assert "deployment-toolkit plan" in top, f"`deployment-toolkit plan` is not in README.md's first {OWN_MODEL_WITHIN} lines"
    for form in ("get_model", "--checkpoint", "timm:", ".onnx"):  # model.py + checkpoint, a timm arch, an ONNX file
        assert form in top, f"README.md's first {OWN_MODEL_WITHIN} lines do not show {form!r}"
    assert "make demo" in top and "make test" in top


def test_the_readme_links_only_to_files_that_exist():
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text()):
        if not re.match(r"[a-z]+://", target):
            assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


# ---- the generated references ------------------------------------------------------------------------------------

def test_the_deployment_file_reference_follows_the_fields_the_dataclasses_gain():
    """A key added to a section later (a traffic CSV, say) gets its row, with its type, default and help."""
    from deployment_toolkit.config import setting
    from deployment_toolkit.deployment import file

    gen = _generator()

    @dataclasses.dataclass(frozen=True)
    class WithTraffic(file.ModelEntry):
        traffic: Path | None = setting(None, help="a CSV of the model's arrivals")
        burst: float = setting(1.5, unit="x", low=1, high=10)

    sections: list = []
    rows = {r[0]: r for r in gen._key_rows(WithTraffic, list(dataclasses.fields(WithTraffic)), {}, sections, "models[].")}
    assert rows["`traffic`"][1:3] == ("path", "not set") and "arrivals" in rows["`traffic`"][5]
    assert rows["`burst`"][1:5] == ("number", "`1.5`", "x", "≥ 1 and ≤ 10")
    assert rows["`peak_rps`"][2:5] == ("required", "inferences/s", "&gt; 0 and ≤ 1e+09")


@pytest.mark.slow
def test_the_references_cover_every_command_and_every_key():
    from deployment_toolkit.__main__ import COMMANDS, PROG
    from deployment_toolkit.deployment import file

    gen = _generator()
    cli = gen.cli_reference()
    for name in COMMANDS:
        assert f"## `{PROG} {name}`" in cli, f"the CLI reference has no section for {name}"
    assert "--peak-rps" in cli and "--deployment" in cli
    page = gen.deployment_file_reference()
    sections = ((file.Deployment, lambda k: {k: None}), (file.ModelEntry, lambda k: {"models": [{k: None}]}),
                (file.Costs, lambda k: {"costs": {k: None}}), (file.Limits, lambda k: {"limits": {k: None}}))
    for cls, place in sections:
        for field in dataclasses.fields(cls):
            if f"| `{field.name}` |" in page:
                continue
            # left out only where the reader refuses it as a key (a field it sets itself, such as `source`)
            with pytest.raises(UserInputError, match=f"unknown key '{field.name}'"):
                file.parse(place(field.name))
    assert "| `source` |" not in page and "| `peak_rps` |" in page


@pytest.mark.slow
def test_the_docs_site_builds_in_strict_mode(tmp_path):
    """`make docs` is this build: a broken link, a missing anchor, a page left out of the nav fails it."""
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                           "--site-dir", str(site)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **QUIET})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    cli = (site / "reference" / "cli.html").read_text()
    assert "deployment-toolkit plan" in cli and "--peak-rps" in cli
    assert "peak_rps" in (site / "reference" / "deployment-file.html").read_text()
    for page in ("index.html", "results.html", "guides/your-model.html", "guides/lab.html"):
        assert (site / page).is_file(), page
