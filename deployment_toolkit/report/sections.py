"""Extra report sections written by other analyses (fleet sizing, config search) next to a run:
`<name>.md` and `<name>.html` in the run folder are spliced into report.md / report.html between markers,
replacing an earlier copy, so rebuilding the report or rerunning the analysis never duplicates them."""
from __future__ import annotations

from pathlib import Path

from ..spec import atomic_write_text

EXTRA_SECTIONS = ("sizing", "search")


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
