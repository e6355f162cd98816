"""A user's YAML file read as a person meant it: a key given twice is a mistake (YAML loaders keep the last one
silently: a second `models:` makes models vanish), and aliases that expand past a budget are refused before they
are expanded (nine levels of nine aliases are 387 million values: a loader builds them until memory runs out).
The node graph is composed first (aliases share nodes, so it stays as small as the text), checked, then built."""
from __future__ import annotations

from typing import Any

from ..errors import UserInputError

MAX_VALUES = 100_000  # values after aliases are expanded; a deployment of a thousand models has about 20,000
MERGE_KEY = "tag:yaml.org,2002:merge"


def _line(node: Any) -> int:
    return node.start_mark.line + 1


def _duplicates(node: Any, where: str) -> None:
    """One line naming a key given twice in one mapping and both its lines."""
    seen: dict[tuple[str, str], Any] = {}
    for key, _ in node.value:
        if key.tag == MERGE_KEY or not hasattr(key, "value") or not isinstance(key.value, str):
            continue  # `<<` merges; a complex key (a list as a key) is left to the reader of the value
        first = seen.setdefault((key.tag, key.value), key)
        if first is not key:
            raise UserInputError(f"{where}: key {key.value!r} is given twice in one mapping, at lines {_line(first)} "
                                 f"and {_line(key)}: keep one (YAML would silently keep the last)")


def _children(node: Any) -> list[Any]:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def check_nodes(root: Any, where: str, budget: int = MAX_VALUES) -> int:
    """The number of values `root` expands to (every alias counted as a copy); one line when it passes `budget`,
    refers to itself, or a mapping repeats a key. Each node is visited once (sizes memoised), so this is quick
    whatever the expansion."""
    import yaml

    sizes: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    open_: set[int] = set()
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        kids = _children(node)
        if done:
            open_.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(k)] for k in kids)
            if sizes[id(node)] > budget:
                raise UserInputError(f"{where}: the YAML expands to more than {budget:,} values (aliases repeat the "
                                     f"values they name; from line {_line(node)}): write the values out, or split "
                                     "the file")
            continue
        if id(node) in open_:
            raise UserInputError(f"{where}: line {_line(node)}: an alias refers to a value that contains it: a "
                                 "deployment file is a tree")
        open_.add(id(node))
        if isinstance(node, yaml.MappingNode):
            _duplicates(node, where)
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in sizes)
    return sizes[id(root)]


def load_yaml(text: str, where: str, budget: int = MAX_VALUES) -> Any:
    """The document in `text`, checked (check_nodes) before it is built; a syntax error is one line with its place."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_nodes(node, where, budget)
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise UserInputError(f"{where} is not valid YAML{at}: {getattr(err, 'problem', None) or err}") from None
    finally:
        loader.dispose()


__all__ = ["MAX_VALUES", "check_nodes", "load_yaml"]
