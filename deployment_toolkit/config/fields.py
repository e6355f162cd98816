"""Settings that carry their own command-line flag, default, unit and range, written once (issue 37).

A settings dataclass declares each field with `setting(...)`: its default, the flag that sets it, the help line,
and for numbers the unit and the range a value must be in. `add_arguments` builds the argparse flags from those
fields, `from_args` builds the dataclass from the parsed flags, and `check_numbers` (called by the dataclass's
`__post_init__`) refuses a number that is not finite or out of range in one line naming the flag and its unit, so a
command and the Python API refuse the same values with the same words. A field without a flag is a setting the
Python API alone takes (a callback, an in-memory object).
"""
from __future__ import annotations

import argparse
import dataclasses
import enum
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..errors import UserInputError

_KEY = "deployment_toolkit.setting"


@dataclass(frozen=True)
class Flag:
    """How one field appears on the command line."""

    name: str  # --onnx-opset
    help: str = ""
    unit: str = ""  # "ms", "s", "bytes", "requests/s": in the help and in every refusal
    low: float | None = None  # the range a number must be in (None: unbounded on that side)
    high: float | None = None
    low_open: bool = False  # True: the value must be > low (else >= low)
    type: Callable[[str], Any] | None = None  # how the flag's text is read (default: from the field's default)
    to_value: Callable[[Any], Any] | None = None  # flag value -> field value (0 -> None, 1 -> True, ...)
    choices: tuple[Any, ...] | None = None
    action: str | None = None  # "store_true" / "store_false" for a switch; "append": repeatable, the field a tuple
    metavar: str | None = None
    aliases: tuple[str, ...] = ()
    show_default: bool = True
    nargs: str | None = None  # "+": several space-separated values (`--gsd-m 10 30`); the field holds a tuple


def int_list(text: str) -> tuple[int, ...]:
    """'1,2,4' or '1 2 4' -> (1, 2, 4): a flag that takes several integers."""
    try:
        return tuple(int(x) for x in text.replace(" ", ",").split(",") if x)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of integers, got {text!r}") from err


# The bounds of the quantities several settings share: a value past them is a typo or an overflow waiting to
# happen (a peak of 1e308 inferences/s once planned a 308-digit replica count), never a deployment.
MAX_RATE = 1e9  # inferences/s
MAX_LATENCY_MS = 3_600_000.0  # an hour
MAX_HEADROOM = 10.0  # 1000 % spare capacity
MAX_MEMORY_GB = 100_000.0
MAX_HOUR_COST = 1_000_000.0  # $ per hour


def setting(default: Any = dataclasses.MISSING, *, flag: str | None = None, help: str = "", unit: str = "",
            low: float | None = None, high: float | None = None, low_open: bool = False,
            default_factory: Any = dataclasses.MISSING, **flag_options: Any) -> Any:
    """A dataclass field with its flag; `low`/`high` bound a number (checked with `check_numbers`)."""
    meta = {_KEY: Flag(flag, help, unit, low, high, low_open, **flag_options) if flag else
            Flag("", help, unit, low, high, low_open, **flag_options)}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def flag_of(field: dataclasses.Field) -> Flag | None:
    return field.metadata.get(_KEY)


def _range_text(f: Flag) -> str:
    unit = f" {f.unit}" if f.unit else ""
    if f.low is not None and f.high is not None:
        return f"{'>' if f.low_open else '>='} {f.low:g} and <= {f.high:g}{unit}"
    if f.low is not None:
        return f"{'>' if f.low_open else '>='} {f.low:g}{unit}"
    if f.high is not None:
        return f"<= {f.high:g}{unit}"
    return f"a finite number{unit}"


def check_number(value: Any, f: Flag, name: str) -> None:
    """UserInputError unless `value` (a number, or each number of a tuple) is finite and in the flag's range."""
    if value is None or isinstance(value, (bool, str, enum.Enum)):
        return
    values = value if isinstance(value, (tuple, list)) else (value,)
    for v in values:
        if not isinstance(v, (int, float)):
            continue
        bad = not math.isfinite(v) or (f.low is not None and (v <= f.low if f.low_open else v < f.low)) or \
            (f.high is not None and v > f.high)
        if bad:
            who = f.name or name
            raise UserInputError(f"{who} must be {_range_text(f)}, got {v!r}")


def check_numbers(settings: Any) -> None:
    """Check every bounded or numeric field of a settings dataclass (its __post_init__ calls this)."""
    for field in dataclasses.fields(settings):
        f = flag_of(field)
        if f is not None:
            check_number(getattr(settings, field.name), f, field.name)


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return field.default_factory()  # type: ignore[misc]
    return None


_NUMBERS = {"int": int, "float": float}


def _reader(f: Flag, default: Any, annotation: Any) -> Callable[[str], Any] | None:
    """How the flag's text is read: the flag's own type, else the default's, else the field's annotation
    (`float`, `int | None`; annotations are strings under `from __future__ import annotations`)."""
    if f.type is not None:
        return f.type
    if isinstance(default, enum.Enum):
        return type(default)
    if isinstance(default, bool):
        return None
    if isinstance(default, (int, float)):
        return type(default)
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return _NUMBERS.get(text.replace(" ", "").replace("|None", "").replace("None|", ""))


def add_arguments(parser: Any, settings: type, *, only: Iterable[str] | None = None, skip: Iterable[str] = (),
                  **defaults: Any) -> None:
    """The flags of a settings dataclass's fields (those with a flag: `only` these, less `skip`), with their
    defaults written once in the dataclass; `defaults` overrides a default for this command only (its own
    documented default). A field without a default is a required flag."""
    skipped, wanted = set(skip), set(only) if only is not None else None
    for field in dataclasses.fields(settings):
        f = flag_of(field)
        if f is None or not f.name or field.name in skipped or (wanted is not None and field.name not in wanted):
            continue
        required = field.name not in defaults and field.default is dataclasses.MISSING and \
            field.default_factory is dataclasses.MISSING  # type: ignore[misc]
        default = defaults.get(field.name, _default(field))
        help_text = f.help + (f" ({f.unit})" if f.unit and f.unit not in f.help else "")
        if f.action in ("store_true", "store_false"):
            parser.add_argument(f.name, *f.aliases, dest=field.name, action=f.action, help=help_text)
            continue
        shown = default.value if isinstance(default, enum.Enum) else default
        if isinstance(shown, (tuple, list)):  # as the user types them: `10 30` (several values), `1,8` (a list)
            shown = (" " if f.nargs else ",").join(f"{v:g}" if isinstance(v, float) else str(v) for v in shown) or None
        if isinstance(shown, bool) and f.choices is not None:  # a 0/1 flag shows its number
            shown = int(shown)
        if f.show_default and shown is not None and "default" not in f.help:
            help_text += f" (default {shown})"
        choices = f.choices
        if choices is None and isinstance(default, enum.Enum):
            choices = tuple(type(default))
        kwargs: dict[str, Any] = {"dest": field.name, "help": help_text}
        if required:
            kwargs["required"] = True
        else:
            kwargs["default"] = default
        reader = _reader(f, default, field.type)
        if reader is not None:
            kwargs["type"] = reader
        if choices is not None:
            kwargs["choices"] = choices
            if f.metavar is None and isinstance(default, enum.Enum):
                kwargs["metavar"] = "{" + ",".join(str(c.value) for c in choices) + "}"
        if f.nargs:
            kwargs["nargs"] = f.nargs
        if f.action == "append":  # each occurrence adds one value (argparse appends to a copy of a list default)
            kwargs.update(action="append", default=list(default or ()))
        if f.metavar:
            kwargs["metavar"] = f.metavar
        elif choices is None:  # named for the flag, not the field
            kwargs["metavar"] = f.name.lstrip("-").upper().replace("-", "_")
        parser.add_argument(f.name, *f.aliases, **kwargs)


def from_args(settings: type, args: argparse.Namespace, **extra: Any) -> Any:
    """The settings dataclass from parsed flags (fields with a flag on the command line) and `extra` (the rest)."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(settings):
        f = flag_of(field)
        if f is not None and f.name and hasattr(args, field.name):
            value = getattr(args, field.name)
            check_number(value, f, field.name)  # as typed, before a conversion (0 -> None) can hide it
            if (f.nargs or f.action == "append") and isinstance(value, list):
                value = tuple(value)  # several values on the command line: the field's tuple
            values[field.name] = f.to_value(value) if f.to_value is not None and value is not None else value
    values.update(extra)
    return settings(**values)


__all__ = ["MAX_RATE", "MAX_LATENCY_MS", "MAX_HEADROOM", "MAX_MEMORY_GB", "MAX_HOUR_COST", "Flag", "int_list",
           "setting", "flag_of", "check_number", "check_numbers", "add_arguments", "from_args"]
