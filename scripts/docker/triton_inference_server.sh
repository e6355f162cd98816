#!/usr/bin/env bash
# Start NVIDIA Triton Inference Server (NGC container) on a local model repository.
#
# The docker command is built as a bash array and executed with "exec", never
# through eval, so user-supplied values cannot inject shell syntax.
# --dry-run (or DRY_RUN=1) prints that exact command, shell-quoted, and exits 0
# without touching docker (the docker binary need not even be installed).
set -euo pipefail

readonly DEFAULT_IMAGE="nvcr.io/nvidia/tritonserver:24.10-py3"
readonly CONTAINER_MODEL_REPOSITORY="/models"
# The flags every tritonserver start carries (deployment_toolkit/server/args.py CONTAINER_DEFAULTS; the embedded
# server and the Kubernetes manifests use the same list, tests/unit/server/test_server_args.py keeps them equal).
readonly SERVER_DEFAULTS=(--strict-readiness=true --exit-on-error=true --log-verbose=0)
PROG="${0##*/}"

usage() {
    cat <<EOF
Usage: ${PROG} [OPTIONS] [-- TRITONSERVER_ARGS...]

Run NVIDIA Triton Inference Server in the NGC container, with a host model
repository mounted at ${CONTAINER_MODEL_REPOSITORY} inside the container.

Options:
  --model-repository DIR    host model repository (env MODEL_REPOSITORY;
                            default: \$PWD/model_repository). Must exist.
  --image IMAGE             container image (env TRITON_IMAGE;
                            default: ${DEFAULT_IMAGE})
  --http-port PORT          host port for HTTP/REST    (default: 8000)
  --grpc-port PORT          host port for gRPC         (default: 8001)
  --metrics-port PORT       host port for Prometheus metrics (default: 8002)
  --bind-address ADDR       host address the ports are published on
                            (default: 127.0.0.1; 0.0.0.0 exposes them to the network)
  --gpus SPEC               value for 'docker run --gpus' (default: all);
                            'none' omits the flag (CPU-only host), e.g. 1 or device=0,1
  --shm-size SIZE           /dev/shm size (default: 1g); ignored with --ipc-host
  --ipc-host                share the host IPC namespace (--ipc=host) instead
                            of a private /dev/shm of --shm-size
  --model-control-mode MODE none | poll | explicit (default: none)
  --repository-poll-secs N  poll interval in seconds, poll mode only (default: 5)
  --load-model NAME         model to load at startup, explicit mode only;
                            repeatable ('*' loads all)
  --name NAME               container name (default: triton-inference-server)
  -d, --detach              run the container in the background
  --dry-run                 print the docker command and exit 0 without running
                            it (same as DRY_RUN=1); the model repository is
                            still checked
  -h, --help                show this help and exit

Arguments after '--' are appended to the tritonserver command line.

Exit status: 0 on success (or the exit status of docker), 2 on a usage error
or a missing model repository.

Examples:
  ${PROG} --model-repository ./model_repository
  ${PROG} --gpus none --model-control-mode poll --repository-poll-secs 10 --detach
  DRY_RUN=1 TRITON_IMAGE=nvcr.io/nvidia/tritonserver:24.09-py3 ${PROG} -- --log-verbose=1
EOF
}

die() {
    # usage errors and a missing model repository exit 2
    echo "${PROG}: error: $*" >&2
    exit 2
}

need_value() {
    # $1: option name, $2: number of remaining arguments (including the option)
    [[ "$2" -ge 2 ]] || die "option $1 requires a value (see --help)"
}

validate_port() {
    local name=$1 value=$2
    if ! [[ "${value}" =~ ^[0-9]{1,5}$ ]] || (( 10#${value} < 1 || 10#${value} > 65535 )); then
        die "${name} must be a port number between 1 and 65535, got '${value}'"
    fi
}

# ---------------------------------------------------------------- defaults ---
model_repository="${MODEL_REPOSITORY:-${PWD}/model_repository}"
image="${TRITON_IMAGE:-${DEFAULT_IMAGE}}"
http_port=8000
grpc_port=8001
metrics_port=8002
bind_address="127.0.0.1"
gpus="all"
shm_size="1g"
ipc_host=0
model_control_mode="none"
poll_secs=""
load_models=()
container_name="triton-inference-server"
detach=0
case "${DRY_RUN:-0}" in
    1 | true | yes) dry_run=1 ;;
    0 | false | no | "") dry_run=0 ;;
    *) die "DRY_RUN must be 1 or 0, got '${DRY_RUN}'" ;;
esac
extra_args=()

# ------------------------------------------------------------------ parsing ---
while [[ $# -gt 0 ]]; do
    opt=$1
    # accept both "--opt value" and "--opt=value"
    if [[ "${opt}" == --*=* ]]; then
        set -- "${opt%%=*}" "${opt#*=}" "${@:2}"
        opt=$1
    fi
    case "${opt}" in
        -h | --help) usage; exit 0 ;;
        --dry-run) dry_run=1; shift ;;
        -d | --detach) detach=1; shift ;;
        --ipc-host) ipc_host=1; shift ;;
        --model-repository) need_value "$1" $#; model_repository=$2; shift 2 ;;
        --image) need_value "$1" $#; image=$2; shift 2 ;;
        --http-port) need_value "$1" $#; http_port=$2; shift 2 ;;
        --grpc-port) need_value "$1" $#; grpc_port=$2; shift 2 ;;
        --metrics-port) need_value "$1" $#; metrics_port=$2; shift 2 ;;
        --bind-address) need_value "$1" $#; bind_address=$2; shift 2 ;;
        --gpus) need_value "$1" $#; gpus=$2; shift 2 ;;
        --shm-size) need_value "$1" $#; shm_size=$2; shift 2 ;;
        --model-control-mode) need_value "$1" $#; model_control_mode=$2; shift 2 ;;
        --repository-poll-secs) need_value "$1" $#; poll_secs=$2; shift 2 ;;
        --load-model) need_value "$1" $#; load_models+=("$2"); shift 2 ;;
        --name) need_value "$1" $#; container_name=$2; shift 2 ;;
        --) shift; extra_args=("$@"); break ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

# --------------------------------------------------------------- validation ---
[[ -n "${image}" ]] || die "the image name must not be empty"
validate_port --http-port "${http_port}"
validate_port --grpc-port "${grpc_port}"
validate_port --metrics-port "${metrics_port}"
if [[ "${http_port}" == "${grpc_port}" || "${http_port}" == "${metrics_port}" || "${grpc_port}" == "${metrics_port}" ]]; then
    die "--http-port, --grpc-port and --metrics-port must differ (${http_port}, ${grpc_port}, ${metrics_port})"
fi
addr_re='^[][0-9A-Za-z.:-]+$'
[[ "${bind_address}" =~ ${addr_re} ]] || die "invalid --bind-address '${bind_address}'"
# IPv6 addresses need brackets in -p host:port:container_port
if [[ "${bind_address}" == *:* && "${bind_address}" != \[*\] ]]; then
    bind_address="[${bind_address}]"
fi
[[ "${shm_size}" =~ ^[0-9]+[bBkKmMgG]?$ ]] || die "--shm-size must look like 1g, 512m or 268435456, got '${shm_size}'"
[[ "${container_name}" =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]] || die "invalid container --name '${container_name}'"
[[ -n "${gpus}" ]] || die "--gpus must not be empty (use 'none' for a CPU-only host)"

case "${model_control_mode}" in
    none | poll | explicit) ;;
    *) die "--model-control-mode must be none, poll or explicit, got '${model_control_mode}'" ;;
esac
if [[ -n "${poll_secs}" ]]; then
    [[ "${model_control_mode}" == "poll" ]] || die "--repository-poll-secs needs --model-control-mode poll"
    if ! [[ "${poll_secs}" =~ ^[0-9]{1,9}$ ]] || (( 10#${poll_secs} < 1 )); then
        die "--repository-poll-secs must be a positive integer, got '${poll_secs}'"
    fi
fi
if [[ ${#load_models[@]} -gt 0 && "${model_control_mode}" != "explicit" ]]; then
    die "--load-model needs --model-control-mode explicit"
fi

# The model repository must exist, in dry-run mode too: a dry run that prints a
# command which would fail is worse than no dry run.
if [[ ! -d "${model_repository}" ]]; then
    hint=""
    [[ "${dry_run}" -eq 0 ]] || hint=" (checked even with --dry-run)"
    die "model repository '${model_repository}' does not exist or is not a directory${hint}; create it, or pass --model-repository DIR / set MODEL_REPOSITORY"
fi
model_repository="$(cd -- "${model_repository}" && pwd -P)"
# docker's -v splits on ':'; such a path cannot be mounted reliably
[[ "${model_repository}" != *:* ]] || die "model repository path must not contain ':' ('${model_repository}')"

# ------------------------------------------------------------ docker command ---
cmd=(docker run --rm --name "${container_name}")
if [[ "${detach}" -eq 1 ]]; then
    cmd+=(--detach)
fi
if [[ "${gpus}" != "none" ]]; then
    # docker parses --gpus as CSV: "device=0,1" must reach it wrapped in double quotes
    if [[ "${gpus}" == *,* && "${gpus}" != \"*\" ]]; then
        gpus="\"${gpus}\""
    fi
    cmd+=(--gpus "${gpus}")
fi
if [[ "${ipc_host}" -eq 1 ]]; then
    cmd+=(--ipc=host)
else
    cmd+=(--shm-size "${shm_size}")
fi
# NGC containers recommend these limits
cmd+=(--ulimit memlock=-1 --ulimit stack=67108864)
cmd+=(
    -p "${bind_address}:${http_port}:8000"
    -p "${bind_address}:${grpc_port}:8001"
    -p "${bind_address}:${metrics_port}:8002"
    -v "${model_repository}:${CONTAINER_MODEL_REPOSITORY}"
    "${image}"
    tritonserver
    "--model-repository=${CONTAINER_MODEL_REPOSITORY}"
    "--model-control-mode=${model_control_mode}"
)
if [[ "${model_control_mode}" == "poll" ]]; then
    cmd+=("--repository-poll-secs=${poll_secs:-5}")
fi
for model in ${load_models[@]+"${load_models[@]}"}; do
    cmd+=("--load-model=${model}")
done
cmd+=("${SERVER_DEFAULTS[@]}")
cmd+=(${extra_args[@]+"${extra_args[@]}"})

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
