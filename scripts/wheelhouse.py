#!/usr/bin/env python3
"""What an air-gapped host needs beside its own torch, for `make wheelhouse` and `make install WHEELHOUSE=DIR`.

Standard library only: it runs with the host's Python before anything of ours is installed.

  requirements --for download   the toolkit's pins minus torch/torchvision (the host brings them) and minus the
                                packages that depend on torch (pip would download torch for them: CUDA GBs);
  requirements --for torch-dependent   those, downloaded with --no-deps;
  requirements --for install    what `make install WHEELHOUSE=DIR` installs: everything minus torch/torchvision
                                when this Python's torch is a CUDA build (the host's torch is kept, never
                                replaced), else every pin;
  size DIR                      the wheelhouse's size: the parts the GPU path needs (tritonserver and perf_analyzer
                                carriers, the CUDA 12 runtime, the toolkit) and the whole folder; fails if a
                                torch, torchvision or CUDA-library wheel slipped in (the host brings those)
  check-torch                   after the install: which torch the venv uses (fails if a CUDA host's torch was
                                replaced by another one).
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOST_PROVIDED = ("torch", "torchvision")  # a CUDA host's own builds: never downloaded, never replaced
# Pins that declare a dependency on torch: downloaded with --no-deps (their other dependencies are pinned
# or pulled by the rest). A new pin that needs torch belongs here, or `make wheelhouse` downloads torch.
TORCH_DEPENDENT = ("timm", "monai")
BUILD = ("wheel",)
# The wheels that carry what the GPU path runs: tritonserver + Python backend, perf_analyzer, libcudart.so.12, us.
CARRIERS = ("nvidia_pytriton", "tritonclient", "nvidia_cuda_runtime_cu12", "triton_deployment_toolkit")
# Host-provided: a wheel of these in the wheelhouse means pip resolved torch in (GBs of CUDA wheels).
FORBIDDEN = re.compile(r"^(torch|torchvision|triton|nvidia_(cudnn|cublas|cufft|curand|cusolver|cusparse|nccl)\w*)-",
                       re.I)  # the editable install of the checkout builds without an index (--no-build-isolation)


def pins(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """[project].dependencies and the `test` extra (`make test` runs there too) as written (tomllib where the
    Python has it, else the lists' literal text)."""
    text = pyproject.read_text()
    try:
        import tomllib

        project = tomllib.loads(text)["project"]
        return list(project["dependencies"]) + list(project.get("optional-dependencies", {}).get("test", []))
    except ImportError:  # Python 3.10
        block = re.search(r"^dependencies\s*=\s*\[(.*?)^\]", text, re.S | re.M)
        test = re.search(r"^test\s*=\s*\[(.*?)\]", text, re.S | re.M)
        return ((re.findall(r'^\s*"([^"]+)"', block.group(1), re.M) if block else [])
                + (re.findall(r'"([^"]+)"', test.group(1)) if test else []))


def name_of(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def host_torch_cuda(python: str = sys.executable) -> str | None:
    """The CUDA version of the torch that `python` imports (None: no torch, or a CPU build)."""
    probe = "import torch, sys; sys.stdout.write(torch.version.cuda or '')"
    try:
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def requirements(kind: str, cuda: str | None) -> list[str]:
    reqs = pins()
    without_host = [r for r in reqs if name_of(r) not in HOST_PROVIDED]
    if kind == "download":
        return [r for r in without_host if name_of(r) not in TORCH_DEPENDENT] + list(BUILD)
    if kind == "torch-dependent":
        return [r for r in reqs if name_of(r) in TORCH_DEPENDENT]
    return (without_host if cuda else reqs) + list(BUILD)


def sizes(folder: Path) -> dict[str, int]:
    """Bytes per wheel (and .deb) in `folder`."""
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.suffix in (".whl", ".deb")}


def size_report(folder: Path) -> tuple[str, list[str]]:
    files = sizes(folder)
    carriers = {n: b for n, b in files.items() if n.split("-")[0].lower() in CARRIERS}
    mb = lambda b: f"{b / 1e6:.1f} MB"  # noqa: E731
    lines = [f"{folder}: {len(files)} files, {mb(sum(files.values()))} in all"]
    lines += [f"  {n}: {mb(b)}" for n, b in carriers.items()]
    lines.append(f"  carriers together: {mb(sum(carriers.values()))}; the other {len(files) - len(carriers)} files "
                 f"(their Python dependencies): {mb(sum(files.values()) - sum(carriers.values()))}")
    return "\n".join(lines), [n for n in files if FORBIDDEN.match(n)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="example:\n  python scripts/wheelhouse.py requirements --for install")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("requirements")
    r.add_argument("--for", dest="kind", choices=("download", "torch-dependent", "install"), required=True)
    sub.add_parser("size").add_argument("folder", type=Path)
    sub.add_parser("check-torch")
    args = p.parse_args(argv)
    if args.cmd == "size":
        if not args.folder.is_dir():
            print(f"error: {args.folder} is not a folder", file=sys.stderr)
            return 2
        text, forbidden = size_report(args.folder)
        print(text)
        if forbidden:
            print(f"error: {', '.join(forbidden)} in the wheelhouse: the host brings torch and its CUDA libraries; "
                  "a pin that depends on torch belongs in TORCH_DEPENDENT (scripts/wheelhouse.py)", file=sys.stderr)
            return 1
        return 0
    cuda = host_torch_cuda() if args.cmd == "check-torch" or args.kind == "install" else None
    if args.cmd == "requirements":
        if args.kind == "install":
            why = (f"this Python's torch is a CUDA {cuda} build: it is used as is (torch/torchvision not installed)"
                   if cuda else "no CUDA torch on this Python: every pin is installed, torch included")
            print(f"# {why}")
        print("\n".join(requirements(args.kind, cuda)))
        return 0
    import importlib.metadata as md

    try:
        version = md.version("torch")
    except md.PackageNotFoundError:
        print("error: no torch in this environment: install the host's torch or put a torch wheel in the "
              "wheelhouse", file=sys.stderr)
        return 2
    where = subprocess.run([sys.executable, "-c", "import torch; print(torch.__file__)"], capture_output=True,
                           text=True).stdout.strip()
    print(f"torch {version} (CUDA {cuda or 'none'}) from {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
