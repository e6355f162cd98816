#!/usr/bin/env bash
# Run the client image (built by scripts/docker/build.sh) interactively, with
# the repository mounted at /workspace and the host network, so a Triton server
# started by triton_inference_server.sh is reachable at localhost:8000/8001/8002.
#
# --dry-run (or DRY_RUN=1) prints the exact docker command, shell-quoted, and
# exits 0 without touching docker.
set -euo pipefail

readonly DEFAULT_IMAGE="triton-deployment-toolkit-client:latest"
readonly WORKSPACE="/workspace"
PROG="${0##*/}"
script_path="${BASH_SOURCE[0]}"
[[ "${script_path}" == */* ]] || script_path="./${script_path}"
SCRIPT_DIR="$(cd -- "${script_path%/*}" && pwd -P)"
REPO_ROOT="$(cd -- "${SCRIPT_DIR}/../.." && pwd -P)"

usage() {
    cat <<EOF
Usage: ${PROG} [OPTIONS] [-- COMMAND [ARGS...]]

Start the client container with the repository (${REPO_ROOT})
mounted at ${WORKSPACE} (also the working directory) and --network host.
Without a COMMAND it opens bash.

Options:
  --image NAME:TAG   client image (env CLIENT_IMAGE; default: ${DEFAULT_IMAGE})
  --gpus SPEC        value for 'docker run --gpus' (default: all);
                     'none' omits the flag (CPU-only host)
  --shm-size SIZE    /dev/shm size (default: 8g)
  -v, --volume SRC:DST[:OPTS]
                     extra bind mount; repeatable (SRC made absolute)
  -e, --env KEY=VAL  extra environment variable; repeatable
  --name NAME        container name (default: none, docker picks one)
  --as-user          run as the calling user (id -u:id -g), so files written
                     under ${WORKSPACE} are owned by you
  --dry-run          print the docker command and exit 0 without running it
                     (same as DRY_RUN=1)
  -h, --help         show this help and exit

A TTY (-t) is requested only when standard input is a terminal.

Examples:
  ${PROG}
  ${PROG} --gpus none -- python triton/run_online_performance_test_on_triton.py \\
      --server-url localhost:8001 --model-name resnet50 --concurrency 1:8:1 \\
      --result-path ${WORKSPACE}/results/online
EOF
}

die() {
    echo "${PROG}: error: $*" >&2
    exit 2
}

need_value() {
    [[ "$2" -ge 2 ]] || die "option $1 requires a value (see --help)"
}

image="${CLIENT_IMAGE:-${DEFAULT_IMAGE}}"
gpus="all"
shm_size="8g"
volumes=()
envs=()
container_name=""
as_user=0
case "${DRY_RUN:-0}" in
    1 | true | yes) dry_run=1 ;;
    0 | false | no | "") dry_run=0 ;;
    *) die "DRY_RUN must be 1 or 0, got '${DRY_RUN}'" ;;
esac
command_args=()

while [[ $# -gt 0 ]]; do
    opt=$1
    if [[ "${opt}" == --*=* ]]; then
        set -- "${opt%%=*}" "${opt#*=}" "${@:2}"
        opt=$1
    fi
    case "${opt}" in
        -h | --help) usage; exit 0 ;;
        --dry-run) dry_run=1; shift ;;
        --as-user) as_user=1; shift ;;
        --image) need_value "$1" $#; image=$2; shift 2 ;;
        --gpus) need_value "$1" $#; gpus=$2; shift 2 ;;
        --shm-size) need_value "$1" $#; shm_size=$2; shift 2 ;;
        -v | --volume) need_value "$1" $#; volumes+=("$2"); shift 2 ;;
        -e | --env) need_value "$1" $#; envs+=("$2"); shift 2 ;;
        --name) need_value "$1" $#; container_name=$2; shift 2 ;;
        --) shift; command_args=("$@"); break ;;
        *) die "unknown argument '$1' (see --help; put the container command after --)" ;;
    esac
done

[[ -n "${image}" ]] || die "the image name must not be empty"
[[ -n "${gpus}" ]] || die "--gpus must not be empty (use 'none' for a CPU-only host)"
[[ "${shm_size}" =~ ^[0-9]+[bBkKmMgG]?$ ]] || die "--shm-size must look like 8g, 512m or 268435456, got '${shm_size}'"
if [[ -n "${container_name}" && ! "${container_name}" =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]]; then
    die "invalid container --name '${container_name}'"
fi
[[ "${REPO_ROOT}" != *:* ]] || die "repository path must not contain ':' ('${REPO_ROOT}')"

mounts=(-v "${REPO_ROOT}:${WORKSPACE}")
for spec in ${volumes[@]+"${volumes[@]}"}; do
    src="${spec%%:*}"
    rest="${spec#*:}"
    [[ "${spec}" == *:* && -n "${src}" && -n "${rest}" ]] || die "--volume must look like SRC:DST[:OPTS], got '${spec}'"
    [[ -e "${src}" ]] || die "--volume source '${src}' does not exist"
    if [[ -d "${src}" ]]; then
        src="$(cd -- "${src}" && pwd -P)"
    else
        src_dir="."
        [[ "${src}" != */* ]] || src_dir="${src%/*}"
        src="$(cd -- "${src_dir:-/}" && pwd -P)/${src##*/}"
    fi
    mounts+=(-v "${src}:${rest}")
done
for kv in ${envs[@]+"${envs[@]}"}; do
    [[ "${kv}" =~ ^[A-Za-z_][A-Za-z0-9_]*(=.*)?$ ]] || die "--env must look like KEY=VALUE, got '${kv}'"
done

cmd=(docker run --rm -i)
if [[ -t 0 ]]; then
    cmd+=(-t)
fi
if [[ -n "${container_name}" ]]; then
    cmd+=(--name "${container_name}")
fi
cmd+=(--network host)
if [[ "${gpus}" != "none" ]]; then
    if [[ "${gpus}" == *,* && "${gpus}" != \"*\" ]]; then
        gpus="\"${gpus}\""
    fi
    cmd+=(--gpus "${gpus}")
fi
cmd+=(--shm-size "${shm_size}" --ulimit memlock=-1 --ulimit stack=67108864)
if [[ "${as_user}" -eq 1 ]]; then
    cmd+=(--user "$(id -u):$(id -g)" -e "HOME=/tmp")
fi
for kv in ${envs[@]+"${envs[@]}"}; do
    cmd+=(-e "${kv}")
done
cmd+=("${mounts[@]}" -w "${WORKSPACE}" "${image}")
if [[ ${#command_args[@]} -gt 0 ]]; then
    cmd+=("${command_args[@]}")
else
    cmd+=(bash)
fi

quoted="$(printf '%q ' "${cmd[@]}")"
quoted="${quoted% }"

if [[ "${dry_run}" -eq 1 ]]; then
    printf '%s\n' "${quoted}"
    exit 0
fi

command -v docker >/dev/null 2>&1 || {
    echo "${PROG}: error: docker not found in PATH (use --dry-run to only print the command)" >&2
    exit 127
}
printf '+ %s\n' "${quoted}" >&2
exec "${cmd[@]}"
