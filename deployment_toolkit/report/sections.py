"""Extra report sections written by other analyses (fleet sizing, config search) next to a run:
`<name>.md` and `<name>.html` in the run folder are spliced into report.md / report.html between markers,
replacing an earlier copy, so rebuilding the report or rerunning the analysis never duplicates them."""
from __future__ import annotations

import base64
import mimetypes
import xml.etree.ElementTree as ET
from pathlib import Path

import markdown
from markdown.treeprocessors import Treeprocessor

from ..spec import atomic_write_text

EXTRA_SECTIONS = ("sizing", "search")


class _SectionTree(Treeprocessor):
    """Fits the converted section into report.html: headings one level down (the report owns <h1>) and local
    images embedded as data URIs (the report is one self-contained file); an image not on disk is dropped."""

    def __init__(self, md: markdown.Markdown, base_dir: Path):
        super().__init__(md)
        self.base_dir = base_dir

    def run(self, root: ET.Element) -> None:
        for el in root.iter():
            if el.tag in ("h1", "h2", "h3", "h4", "h5"):
                el.tag = f"h{int(el.tag[1]) + 1}"
        for parent, img in [(p, c) for p in root.iter() for c in p if c.tag == "img"]:
            path = self.base_dir / img.get("src", "")
            if path.is_file():
                mime = mimetypes.guess_type(path.name)[0] or "image/png"
                img.set("src", f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}")
            else:
                parent.remove(img)


def markdown_to_html(md: str, base_dir: str | Path, css_class: str = "section") -> str:
    """The markdown the analyses write as an HTML fragment for report.html (Python-Markdown with tables; a line
    break inside a paragraph stays one). Raw HTML in the text is escaped, not passed through: the text quotes
    tool output such as error messages."""
    converter = markdown.Markdown(extensions=["tables", "nl2br"], output_format="html")
    converter.preprocessors.deregister("html_block")
    converter.inlinePatterns.deregister("html")
    converter.treeprocessors.register(_SectionTree(converter, Path(base_dir)), "report_section", 0)
    return f'<section class="{css_class}">\n{converter.convert(md)}\n</section>\n'


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def _strip_block(text: str, name: str) -> str:
    begin, end = _markers(name)
    while begin in text and end in text.split(begin, 1)[1]:
        head, rest = text.split(begin, 1)
        text = head.rstrip("\n") + "\n" + rest.split(end, 1)[1].lstrip("\n")
    return text


def include_section(run_dir: str | Path, name: str) -> dict[str, Path]:
    """Splice `<name>.md` / `<name>.html` into the run's report; returns the sources included."""
    run_dir = Path(run_dir)
    begin, end = _markers(name)
    done: dict[str, Path] = {}
    md_src, html_src = run_dir / f"{name}.md", run_dir / f"{name}.html"
    report_md, report_html = run_dir / "report.md", run_dir / "report.html"
    if md_src.exists() and report_md.exists():
        section = "\n".join(("#" + line) if line.startswith("#") else line for line in md_src.read_text().splitlines())
        text = _strip_block(report_md.read_text(), name).rstrip("\n")
        atomic_write_text(report_md, f"{text}\n\n{begin}\n{section}\n{end}\n")
        done[md_src.name] = md_src
    if html_src.exists() and report_html.exists():
        text = _strip_block(report_html.read_text(), name)
        block = f"{begin}\n{html_src.read_text()}{end}\n"
        text = text.replace("</body>", block + "</body>", 1) if "</body>" in text else text + block
        atomic_write_text(report_html, text)
        done[html_src.name] = html_src
    return done


def include_extra_sections(run_dir: str | Path) -> dict[str, Path]:
    done: dict[str, Path] = {}
    for name in EXTRA_SECTIONS:
        done.update(include_section(run_dir, name))
    return done


def plan_page(md: str, base_dir: str | Path, title: str = "Fleet plan") -> str:
    """plan.html: a plan's markdown as one self-contained page (the single-model plan and the deployment plan)."""
    return ("<!doctype html><html><head><meta charset='utf-8'><title>" + title + "</title><style>body{font-family:"
            "sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
            "padding:2px 6px}</style></head><body>" + markdown_to_html(md, base_dir, css_class="plan")
            + "</body></html>\n")
