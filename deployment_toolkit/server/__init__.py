"""Triton servers: the embedded real tritonserver (any host) and the NGC container (GPU hosts)."""
from .errors import ModelLoadError, PortInUseError, ServerError, ServerExitedError, ServerNotFoundError, ServerStartTimeout
from .local import LocalTritonServer, ServerConfig, find_installation

__all__ = [
    "LocalTritonServer", "ServerConfig", "find_installation", "ModelLoadError", "PortInUseError", "ServerError",
    "ServerExitedError", "ServerNotFoundError", "ServerStartTimeout",
]
