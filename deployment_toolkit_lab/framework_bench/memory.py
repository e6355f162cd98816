"""Peak memory of the timed calls: CUDA max_memory_allocated on a GPU, the growth of the process' peak RSS on CPU."""
from __future__ import annotations

import math


def _proc_status_kib(field_name: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class PeakMemory:
    """Peak memory over a block: CUDA max allocated, or the process' peak-RSS growth on CPU.

    On Linux the RSS high-water mark is reset through /proc/self/clear_refs ("5"), so each configuration
    gets its own peak even in a long-lived process; without that, ru_maxrss growth is a lower bound.
    """

    def __init__(self, device: str):
        self.device = device
        self.metric = "cuda_max_allocated" if device.startswith("cuda") else "rss_peak_delta"
        self.baseline_kib = 0

    def start(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            return
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
            self.baseline_kib = _proc_status_kib("VmRSS") or 0
        except OSError:
            import resource

            self.metric = "ru_maxrss_delta (lower bound)"
            self.baseline_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    def peak_mb(self) -> float:
        if self.device.startswith("cuda"):
            import torch

            return torch.cuda.max_memory_allocated(self.device) / 2**20
        if self.metric == "rss_peak_delta":
            peak = _proc_status_kib("VmHWM") or 0
        else:
            import resource

            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return max(0, peak - self.baseline_kib) / 1024

    def peak_rss_mb(self) -> float:
        """The process' whole peak RSS during the block (libraries and weights included); NaN off Linux."""
        if self.metric != "rss_peak_delta":
            return math.nan
        return (_proc_status_kib("VmHWM") or 0) / 1024
