"""Extra report sections written by other analyses (fleet sizing, config search) next to a run:
`<name>.md` and `<name>.html` in the run folder are spliced into report.md / report.html between markers,
replacing an earlier copy, so rebuilding the report or rerunning the analysis never duplicates them."""
from __future__ import annotations

from pathlib import Path

from ..spec import atomic_write_text

EXTRA_SECTIONS = ("sizing", "search")


def _inline(text: str) -> str:
    import html
    import re

    out = html.escape(text, quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out)


def markdown_to_html(md: str, base_dir: str | Path, css_class: str = "section") -> str:
    """The subset of markdown the analyses write (headings, paragraphs, tables, lists, images, bold, code)
    as an HTML fragment for report.html; headings move down one level and PNGs are embedded."""
    import base64
    import html
    import re

    base_dir = Path(base_dir)
    lines = md.splitlines()
    parts = [f'<section class="{css_class}">']
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")) + 1, 6)
            parts.append(f"<h{level}>{_inline(line.lstrip('#').strip())}</h{level}>")
            i += 1
        elif line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            head, body = block[0], block[2:]
            parts.append("<table><thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr></thead><tbody>"
                         + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in body)
                         + "</tbody></table>")
        elif line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            parts.append("<ul>" + "".join(items) + "</ul>")
        elif re.match(r"^!\[[^\]]*\]\([^)]+\)$", line.strip()):
            alt, name = re.match(r"^!\[([^\]]*)\]\(([^)]+)\)$", line.strip()).groups()
            img = base_dir / name
            if img.exists():
                data = base64.b64encode(img.read_bytes()).decode("ascii")
                parts.append(f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">')
            i += 1
        else:
            para = []
            while i < len(lines) and lines[i].strip() and not lines[i].startswith(("#", "|", "- ", "![")):
                para.append(_inline(lines[i].rstrip()))
                i += 1
            parts.append("<p>" + "<br>".join(para) + "</p>")
    parts.append("</section>")
    return "\n".join(parts) + "\n"


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
