"""What a sweep takes, as typed values: where the measured server is (`ServerAt`: one value for its URL, the embedded
server object and its metrics endpoint), the points (`SweepPoint`: a batch size and a load level) and how the sweep
runs (`SweepSettings`: each default written once, the command's flags built from its fields)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..config import Concurrency, Protocol, Reuse, setting
from ..config.fields import check_numbers
from . import telemetry
from .analyzer import PerfOptions, PointResult

if TYPE_CHECKING:  # pragma: no cover
    from ..server.local import LocalTritonServer


@dataclass(frozen=True)
class ServerAt:
    """Where the measured server is. `url`: grpc://, http:// or host:port (None: the embedded server's own, for
    the protocol measured). `server`: the embedded server when this process runs it (its liveness and log tail are
    read when a point fails, its metrics port is known). `metrics_url`: the endpoint scraped beside every point
    (None: the embedded server's, else Triton's default port on the URL's host; "none": no scraping)."""

    url: str | None = None
    server: "LocalTritonServer | None" = None
    metrics_url: str | None = None

    @classmethod
    def of(cls, where: "ServerAt | str | LocalTritonServer | None") -> "ServerAt":
        """A URL, an embedded server or a ServerAt, as a ServerAt."""
        if isinstance(where, ServerAt):
            return where
        if where is None:
            return cls()
        if isinstance(where, str):
            return cls(url=where)
        return cls(server=where)

    def url_for(self, protocol: Protocol | str) -> str:
        if self.url:
            return self.url
        if self.server is None:
            raise ValueError("give server_url or a LocalTritonServer")
        return self.server.grpc_url if protocol == Protocol.GRPC else self.server.http_url

    def metrics_for(self, url: str) -> str | None:
        return telemetry.metrics_url_for(url, self.server, self.metrics_url)


@dataclass(frozen=True)
class SweepPoint:
    """One point of a closed-loop sweep: a client batch size at a load level (`SweepPoint(8, 2)` reads as
    batch 8 at concurrency 2)."""

    batch_size: int
    load: Concurrency

    def __post_init__(self) -> None:
        if not isinstance(self.load, Concurrency):
            object.__setattr__(self, "load", Concurrency(self.load))

    @property
    def concurrency(self) -> int:
        return self.load.clients

    @property
    def key(self) -> tuple[int, int]:
        return (self.batch_size, self.concurrency)

    @property
    def name(self) -> str:
        return f"b{self.batch_size}_c{self.concurrency}"


PointCallback = Callable[[SweepPoint, PointResult], None]


@dataclass(frozen=True)
class SweepSettings:
    """How a sweep runs, besides what perf_analyzer measures (PerfOptions) and where (ServerAt)."""

    model_version: str = ""
    precision: str | None = None  # recorded in the tables (default: the manifest's)
    number_of_model_instances: int | None = None  # recorded; the server's instance_group count is what the tables show
    shapes: Mapping[str, Sequence[int]] | None = None  # dynamic input dims without a manifest (--shape NAME:D1,D2)
    manifest_path: str | Path | None = None
    on_point_done: PointCallback | None = None
    progress: bool = setting(True, flag="--no-progress", action="store_false", help="no progress bar")
    remeasure_unstable: bool = setting(False, flag="--remeasure-unstable", action="store_true",
                                       help="on resume, measure unstable points again")
    build_report: bool = setting(True, flag="--no-report", action="store_false",
                                 help="skip report.md/report.html/plots")
    ready_timeout_s: float = setting(60.0, flag="--ready-timeout", unit="s", low=0, high=86_400,
                                     help="seconds to wait for the model")
    reuse: Reuse = Reuse.AUTO  # results.ledger's policy: auto | resume | fresh (--resume / --fresh)
    metrics_period_s: float = setting(telemetry.DEFAULT_PERIOD_S, flag="--metrics-period", unit="s", low=0,
                                      low_open=True, high=3600, metavar="SECONDS",
                                      help="scrape period; <kind>_server.csv and telemetry/ hold the result")

    def __post_init__(self) -> None:
        object.__setattr__(self, "reuse", Reuse(self.reuse))
        check_numbers(self)


SWEEP_FIELDS = frozenset(f.name for f in dataclasses.fields(SweepSettings))


def sweep_arguments(where: Any, options: PerfOptions, settings: SweepSettings | None,
                    fields: Mapping[str, Any]) -> tuple[ServerAt, PerfOptions, SweepSettings]:
    """The typed values of a sweep call: `fields` are SweepSettings fields by name, plus, as the Python API has always
    taken them, `server=` (the embedded server), `protocol=` (PerfOptions.protocol) and `metrics_url=`."""
    fields = dict(fields)
    at = ServerAt.of(where)
    if "server" in fields or "metrics_url" in fields:
        at = replace(at, server=fields.pop("server", at.server), metrics_url=fields.pop("metrics_url", at.metrics_url))
    protocol = fields.pop("protocol", None)
    if protocol and protocol != options.protocol:
        options = replace(options, protocol=protocol)
    unknown = sorted(set(fields) - SWEEP_FIELDS)
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) {unknown}: a sweep takes SweepSettings fields "
                        f"({', '.join(sorted(SWEEP_FIELDS))}), server, protocol and metrics_url")
    settings = replace(settings or SweepSettings(), **fields)
    return at, options, settings


__all__ = ["PointCallback", "SWEEP_FIELDS", "ServerAt", "SweepPoint", "SweepSettings", "sweep_arguments"]
