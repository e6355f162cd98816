"""A server's address with its protocol: `grpc://host:port`, `http://host:port`, or `host:port` plus a default.

Why: the URL and the protocol used to travel as two arguments that could disagree (a gRPC port with
`--protocol http` answered with a confusing connection error); PyTriton's `ModelClient` takes one URL whose scheme
names the protocol, and so does `TritonClient` here.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import Protocol
from ..errors import UserInputError

PROTOCOLS = Protocol.values()
DEFAULT_PORTS = {Protocol.HTTP: 8000, Protocol.GRPC: 8001}


@dataclass(frozen=True)
class ServerUrl:
    protocol: Protocol  # a string ("grpc", "http") is taken and compares equal
    host: str
    port: int

    @classmethod
    def parse(cls, text: "str | ServerUrl", protocol: Protocol | str | None = None) -> "ServerUrl":
        """`grpc://h:p` / `http://h:p` / `h:p` (with `protocol`, default grpc) / `h` (the protocol's default port).
        A scheme that contradicts `protocol` is refused in one line."""
        if isinstance(text, ServerUrl):
            if protocol and protocol != text.protocol:
                raise UserInputError(f"{text} is a {text.protocol} URL but the protocol asked for is {protocol}")
            return text
        raw = str(text).strip()
        scheme, sep, rest = raw.partition("://")
        if not sep:
            scheme, rest = "", raw
        scheme = scheme.lower()
        if scheme in ("https", "grpcs"):
            raise UserInputError(f"server URL {raw!r}: TLS is not supported; use http:// or grpc:// (on loopback, "
                                 "or through a TLS-terminating proxy)")
        if scheme and scheme not in PROTOCOLS:
            raise UserInputError(f"server URL {raw!r}: the scheme must be grpc:// or http://, got {scheme}://")
        if scheme and protocol and scheme != protocol:
            raise UserInputError(f"server URL {raw!r} says {scheme} but --protocol is {protocol}: "
                                 "drop one of them or make them agree")
        proto = scheme or protocol or Protocol.GRPC
        if proto not in PROTOCOLS:
            raise UserInputError(f"protocol must be grpc or http, got {proto!r}")
        proto = Protocol(proto)
        hostport = rest.rstrip("/")
        if "/" in hostport:
            raise UserInputError(f"server URL {raw!r}: give host:port only (no path)")
        host, colon, port = hostport.rpartition(":")
        if not colon:
            host, port = hostport, str(DEFAULT_PORTS[proto])
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UserInputError(f"server URL {raw!r}: expected host:port, e.g. 127.0.0.1:{DEFAULT_PORTS[proto]}")
        return cls(proto, host, int(port))

    @property
    def address(self) -> str:
        """host:port, as tritonclient and perf_analyzer take it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.protocol}://{self.address}"
