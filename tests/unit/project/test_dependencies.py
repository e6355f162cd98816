"""Dependencies where they belong (issue 19, item 7): every declared runtime dependency is imported by the
package (or allow-listed here with the reason it is needed without an import), every third-party import in
deployment_toolkit/ is declared, and test-only packages live in the `test` extra."""
from __future__ import annotations

import ast
import functools
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path
import pytest

pytestmark = pytest.mark.slow  # real exports or subprocesses: `make test` runs it, `make test-unit` does not

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "deployment_toolkit"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

# Declared, needed, but never imported by name in deployment_toolkit/.
NOT_IMPORTED = {
    "nvidia-cuda-runtime-cu12": "libcudart.so.12, which the perf_analyzer binary links against even on CPU hosts",
    "setuptools": "tritonclient's shared-memory module imports pkg_resources",
    "cuda-python": "tritonclient.utils.cuda_shared_memory imports `cuda` (cuda-bindings, pulled by cuda-python<13)",
    "nvidia-pytriton": "ships the tritonserver binary; server/local.py finds it with importlib.util.find_spec",
    "onnxscript": "torch.onnx.export's exporter imports it",
}
# Imported, but provided by something other than a distribution this project declares.
NOT_DECLARED = {
    "triton_python_backend_utils": "Triton's Python backend provides it inside the model's stub process",
    "runtimes": "deployment_toolkit/runtimes/artifact.py, copied beside the Python backend model as runtimes.py",
    "samplers": "diffusion/samplers.py, copied beside the sampler model",
    "step_runtime": "pipeline/step_runtime.py, copied beside a pipeline step's Python backend model",
    "user_step": "the user's pre/post-processing file, copied beside its step's model as user_step.py",
    "deployment_toolkit": "this package",
}


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


@functools.lru_cache(maxsize=1)
def _imports() -> dict[str, set[str]]:
    """Top-level module -> files of deployment_toolkit/ importing it (lazy imports inside functions included); parsed
    once for the module's tests."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


def _third_party(imports: dict[str, set[str]]) -> dict[str, set[str]]:
    return {m: files for m, files in imports.items() if m not in sys.stdlib_module_names and m != "__future__"}


@functools.lru_cache(maxsize=1)
def _installed() -> dict[str, list[str]]:
    """Top-level module -> the distributions providing it: read once (each read scans every installed
    distribution's files, about half a second; read per module it made two tests take 50 s)."""
    return packages_distributions()


def _distributions_of(module: str) -> set[str]:
    return {d.lower().replace("_", "-") for d in _installed().get(module, [])}


def test_every_declared_runtime_dependency_is_imported():
    imported = set()
    for module in _third_party(_imports()):
        imported |= _distributions_of(module)
    declared = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    unused = sorted(d for d in declared - imported if d not in NOT_IMPORTED)
    assert not unused, f"declared in pyproject.toml but never imported by deployment_toolkit/: {unused}"
    stale = sorted(set(NOT_IMPORTED) - declared)
    assert not stale, f"allow-listed but no longer declared: {stale}"


def test_every_third_party_import_is_declared():
    declared = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    declared |= {_name(r) for extra, reqs in PYPROJECT["project"]["optional-dependencies"].items()
                 if extra != "test" for r in reqs}
    missing = {}
    for module, files in _third_party(_imports()).items():
        if module in NOT_DECLARED:
            continue
        dists = _distributions_of(module) or {module.lower()}  # not installed here: its own name
        if not dists & declared:
            missing[module] = sorted(files)
    assert not missing, f"imported by deployment_toolkit/ but not declared in pyproject.toml: {missing}"


def test_test_only_packages_are_in_the_test_extra():
    runtime = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    test_extra = {_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["test"]}
    assert "pytest" in test_extra and "pytest" not in runtime
    assert "pytest" not in _imports()  # runtime code never imports the test runner
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"pip install .*-e '?\.\[test(,hf)?\]'?", makefile), "make test must install the test extra"


def test_the_checks_can_fail():
    """The scan sees lazy imports (inside functions) and maps import names to distributions."""
    imports = _imports()
    assert "deployment_toolkit/kube/manifests.py" in imports["kubernetes_validate"]  # imported inside a function
    assert _distributions_of("yaml") == {"pyyaml"} and _distributions_of("google") >= {"protobuf"}
    assert _name("tritonclient[all]==2.50.0") == "tritonclient" and _name("PyYAML==6.0.3") == "pyyaml"
