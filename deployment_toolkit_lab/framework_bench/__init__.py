"""In-process throughput bench: models x precision x torch.compile x batch size x runtime, no server.

One job per module: configs (what to measure), host (what this host can run), runners (a configuration ready
to call), arithmetic and memory (the figures), measure (one configuration, one group), isolation (a group in a
child process), summary (markdown), bench (the run); the CSV is the toolkit's results.bench_store. This namespace is
the API; its command is `deployment-toolkit-lab bench` (deployment_toolkit_lab/commands/bench.py), and gpu-check runs
it as its framework stages.

In the lab, not the toolkit: it measures the framework and the toolkit's own exports, not a user's deployment, as
Model Analyzer keeps its QA in `qa/`. It imports the toolkit (sources, export, runtimes.timing, results); the toolkit
never imports it.

Why: it is the ceiling every served number is compared with ("how much of the framework's speed does
serving keep?"), and it answers which precision / compile mode / runtime to deploy before anything is
configured. The method follows calebrob6/throughput-bench (seeds/004): warm-up iterations, then a timed
duration of back-to-back calls on a pre-allocated batch; throughput, mean/p50/p95/p99 latency and peak
memory; the batch is halved on out-of-memory; results go to a per-device CSV that a rerun extends
(completed configurations are skipped); geospatial models get km^2/s coverage columns.

Peak memory is CUDA `max_memory_allocated` on a GPU (the torch allocator: weights + activations), and
the peak-RSS growth of the process during the timed calls on CPU (activations + runtime workspace; the
weights were resident before): the `peak_mem_metric` column says which. The CPU number is a lower bound
when earlier work in the same process left freed heap pages resident (malloc keeps them): `--isolate all`
measures every group in a fresh process; `peak_rss_mb` is the whole process' peak for context.
"""
from .arithmetic import coverage_column, coverage_km2_per_s, is_oom, latency_stats, tile_pixels, with_batch_halving
from .bench import BenchRun, Isolation, Plan, bench_identity, groups_of, plan_run, run_bench, write_hardware_json
from .configs import (COMPILE_MODES, PRECISIONS, RUNTIMES, STATUS_FAILED, STATUS_OK, STATUS_SKIPPED, BenchConfig,
                      BenchMatrix, enumerate_configs)
from .host import HostCaps, amp_dtype_for, default_device, device_slug, probe_compile, probe_host, skip_reason, slugify
from .isolation import run_group_isolated
from .measuring import add_coverage, base_row, gc_device, measure, run_group
from .memory import PeakMemory
from .runners import BenchOptions, Prepared, prepare
from .summary import summary_table, write_summary

__all__ = [
    "PRECISIONS", "COMPILE_MODES", "RUNTIMES", "STATUS_OK", "STATUS_SKIPPED", "STATUS_FAILED", "BenchConfig",
    "BenchMatrix", "BenchOptions", "BenchRun", "HostCaps", "Isolation", "PeakMemory", "Plan", "Prepared",
    "enumerate_configs", "skip_reason", "plan_run",
    "probe_host", "probe_compile", "amp_dtype_for", "default_device", "device_slug", "slugify", "tile_pixels",
    "coverage_km2_per_s", "coverage_column", "add_coverage", "latency_stats", "is_oom", "with_batch_halving",
    "base_row", "gc_device", "measure", "prepare", "groups_of", "bench_identity", "write_hardware_json",
    "run_bench", "run_group", "run_group_isolated", "summary_table", "write_summary",
]
