"""The toolkit's one exception root.

`cli.run` (the entry point of every command) sorts on it: a `UserError` is something the user can fix (a bad
flag or value, a missing file or tool, a server or model that is not there), printed as one `error: ...` line
with exit code 2; anything else, a bare ValueError/KeyError included, is a bug and keeps its traceback (exit 1).
Classes that code elsewhere catches by a builtin type keep that builtin as a second base
(`class ConfigError(UserError, ValueError)`), so `except ValueError` sites go on working.
"""
from __future__ import annotations


class ToolkitError(Exception):
    """Raised by the toolkit on purpose; not a user error unless it is also a UserError (e.g. control flow
    between the search engine and its measurer, or a missed threshold that exits 1)."""


class UserError(ToolkitError):
    """The message is the whole story and tells the user what to do: one line, exit 2, no traceback."""


class UserInputError(UserError, ValueError):
    """A bad argument value or input file content given on the command line."""


class UserFileNotFoundError(UserError, FileNotFoundError):
    """A path the user gave (or a step they must run first) does not exist."""


def reason_line(err: BaseException | str, limit: int = 600) -> str:
    """An error's reason on one line: its first line, and the lines after it while a line only announces what
    follows (ends with ':'), so 'perf_analyzer failed at rate 8068 (exit 99):' keeps perf_analyzer's own words."""
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    if not lines:
        return type(err).__name__ if isinstance(err, BaseException) else ""
    kept = [lines[0]]
    for line in lines[1:]:
        if not kept[-1].endswith(":"):
            break
        kept.append(line)
    text = " ".join(kept)
    return text if len(text) <= limit else text[:limit - 3] + "..."


__all__ = ["ToolkitError", "UserError", "UserInputError", "UserFileNotFoundError", "reason_line"]
