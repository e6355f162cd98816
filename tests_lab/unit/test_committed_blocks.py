"""The committed runs and the pages that quote them (issue 45, items 2 and 3; moved from
tests/unit/project/test_docs_build.py with embed-results): a figure on a page is copied from its run's file, never
typed; only the runs the docs cite are committed, with no model repository or code in them; every generated block
names a file a commit would hold."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from deployment_toolkit_lab.housekeeping.embed import blocks, stale_blocks

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def _tracked(*paths: str) -> list[str]:
    """Files a commit of the working tree would hold under `paths` (tracked, or new and not ignored)."""
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard", *paths],
                         capture_output=True, text=True, check=True).stdout.split()
    return [f for f in out if (ROOT / f).exists()]


def _doc_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def test_the_docs_pages_quote_their_result_files_verbatim():
    """A figure on a page is copied from its run's file (`deployment-toolkit-lab embed-results PAGE`), never typed."""
    stale = {str(p.relative_to(ROOT)): s for p in _doc_pages() if (s := stale_blocks(p, ROOT))}
    assert not stale, f"stale generated blocks (run deployment-toolkit-lab embed-results on these pages): {stale}"


def test_every_committed_run_is_cited_by_the_docs_and_holds_no_code_or_model_repository():
    committed = _tracked("results")
    runs = {f.split("/")[1] for f in committed if f.count("/") >= 2}
    assert runs, "no committed run under results/"
    results_page = (DOCS / "results.md").read_text()
    listed = set(re.findall(r"`results/([^/`]+)/`", results_page))
    assert runs - listed == set(), f"committed runs docs/results.md does not list (cite them, or git rm them): {runs - listed}"
    assert listed - runs == set(), f"docs/results.md lists runs that are not committed: {listed - runs}"
    other_text = README.read_text() + "".join(p.read_text() for p in _doc_pages() if p.name != "results.md")
    uncited = sorted(r for r in runs if f"results/{r}/" not in other_text)
    assert not uncited, f"runs no guide or README cites: {uncited}"
    inert = [f for f in committed if re.search(r"\.py$|config\.pbtxt|model_repository", f)]
    assert not inert, f"code or a model repository committed under results/: {inert[:5]}"


def test_every_generated_block_names_a_committed_file():
    for page in [README, *_doc_pages()]:
        for rel, _ in blocks(page.read_text()):
            assert rel in _tracked(rel), f"{page.name} quotes {rel}, which a commit would not hold"


_COPIED = re.compile(r"<!-- copied from (?P<source>\S+) -->\n!\[[^\]]*\]\((?P<image>[^)\s]+)\)")


def test_every_image_on_a_page_is_its_run_s_file_byte_for_byte():
    """A plot on a page is the committed run's own file (issue 57: the traffic command's plot), copied, never
    redrawn by hand: `<!-- copied from results/<run>/<file> -->` above the image names it."""
    copies = [(page, m) for page in _doc_pages() for m in _COPIED.finditer(page.read_text())]
    assert copies, "no copied image found"
    for page, m in copies:
        assert m["source"] in _tracked(m["source"]), f"{page.name} copies {m['source']}, which a commit would not hold"
        assert (page.parent / m["image"]).read_bytes() == (ROOT / m["source"]).read_bytes(), (
            f"{page.name}: {m['image']} differs from {m['source']}: copy it again")
