"""The docs site's reference pages, generated from the code at build time (never written by hand, never committed).

mkdocs-gen-files runs this file on every `mkdocs build` (mkdocs.yml, `plugins: gen-files`) and it writes:

- reference/cli.md: every subcommand in `deployment_toolkit.__main__.COMMANDS` (and in the lab's table, where
  `deployment_toolkit_lab` is installed) with its usage, description, every flag with its default, and its example;
  each command's parser is the one its `main` parses with (the module's `build_parser()` where it has one, else
  the parser `main` builds, caught at its `parse_args` before anything runs);
- reference/deployment-file.md: every key of the deployment file (`deployment_toolkit/deployment/file.py`: the
  Deployment dataclass and the dataclasses its fields hold), with its type, default, unit, range and the help the
  field's `config.setting` carries (else the field's own comment in the source), whatever fields they gain.

`python docs/gen_reference.py OUT_DIR` writes the same pages into OUT_DIR (to read them without a build).
"""
from __future__ import annotations

import argparse
import ast
import collections.abc
import dataclasses
import enum
import html
import importlib
import inspect
import io
import os
import re
import sys
import textwrap
import tokenize
import types
import typing
from pathlib import Path
from typing import Any, Callable, Iterator

REPO_ROOT = Path(__file__).resolve().parents[1]
HELP_WIDTH = "100"  # argparse wraps the usage lines to $COLUMNS: the same page on every terminal
CLI_PAGE = "reference/cli.md"
DEPLOYMENT_PAGE = "reference/deployment-file.md"
# Entry points whose COMMANDS tables are documented, in this order: (package, what its page section says)
ENTRY_POINTS = (
    ("deployment_toolkit", "The toolkit's commands."),
    ("deployment_toolkit_lab", "The lab: the toolkit's own benchmarks and the housekeeping of its committed runs."),
)


# ---- markdown text ----------------------------------------------------------------------------------------------

def _text(value: str) -> str:
    """Plain text for a markdown table cell or paragraph: HTML and emphasis characters escaped outside `code`
    spans, one line."""
    parts = re.split(r"(`[^`\n]*`)", " ".join(str(value).split()))
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(part)
        else:
            out.append(html.escape(part, quote=False).replace("*", r"\*").replace("_", r"\_"))
    return "".join(out).replace("|", r"\|")


def _code(value: str) -> str:
    value = str(value)
    fence = "``" if "`" in value else "`"
    return f"{fence}{value}{fence}".replace("|", r"\|")


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _fenced(text: str, lang: str = "text") -> str:
    return f"```{lang}\n{text.rstrip()}\n```\n"


# ---- the CLI reference --------------------------------------------------------------------------------------------

class _Caught(BaseException):
    """Raised by a patched parse_args: carries the parser a command's main was about to parse with."""

    def __init__(self, parser: argparse.ArgumentParser):
        super().__init__("parser caught")
        self.parser = parser


def _catch_parser(main: Callable[..., Any]) -> argparse.ArgumentParser:
    """The parser `main` builds, taken at its first parse_args/parse_known_args call, before the command runs."""

    def caught(self, *args, **kwargs):
        raise _Caught(self)

    saved = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args
    argparse.ArgumentParser.parse_args = caught  # type: ignore[method-assign]
    argparse.ArgumentParser.parse_known_args = caught  # type: ignore[method-assign]
    try:
        main([])
    except _Caught as got:
        return got.parser
    finally:
        argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args = saved
    raise RuntimeError(f"{main.__module__}.main returned without parsing its flags")


def command_parser(module: types.ModuleType) -> argparse.ArgumentParser:
    """A command module's parser: its build_parser() where it has one, else the one its main(argv) builds."""
    build = getattr(module, "build_parser", None)
    if callable(build) and all(p.default is not p.empty or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
                               for p in inspect.signature(build).parameters.values()):
        return build()
    return _catch_parser(module.main)


@dataclasses.dataclass(frozen=True)
class _Entry:
    """One row of an entry point's COMMANDS table, whatever its shape there."""

    name: str
    module: str  # relative to the entry point's package
    help: str
    script: str | None = None  # the script's path from the checkout's root (triton/<name>.py), where it has one


def _entry(name: str, row: Any, scripts: str = "triton") -> _Entry:
    """A COMMANDS row: an object with .module and .help (a Command) or a (module, help) tuple; `scripts` is the
    folder of the entry point's shims (its SCRIPTS, else triton/)."""
    if isinstance(row, (tuple, list)):
        return _Entry(name, row[0], row[1])
    script = getattr(row, "script", None)
    return _Entry(name, row.module, row.help, f"{scripts}/{script}.py" if script else None)


def _entry_point(package: str) -> tuple[str, dict[str, _Entry]] | None:
    """(PROG, its commands) of `package.__main__` in this checkout, or None where it has no such package."""
    if str(REPO_ROOT) not in sys.path:  # this checkout's packages, however the script is run (mkdocs, python, pytest)
        sys.path.insert(0, str(REPO_ROOT))
    try:
        main_module = importlib.import_module(f"{package}.__main__")
    except ModuleNotFoundError as err:
        if err.name in (package, f"{package}.__main__"):
            return None
        raise
    scripts = getattr(main_module, "SCRIPTS", "triton")
    return main_module.PROG, {name: _entry(name, row, scripts) for name, row in main_module.COMMANDS.items()}


def _command_module(package: str, module: str) -> types.ModuleType:
    return importlib.import_module(f"{package}.{module}")


def _value_text(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    formatter = parser._get_formatter()
    default_metavar = action.dest.upper() if action.option_strings else action.dest
    return formatter._format_args(action, default_metavar)


def _default_text(action: argparse.Action) -> str:
    if action.required:
        return "required"
    default = action.default
    if action.nargs == 0 or default is None or default is argparse.SUPPRESS or default == []:
        return ""
    if isinstance(default, enum.Enum):
        default = default.value
    if isinstance(default, (str, Path)) and Path(default).is_absolute():  # a folder of this checkout: no host path
        path = Path(default).resolve()
        if path == REPO_ROOT:
            return "the checkout's root"
        if REPO_ROOT in path.parents:
            default = path.relative_to(REPO_ROOT).as_posix()
    if isinstance(default, (tuple, list)):
        default = ",".join(str(v) for v in default)
    return _code(default)


def _help_text(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help:
        return ""
    try:
        return parser._get_formatter()._expand_help(action)
    except (KeyError, TypeError, ValueError):
        return action.help


def _common_flags(parser: argparse.ArgumentParser) -> tuple[str, ...]:
    """The flags the parser's class adds to every parser it makes (cli.parser's --user-code-timeout, ...): an
    instance made with no arguments holds exactly those."""
    try:
        bare = type(parser)()
    except TypeError:
        return ()
    return tuple(s for a in bare._actions if not isinstance(a, argparse._HelpAction) for s in a.option_strings)


def _options_tables(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> str:
    out = []
    for group in parser._action_groups:
        rows = []
        for action in group._group_actions:
            if action.help is argparse.SUPPRESS or isinstance(action, argparse._HelpAction) or \
                    (action.option_strings and set(action.option_strings) <= set(skip)):
                continue
            names = ", ".join(_code(s) for s in action.option_strings) or _code(action.dest)
            value = _value_text(parser, action)
            rows.append((names, _code(value) if value else "", _default_text(action),
                         _text(_help_text(parser, action))))
        if rows:
            out.append(f"*{_text(group.title or 'options')}*\n\n" +
                       _table(("flag", "value", "default", "what it does"), rows))
    return "\n".join(out)


def _command_section(prog: str, command: _Entry, parser: argparse.ArgumentParser, level: str,
                     common: tuple[str, ...]) -> str:
    parser.prog = f"{prog} {command.name}"
    summary = command.help[:1].upper() + command.help[1:]
    parts = [f"{level} `{prog} {command.name}`\n", f"{_text(summary)}.\n"]
    if command.script:
        parts.append(f"Also `python {command.script}`, with the same flags.\n")
    parts.append(_fenced(parser.format_usage()))
    if parser.description:
        paragraphs = [p for p in textwrap.dedent(parser.description).strip().split("\n\n") if p.strip()]
        parts.extend(_text(p) + "\n" for p in paragraphs)
    shared = tuple(s for s in _common_flags(parser) if s in common)
    if shared:
        parts.append("Besides [the flags every command takes](#the-flags-every-command-takes):\n")
    parts.append(_options_tables(parser, shared))
    if parser.epilog:
        epilog = textwrap.dedent(parser.epilog).strip()
        header, _, body = epilog.partition("\n")
        if header.rstrip(":").strip().lower() in ("example", "examples") and body.strip():
            parts.append(f"{header.rstrip(':').capitalize()}:\n\n" + _fenced(textwrap.dedent(body), "bash"))
        else:
            parts.append(_fenced(epilog))
    return "\n".join(parts)


def cli_reference(entry_points: tuple[tuple[str, str], ...] = ENTRY_POINTS) -> str:
    """The CLI reference page: each installed entry point's COMMANDS table, then every command in it."""
    saved_argv, saved_columns = sys.argv, os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH
    try:
        return _cli_reference(entry_points)
    finally:
        sys.argv = saved_argv
        if saved_columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved_columns


def _cli_reference(entry_points: tuple[tuple[str, str], ...]) -> str:
    found = [(package, what, ep) for package, what in entry_points if (ep := _entry_point(package)) is not None]
    several = len(found) > 1
    parts = ["# Command-line reference\n",
             "Generated from the code when the site is built (`docs/gen_reference.py`): every subcommand in the "
             "`COMMANDS` table of each entry point, with the parser its `main` reads its flags with. "
             "`SUBCOMMAND --help` prints the same.\n"]
    parsers = {}
    for package, _, (prog, commands) in found:
        for name, command in commands.items():
            sys.argv = [f"{prog} {name}"]
            parsers[prog, name] = command_parser(_command_module(package, command.module))
    common = _most_common_flags(list(parsers.values()))
    for package, what, (prog, commands) in found:
        level = "###" if several else "##"
        if several:
            parts.append(f"## `{prog}`\n\n{what}\n")
        parts.append(_table(("command", "what it does"),
                            [(f"[`{name}`](#{_anchor(prog, name)})", _text(c.help)) for name, c in commands.items()]))
        for name, command in commands.items():
            parts.append(_command_section(prog, command, parsers[prog, name], level, common))
    if common:
        example = next(p for p in parsers.values() if set(common) <= set(_common_flags(p)))
        parts.append("## The flags every command takes\n")
        parts.append("Every command whose section points here also takes these (its parser adds them):\n")
        parts.append(_options_tables(type(example)()))
    return "\n".join(parts)


def _most_common_flags(parsers: list[argparse.ArgumentParser]) -> tuple[str, ...]:
    """The flags the parser class most commands use adds to each of its parsers."""
    counts: dict[tuple[str, ...], int] = {}
    for p in parsers:
        flags = _common_flags(p)
        if flags:
            counts[flags] = counts.get(flags, 0) + 1
    return max(counts, key=counts.get) if counts else ()


def _anchor(prog: str, name: str) -> str:
    """The id mkdocs' toc gives the heading `` `PROG NAME` ``."""
    return re.sub(r"[^\w\- ]", "", f"{prog} {name}".lower()).strip().replace(" ", "-")


# ---- the deployment-file reference ------------------------------------------------------------------------------

def _field_comments(cls: type) -> dict[str, str]:
    """Field name -> the comment written beside it in the class's source (trailing, or full lines just above)."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    comments: dict[int, str] = {}
    full_line: set[int] = set()
    lines = source.splitlines()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            row = tok.start[0]
            comments[row] = tok.string.lstrip("#").strip()
            if not lines[row - 1][:tok.start[1]].strip():
                full_line.add(row)
    tree = ast.parse(source)
    found: dict[str, str] = {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    for node in body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above, row = [], node.lineno - 1
        while row in full_line:
            above.insert(0, comments[row])
            row -= 1
        beside = [comments[r] for r in range(node.lineno, (node.end_lineno or node.lineno) + 1)
                  if r in comments and r not in full_line]
        text = " ".join(above + beside).strip()
        if text and not text.startswith(("type:", "noqa")):
            found[node.target.id] = text
    return found


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]), True
    return hint, False


def _item_class(hint: Any) -> type | None:
    """The dataclass a list-valued key holds (tuple[ModelEntry, ...], list[X]), else None."""
    if typing.get_origin(hint) in (tuple, list, collections.abc.Sequence):
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        if len(args) == 1 and dataclasses.is_dataclass(args[0]):
            return args[0]
    return None


def _type_text(hint: Any) -> str:
    hint, optional = _unwrap_optional(hint)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        text = "one of " + ", ".join(_code(m.value) for m in hint)
    elif hint is bool:
        text = "true or false"
    elif hint is int:
        text = "whole number"
    elif hint is float:
        text = "number"
    elif hint is str:
        text = "text"
    elif isinstance(hint, type) and issubclass(hint, Path):
        text = "path"
    elif dataclasses.is_dataclass(hint):
        text = "mapping"
    elif (item := _item_class(hint)) is not None:
        text = "list of mappings"
    elif typing.get_origin(hint) in (dict, collections.abc.Mapping):
        key, value = (typing.get_args(hint) + (Any, Any))[:2]
        text = "mapping" if value is Any else f"mapping of {_type_text(key)} to {_type_text(value)}"
    elif typing.get_origin(hint) in (tuple, list):
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        text = f"list of {_type_text(args[0])}" if len(args) == 1 else "list"
    else:
        text = getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
    return text


def _number(value: float) -> str:
    value = float(value)
    if value.is_integer() and abs(value) < 1e7:
        return f"{int(value):,}"
    return f"{value:g}"


def _range(flag: Any) -> str:
    if flag is None:
        return ""
    low, high = getattr(flag, "low", None), getattr(flag, "high", None)
    lower = f"{'>' if getattr(flag, 'low_open', False) else '≥'} {_number(low)}" if low is not None else ""
    upper = f"≤ {_number(high)}" if high is not None else ""
    return " and ".join(p for p in (lower, upper) if p)


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return field.default_factory()  # type: ignore[misc]
    return dataclasses.MISSING


def _default_cell(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "required"
    if value is None:
        return "not set"
    if dataclasses.is_dataclass(value):
        return "its keys' defaults"
    if isinstance(value, enum.Enum):
        return _code(value.value)
    if isinstance(value, (dict, tuple, list)) and not value:
        return "empty"
    return _code(value)


def _doc(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    if not doc or doc.startswith(f"{cls.__name__}("):  # the signature dataclass writes when there is no docstring
        return ""
    return " ".join(doc.split())


Path_ = tuple[tuple[str, bool], ...]  # where a section sits in the file: (key, is a list) from the top


def _place(path: Path_, inner: dict[str, Any]) -> dict[str, Any]:
    """A document holding `inner` at `path` (models[0] for a list section)."""
    for name, is_list in reversed(path):
        inner = {name: [inner] if is_list else inner}
    return inner


def _refusal(module: types.ModuleType, doc: Any, source: Path | None = None) -> str | None:
    """What the module's reader says of `doc` (None: it read it)."""
    try:
        module.parse(doc, source)
    except Exception as err:  # noqa: BLE001  (the reader's refusal is what the probe asks for)
        return str(err)
    return None


def _file_keys(module: types.ModuleType, cls: type, path: Path_) -> list[dataclasses.Field]:
    """The fields of a section the file takes as keys: each is offered to the reader alone in that section, and
    the reader names an unknown key before anything else (a field the reader sets itself is not a key)."""
    keys = []
    for field in dataclasses.fields(cls):
        said = _refusal(module, _place(path, {field.name: None})) or ""
        if not ("unknown key" in said and repr(field.name) in said):
            keys.append(field)
    return keys


def _probe_value(hint: Any) -> Any:
    hint, _ = _unwrap_optional(hint)
    return {str: "probe", float: 1.0, int: 1}.get(hint, dataclasses.MISSING)


def _minimal(cls: type) -> dict[str, Any] | None:
    """A section holding only its required keys, each with a plain value (None where one cannot be made)."""
    hints = typing.get_type_hints(cls)
    doc: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if _default(field) is not dataclasses.MISSING:
            continue
        hint, _ = _unwrap_optional(hints[field.name])
        if (item := _item_class(hint)) is not None:
            entry = _minimal(item)
            if entry is None:
                return None
            doc[field.name] = [entry]
        elif (value := _probe_value(hint)) is not dataclasses.MISSING:
            doc[field.name] = value
        else:
            return None
    return doc


SHOP = Path("shop.yaml")  # the file name the probes read their documents as


def _left_out(module: types.ModuleType, top: type, path: Path_, cls: type) -> dict[str, str]:
    """For each key of a section without a dataclass default: what the reader makes of a minimal file that leaves
    it out (the value it reads instead), or why it refuses one (required, and the reader's reason)."""
    minimal = _minimal(top)
    if minimal is None or _refusal(module, minimal, SHOP) is not None:
        return {}  # no minimal file this probe can make: the dataclass's defaults alone
    section: Any = minimal
    for name, is_list in path:
        section = section[name][0] if is_list else section.get(name)
        if not isinstance(section, dict):
            return {}
    found = {}
    for name in list(section):
        value = section.pop(name)
        said = _refusal(module, minimal, SHOP)
        if said is None:
            read: Any = module.parse(minimal, SHOP)
            for step, is_list in path:
                read = getattr(read, step)[0] if is_list else getattr(read, step)
            found[name] = f"left out: {_code(getattr(read, name))} for a file named `{SHOP}`"
        else:
            reason = re.search(rf"'{re.escape(name)}' is missing(.*)$", said)
            why = reason[1].strip() if reason else ""
            why = (why[1:-1] if why.startswith("(") and why.endswith(")") else why).lstrip(":;, ").strip()
            found[name] = "required" + (f": {_text(why)}" if why else "")
        section[name] = value
    return found


def _key_rows(cls: type, fields: list[dataclasses.Field], left_out: dict[str, str],
              sections: list[tuple[str, type, Path_]], prefix: str, path: Path_ = ()) -> list[tuple[str, ...]]:
    hints = typing.get_type_hints(cls)
    comments = _field_comments(cls)
    rows = []
    for field in fields:
        hint = hints[field.name]
        flag = field.metadata.get("deployment_toolkit.setting")
        what = _text(getattr(flag, "help", "") or comments.get(field.name, ""))
        key = f"{prefix}{field.name}"
        inner, _ = _unwrap_optional(hint)
        see = ""
        if dataclasses.is_dataclass(inner):
            sections.append((key, inner, (*path, (field.name, False))))
            see = f"The keys of [`{key}`](#{_slug(key)}) below."
        elif (item := _item_class(inner)) is not None:
            sections.append((f"{key}[]", item, (*path, (field.name, True))))
            see = f"Each item has the keys of [`{key}[]`](#{_slug(key + '[]')}) below."
        default = left_out.get(field.name) or _default_cell(_default(field))
        rows.append((_code(field.name), _text(_type_text(hint)), default, _text(getattr(flag, "unit", "") or ""),
                     _text(_range(flag)), " ".join(p for p in (what, see) if p)))
    return rows


def _slug(key: str) -> str:
    return re.sub(r"[^\w\- ]", "", key.lower()).strip().replace(" ", "-") or "key"


def deployment_file_reference(module_name: str = "deployment_toolkit.deployment.file",
                              top_name: str = "Deployment") -> str:
    """The deployment-file reference page, from the dataclasses the reader builds (and the reader itself)."""
    module = importlib.import_module(module_name)
    top = getattr(module, top_name)
    header = ("key", "type", "default", "unit", "range", "what it is")
    parts = [
        "# Deployment-file reference\n",
        "The file `deployment-toolkit plan --deployment FILE` reads (a YAML mapping). Generated from the code when "
        "the site is built (`docs/gen_reference.py`): the dataclasses of "
        f"`{module_name.replace('.', '/')}.py`, the bounds their settings carry (checked as the command line checks "
        "its flags: a number out of range is refused in one line naming the key and its unit), and what the file's "
        "reader says of small files built to ask it (which fields are keys, which may be left out). A key no table "
        "lists is refused, naming the keys there are.\n",
    ]
    if module.__doc__:
        parts.append("From the module's own description:\n")
        parts.append(textwrap.dedent(module.__doc__).strip() + "\n")
    sections: list[tuple[str, type, Path_]] = [("", top, ())]
    done: set[str] = set()
    while sections:
        key, cls, path = sections.pop(0)
        if key in done:
            continue
        done.add(key)
        parts.append(f"## `{key}` {{#{_slug(key)}}}\n" if key else "## Top level\n")
        if _doc(cls):
            parts.append(_text(_doc(cls)) + "\n")
        prefix = key.removesuffix("[]") + ("[]." if key.endswith("[]") else ".") if key else ""
        parts.append(_table(header, _key_rows(cls, _file_keys(module, cls, path), _left_out(module, top, path, cls),
                                              sections, prefix, path)))
    return "\n".join(parts)


# ---- writing the pages -----------------------------------------------------------------------------------------

def pages() -> Iterator[tuple[str, str]]:
    yield CLI_PAGE, cli_reference()
    yield DEPLOYMENT_PAGE, deployment_file_reference()


def _write_with_gen_files() -> None:
    import mkdocs_gen_files

    for path, text in pages():
        with mkdocs_gen_files.open(path, "w") as f:
            f.write(text)
        mkdocs_gen_files.set_edit_path(path, "gen_reference.py")


if __name__ == "<run_path>":  # mkdocs-gen-files runs this file with runpy.run_path
    _write_with_gen_files()
elif __name__ == "__main__":
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else "site-reference")
    for rel, text in pages():
        (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (out_dir / rel).write_text(text)
        print(out_dir / rel)
