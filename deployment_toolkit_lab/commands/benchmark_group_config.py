"""One shared replica group with its models' solo configs and with its group config, side by side (issue 55).

A plan's shared group is served from the plan's own repository on the embedded tritonserver and driven by
`deployment-toolkit check-plan` (its own open-loop client, not the planner's) at the group's planned per-replica
rates times each --scale, in rounds that alternate the two settings: "as searched alone" (each model's intra-op
threads as its own search picked them) and "intra-op threads split" (max(1, cores // models) each, what
deployment.groupconfig tries for a shared group). Between settings each model's config.pbtxt is rewritten and the
model reloaded; the repository is put back as it was at the end. Prints, per setting and scale, the rounds the group
held and each model's p99 per round, and writes group_config.md and run.json to --result-path. A benchmark: it
reports; it does not pass or fail."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from deployment_toolkit import cli
from deployment_toolkit.errors import UserInputError
from deployment_toolkit.results.run_folder import add_result_path_argument

SOLO, SPLIT = "as searched alone", "intra-op threads split"
THREAD_KEY = "intra_op_thread_count"  # ONNX Runtime's (the settings compared are the ONNX members')
EXAMPLE = """
    deployment-toolkit-lab bench-group-config results/check-plan-fleet-cpu/fleet/plan \\
        --workspace workspace/check-plan-fleet --rounds 3 --scale 1,1.5 --result-path results/local/group-config
"""


def _parse(argv: list[str] | None):
    p = cli.parser(__doc__, EXAMPLE)
    p.add_argument("plan", metavar="PLAN_DIR", help="the folder `deployment-toolkit plan` wrote (its run.json)")
    p.add_argument("--workspace", required=True, help="the plan's workspace (its model_repository is served)")
    p.add_argument("--group", default=None, help="the shared group (its models joined by '-'); default: the largest")
    p.add_argument("--rounds", type=int, default=3, help="rounds per setting and scale, alternating (default 3)")
    p.add_argument("--scale", default="1", help="multiples of the planned rates, comma-separated (default 1)")
    p.add_argument("--window-s", type=float, default=5.0, help="each round's counted window (default 5)")
    p.add_argument("--samples", default=None, help="check-plan's --samples for models taking strings")
    add_result_path_argument(p, help="default: results/local/group-config-<UTC time>")
    args = p.parse_args(argv)
    try:
        args.scales = [float(x) for x in args.scale.split(",") if x.strip()]
    except ValueError:
        raise UserInputError(f"--scale {args.scale!r}: give multiples separated by commas, e.g. 1,1.5") from None
    if not args.scales or any(s <= 0 for s in args.scales) or not 1 <= args.rounds <= 20:
        raise UserInputError("--scale takes multiples > 0 and --rounds 1..20")
    return args


def _group(plan_dir: Path, label: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The shared group to compare and the plan's models (run.json's config)."""
    path = plan_dir / "run.json"
    if not path.is_file():
        raise UserInputError(f"{plan_dir}: no run.json; give the folder `deployment-toolkit plan` wrote")
    config = json.loads(path.read_text()).get("config") or {}
    shared = [g for g in config.get("groups") or [] if len(g["models"]) > 1]
    if label is not None:
        shared = [g for g in shared if "-".join(g["models"]) == label]
    if not shared:
        raise UserInputError(f"{path}: no shared group" + (f" {label!r}" if label else "") + " to compare")
    return max(shared, key=lambda g: len(g["models"])), config.get("models") or {}


def _solo_threads(models: dict[str, Any], name: str) -> int:
    """The model's own search's threads, from its config's name (`..._t2_...`; `tdef`: the runtime's default)."""
    found = re.search(r"_t(\d+|def)_", str((models.get(name) or {}).get("config", "")))
    return int(found.group(1)) if found and found.group(1) != "def" else 0


def _set_threads(config: Path, threads: int) -> bool:
    """Write the ONNX intra-op thread count into `config` (0: the runtime's default); False where nothing changed
    or the model is not served by ONNX Runtime."""
    from deployment_toolkit.repository.config import parse_text, to_text

    cfg = parse_text(config.read_text())
    if (cfg.backend or cfg.platform.split("_")[0]) != "onnxruntime":
        return False
    have = int(cfg.parameters[THREAD_KEY].string_value or 0) if THREAD_KEY in cfg.parameters else 0
    if have == threads:
        return False
    if threads:
        cfg.parameters[THREAD_KEY].string_value = str(threads)
    else:
        del cfg.parameters[THREAD_KEY]
    config.write_text(to_text(cfg))
    return True


def _apply(server: Any, repository: Path, threads: dict[str, int]) -> None:
    for name, n in threads.items():
        if _set_threads(repository / name / "config.pbtxt", n):
            server.load_model(name)


def _round(plan_dir: Path, url: str, label: str, scale: float, args, out: Path) -> dict[str, Any]:
    """One check-plan round of the group at `scale`; its verdict and each model's p99 and share within its SLO."""
    command = [sys.executable, "-m", "deployment_toolkit", "check-plan", str(plan_dir), "--url", url, "--group",
               label, "--rounds", "1", "--scale", f"{scale:g}", "--window-s", f"{args.window_s:g}",
               "--result-path", str(out), *(["--samples", args.samples] if args.samples else [])]
    subprocess.run(command, stdout=subprocess.DEVNULL)
    check = json.loads((out / "check.json").read_text())
    (group,) = check["groups"]
    last = group["rounds"][-1]
    return {"verdict": last["verdict"], "cpu_share": last["cpu_share"],
            "models": {m["model"]: {"p99_ms": m["p99_ms"], "slo_ms": m["slo_ms"], "within_slo": m["within_slo"],
                                    "holds": m["holds"]} for m in last["models"]}}


def _markdown(record: dict[str, Any]) -> str:
    from deployment_toolkit.tables import markdown_table

    rows = []
    for setting in (SOLO, SPLIT):
        for scale in record["scales"]:
            got = [r for r in record["rounds"] if r["setting"] == setting and r["scale"] == scale]
            held = sum(r["verdict"] == "holds" for r in got)
            p99s = "; ".join(", ".join(f"{m} {v['p99_ms']:.1f}" if v["p99_ms"] is not None else f"{m} -"
                                       for m, v in r["models"].items()) for r in got)
            rows.append([setting, f"x{scale:g}", f"{held} of {len(got)}", p99s])
    threads = "; ".join(f"{s}: " + ", ".join(f"{m} {t or 'default'}" for m, t in record["threads"][s].items())
                        for s in (SOLO, SPLIT))
    return "\n".join([f"# Group {record['group']}: solo configs against the group config", "",
                      f"Command: `{record['command']}`", "", f"Intra-op threads: {threads}.", "",
                      markdown_table(["setting", "rates", "rounds held", "p99 per round (ms)"], rows, "llll"),
                      "", "SLOs (ms): " + ", ".join(f"{m} {s:g}" for m, s in record["slo_ms"].items()) + ".", ""])


def main(argv: list[str] | None = None) -> int:
    from deployment_toolkit.committed import refuse_committed
    from deployment_toolkit.results.run_folder import RunFolder
    from deployment_toolkit.server.local import LocalTritonServer, ServerConfig
    from deployment_toolkit.spec import atomic_write_text

    args = _parse(argv)
    plan_dir, repository = Path(args.plan), Path(args.workspace) / "model_repository"
    group, models = _group(plan_dir, args.group)
    names, label = list(group["models"]), "-".join(group["models"])
    out = Path(args.result_path or f"results/local/group-config-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    refuse_committed(out, "--result-path")
    share = max(1, len(os.sched_getaffinity(0)) // len(names))
    threads = {SOLO: {n: _solo_threads(models, n) for n in names}, SPLIT: {n: share for n in names}}
    kept = {n: (repository / n / "config.pbtxt").read_text() for n in names}
    served = [n + "_pipeline" if (repository / f"{n}_pipeline").is_dir() else n for n in names]
    rounds: list[dict[str, Any]] = []
    try:
        with LocalTritonServer(ServerConfig(repository, model_control_mode="explicit", load_models=tuple(served),
                                            log_dir=out / "server-logs")) as server:
            for r in range(1, args.rounds + 1):
                for setting in ((SOLO, SPLIT) if r % 2 else (SPLIT, SOLO)):
                    _apply(server, repository, threads[setting])
                    for scale in args.scales:
                        got = _round(plan_dir, server.grpc_url, label, scale, args, out / f"r{r}-{len(rounds)}")
                        rounds.append({"round": r, "setting": setting, "scale": scale, **got})
                        print(f"round {r}, {setting}, x{scale:g}: {got['verdict']}", flush=True)
    finally:
        for n, text in kept.items():
            (repository / n / "config.pbtxt").write_text(text)
    record = {"command": " ".join(["deployment-toolkit-lab", "bench-group-config", *(argv or sys.argv[1:])]),
              "plan": str(plan_dir), "group": label, "scales": args.scales, "threads": threads,
              "slo_ms": {n: (models.get(n) or {}).get("p99_ms") for n in names}, "rounds": rounds}
    atomic_write_text(out / "group_config.md", _markdown(record))
    RunFolder(out).record({"kind": "bench-group-config", **record})
    print("\n" + _markdown(record))
    return 0


if __name__ == "__main__":
    cli.run(main)
