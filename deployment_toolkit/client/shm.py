"""System shared-memory regions of one client: the client writes inputs into regions the server maps, the server
writes outputs into others; only names travel in the request.

Regions are reused across requests (registering per request costs two round trips, and the server may still hold
a region it just answered from) and carry the `dtk_<pid>_` prefix, so a client killed before it could free them is
cleaned up by the next run (`cleanup.sweep_dead_runs`).
"""
from __future__ import annotations

import itertools
import os
import time
import warnings

import numpy as np

from ..spec import numpy_dtype


def shm_module():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tritonclient imports the deprecated pkg_resources
        import tritonclient.utils.shared_memory as shm
    return shm


class Regions:
    """The regions one client registered on its server, by role (`in_<name>`, `out_<name>`)."""

    _ids = itertools.count()

    def __init__(self, client):
        self._client = client  # tritonclient's InferenceServerClient
        self._regions: dict[str, tuple[str, object, int]] = {}

    def write(self, role: str, array: np.ndarray) -> str:
        """Copy `array` into the region for `role`; its registered name."""
        name, handle = self.region(role, array.nbytes)
        shm_module().set_shared_memory_region(handle, [array])
        return name

    def region(self, role: str, size: int) -> tuple[str, object]:
        """A registered region for `role` of at least `size` bytes."""
        have = self._regions.get(role)
        if have is not None and have[2] >= size:
            return have[0], have[1]
        if have is not None:
            self._drop(have)
        name = f"dtk_{os.getpid()}_{id(self)}_{next(self._ids)}"
        handle = shm_module().create_shared_memory_region(name, f"/{name}", size)
        self._client.register_system_shared_memory(name, f"/{name}", size)
        self._regions[role] = (name, handle, size)
        return name, handle

    @staticmethod
    def read(handle, datatype: str, shape: list[int]) -> np.ndarray:
        return shm_module().get_contents_as_numpy(handle, np.dtype(numpy_dtype(datatype)), shape).copy()

    def _drop(self, region: tuple[str, object, int]) -> None:
        name, handle, _ = region
        for attempt in range(50):
            try:
                self._client.unregister_system_shared_memory(name)
                break
            except Exception as err:  # "currently in use" right after a response: the server lets go shortly
                if "in use" not in str(err) or attempt == 49:
                    break
                time.sleep(0.01)
        shm_module().destroy_shared_memory_region(handle)

    def free(self) -> None:
        for region in self._regions.values():
            self._drop(region)
        self._regions.clear()
