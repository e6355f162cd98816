"""The plan flags a search job's pods run with, built from the parsed settings, never from the user's argv.

argv as typed carries what only this machine has (`--data-dir /tmp/...`, `--model-repository ./mr`) and spellings
that are the user's (`--max-minutes=4`, an alias): copied into a pod, the first fails there and the second depends
on the parser staying the same. So each flag of the plan's parser whose parsed value differs from its default is
written out again in its canonical long form, value by value (an append flag once per value, a switch alone), and
the list is parsed again to check that it gives the pods the very values given here. Flags the jobs set themselves
(the deployment file, the folders, the fan-out's own) are not passed on (POD_SET); a flag that names a path of this
machine is refused in one line, naming it: the pods see only the staged inputs and the results volume.
"""
from __future__ import annotations

import argparse
import enum
from pathlib import Path
from typing import Any

from ..errors import UserInputError

# the destinations the jobs set themselves, or that belong to this run on this machine
POD_SET = frozenset({
    "help", "deployment", "result_path", "workspace", "write_job", "job_image", "node_selector", "force", "gather",
    "search_only", "index", "job_cpu", "job_memory", "job_gpus", "parallelism", "results_claim", "results_size",
    "storage_class",
    "update_committed",  # this checkout's committed results: a pod writes only under its results volume
})
_PATH_METAVARS = ("DIR", "FILE", "PATH")


def _flag(action: argparse.Action) -> str:
    """The canonical spelling: the first long option string."""
    return next((o for o in action.option_strings if o.startswith("--")), action.option_strings[0])


def _text(value: Any) -> str:
    """A parsed value as the flag's text again: an enum's value, a list comma-joined, a float in full."""
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, (tuple, list)):
        return ",".join(_text(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}" if float(f"{value:g}") == value else repr(value)
    return str(value)


def _is_path_flag(action: argparse.Action) -> bool:
    return action.type is Path or str(action.metavar or "").upper() in _PATH_METAVARS


def host_path(text: str) -> bool:
    """Whether a flag's text (or what follows its '=') names a path of this machine: absolute, under the home
    folder, or a relative path that exists here."""
    for candidate in {text, text.partition("=")[2]} - {""}:
        if candidate.startswith(("/", "~")):
            return True
        if ("/" in candidate or candidate.startswith(".")) and Path(candidate).exists():
            return True
    return False


def _refuse_host_path(flag: str, value: str, why: str = "names a path of this machine") -> None:
    raise UserInputError(f"{flag} {value!r}: {why}, which the pods do not have (they see the staged inputs and the "
                         "results volume only): name the file in the deployment file, or drop the flag with "
                         "--write-job")


def _of(action: argparse.Action, value: Any) -> list[str]:
    """The flag's tokens for its parsed value."""
    flag = _flag(action)
    if action.nargs == 0:  # store_true / store_false / store_const: the flag alone
        return [flag]
    values = value if isinstance(action, argparse._AppendAction) else [value]
    # a value that starts with '-' (`--perf-analyzer-arg=--verbose`) would be read as a flag: joined with '='
    return [t for v in map(_text, values) for t in ((f"{flag}={v}",) if v.startswith("-") else (flag, v))]


def pod_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The plan flags the pods run with: every flag given a value other than its default, less POD_SET, in its
    canonical form; checked by parsing them again (`parser` must be a fresh plan parser: its error hook is
    replaced)."""
    out: list[str] = []
    for action in parser._actions:
        if not action.option_strings or action.dest in POD_SET or not hasattr(args, action.dest):
            continue
        value = getattr(args, action.dest)
        if value == action.default or (isinstance(action, argparse._AppendAction) and not value):
            continue
        if _is_path_flag(action):
            _refuse_host_path(_flag(action), _text(value), "is a path of this machine")
        for item in (value if isinstance(action, argparse._AppendAction) else [value]) if action.nargs != 0 else ():
            if host_path(_text(item)):
                _refuse_host_path(_flag(action), _text(item))
        out += _of(action, value)
    _check_round_trip(parser, args, out)
    return out


def _check_round_trip(parser: argparse.ArgumentParser, args: argparse.Namespace, out: list[str]) -> None:
    """Parse the pods' flags again: each must give the value given here (else the pods would plan otherwise)."""
    def refuse(message: str) -> None:
        raise UserInputError(f"the flags for the search job's pods do not parse ({message}): {' '.join(out)}")

    parser.error = refuse  # type: ignore[method-assign]  # one line, not a usage message and exit
    again = parser.parse_args(["--deployment", "deployment.yaml", *out])
    differs = [a for a in parser._actions if a.option_strings and a.dest not in POD_SET and hasattr(args, a.dest)
               and not _same(getattr(again, a.dest), getattr(args, a.dest))]
    if differs:
        action = differs[0]
        raise UserInputError(f"{_flag(action)}: its value {getattr(args, action.dest)!r} would reach the pods as "
                             f"{getattr(again, action.dest)!r}: give it in another form")


def _same(a: Any, b: Any) -> bool:
    """Parsed values compared as the plan reads them (an append flag's list and the field's tuple alike)."""
    return (tuple(a) if isinstance(a, list) else a) == (tuple(b) if isinstance(b, list) else b)


__all__ = ["POD_SET", "host_path", "pod_args"]
