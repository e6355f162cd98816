"""The bench run: plan what is missing from the device's CSV, record the host (hardware JSON, run.json and
the run identity), measure group by group (isolated where asked) and write every row as it comes."""
from __future__ import annotations

import logging
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from deployment_toolkit.config import Choice, Reuse, setting
from deployment_toolkit.results.bench_store import BenchCSV, row_key
from deployment_toolkit.results.identity import RunIdentity, host_identity, library_versions, toolkit_version
from deployment_toolkit.results.run_folder import RunFolder
from deployment_toolkit.spec import atomic_write_text
from .configs import STATUS_OK, STATUS_SKIPPED, BenchConfig
from .host import HostCaps, device_slug, probe_host, skip_reason
from .isolation import run_group_isolated
from .measuring import base_row, loadavg, run_group
from .runners import BenchOptions
from .summary import write_summary

_log = logging.getLogger(__name__)


class Isolation(Choice):
    """Which groups run in a child process (a hang or an OOM kill then fails that configuration alone)."""
    COMPILE = "compile"  # torch.compile groups
    ALL = "all"
    NONE = "none"  # fastest; a hang or an OOM kill then stops the bench


@dataclass(frozen=True)
class BenchRun:
    """How a bench run goes, besides how each configuration is timed (BenchOptions): isolation, the per-configuration
    limit of an isolated group, whether completed configurations are measured again, the progress bar, and
    results.ledger's reuse policy (auto | resume | fresh)."""

    isolate: Isolation = setting(Isolation.COMPILE, flag="--isolate", type=str, choices=Isolation.values(),
                                 metavar="{" + ",".join(Isolation.values()) + "}",  # argparse's own wording
                                 help="run torch.compile groups (or all groups) in a child process with "
                                      "--config-timeout")
    timeout_s: float = setting(900.0, flag="--config-timeout",
                               help="seconds one isolated configuration may take, compile included")
    remeasure: bool = setting(False, flag="--remeasure", action="store_true",
                              help="measure completed configurations again")
    progress: bool = setting(True, flag="--no-progress", action="store_false", help="no progress bar")
    reuse: Reuse = Reuse.AUTO  # the command's --resume / --fresh (results.ledger.add_reuse_arguments)

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "isolate", Isolation(self.isolate))
        except ValueError:
            raise ValueError("isolate must be compile, all or none") from None
        object.__setattr__(self, "reuse", Reuse(self.reuse))


@dataclass
class Plan:
    """What a run will do: configurations already in the CSV, ones the host cannot run, the rest."""

    done: list[BenchConfig] = field(default_factory=list)
    unsupported: list[tuple[BenchConfig, str]] = field(default_factory=list)
    todo: list[BenchConfig] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{len(self.done) + len(self.unsupported) + len(self.todo)} configurations: skipping "
                f"{len(self.done)} completed, {len(self.unsupported)} unsupported on this host, "
                f"{len(self.todo)} to measure")


def plan_run(configs: Sequence[BenchConfig], caps: HostCaps, existing: Iterable[dict[str, Any]],
             amp_dtype: str = "auto", remeasure: bool = False) -> Plan:
    """Completed = measured rows, and skipped rows whose reason still holds (a host that gained a C
    compiler measures its torch.compile rows). Failed rows are tried again."""
    status = {row_key(r): r.get("status") for r in existing}
    plan = Plan()
    for cfg in configs:
        stored = status.get(tuple(str(v) for v in cfg.key))
        reason = skip_reason(cfg, caps, amp_dtype)
        if stored == STATUS_OK and not remeasure:  # a measurement is never overwritten by a skip
            plan.done.append(cfg)
        elif reason is not None:
            if stored == STATUS_SKIPPED and not remeasure:
                plan.done.append(cfg)
            else:
                plan.unsupported.append((cfg, reason))
        else:
            plan.todo.append(cfg)
    return plan


def groups_of(configs: Sequence[BenchConfig]) -> list[list[BenchConfig]]:
    out: dict[tuple[str, ...], list[BenchConfig]] = {}
    for cfg in configs:
        out.setdefault(cfg.group, []).append(cfg)
    return list(out.values())


def write_hardware_json(path: Path, config: dict[str, Any], caps: HostCaps,
                        identity: RunIdentity | None = None) -> Path:
    """`<device_slug>_hardware.json`: runinfo's machine/versions/git record plus what torch sees; `runs`
    keeps every measuring run's command, config and git state (the CSV collects rows of many runs)."""
    import json

    import torch

    from deployment_toolkit.results import runinfo

    meta = runinfo.run_metadata(config)
    try:
        previous = json.loads(path.read_text()).get("runs", []) if path.exists() else []
    except (OSError, ValueError):
        previous = []
    meta["runs"] = [*previous, {k: meta[k] for k in ("timestamp", "command", "git", "config")}][-100:]
    meta["torch_runtime"] = {
        "threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads(),
        "mkldnn": torch.backends.mkldnn.is_available(), "host_caps": asdict(caps),
        "loadavg": list(loadavg()),
    }
    if caps.cuda:
        props = torch.cuda.get_device_properties(caps.device)
        meta["torch_runtime"]["cuda"] = {"name": props.name, "capability": f"{props.major}.{props.minor}",
                                         "memory_gib": round(props.total_memory / 2**30, 1),
                                         "torch_cuda": torch.version.cuda}
    atomic_write_text(path, json.dumps(meta, indent=2, default=str) + "\n")
    # the folder's run.json, like every results folder's (through its RunFolder): the latest run with the runs
    # before it and what torch sees, and every identity whose rows the CSV holds
    folder = RunFolder(path.parent, identity)
    if identity is not None:
        meta["identities"] = folder.identities()
    folder.write_run_json(meta)
    if identity is not None:
        from deployment_toolkit.results.ledger import register

        register(path.parent, identity, meta)
    return path


def bench_identity(opts: BenchOptions) -> RunIdentity:
    """What defines a bench row (results.identity): the host and its GPUs, the libraries, the toolkit and how each
    configuration is timed. The configuration itself is the row's key."""
    return RunIdentity(host=host_identity(), server_version=None, model_config=None, artifact_digest=None,
                       perf_options=asdict(opts), input_data="random", toolkit_version=toolkit_version(),
                       libraries=library_versions(), extra={"kind": "framework-bench"})


def run_bench(configs: Sequence[BenchConfig], opts: BenchOptions, result_dir: str | Path,
              run: BenchRun | None = None, *, caps: HostCaps | None = None, run_config: dict[str, Any] | None = None,
              log: Callable[[str], None] | None = None, **fields: Any) -> tuple[Path, list[dict[str, Any]], Plan]:
    """Measure what is missing from `<result_dir>/<device_slug>.csv`; returns (csv path, this run's rows, plan).

    Rows are reused only under this run's identity (`bench_identity`); a CSV holding rows of another identity is
    moved aside first (results.ledger; `run.reuse`: auto | resume | fresh). `fields` set single BenchRun fields by
    name (`isolate="none"`, `progress=False`, ...); `log` defaults to this module's logger.

    isolate: `compile` runs torch.compile groups in a child process with `timeout_s` per configuration,
    `all` every group, `none` nothing (fastest; a hang or an OOM kill then stops the bench).
    """
    run = replace(run or BenchRun(), **fields)
    log = log or _log.info
    slug = device_slug(opts.device)
    result_dir = Path(result_dir)
    store = BenchCSV(result_dir / f"{slug}.csv")
    identity = bench_identity(opts)
    hw_path = result_dir / f"{slug}_hardware.json"
    store.reconcile(identity, run.reuse, [store.path.with_suffix(".md"), hw_path], say=log)  # may move the CSV aside
    caps = caps if caps is not None else _probe(configs, opts, run, store, log)
    plan = plan_run(configs, caps, store.read(), opts.amp_dtype, run.remeasure)
    log(plan.summary() + f" ({store.path})")
    hw_config = {**(run_config or {}), "options": asdict(opts), "isolate": run.isolate.value,
                 "timeout_s": run.timeout_s}
    if plan.todo or plan.unsupported or not hw_path.exists():  # a run that measures nothing leaves it alone
        write_hardware_json(hw_path, hw_config, caps, identity)

    run_rows: list[dict[str, Any]] = []
    skipped_rows = [{**base_row(cfg, opts.device, STATUS_SKIPPED, reason), "identity": identity.id}
                    for cfg, reason in plan.unsupported]
    store.upsert(skipped_rows)
    run_rows += skipped_rows
    _measure(plan, opts, run, _Rows(store, identity.id, run_rows), log)
    return store.path, run_rows, plan


def _probe(configs: Sequence[BenchConfig], opts: BenchOptions, run: BenchRun, store: BenchCSV,
           log: Callable[[str], None]) -> HostCaps:
    """What the host can run, torch.compile checked only where a configuration still to measure needs it (the
    check compiles, which takes a while)."""
    measured = {row_key(r) for r in store.read() if r.get("status") == STATUS_OK}
    needs_compile = any(c.compile_mode != "none" and (run.remeasure or tuple(map(str, c.key)) not in measured)
                        for c in configs)
    log("probing the host (fp16/bf16 kernels, ONNX Runtime providers"
        + (", torch.compile)" if needs_compile else ")") + " ...")
    caps = probe_host(opts.device, check_compile=needs_compile)
    if caps.compile_error and needs_compile:
        log(f"torch.compile is unavailable: {caps.compile_error}")
    return caps


@dataclass
class _Rows:
    """Where this run's rows go: the device's CSV (each row as it comes, under the run's identity) and the list
    the run returns."""

    store: BenchCSV
    identity: str
    run_rows: list[dict[str, Any]]


def _measure(plan: Plan, opts: BenchOptions, run: BenchRun, rows: _Rows, log: Callable[[str], None]) -> None:
    """Every configuration to measure, group by group (in a child process where `run.isolate` says), each row
    written and said as it comes; the summary is written whatever stops the run."""
    bar = None
    if run.progress and plan.todo:
        from tqdm import tqdm

        bar = tqdm(total=len(plan.todo), desc="framework bench", unit="config", dynamic_ncols=True)
        log = _bar_log(bar)

    def emit(row: dict[str, Any]) -> None:
        row = {**row, "identity": rows.identity}
        rows.store.upsert([row])
        rows.run_rows.append(row)
        log(_row_line(row))
        if bar is not None:
            bar.update(1)

    try:
        for group in groups_of(plan.todo):
            if bar is not None:
                bar.set_postfix_str(group[0].label.rsplit(" b", 1)[0])
            if run.isolate == Isolation.ALL or (run.isolate == Isolation.COMPILE and group[0].compile_mode != "none"):
                run_group_isolated(group, opts, emit, run.timeout_s)
            else:
                run_group(group, opts, emit, log)
    finally:
        if bar is not None:
            bar.close()
        write_summary(rows.store.path, rows.store.read())


def _row_line(row: dict[str, Any]) -> str:
    """One measured configuration as a console line: its throughput, p50 and peak memory, or why it failed."""
    if row["status"] == STATUS_OK:
        return (f"{row['model']} {row['runtime']} {row['precision']} compile={row['compile_mode']} "
                f"b{row['batch_size']}: {row['throughput']:.2f} {row['unit']}, p50 {row['p50_ms']:.1f} ms, "
                f"peak {row['peak_mem_mb']:.0f} MB ({row['peak_mem_metric']})")
    return f"{row['model']} {row['runtime']} {row['precision']} b{row['requested_batch_size']}: " \
           f"{row['status']}: {row['reason']}"


def _bar_log(bar) -> Callable[[str], None]:
    def log(msg: str) -> None:
        bar.write(msg, file=sys.stderr)

    return log
