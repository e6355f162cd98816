"""What a server can do wrong, as the toolkit's user errors (one line, exit 2)."""
from __future__ import annotations

from ..errors import UserError


class ServerNotReady(UserError, RuntimeError):
    """The server does not answer, the model is not ready, or it answers its first request wrongly."""


class InferenceError(UserError, RuntimeError):
    """A request the server refused or failed."""
