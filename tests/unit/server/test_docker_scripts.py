"""Dry-run tests for scripts/docker/* and docker-compose.yml.

No Docker daemon is needed, nor a ``docker`` binary: every script runs with a
PATH that holds either nothing or a fake ``docker`` that records its argv, so a
dry run that called docker would be caught, and a real run can be checked to
execute exactly the command the dry run prints.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import require_tool

from deployment_toolkit.server.args import CONTAINER_DEFAULTS, ServerArgs

REPO = Path(__file__).resolve().parents[3]
SCRIPTS = REPO / "scripts" / "docker"
SERVER = SCRIPTS / "triton_inference_server.sh"
BUILD = SCRIPTS / "build.sh"
INTERACTIVE = SCRIPTS / "interactive.sh"
DOCKERFILE = SCRIPTS / "Dockerfile"
COMPOSE = REPO / "docker-compose.yml"
ALL_SCRIPTS = [SERVER, BUILD, INTERACTIVE]

BASH = shutil.which("bash") or "/bin/bash"
TRITON_IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"
CLIENT_IMAGE = "triton-deployment-toolkit-client:latest"
NGC_LIMITS = ["--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]


# --------------------------------------------------------------- helpers ---
class Sandbox:
    """A PATH with a fake docker (or none), and helpers to run the scripts."""

    def __init__(self, root: Path, with_fake_docker: bool = True):
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        self.record = root / "docker-argv"
        if with_fake_docker:
            fake = self.bin / "docker"
            fake.write_text(
                f"#!{BASH}\n"
                f"printf '%s\\0' \"$@\" > {shlex.quote(str(self.record))}\n"
                'exit "${FAKE_DOCKER_RC:-0}"\n'
            )
            fake.chmod(0o755)
        self.home = root / "home"
        self.home.mkdir()

    def link(self, tool: str) -> None:
        """Make one real host tool available on the sandbox PATH."""
        found = shutil.which(tool)
        if found is None:  # coreutils (cat, id): a host without them is broken, not a reason to skip
            pytest.fail(f"{tool} not found on PATH")
        (self.bin / tool).symlink_to(found)

    def run(self, script: Path, *args: str, cwd: Path, env: dict | None = None):
        full_env = {"PATH": str(self.bin), "HOME": str(self.home), "LC_ALL": "C"}
        full_env.update(env or {})
        return subprocess.run(
            [BASH, str(script), *args],
            cwd=cwd,
            env=full_env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def dry(self, script: Path, *args: str, cwd: Path, env: dict | None = None) -> list[str]:
        """Run with --dry-run, check it printed exactly one line and never ran docker."""
        proc = self.run(script, "--dry-run", *args, cwd=cwd, env=env)
        assert proc.returncode == 0, proc.stderr
        assert not self.docker_called(), "dry run must not invoke docker"
        lines = proc.stdout.splitlines()
        assert len(lines) == 1, f"expected one command line, got {proc.stdout!r}"
        return shlex.split(lines[0])

    def docker_called(self) -> bool:
        return self.record.exists()

    def docker_argv(self) -> list[str]:
        raw = self.record.read_bytes()
        assert raw.endswith(b"\0")
        return [a.decode() for a in raw[:-1].split(b"\0")]


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path / "sandbox")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A working directory with the default ./model_repository in it."""
    work = tmp_path / "work"
    (work / "model_repository").mkdir(parents=True)
    return work.resolve()


@pytest.fixture
def fake_repo(tmp_path: Path) -> Path:
    """A copy of the repository layout the client scripts derive their paths from."""
    root = (tmp_path / "checkout with space").resolve()
    target = root / "scripts" / "docker"
    target.mkdir(parents=True)
    for path in (BUILD, INTERACTIVE, DOCKERFILE):
        shutil.copy2(path, target / path.name)
    return root


def server_cmd(repo: Path, **overrides) -> list[str]:
    """The command triton_inference_server.sh should print with default options."""
    image = overrides.get("image", TRITON_IMAGE)
    return [
        "docker", "run", "--rm", "--name", "triton-inference-server",
        "--gpus", "all", "--shm-size", "1g", *NGC_LIMITS,
        "-p", "127.0.0.1:8000:8000",
        "-p", "127.0.0.1:8001:8001",
        "-p", "127.0.0.1:8002:8002",
        "-v", f"{repo}:/models",
        image, "tritonserver", *ServerArgs("/models").argv(),
    ]


def flag_values(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


def tritonserver_args(argv: list[str]) -> list[str]:
    return argv[argv.index("tritonserver") + 1:]


def docker_args(argv: list[str]) -> list[str]:
    """Arguments of `docker run` before the image."""
    return argv[: argv.index("tritonserver") - 1]


# ------------------------------------------------------- script hygiene ---
@pytest.mark.parametrize("script", ALL_SCRIPTS, ids=lambda p: p.name)
def test_script_is_executable_strict_bash(script: Path):
    assert os.access(script, os.X_OK), f"chmod +x {script}"
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
    assert not re.search(r"^\s*eval\b", text, re.M), "no eval of user input"
    syntax = subprocess.run([BASH, "-n", str(script)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr


@pytest.mark.parametrize("script", ALL_SCRIPTS, ids=lambda p: p.name)
def test_shellcheck_clean(script: Path):
    shellcheck = require_tool("shellcheck", "apt-get install shellcheck (or `make install` as root)")
    proc = subprocess.run([str(shellcheck), str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize("script", ALL_SCRIPTS, ids=lambda p: p.name)
def test_help_prints_usage_with_example(script: Path, sandbox: Sandbox, tmp_path: Path):
    sandbox.link("cat")  # the usage text is a here-document printed by cat
    # tmp_path has no model_repository: --help must not care
    proc = sandbox.run(script, "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: ")
    assert "Example" in proc.stdout
    assert f"{script.name} " in proc.stdout  # the example names the script
    assert "--dry-run" in proc.stdout
    assert not sandbox.docker_called()
    assert sandbox.run(script, "-h", cwd=tmp_path).stdout == proc.stdout


@pytest.mark.parametrize("script", ALL_SCRIPTS, ids=lambda p: p.name)
def test_unknown_option_is_a_usage_error(script: Path, sandbox: Sandbox, workdir: Path):
    proc = sandbox.run(script, "--dry-run", "--no-such-option", cwd=workdir)
    assert proc.returncode == 2
    assert "--no-such-option" in proc.stderr
    assert proc.stdout == ""


# ------------------------------------------- triton_inference_server.sh ---
def test_server_default_command(sandbox: Sandbox, workdir: Path):
    argv = sandbox.dry(SERVER, cwd=workdir)
    assert argv == server_cmd(workdir / "model_repository")


def test_server_dry_run_env_equals_flag(sandbox: Sandbox, workdir: Path):
    proc = sandbox.run(SERVER, cwd=workdir, env={"DRY_RUN": "1"})
    assert proc.returncode == 0, proc.stderr
    assert shlex.split(proc.stdout) == server_cmd(workdir / "model_repository")
    assert not sandbox.docker_called()


def test_server_dry_run_without_any_docker_binary(tmp_path: Path, workdir: Path):
    bare = Sandbox(tmp_path / "bare", with_fake_docker=False)
    assert bare.dry(SERVER, cwd=workdir) == server_cmd(workdir / "model_repository")
    # a real run without docker explains itself instead of crashing obscurely
    proc = bare.run(SERVER, cwd=workdir)
    assert proc.returncode == 127
    assert "docker not found" in proc.stderr


def test_server_runs_exactly_the_printed_command(sandbox: Sandbox, workdir: Path):
    args = ["--gpus", "none", "--model-control-mode", "poll", "--detach"]
    printed = sandbox.dry(SERVER, *args, cwd=workdir)
    proc = sandbox.run(SERVER, *args, cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert ["docker", *sandbox.docker_argv()] == printed


def test_server_propagates_docker_exit_status(sandbox: Sandbox, workdir: Path):
    proc = sandbox.run(SERVER, cwd=workdir, env={"FAKE_DOCKER_RC": "3"})
    assert proc.returncode == 3
    assert sandbox.docker_called()


def test_server_custom_repository_image_ports_and_name(sandbox: Sandbox, workdir: Path):
    repo = workdir / "my models"
    repo.mkdir()
    argv = sandbox.dry(
        SERVER,
        "--http-port", "18000", "--grpc-port=18001", "--metrics-port", "18002",
        "--bind-address", "0.0.0.0", "--shm-size", "2g", "--name", "triton-test",
        "--detach", "--", "--log-verbose=1", "--exit-on-error=false",
        cwd=workdir,
        env={"MODEL_REPOSITORY": "my models", "TRITON_IMAGE": "example.com/triton:custom"},
    )
    assert argv == [
        "docker", "run", "--rm", "--name", "triton-test", "--detach",
        "--gpus", "all", "--shm-size", "2g", *NGC_LIMITS,
        "-p", "0.0.0.0:18000:8000",
        "-p", "0.0.0.0:18001:8001",
        "-p", "0.0.0.0:18002:8002",
        "-v", f"{repo}:/models",
        "example.com/triton:custom", "tritonserver",
        "--model-repository=/models", "--model-control-mode=none", *CONTAINER_DEFAULTS,
        "--log-verbose=1", "--exit-on-error=false",
    ]


def test_server_flag_overrides_env_and_resolves_relative_path(sandbox: Sandbox, workdir: Path):
    (workdir / "flagged").mkdir()
    argv = sandbox.dry(
        SERVER, "--model-repository", "./flagged/../flagged", "--image", "img:1",
        cwd=workdir, env={"MODEL_REPOSITORY": "/does/not/exist", "TRITON_IMAGE": "ignored:0"},
    )
    assert flag_values(argv, "-v") == [f"{workdir / 'flagged'}:/models"]
    assert "img:1" in argv and "ignored:0" not in argv


def test_server_ports_bound_to_loopback_by_default(sandbox: Sandbox, workdir: Path):
    published = flag_values(sandbox.dry(SERVER, cwd=workdir), "-p")
    assert len(published) == 3
    assert all(p.startswith("127.0.0.1:") for p in published), published
    assert {p.rsplit(":", 1)[1] for p in published} == {"8000", "8001", "8002"}


def test_server_ipv6_bind_address_is_bracketed(sandbox: Sandbox, workdir: Path):
    published = flag_values(sandbox.dry(SERVER, "--bind-address", "::1", cwd=workdir), "-p")
    assert published == ["[::1]:8000:8000", "[::1]:8001:8001", "[::1]:8002:8002"]


def test_server_gpus_none_omits_the_flag(sandbox: Sandbox, workdir: Path):
    argv = sandbox.dry(SERVER, "--gpus", "none", cwd=workdir)
    assert "--gpus" not in argv
    expected = server_cmd(workdir / "model_repository")
    i = expected.index("--gpus")
    assert argv == expected[:i] + expected[i + 2:]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("all", "all"), ("1", "1"), ("device=0,1", '"device=0,1"'), ('"device=2,3"', '"device=2,3"')],
)
def test_server_gpu_specs(sandbox: Sandbox, workdir: Path, spec: str, expected: str):
    assert flag_values(sandbox.dry(SERVER, "--gpus", spec, cwd=workdir), "--gpus") == [expected]


def test_server_ipc_host_replaces_shm_size(sandbox: Sandbox, workdir: Path):
    argv = sandbox.dry(SERVER, "--ipc-host", cwd=workdir)
    assert "--ipc=host" in docker_args(argv)
    assert "--shm-size" not in argv
    assert "--ipc=host" not in sandbox.dry(SERVER, cwd=workdir)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], ["--model-control-mode=none"]),
        (["--model-control-mode", "none"], ["--model-control-mode=none"]),
        (["--model-control-mode", "poll"], ["--model-control-mode=poll", "--repository-poll-secs=5"]),
        (
            ["--model-control-mode=poll", "--repository-poll-secs", "30"],
            ["--model-control-mode=poll", "--repository-poll-secs=30"],
        ),
        (["--model-control-mode", "explicit"], ["--model-control-mode=explicit"]),
        (
            ["--model-control-mode", "explicit", "--load-model", "resnet50", "--load-model=bert base"],
            ["--model-control-mode=explicit", "--load-model=resnet50", "--load-model=bert base"],
        ),
    ],
)
def test_server_model_control_mode(sandbox: Sandbox, workdir: Path, args, expected):
    argv = sandbox.dry(SERVER, *args, cwd=workdir)
    assert tritonserver_args(argv) == ["--model-repository=/models", *expected, *CONTAINER_DEFAULTS]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model-control-mode", "auto"], "none, poll or explicit"),
        (["--model-control-mode", "explicit", "--repository-poll-secs", "5"], "--repository-poll-secs"),
        (["--model-control-mode", "poll", "--repository-poll-secs", "0"], "positive integer"),
        (["--model-control-mode", "poll", "--repository-poll-secs", "5s"], "positive integer"),
        (["--load-model", "resnet50"], "explicit"),
        (["--http-port", "0"], "--http-port"),
        (["--grpc-port", "65536"], "--grpc-port"),
        (["--metrics-port", "80a"], "--metrics-port"),
        (["--http-port", "8001"], "must differ"),
        (["--shm-size", "lots"], "--shm-size"),
        (["--name", "bad name;rm -rf /"], "--name"),
        (["--bind-address", "127.0.0.1;id"], "--bind-address"),
        (["--gpus", ""], "--gpus"),
        (["--image", ""], "image"),
        (["--http-port"], "requires a value"),
    ],
)
def test_server_rejects_bad_arguments(sandbox: Sandbox, workdir: Path, args, message):
    proc = sandbox.run(SERVER, "--dry-run", *args, cwd=workdir)
    assert proc.returncode == 2, proc.stdout
    assert message in proc.stderr
    assert proc.stdout == ""
    assert not sandbox.docker_called()


def test_server_missing_repository_fails_even_in_dry_run(sandbox: Sandbox, tmp_path: Path):
    proc = sandbox.run(SERVER, "--dry-run", cwd=tmp_path)
    assert proc.returncode == 2
    assert f"'{tmp_path / 'model_repository'}' does not exist" in proc.stderr
    assert "--dry-run" in proc.stderr and "--model-repository" in proc.stderr
    assert proc.stdout == ""
    assert not sandbox.docker_called()


@pytest.mark.parametrize("dry_run", [True, False])
def test_server_missing_repository_from_flag_or_env(sandbox: Sandbox, tmp_path: Path, dry_run: bool):
    env = {"DRY_RUN": "1"} if dry_run else {}
    proc = sandbox.run(SERVER, "--model-repository", "nope", cwd=tmp_path, env=env)
    assert proc.returncode == 2
    assert "'nope' does not exist" in proc.stderr
    proc = sandbox.run(SERVER, cwd=tmp_path, env={**env, "MODEL_REPOSITORY": "/no/such/dir"})
    assert proc.returncode == 2
    assert "/no/such/dir" in proc.stderr
    assert not sandbox.docker_called()


def test_server_repository_that_is_a_file_is_rejected(sandbox: Sandbox, tmp_path: Path):
    (tmp_path / "model_repository").write_text("not a directory")
    proc = sandbox.run(SERVER, "--dry-run", cwd=tmp_path)
    assert proc.returncode == 2
    assert "not a directory" in proc.stderr


def test_server_quotes_hostile_paths_without_executing_them(sandbox: Sandbox, workdir: Path):
    hostile = "$(touch PWNED); `touch PWNED2` 'x' \"y\" & z"
    (workdir / hostile).mkdir()
    argv = sandbox.dry(SERVER, "--model-repository", hostile, "--", "--log-info=$(id)", cwd=workdir)
    assert flag_values(argv, "-v") == [f"{workdir / hostile}:/models"]
    assert argv[-1] == "--log-info=$(id)"
    assert not list(workdir.glob("PWNED*"))


def test_server_rejects_colon_in_repository_path(sandbox: Sandbox, workdir: Path):
    (workdir / "a:b").mkdir()
    proc = sandbox.run(SERVER, "--dry-run", "--model-repository", "a:b", cwd=workdir)
    assert proc.returncode == 2
    assert "':'" in proc.stderr


# ---------------------------------------------------------------- build.sh ---
def test_build_default_command(sandbox: Sandbox, fake_repo: Path, tmp_path: Path):
    argv = sandbox.dry(fake_repo / "scripts/docker/build.sh", cwd=tmp_path)
    assert argv == [
        "docker", "build",
        "--file", f"{fake_repo}/scripts/docker/Dockerfile",
        "--tag", CLIENT_IMAGE,
        str(fake_repo),
    ]


def test_build_in_the_real_repository_uses_its_root_as_context(sandbox: Sandbox, tmp_path: Path):
    argv = sandbox.dry(BUILD, cwd=tmp_path)
    assert argv[-1] == str(REPO)
    assert flag_values(argv, "--file") == [str(DOCKERFILE)]


def test_build_invoked_by_relative_name(sandbox: Sandbox, fake_repo: Path):
    scripts = fake_repo / "scripts" / "docker"
    argv = sandbox.dry(Path("build.sh"), cwd=scripts)
    assert argv[-1] == str(fake_repo)


def test_build_options(sandbox: Sandbox, fake_repo: Path, tmp_path: Path):
    argv = sandbox.dry(
        fake_repo / "scripts/docker/build.sh",
        "--image", "me/client:dev", "--base-image=nvcr.io/nvidia/pytorch:25.02-py3",
        "--build-arg", "PIP_INDEX_URL=http://mirror.local/simple", "--no-cache", "--pull",
        cwd=tmp_path,
    )
    assert argv == [
        "docker", "build",
        "--file", f"{fake_repo}/scripts/docker/Dockerfile",
        "--tag", "me/client:dev",
        "--build-arg", "BASE_IMAGE=nvcr.io/nvidia/pytorch:25.02-py3",
        "--build-arg", "PIP_INDEX_URL=http://mirror.local/simple",
        "--no-cache", "--pull",
        str(fake_repo),
    ]


def test_build_env_overrides(sandbox: Sandbox, fake_repo: Path, tmp_path: Path):
    argv = sandbox.dry(
        fake_repo / "scripts/docker/build.sh", cwd=tmp_path,
        env={"CLIENT_IMAGE": "env/client:1", "BASE_IMAGE": "env/base:2"},
    )
    assert flag_values(argv, "--tag") == ["env/client:1"]
    assert flag_values(argv, "--build-arg") == ["BASE_IMAGE=env/base:2"]


def test_build_runs_exactly_the_printed_command(sandbox: Sandbox, fake_repo: Path, tmp_path: Path):
    script = fake_repo / "scripts/docker/build.sh"
    printed = sandbox.dry(script, "--pull", cwd=tmp_path)
    proc = sandbox.run(script, "--pull", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ["docker", *sandbox.docker_argv()] == printed


def test_build_without_dockerfile_fails(sandbox: Sandbox, fake_repo: Path, tmp_path: Path):
    (fake_repo / "scripts/docker/Dockerfile").unlink()
    proc = sandbox.run(fake_repo / "scripts/docker/build.sh", "--dry-run", cwd=tmp_path)
    assert proc.returncode == 2
    assert "Dockerfile not found" in proc.stderr


def test_build_rejects_malformed_build_arg(sandbox: Sandbox, tmp_path: Path):
    proc = sandbox.run(BUILD, "--dry-run", "--build-arg", "no-equals-sign", cwd=tmp_path)
    assert proc.returncode == 2
    assert "KEY=VALUE" in proc.stderr


# ---------------------------------------------------------- interactive.sh ---
def interactive_cmd(root: Path, image: str = CLIENT_IMAGE, gpus: bool = True) -> list[str]:
    return [
        "docker", "run", "--rm", "-i", "--network", "host",
        *(["--gpus", "all"] if gpus else []),
        "--shm-size", "8g", *NGC_LIMITS,
        "-v", f"{root}:/workspace", "-w", "/workspace",
        image, "bash",
    ]


def test_interactive_default_command(sandbox: Sandbox, fake_repo: Path, tmp_path: Path):
    # stdin is /dev/null, not a terminal, so no -t
    argv = sandbox.dry(fake_repo / "scripts/docker/interactive.sh", cwd=tmp_path)
    assert argv == interactive_cmd(fake_repo)


def test_interactive_mounts_the_real_repository(sandbox: Sandbox, tmp_path: Path):
    argv = sandbox.dry(INTERACTIVE, cwd=tmp_path)
    assert flag_values(argv, "-v") == [f"{REPO}:/workspace"]
    assert flag_values(argv, "--network") == ["host"]


def test_interactive_gpus_none_image_env_and_command(sandbox: Sandbox, fake_repo: Path, tmp_path: Path):
    argv = sandbox.dry(
        fake_repo / "scripts/docker/interactive.sh", "--gpus", "none", "--",
        "python", "triton/run_online_performance_test_on_triton.py", "--model-name", "a b",
        cwd=tmp_path, env={"CLIENT_IMAGE": "env/client:3"},
    )
    expected = interactive_cmd(fake_repo, image="env/client:3", gpus=False)
    assert argv == expected[:-1] + [
        "python", "triton/run_online_performance_test_on_triton.py", "--model-name", "a b",
    ]


def test_interactive_extra_mounts_env_name_and_user(sandbox: Sandbox, fake_repo: Path, tmp_path: Path):
    sandbox.link("id")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "cfg.yaml").write_text("{}")
    argv = sandbox.dry(
        fake_repo / "scripts/docker/interactive.sh",
        "-v", "data:/data:ro", "--volume", "data/cfg.yaml:/cfg.yaml",
        "-e", "TRITON_SERVER_URL=localhost:8001", "--name", "client-1", "--as-user",
        "--shm-size", "2g",
        cwd=tmp_path,
    )
    assert flag_values(argv, "-v") == [
        f"{fake_repo}:/workspace",
        f"{tmp_path.resolve()}/data:/data:ro",
        f"{tmp_path.resolve()}/data/cfg.yaml:/cfg.yaml",
    ]
    assert flag_values(argv, "-e") == ["HOME=/tmp", "TRITON_SERVER_URL=localhost:8001"]
    assert flag_values(argv, "--name") == ["client-1"]
    assert flag_values(argv, "--user") == [f"{os.getuid()}:{os.getgid()}"]
    assert flag_values(argv, "--shm-size") == ["2g"]


def test_interactive_rejects_missing_volume_source(sandbox: Sandbox, tmp_path: Path):
    proc = sandbox.run(INTERACTIVE, "--dry-run", "-v", "missing:/data", cwd=tmp_path)
    assert proc.returncode == 2
    assert "'missing' does not exist" in proc.stderr


def test_interactive_runs_exactly_the_printed_command(sandbox: Sandbox, fake_repo: Path, tmp_path: Path):
    script = fake_repo / "scripts/docker/interactive.sh"
    printed = sandbox.dry(script, "--", "pytest", "-q", cwd=tmp_path)
    proc = sandbox.run(script, "--", "pytest", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ["docker", *sandbox.docker_argv()] == printed


def test_client_scripts_dry_run_without_any_docker_binary(tmp_path: Path, fake_repo: Path):
    bare = Sandbox(tmp_path / "bare", with_fake_docker=False)
    assert bare.dry(fake_repo / "scripts/docker/build.sh", cwd=tmp_path)[:2] == ["docker", "build"]
    assert bare.dry(fake_repo / "scripts/docker/interactive.sh", cwd=tmp_path) == interactive_cmd(fake_repo)


# -------------------------------------------------------------- Dockerfile ---
def dockerfile_instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", "", DOCKERFILE.read_text())  # join continuation lines
    out = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, rest = line.strip().partition(" ")
            out.append((keyword.upper(), rest))
    return out


def test_dockerfile_builds_on_ngc_pytorch_and_installs_the_toolkit():
    instructions = dockerfile_instructions()
    assert instructions[0][0] == "ARG"
    arg_name, _, default = instructions[0][1].partition("=")
    assert arg_name == "BASE_IMAGE"
    assert re.fullmatch(r"nvcr\.io/nvidia/pytorch:\d\d\.\d\d-py3", default)
    assert instructions[1] == ("FROM", "${BASE_IMAGE}")
    runs = " ".join(rest for kw, rest in instructions if kw == "RUN")
    assert "pip install --no-deps -e ." in runs
    assert "tritonclient[all]" in runs
    copies = [rest for kw, rest in instructions if kw == "COPY"]
    assert any(c.startswith("pyproject.toml ") for c in copies)
    assert not any(c.split()[0] == "." for c in copies), "COPY . would ship .venv and results"


def test_dockerfile_has_no_secrets():
    for keyword, rest in dockerfile_instructions():
        if keyword in {"ENV", "ARG"}:
            assert not re.search(r"(TOKEN|PASSWORD|SECRET|API_KEY|NGC_KEY)", rest, re.I), rest


@pytest.mark.skipif(sys.version_info < (3, 11), reason="the Dockerfile's snippet uses tomllib")
def test_dockerfile_requirement_filter_keeps_base_torch(tmp_path: Path):
    """Run the Dockerfile's requirement-filter RUN step against this pyproject.toml."""
    runs = [rest for kw, rest in dockerfile_instructions() if kw == "RUN" and "tomllib" in rest]
    assert len(runs) == 1
    out = tmp_path / "requirements-client.txt"
    command = runs[0].replace("/tmp/requirements-client.txt", str(out))
    assert command.startswith("python ")
    shutil.copy2(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    proc = subprocess.run(
        ["sh", "-c", shlex.quote(sys.executable) + command[len("python"):]],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    requirements = out.read_text().splitlines()
    names = {re.split(r"[^A-Za-z0-9._-]", r, maxsplit=1)[0].lower() for r in requirements}
    assert "torch" not in names and "torchvision" not in names
    assert any(r.startswith("tritonclient[all]") for r in requirements)
    with open(REPO / "pyproject.toml", "rb") as f:
        import tomllib

        deps = tomllib.load(f)["project"]["dependencies"]
    assert set(requirements) == {d for d in deps if not re.match(r"torch(vision)?\b", d)}


def test_dockerfile_python_guard_rejects_old_python(tmp_path: Path):
    runs = [rest for kw, rest in dockerfile_instructions() if kw == "RUN" and "version_info" in rest]
    assert len(runs) == 1
    command = runs[0].replace("(3, 11)", "(99, 0)")  # pretend this interpreter is too old
    assert command != runs[0]
    proc = subprocess.run(
        ["sh", "-c", shlex.quote(sys.executable) + command[len("python"):]],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 1
    assert "need Python >= 3.11" in proc.stderr
    ok = subprocess.run(["sh", "-c", shlex.quote(sys.executable) + runs[0][len("python"):]], timeout=60)
    assert ok.returncode == (0 if sys.version_info >= (3, 11) else 1)


# ------------------------------------------------------ docker-compose.yml ---
@pytest.fixture(scope="module")
def compose() -> dict:
    with open(COMPOSE) as f:
        return yaml.safe_load(f)


def as_argv(command) -> list[str]:
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def test_compose_services(compose):
    assert set(compose["services"]) == {"triton", "client"}


def test_compose_triton_server(compose):
    triton = compose["services"]["triton"]
    assert triton["image"].endswith(TRITON_IMAGE + "}") or triton["image"] == TRITON_IMAGE
    argv = as_argv(triton["command"])
    assert argv[0] == "tritonserver"
    assert "--model-repository=/models" in argv
    assert "./model_repository:/models" in triton["volumes"]
    assert str(triton["shm_size"]).lower() in {"1g", "1gb"}


def test_compose_ports_bound_to_loopback(compose):
    ports = compose["services"]["triton"]["ports"]
    assert all(isinstance(p, str) for p in ports), "ports must be quoted strings"
    parsed = [p.split(":") for p in ports]
    assert all(len(p) == 3 and p[0] == "127.0.0.1" for p in parsed), ports
    assert sorted((int(h), int(c)) for _, h, c in parsed) == [(8000, 8000), (8001, 8001), (8002, 8002)]
    assert "ports" not in compose["services"]["client"]


def test_compose_gpu_reservation(compose):
    devices = compose["services"]["triton"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]


def test_compose_healthcheck(compose):
    health = compose["services"]["triton"]["healthcheck"]
    test = health["test"]
    assert test[0] in {"CMD", "CMD-SHELL"}
    argv = test[1:] if test[0] == "CMD" else shlex.split(test[1])
    assert argv[:2] == ["curl", "-f"]
    assert re.fullmatch(r"(http://)?localhost:8000/v2/health/ready", argv[-1])
    assert int(health["retries"]) >= 1


def test_compose_client(compose):
    client = compose["services"]["client"]
    assert client["build"]["context"] == "."
    assert (REPO / client["build"]["context"] / client["build"]["dockerfile"]) == DOCKERFILE
    assert client["depends_on"] == {"triton": {"condition": "service_healthy"}}
    argv = as_argv(client["command"])
    assert argv[:2] == ["python", "triton/run_online_performance_test_on_triton.py"]
    options = dict(zip(argv[2::2], argv[3::2]))
    assert options == {
        "--server-url": "triton:8001",
        "--model-name": "${MODEL_NAME:-resnet50}",
        "--concurrency": "1:8:1",
        "--result-path": "/workspace/results/compose-online",
    }
    # unquoted, YAML 1.1 would read 1:8:1 as the base-60 integer 4081
    assert client["command"][client["command"].index("--concurrency") + 1] == "1:8:1"
    # results written in the container land in ./results on the host
    assert "./results:/workspace/results" in client["volumes"]
    assert client["image"] == CLIENT_IMAGE
