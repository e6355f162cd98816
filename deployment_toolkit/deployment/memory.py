"""What each model costs in a replica's memory, and which groups fit: the models are loaded one at a time on the
deployment's server, and a model is charged what its load added: the resident memory of the processes it started
(its Python-backend stubs) and the growth of tritonserver itself. Not the whole group's difference: the stubs already
there release load-time buffers at the same moment, which read a second model as 0.00 GB. A group fits when the server's own memory plus its models' fits the host
(`limits.host_memory_gb`); one that does not is said per model, and is never measured.

CPU hosts only: a GPU replica's budget is the device's memory (`limits.gpu_memory_gb`), which this reading does
not see; there the group is said to be unchecked rather than guessed.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from ..server.local import group_members

GB = 1e9


def group_resident(pgid: int) -> dict[int, float]:
    """Resident bytes of each live process of the group (the server and its backend stubs)."""
    out: dict[int, float] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for pid in group_members(pgid):
        try:
            out[pid] = float(int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page)
        except (OSError, IndexError, ValueError):  # exited while we looked
            continue
    return out


def group_rss(pgid: int) -> float:
    """Resident bytes of every live process of the group."""
    return sum(group_resident(pgid).values())


def added(before: Mapping[int, float], after: Mapping[int, float], server_pid: int) -> float:
    """What a load added: the processes that were not there before, and the server's own growth."""
    new = sum(rss for pid, rss in after.items() if pid not in before)
    return new + max(0.0, after.get(server_pid, 0.0) - before.get(server_pid, 0.0))


@dataclass
class Footprints:
    """The server alone, and what loading each model added (bytes)."""

    server: float
    models: dict[str, float] = field(default_factory=dict)
    budget_gb: float | None = None

    def need(self, group: Iterable[str]) -> float:
        return self.server + sum(self.models[m] for m in group)

    def misfit(self, group: tuple[str, ...]) -> str:
        """Why `group` does not fit one replica ('' when it fits or there is no budget)."""
        if self.budget_gb is None:
            return ""
        need = self.need(group)
        if need <= self.budget_gb * GB:
            return ""
        parts = " + ".join(f"{m} {self.models[m] / GB:.2f} GB" for m in group)
        return (f"out of memory: {parts} + the server {self.server / GB:.2f} GB = {need / GB:.2f} GB > "
                f"--host-memory-gb {self.budget_gb:g}")


def measure_footprints(server, models: Mapping[str, Iterable[str]], budget_gb: float | None) -> Footprints:
    """Load each entry's models (a network, or a pipeline's steps, network and ensemble) one entry at a time on
    `server` (started with none loaded, explicit model control)."""
    pgid = server.process.pid
    prints = Footprints(group_rss(pgid), budget_gb=budget_gb)
    for entry, names in models.items():
        before = group_resident(pgid)
        for name in names:
            server.load_model(name)
        prints.models[entry] = added(before, group_resident(pgid), pgid)
    return prints


__all__ = ["Footprints", "added", "group_resident", "group_rss", "measure_footprints"]
