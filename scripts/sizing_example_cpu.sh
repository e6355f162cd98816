#!/usr/bin/env bash
# Regenerate results/sizing-example-cpu on a quiet host, in one command:
#   bash scripts/sizing_example_cpu.sh            (from the repository root, after `make install`)
# resnet18 (small preset) served by the embedded server at 1 and 2 instances: two closed-loop sweeps, the
# open-loop capacity search of both (3 searches each), the plan on it, its open-loop confirmation (derated and
# confirmed again if it fails) with the burst check, 2 one-instance replicas behind nginx, and the manifests.
# Everything it writes goes to $OUT (default results/sizing-example-cpu; what an earlier run generated there is
# removed first, its README.md is kept) and workspace/sizing-example.
# Takes about 20-30 minutes on 2 cores. Needs nginx for the fleet check (`make system-deps` as root installs it).
set -euo pipefail

PY=${PY:-.venv/bin/python}
OUT=${OUT:-results/sizing-example-cpu}
WS=${WS:-workspace/sizing-example}
GRPC_PORT=${GRPC_PORT:-18101}
HTTP_PORT=${HTTP_PORT:-18100}
METRICS_PORT=${METRICS_PORT:-18102}
PEAK=${PEAK:-1000}
SLO_MS=${SLO_MS:-50}

[ -x "$PY" ] || { echo "no $PY: run 'make install' first" >&2; exit 2; }
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || {
    echo "nginx not found: 'make system-deps' as root (or apt-get install -y nginx)" >&2; exit 2; }

rm -rf "$OUT"/resnet18_i1 "$OUT"/resnet18_i2 "$OUT"/confirm "$OUT"/fleet "$OUT"/k8s "$OUT"/sizing.* \
    "$OUT"/run.json "$WS/repo" "$WS/logs"
mkdir -p "$OUT" "$WS"

"$PY" triton/convert_model.py --model resnet18 --preset small --output-type onnx \
    --output-path "$WS/resnet18/onnx"
for n in 1 2; do
    "$PY" triton/config_model_on_triton.py --model-repository "$WS/repo" \
        --model-path "$WS/resnet18/onnx" --model-format python --model-name "resnet18_i$n" \
        --max-batch-size 8 --preferred-batch-sizes 4,8 --max-queue-delay-us 100 \
        --number-of-model-instances "$n" --intra-op-threads 1
done

"$PY" -m deployment_toolkit serve --model-repository "$WS/repo" --grpc-port "$GRPC_PORT" \
    --http-port "$HTTP_PORT" --metrics-port "$METRICS_PORT" --log-dir "$WS/logs" &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true' EXIT

# closed-loop sweeps (they wait for the server and the model to be ready before the first point)
for n in 1 2; do
    "$PY" triton/run_online_performance_test_on_triton.py --server-url "127.0.0.1:$GRPC_PORT" --protocol grpc \
        --model-name "resnet18_i$n" --manifest "$WS/resnet18/onnx/manifest.json" --input-data random \
        --concurrency 1,2,4,8,16 --shared-memory system --measurement-interval 3000 --max-attempts 3 \
        --no-progress --ready-timeout 300 --result-path "$OUT/resnet18_i$n" --update-committed \
        --metrics-url "http://127.0.0.1:$METRICS_PORT/metrics"
done

# open-loop capacity of both (kept in each run's openloop.csv), the plan on it (headroom from the spread),
# the confirmation with derating and the burst check, 2 one-instance replicas behind nginx, the manifests
"$PY" triton/size_fleet.py "$OUT/resnet18_i1" "$OUT/resnet18_i2" \
    --peak-rps "$PEAK" --p99-ms "$SLO_MS" --host-hour-cost 0.10 --output "$OUT" --update-committed \
    --capacity "127.0.0.1:$GRPC_PORT" --capacity-shared-memory system --distribution poisson \
    --capacity-trials 3 --capacity-window-ms 3000 \
    --confirm "127.0.0.1:$GRPC_PORT" --confirm-shared-memory system --confirm-interval-ms 3000 \
    --burst-factor 1.5 --burst-seconds 6 \
    --confirm-fleet 2 --fleet-run "$OUT/resnet18_i1" --fleet-model-repository "$WS/repo" \
    --emit-k8s "$OUT/k8s"
echo "done: $OUT/sizing.md"
