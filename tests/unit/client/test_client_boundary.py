"""Only the client package talks to a server (issue 19, item 1): a module elsewhere in the toolkit or in the
triton/ scripts that imports tritonclient's HTTP/gRPC client, its shared-memory helpers or an HTTP library
fails here; it should call `deployment_toolkit.client.TritonClient` instead.
perf_analyzer runs as a subprocess and is not a client in this sense."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "deployment_toolkit"
CLIENT = PACKAGE / "client"

# Modules whose import means talking to a server over the network.
FORBIDDEN = ("tritonclient.http", "tritonclient.grpc", "tritonclient.utils.shared_memory",
             "tritonclient.utils.cuda_shared_memory", "urllib.request", "urllib.error", "http.client", "requests",
             "httpx", "aiohttp", "grpc")
# Names under a forbidden module that are data formats, not clients.
NOT_CLIENTS = {("tritonclient.grpc", "model_config_pb2")}  # the ModelConfig protobuf: config text, no server

# What must stay outside the client package, and why.
ALLOWED = {
    ("deployment_toolkit/diffusion/targets.py", "requests"):
        "HttpFormTarget posts the seed's multipart form to a /v1/infer front end (not a Triton API) to compare "
        "its latency with Triton's; the client module speaks only Triton's protocols",
}


def _forbidden(module: str) -> bool:
    return any(module == f or module.startswith(f + ".") for f in FORBIDDEN)


def violations(source: str) -> list[tuple[int, str]]:
    """(line, what) for each import of a server client, and each use of InferenceServerClient, in `source`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names
                      if _forbidden(a.name) or a.name == "tritonclient"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if (node.module, alias.name) in NOT_CLIENTS:
                    continue
                if _forbidden(node.module) or _forbidden(full):
                    found.append((node.lineno, node.module if _forbidden(node.module) else full))
        elif isinstance(node, ast.Attribute) and node.attr == "InferenceServerClient":
            found.append((node.lineno, "InferenceServerClient"))
        elif isinstance(node, ast.Name) and node.id == "InferenceServerClient":
            found.append((node.lineno, "InferenceServerClient"))
    return found


def _sources() -> list[Path]:
    files = [p for p in PACKAGE.rglob("*.py") if CLIENT not in p.parents]
    lab = ROOT / "deployment_toolkit_lab"  # read, not imported: the lab talks to servers through the client too
    return sorted(files + list((ROOT / "triton").glob("*.py")) + list(lab.rglob("*.py")))


def _scan() -> dict[tuple[str, str], list[int]]:
    out: dict[tuple[str, str], list[int]] = {}
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        for line, what in violations(path.read_text()):
            out.setdefault((rel, what), []).append(line)
    return out


def test_only_the_client_package_talks_to_a_server():
    bad = {k: v for k, v in _scan().items() if k not in ALLOWED}
    assert not bad, "server clients outside deployment_toolkit/client/ (use client.TritonClient):\n" + "\n".join(
        f"  {path}:{lines} {what}" for (path, what), lines in sorted(bad.items()))


def test_every_allowance_is_still_needed():
    stale = set(ALLOWED) - set(_scan())
    assert not stale, f"allow-list entries no longer needed, remove them: {sorted(stale)}"


def test_the_scan_sees_each_way_of_importing_a_client():
    source = "\n".join([
        "import tritonclient.http as httpclient",
        "from tritonclient import grpc",
        "from tritonclient.grpc import InferenceServerClient",
        "def f():\n    import urllib.request",
        "from urllib.error import HTTPError",
        "client = module.InferenceServerClient(url='x')",
        "import tritonclient.utils.shared_memory as shm",
    ])
    assert sorted(line for line, _ in violations(source)) == [1, 2, 3, 5, 6, 7, 8]
    assert violations("from tritonclient.grpc import model_config_pb2 as mc\nimport urllib.parse\n") == []


def test_the_client_imports_neither_server_nor_perf():
    """server/ and perf/ import the client; the reverse would be an import cycle."""
    for path in CLIENT.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                package = module.split(".")[0] if node.level == 2 else \
                    module.split(".")[1] if module.startswith("deployment_toolkit.") else ""
                assert package not in ("server", "perf"), f"{path.name}:{node.lineno} imports {module}"
