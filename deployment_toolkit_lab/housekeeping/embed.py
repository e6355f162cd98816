"""Keep the figures in a README equal to the files a command wrote.

A block in a Markdown file

    <!-- generated from results/<run>/online.md -->
    ...
    <!-- end generated -->

holds the named file's text verbatim (relative to the repository root). `embed_generated` rewrites every
block from its file; `stale_blocks` lists those that differ, so a test can catch a number typed by hand.
"""
from __future__ import annotations

import re
from pathlib import Path

from deployment_toolkit.spec import atomic_write_text
from deployment_toolkit.errors import UserError

_BLOCK = re.compile(r"(<!-- generated from (?P<path>\S+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)


class EmbedError(UserError, ValueError):
    pass


def _source(root: Path, rel: str) -> str:
    path = (root / rel).resolve()
    if root.resolve() not in path.parents:
        raise EmbedError(f"generated block names {rel!r}, which is outside {root}")
    if not path.is_file():
        raise EmbedError(f"generated block names {rel}, which does not exist: run the command that writes it")
    text = path.read_text()
    return text if text.endswith("\n") else text + "\n"


def blocks(text: str) -> list[tuple[str, str]]:
    """(path, body) of every generated block in `text`."""
    return [(m["path"], m["body"]) for m in _BLOCK.finditer(text)]


def render(text: str, root: Path) -> str:
    """`text` with every generated block's body replaced by its file's current content."""
    return _BLOCK.sub(lambda m: m.group(1) + _source(root, m["path"]) + m.group(4), text)


def stale_blocks(markdown: Path, root: Path) -> list[str]:
    """Paths of the blocks in `markdown` whose body differs from their file."""
    return [rel for rel, body in blocks(markdown.read_text()) if body != _source(root, rel)]


def embed_generated(markdown: Path, root: Path) -> list[str]:
    """Rewrite `markdown`'s generated blocks in place; returns the paths of the blocks that changed."""
    changed = stale_blocks(markdown, root)
    if changed:
        atomic_write_text(markdown, render(markdown.read_text(), root))
    return changed
