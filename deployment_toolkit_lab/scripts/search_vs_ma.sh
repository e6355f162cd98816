#!/usr/bin/env bash
# The config search against Model Analyzer's quick search on three models of
# different speed, each with a p99 budget near its knee (issue 22): for each,
# deployment_toolkit_lab/scripts/benchmark_vs_model_analyzer.py with --our-max-minutes half, into
# results/search-vs-ma-<model>-cpu (vs_model_analyzer.md says which target is
# met, and why not where one is not). Run it on a quiet host: the figures are
# only as good as the host is idle (each run.json records the load average).
#
# --dry-run (or DRY_RUN=1) prints the commands, shell-quoted, and exits 0.
# --only MODEL runs one of the three. Model Analyzer must be installed in its
# own venv (it needs numpy 2), see usage.
set -euo pipefail

PROG="${0##*/}"
script_path="${BASH_SOURCE[0]}"
[[ "${script_path}" == */* ]] || script_path="./${script_path}"
SCRIPT_DIR="$(cd -- "${script_path%/*}" && pwd -P)"
REPO_ROOT="$(cd -- "${SCRIPT_DIR}/../.." && pwd -P)"
PYTHON="${PYTHON:-${REPO_ROOT}/.venv/bin/python}"
MODEL_ANALYZER="${MODEL_ANALYZER:-/tmp/ma-venv/bin/model-analyzer}"
MA_MAX_MINUTES="${MA_MAX_MINUTES:-10}"

# model preset p99-budget-ms: slow (~35 inf/s), fast (~400 inf/s), and one in between
readonly RUNS=(
    "resnet50 full 500"
    "resnet18 small 50"
    "efficientnet_b0 full 150"
)

usage() {
    cat <<USAGE
Usage: ${PROG} [--dry-run] [--only MODEL]

Runs, one after the other (about 3 x 1.5 x Model Analyzer's time: 20-30 min):
$(for r in "${RUNS[@]}"; do read -r m p b <<<"${r}"; echo "  ${m} (${p}) at p99 ${b} ms -> results/search-vs-ma-${m}-cpu"; done)

Environment: PYTHON (default .venv/bin/python), MODEL_ANALYZER (default
/tmp/ma-venv/bin/model-analyzer), MA_MAX_MINUTES (default 10).

Example:
  python3 -m venv /tmp/ma-venv && /tmp/ma-venv/bin/pip install triton-model-analyzer==1.58.0
  ${PROG} --dry-run
  ${PROG} --only resnet18
USAGE
}

dry_run="${DRY_RUN:-0}"
only=""
while (($#)); do
    case "$1" in
        --dry-run) dry_run=1 ;;
        --only)
            [[ $# -ge 2 ]] || { echo "${PROG}: --only needs a model name, e.g. --only resnet18" >&2; exit 2; }
            only="$2"; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "${PROG}: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

if [[ -n "${only}" ]] && ! printf '%s\n' "${RUNS[@]}" | grep -q "^${only} "; then
    echo "${PROG}: --only ${only}: not one of the benchmarked models (see --help)" >&2
    exit 2
fi
if [[ "${dry_run}" != 1 ]]; then
    [[ -x "${PYTHON}" ]] || { echo "${PROG}: no ${PYTHON}: run 'make install' first" >&2; exit 2; }
    [[ -x "${MODEL_ANALYZER}" ]] || {
        echo "${PROG}: no ${MODEL_ANALYZER}: python3 -m venv /tmp/ma-venv && /tmp/ma-venv/bin/pip install triton-model-analyzer==1.58.0" >&2
        exit 2
    }
fi

cd -- "${REPO_ROOT}"
status=0
for r in "${RUNS[@]}"; do
    read -r model preset budget <<<"${r}"
    [[ -z "${only}" || "${only}" == "${model}" ]] || continue
    out="results/search-vs-ma-${model}-cpu"
    cmd=("${PYTHON}" deployment_toolkit_lab/scripts/benchmark_vs_model_analyzer.py
         --model "${model}" --preset "${preset}"
         --p99-ms "${budget}" --max-minutes "${MA_MAX_MINUTES}" --our-max-minutes half
         --model-analyzer "${MODEL_ANALYZER}" --result-path "${out}" --update-committed)
    if [[ "${dry_run}" == 1 ]]; then
        printf '%q ' "${cmd[@]}"; echo
        continue
    fi
    mkdir -p "${out}"
    echo "== ${model} (${preset}), p99 ${budget} ms -> ${out} (log: ${out}/benchmark.log)"
    if ! "${cmd[@]}" 2>&1 | tee "${out}/benchmark.log"; then
        echo "${PROG}: ${model} failed (see ${out}/benchmark.log); going on with the next" >&2
        status=1
    fi
done
exit "${status}"
