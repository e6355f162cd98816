"""perf_analyzer: build its command (command), run one measurement point with retries (point), parse what it
writes (parse), one shared-memory run at a time (shm_lock), its flags (flags), the toolkit's own arrival schedules
and latency from the intended send time (schedule); finding the binary is
deployment_toolkit.binaries. This package's namespace is the API the rest of the toolkit imports.

Facts this module is built on (checked against the perf_analyzer that ships in tritonclient 2.50.0):
- its CSV rows are sorted by throughput, not by load level, and every time in it is in microseconds;
- `--verbose-csv` adds `Avg latency` (and `request/response`, `response wait`); `--percentile` drops `Avg latency`;
- a level that never stabilises prints "Failed to obtain stable measurement ..." and is simply missing from the
  CSV: with one level the exit code is 2 and no CSV is written, with a range the exit code is 0;
- `--output-shared-memory-size` is per sample: perf_analyzer allocates `size x batch` per output;
- JSON `--input-data` entries are batch-1 samples (`{"b64": ...}` or `{"content": [...], "shape": [...]}`) that
  perf_analyzer repeats to fill a batch;
- it names its shared-memory regions after the tensors (`/dev/shm/<output>`, `/dev/shm/<input>_<stream>_<step>`),
  with no option for a prefix, and unregisters every region of its server when it starts: two runs with shared
  memory at once corrupt each other (one dies of SIGBUS), so runs here take a lock and refuse to start next to
  a foreign one (`shm_lock.shared_memory_guard`).
"""
from ...config.load import Concurrency, Load, RequestRate, Schedule  # the load levels run_point takes
from .command import (DEFAULT_OUTPUT_SHM_BYTES, HasSignature, MeasurementMode, PerfOptions, PerfTarget, build_command,
                      load_args, needs_input_file, output_shared_memory_size, shape_args, write_input_data_json)
from .errors import PerfAnalyzerError
from .flags import add_perf_arguments, perf_options_from_args, real_input_data, shared_memory_for
from .parse import CSV_TO_SEED, OutputDiagnosis, diagnose_output, parse_csv
from .point import PointResult, run_point
from .schedule import (ARRIVALS, LATE_TOLERANCE_MS, Arrivals, ProfileExport, ScheduleLatency, intended_send_ns,
                       make_schedule, read_profile_export, read_schedule, schedule_latency, trim_profile_export,
                       window_dispersion, write_schedule)
from .shm_lock import (SHM_DIR, SHM_LOCK_NAME, ShmRun, concurrent_message, conflicting_runs, parse_shm_run,
                       perf_regions_removed, running_shm_runs, shared_memory_guard, shm_free_bytes, shm_lock_path,
                       sigbus_message)

__all__ = [
    "Concurrency", "Load", "RequestRate", "Schedule",
    "ARRIVALS", "LATE_TOLERANCE_MS", "Arrivals", "ProfileExport", "ScheduleLatency", "intended_send_ns",
    "make_schedule", "read_profile_export", "read_schedule", "schedule_latency", "trim_profile_export",
    "window_dispersion", "write_schedule",
    "CSV_TO_SEED", "DEFAULT_OUTPUT_SHM_BYTES", "SHM_DIR", "SHM_LOCK_NAME", "HasSignature", "OutputDiagnosis",
    "MeasurementMode", "PerfAnalyzerError", "PerfOptions", "PerfTarget", "PointResult", "ShmRun", "add_perf_arguments",
    "build_command", "load_args", "shared_memory_for",
    "concurrent_message", "conflicting_runs", "diagnose_output", "needs_input_file", "output_shared_memory_size",
    "parse_csv", "parse_shm_run", "perf_options_from_args", "perf_regions_removed", "real_input_data", "run_point",
    "running_shm_runs", "shape_args", "shared_memory_guard", "shm_free_bytes", "shm_lock_path", "sigbus_message",
    "write_input_data_json",
]
