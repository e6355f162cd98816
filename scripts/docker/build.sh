#!/usr/bin/env bash
# Build the client image (NGC PyTorch + this toolkit + tritonclient) from
# scripts/docker/Dockerfile, with the repository root as the build context.
#
# --dry-run (or DRY_RUN=1) prints the exact docker command, shell-quoted, and
# exits 0 without touching docker.
set -euo pipefail

readonly DEFAULT_IMAGE="triton-deployment-toolkit-client:latest"
PROG="${0##*/}"
script_path="${BASH_SOURCE[0]}"
[[ "${script_path}" == */* ]] || script_path="./${script_path}"
SCRIPT_DIR="$(cd -- "${script_path%/*}" && pwd -P)"
REPO_ROOT="$(cd -- "${SCRIPT_DIR}/../.." && pwd -P)"
DOCKERFILE="${SCRIPT_DIR}/Dockerfile"

usage() {
    cat <<EOF
Usage: ${PROG} [OPTIONS]

Build the client image from ${DOCKERFILE#"${REPO_ROOT}/"}
(build context: the repository root, ${REPO_ROOT}).

Options:
  --image NAME:TAG     tag of the built image (env CLIENT_IMAGE;
                       default: ${DEFAULT_IMAGE})
  --base-image IMAGE   NGC PyTorch base image, passed as --build-arg BASE_IMAGE
                       (env BASE_IMAGE; default: the Dockerfile's ARG)
  --build-arg KEY=VAL  extra build argument; repeatable
  --no-cache           build without the layer cache
  --pull               always pull a newer base image
  --dry-run            print the docker command and exit 0 without running it
                       (same as DRY_RUN=1)
  -h, --help           show this help and exit

Example:
  ${PROG} --image my-client:dev --base-image nvcr.io/nvidia/pytorch:25.01-py3
  DRY_RUN=1 ${PROG}
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
base_image="${BASE_IMAGE:-}"
build_args=()
no_cache=0
pull=0
case "${DRY_RUN:-0}" in
    1 | true | yes) dry_run=1 ;;
    0 | false | no | "") dry_run=0 ;;
    *) die "DRY_RUN must be 1 or 0, got '${DRY_RUN}'" ;;
esac

while [[ $# -gt 0 ]]; do
    opt=$1
    if [[ "${opt}" == --*=* ]]; then
        set -- "${opt%%=*}" "${opt#*=}" "${@:2}"
        opt=$1
    fi
    case "${opt}" in
        -h | --help) usage; exit 0 ;;
        --dry-run) dry_run=1; shift ;;
        --no-cache) no_cache=1; shift ;;
        --pull) pull=1; shift ;;
        --image) need_value "$1" $#; image=$2; shift 2 ;;
        --base-image) need_value "$1" $#; base_image=$2; shift 2 ;;
        --build-arg) need_value "$1" $#; build_args+=("$2"); shift 2 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

[[ -n "${image}" ]] || die "the image name must not be empty"
[[ -f "${DOCKERFILE}" ]] || die "Dockerfile not found at ${DOCKERFILE}"
for arg in ${build_args[@]+"${build_args[@]}"}; do
    [[ "${arg}" =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || die "--build-arg must look like KEY=VALUE, got '${arg}'"
done

cmd=(docker build --file "${DOCKERFILE}" --tag "${image}")
if [[ -n "${base_image}" ]]; then
    cmd+=(--build-arg "BASE_IMAGE=${base_image}")
fi
for arg in ${build_args[@]+"${build_args[@]}"}; do
    cmd+=(--build-arg "${arg}")
done
if [[ "${no_cache}" -eq 1 ]]; then
    cmd+=(--no-cache)
fi
if [[ "${pull}" -eq 1 ]]; then
    cmd+=(--pull)
fi
cmd+=("${REPO_ROOT}")

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
