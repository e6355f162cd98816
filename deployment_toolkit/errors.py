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


__all__ = ["ToolkitError", "UserError", "UserInputError", "UserFileNotFoundError"]
