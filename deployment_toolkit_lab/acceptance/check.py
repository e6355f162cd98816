"""`deployment-toolkit-lab gpu-check`: plan, probe the host, record run.json, run the steps, write the README."""
from __future__ import annotations

import contextlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator

from deployment_toolkit.config import StepStatus
from deployment_toolkit.errors import UserInputError
from deployment_toolkit.spec import atomic_write_text
from .host import capabilities, library_versions, nvidia_smi, require_cuda, torch_cuda
from .plan import DEFAULT_BUDGETS, PlanOptions, Step, build_plan
from .runner import Runner, shown

log = logging.getLogger(__name__)


def budgets_of(args: Any) -> dict[str, float]:
    return {**DEFAULT_BUDGETS, **dict(args.budget)}


def make_plan(args: Any, result_dir: Path) -> list[Step]:
    budgets = budgets_of(args)
    workspace = Path(args.workspace)
    steps = build_plan(PlanOptions(result_dir=result_dir, workspace=workspace, device=args.device, budgets=budgets))
    if args.stages:
        unknown = sorted(set(args.stages) - set(DEFAULT_BUDGETS))
        if unknown:
            raise UserInputError(f"--stages: unknown {', '.join(unknown)}; stages are {', '.join(DEFAULT_BUDGETS)}")
        steps = [s for s in steps if s.stage in args.stages]
    return steps


def plan_lines(steps: list[Step], max_minutes: float) -> list[str]:
    """The plan as `--dry-run` shows it: each step with its budget, what it needs, and its command."""
    total = sum(s.budget_s for s in steps)
    lines = [f"{len(steps)} steps; budgets add up to {total:.0f} s, the check stops at {max_minutes * 60:.0f} s "
             "(steps past it are skipped)"]
    for s in steps:
        extra = []
        if s.requires:
            extra.append("after: " + "; ".join(s.requires))
        if s.server:
            extra.append("on the embedded tritonserver")
        if s.skip_unless:
            extra.append(f"skipped unless {s.skip_unless} imports")
        lines.append(f"[{s.stage}] {s.name} ({s.budget_s:.0f} s){' - ' + ', '.join(extra) if extra else ''}\n"
                     f"    $ {shown(s.argv)}")
    return lines


def _server_factory(repository: Path, log_dir: Path, timeout_s: float) -> Callable[[], ContextManager[Any]]:
    """What the runner enters when a step first needs the server: the embedded tritonserver on the plan's
    repository with every configured model loaded, stopped when the runner leaves it."""
    @contextlib.contextmanager
    def serving() -> Iterator[Any]:
        from deployment_toolkit.server.local import LocalTritonServer, ServerConfig

        models = sorted(p.name for p in repository.iterdir() if (p / "config.pbtxt").exists()) \
            if repository.exists() else []
        if not models:
            raise RuntimeError(f"no model was configured in {repository}")
        with LocalTritonServer(ServerConfig(repository, log_dir=log_dir, start_timeout_s=timeout_s)) as server:
            server.require_models(models)
            yield server
    return serving


def run_check(args: Any) -> int:
    """The check (or, with `args.dry_run`, its plan on the log); NoGPU where the host cannot run it."""
    from deployment_toolkit.results.run_folder import RunFolder
    from ..framework_bench import slugify
    from .report import CONVERSIONS_JSON, collect_conversions, write_readme

    if args.dry_run:
        for line in plan_lines(make_plan(args, Path(args.result_path or "results/gpu-<device-slug>")),
                               args.max_minutes):
            log.info(line)
        return 0
    gpu = require_cuda()  # NoGPU (a user error: one line, exit 2) before anything is written
    result_dir = Path(args.result_path or f"results/gpu-{slugify(gpu)}")
    steps = make_plan(args, result_dir)
    result_dir.mkdir(parents=True, exist_ok=True)
    repository = Path(args.workspace) / "model_repository"
    shutil.rmtree(repository, ignore_errors=True)  # models of an earlier run would load (and be measured) again
    caps = capabilities()
    config = {"gpu_acceptance": {"nvidia_smi": nvidia_smi(), "torch_cuda": torch_cuda(), "libraries": library_versions(),
                                 "capabilities": caps, "max_minutes": args.max_minutes,
                                 "plan": [s.to_dict() for s in steps]}}
    RunFolder(result_dir).record(config)  # first: an interrupted check still says where it ran
    log.info(f"GPU acceptance on {gpu} -> {result_dir} (at most {args.max_minutes:g} min)")
    runner = Runner(result_dir, args.max_minutes * 60, caps,
                    _server_factory(repository, result_dir / "logs" / "tritonserver", budgets_of(args)["server"]))
    try:
        results = runner.run(steps, fill=lambda a: a.replace("{grpc_url}", runner.server.grpc_url)
                             if "{grpc_url}" in a and runner.server is not None else a)
    finally:
        runner.stop_server()
        atomic_write_text(result_dir / CONVERSIONS_JSON,
                          json.dumps(collect_conversions(Path(args.workspace)), indent=2) + "\n")
        readme = write_readme(result_dir)
    failed = [r for r in results if r.status is StepStatus.FAILED]
    log.info(f"wrote {readme}; {len(failed)} step(s) failed" if failed else f"wrote {readme}; no step failed")
    return 1 if failed else 0

