"""Shared pieces of the thin command-line scripts in triton/."""
from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Callable

from .client.data import DataError
from .client.infer import InferenceError
from .export.errors import ConversionError
from .models.registry import UnknownModelError
from .repository.config import ConfigError
from .server.errors import ServerError
from .spec import SpecError

# Errors whose message is the whole story: print it, no traceback.
USER_ERRORS = (ConversionError, ConfigError, ServerError, InferenceError, DataError, SpecError, UnknownModelError,
               FileNotFoundError, ValueError)


def parser(description: str, example: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        description=description,
        epilog="example:\n" + textwrap.indent(textwrap.dedent(example).strip(), "  "),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.replace(" ", ",").split(",") if x)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of integers, got {text!r}") from err


def run(main: Callable[[], int | None]) -> None:
    """Run a script's main: user errors become one clear message and exit code 2."""
    try:
        code = main()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
    except USER_ERRORS as err:
        print(f"error: {err}", file=sys.stderr)
        code = 2
    sys.exit(code or 0)
