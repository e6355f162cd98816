"""Server errors, each with a message that tells the user what to do."""
from __future__ import annotations
from ..errors import UserError


class ServerError(UserError, RuntimeError):
    pass


class ServerNotFoundError(ServerError):
    pass


class PortInUseError(ServerError):
    pass


class ServerStartTimeout(ServerError):
    pass


class ServerExitedError(ServerError):
    pass


class ModelLoadError(ServerError):
    def __init__(self, message: str, models: list[str] | None = None):
        super().__init__(message)
        self.models = list(models or [])
