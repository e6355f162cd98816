"""Air-gapped install (`make install WHEELHOUSE=DIR`, `make wheelhouse`) and the `triton/` scripts folder never
shadowing the `triton` compiler package that torch.compile imports.

CI-sized: the Makefile's commands through `make -n`, the requirement sets against the installed packages'
real metadata, one real no-index install of the toolkit's wheel into a --system-site-packages venv, and
`import triton` resolved from the repo root and from a triton/*.py script with a stand-in compiler package.
(The whole wheelhouse install on Python 3.12 with a CUDA 13 torch is described in the README; it takes minutes.)
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "wheelhouse.py"
sys.path.insert(0, str(ROOT / "scripts"))
import wheelhouse  # noqa: E402
from conftest import make_n  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("make") is None, reason="needs make")]


# ------------------------------------------------------------------------------------------------ Makefile


def test_install_with_a_wheelhouse_uses_no_index_and_the_hosts_packages(tmp_path):
    venv = tmp_path / "venv"
    text = make_n("install", "WHEELHOUSE=/srv/wheels", f"VENV={venv}", "PYTHON=python3.12")
    assert f"python3.12 -m venv --system-site-packages {venv}" in text
    assert f"{venv}/bin/python scripts/wheelhouse.py requirements --for install > " in text
    assert (f"{venv}/bin/python -m pip install --no-index --find-links /srv/wheels -r "
            f"{venv}/requirements-wheelhouse.txt") in text
    assert "--no-index --find-links /srv/wheels --no-build-isolation --no-deps -e ." in text
    assert "scripts/wheelhouse.py check-torch" in text
    assert f"touch {venv}/.installed-stamp {venv}/.wheelhouse-stamp" in text  # `make test` then keeps this venv
    assert "apt-get install" not in text and "apt-get update" not in text  # no mirrors on an air-gapped host
    pip_lines = [ln for ln in text.splitlines() if " pip install" in ln]
    assert pip_lines and all("--no-index" in ln for ln in pip_lines), pip_lines


def test_install_without_a_wheelhouse_is_unchanged(tmp_path):
    text = make_n("install", f"VENV={tmp_path / 'venv'}")
    assert "--no-index" not in text and "--system-site-packages" not in text
    assert f"{tmp_path / 'venv'}/bin/pip install -q -e '.[test,hf]'" in text  # pytest: the test extra, transformers: the hf extra


def test_gpu_check_installs_from_the_wheelhouse_then_runs_the_acceptance(tmp_path):
    venv = tmp_path / "venv"
    text = make_n("gpu-check", "WHEELHOUSE=/srv/wheels", f"VENV={venv}", "GPU_CHECK_ARGS=--max-minutes 10")
    lines = text.splitlines()
    install = next(i for i, ln in enumerate(lines) if "--no-index" in ln)
    run = next(i for i, ln in enumerate(lines) if "deployment_toolkit_lab gpu-check" in ln)  # the lab's command
    assert install < run
    assert lines[run].strip() == f"{venv}/bin/python -m deployment_toolkit_lab gpu-check --max-minutes 10"


def test_wheelhouse_target_builds_for_the_chosen_python_without_torch(tmp_path):
    text = make_n("wheelhouse", f"WHEELHOUSE_OUT={tmp_path}", "WHEELHOUSE_PYTHON=sh")  # any existing command
    assert f"sh -m pip wheel -q --prefer-binary -w {tmp_path} -r {tmp_path}/requirements.txt" in text
    assert f"--no-deps -w {tmp_path} -r {tmp_path}/requirements-no-deps.txt" in text
    assert f"sh -m pip wheel -q --no-deps -w {tmp_path} ." in text  # the toolkit itself
    assert f"scripts/wheelhouse.py size {tmp_path}" in text


# ------------------------------------------------------------------------------------------------ requirement sets


def _names(reqs: list[str]) -> set[str]:
    return {wheelhouse.name_of(r) for r in reqs}


def test_download_set_leaves_out_torch_and_everything_that_would_pull_it():
    download = _names(wheelhouse.requirements("download", None))
    assert not download & {"torch", "torchvision", "timm", "monai"}
    assert {"nvidia-pytriton", "tritonclient", "nvidia-cuda-runtime-cu12", "numpy"} <= download
    assert _names(wheelhouse.requirements("torch-dependent", None)) == {"timm", "monai"}


def test_torch_dependent_list_is_complete_by_the_installed_metadata():
    """pip would download torch (GBs of CUDA wheels) for a pin that requires it: every such pin must be in
    TORCH_DEPENDENT. Read from the real metadata of the pinned packages installed here."""
    needs_torch = set()
    for req in wheelhouse.requirements("download", None):
        name = wheelhouse.name_of(req)
        if name in wheelhouse.BUILD:
            continue
        requires = metadata.requires(name) or []
        if any(wheelhouse.name_of(r) in wheelhouse.HOST_PROVIDED and "extra ==" not in r for r in requires):
            needs_torch.add(name)
    assert not needs_torch, f"{sorted(needs_torch)} require torch: add them to TORCH_DEPENDENT"


def _fake_cuda_torch(site: Path) -> Path:
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text('__version__ = "2.11.0+cu130"\nfrom . import version\n')
    (site / "torch" / "version.py").write_text('cuda = "13.0"\n')
    return site


def test_install_set_keeps_a_cuda_torch_of_the_host(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(_fake_cuda_torch(tmp_path / "site"))}
    out = subprocess.run([sys.executable, str(SCRIPT), "requirements", "--for", "install"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "CUDA 13.0 build: it is used as is" in out.stdout
    names = _names([ln for ln in out.stdout.splitlines() if ln and not ln.startswith("#")])
    assert not names & {"torch", "torchvision"} and {"timm", "monai", "nvidia-pytriton"} <= names


def test_install_set_on_a_host_without_cuda_torch_is_every_pin():
    out = subprocess.run([sys.executable, str(SCRIPT), "requirements", "--for", "install"], capture_output=True,
                         text=True, timeout=300)
    if "CUDA" in out.stdout.splitlines()[0] and "no CUDA" not in out.stdout:
        pytest.skip("this environment's torch is a CUDA build")
    assert "torch==2.13.0" in out.stdout.splitlines()


def test_size_reports_the_carriers_and_refuses_torch(tmp_path):
    for name, size in (("nvidia_pytriton-0.7.0-py3-none-manylinux_2_35_x86_64.whl", 3_000_000),
                       ("tritonclient-2.50.0-py3-none-manylinux1_x86_64.whl", 1_000_000),
                       ("pandas-3.0.6-cp312-cp312-manylinux_2_28_x86_64.whl", 500_000)):
        (tmp_path / name).write_bytes(b"\0" * size)
    ok = subprocess.run([sys.executable, str(SCRIPT), "size", str(tmp_path)], capture_output=True, text=True)
    assert ok.returncode == 0 and "3 files, 4.5 MB in all" in ok.stdout
    assert "carriers together: 4.0 MB; the other 1 files (their Python dependencies): 0.5 MB" in ok.stdout
    (tmp_path / "torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"\0")
    bad = subprocess.run([sys.executable, str(SCRIPT), "size", str(tmp_path)], capture_output=True, text=True)
    assert bad.returncode == 1 and "torch-2.13.0" in bad.stderr


# ------------------------------------------------------------------------------------------------ real installs


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The toolkit's wheel, installed with no index into a venv that sees the base Python's packages."""
    base = tmp_path_factory.mktemp("offline")
    wheels, venv = base / "wheels", base / "venv"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(wheels), str(ROOT)], check=True, capture_output=True, timeout=300)
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--system-site-packages",
                    "--without-pip", str(venv)], check=True, timeout=120)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-index", "--find-links", str(wheels), "--no-deps", "triton-deployment-toolkit"],
                   check=True, capture_output=True, timeout=300)
    return venv / "bin" / "python"


def test_toolkit_wheel_installs_with_no_index_and_carries_its_data(installed):
    code = ("import importlib.metadata as m; files = [str(f) for f in m.files('triton-deployment-toolkit')]; "
            "print('\\n'.join(files))")
    files = subprocess.run([str(installed), "-c", code], capture_output=True, text=True, cwd="/", check=True,
                           timeout=60).stdout.splitlines()
    assert "deployment_toolkit_lab/acceptance/seed001_nnunet_online.csv" in files
    assert "deployment_toolkit/repository/python_runtime/model.py" in files
    assert not [f for f in files if f.startswith("triton/")]  # the scripts folder is not a package of the wheel


def _fake_compiler(site: Path) -> Path:
    """A stand-in for the `triton` compiler package (a regular package, as the real one is)."""
    (site / "triton").mkdir(parents=True)
    (site / "triton" / "__init__.py").write_text('MARKER = "the triton compiler package"\n')
    return site


PROBE = ("import deployment_toolkit\n"
         "try:\n    import triton\n    print('triton:', getattr(triton, 'MARKER', triton.__path__))\n"
         "except ImportError:\n    print('triton: not importable')\n")


def test_installed_toolkit_from_the_repo_root_gets_the_compiler_package(installed, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(_fake_compiler(tmp_path / "site"))}
    out = subprocess.run([str(installed), "-c", PROBE], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=60)
    assert out.stdout.strip() == "triton: the triton compiler package", out.stderr
    # and where no compiler is installed, the scripts folder is hidden instead of passing for it
    bare = subprocess.run([str(installed), "-c", PROBE], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert bare.stdout.strip() == "triton: not importable", bare.stderr


def _replica(tmp_path: Path) -> Path:
    """A checkout's layout: triton/ scripts (with a probe script) beside the deployment_toolkit package."""
    repo = tmp_path / "repo"
    (repo / "triton").mkdir(parents=True)
    os.symlink(ROOT / "deployment_toolkit", repo / "deployment_toolkit")
    shutil.copy(ROOT / "triton" / "convert_model.py", repo / "triton" / "convert_model.py")
    header = (ROOT / "triton" / "convert_model.py").read_text()
    start = header.index("sys.path.insert")
    (repo / "triton" / "probe.py").write_text(
        "import sys\nfrom pathlib import Path\n\n" + header[start:header.index("\n", start) + 1] + PROBE
        + "import torch.utils._triton as t\nprint('torch sees a triton package:', t.has_triton_package())\n")
    return repo


def test_a_triton_script_gets_the_compiler_package_and_torch_sees_it(tmp_path):
    repo = _replica(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(_fake_compiler(tmp_path / "site"))}
    out = subprocess.run([sys.executable, "triton/probe.py"], capture_output=True, text=True, cwd=repo, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["triton: the triton compiler package", "torch sees a triton package: True"]


def _real_triton_installed() -> bool:
    try:
        metadata.distribution("triton")
        return True
    except metadata.PackageNotFoundError:
        return False


@pytest.mark.skipif(_real_triton_installed(), reason="the triton compiler package is installed here")
def test_a_triton_script_without_a_compiler_does_not_fool_torch(tmp_path):
    repo = _replica(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "triton/probe.py"], capture_output=True, text=True, cwd=repo, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["triton: not importable", "torch sees a triton package: False"]
