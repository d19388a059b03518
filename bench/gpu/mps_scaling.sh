#!/usr/bin/env bash
# Aggregate training steps/s of N separate `rmt bench` processes on one GPU, with and without
# NVIDIA's MPS daemon (issue 40: how a sweep's runs share a GPU; docs/cuda.md "Runs side by side").
#
#   bash bench/gpu/mps_scaling.sh RMT [OUT.jsonl]
#
# For each model (RMT_SCALING_MODELS, default "repro_copy_rmt repro_retrieval_rmt rmt": the
# reproduce shapes and the paper's copy RMT at batch 32), each N (RMT_SCALING_N, default
# "1 2 4 8 16 32 64") and each mode (RMT_SCALING_MPS, default "off on"), N processes start
# together; each times RMT_SCALING_REPS steps (default 300) after RMT_SCALING_WARMUP (default
# 50, long enough for every process to have started before any is timed). A line per point:
# {"model", "mps", "processes", "steps_per_s" (the sum of the processes' 1 / median step time),
# "step_ms_median" (their median), "wall_s"}. With mps "on" a private daemon is started for the
# point and stopped after. RMT_SCALING_DEVICE (default cuda) runs it elsewhere, e.g. cpu for a
# dry run of the script. Needs python3 (only to read the JSON lines).
set -euo pipefail
rmt=${1:?usage: mps_scaling.sh RMT [OUT.jsonl]}
out=${2:-/dev/stdout}
device=${RMT_SCALING_DEVICE:-cuda}
models=${RMT_SCALING_MODELS:-repro_copy_rmt repro_retrieval_rmt rmt}
counts=${RMT_SCALING_N:-1 2 4 8 16 32 64}
modes=${RMT_SCALING_MPS:-off on}
reps=${RMT_SCALING_REPS:-300}
warmup=${RMT_SCALING_WARMUP:-50}
work=$(mktemp -d)
pipes=/tmp/rmt-scaling-mps.$$
cleanup() {
  if [ -f "$pipes/nvidia-cuda-mps-control.pid" ]; then
    echo quit | CUDA_MPS_PIPE_DIRECTORY=$pipes nvidia-cuda-mps-control || true
  fi
  rm -rf "$work" "$pipes"
}
trap cleanup EXIT

for model in $models; do
  for mode in $modes; do
    # Each point's processes find (mode on) or miss (off) a daemon in their own pipe directory.
    mkdir -p "$pipes/log"
    if [ "$mode" = on ]; then
      CUDA_MPS_PIPE_DIRECTORY=$pipes CUDA_MPS_LOG_DIRECTORY=$pipes/log nvidia-cuda-mps-control -d
      sleep 1
    fi
    for n in $counts; do
      rm -f "$work"/*.json
      start=$(date +%s.%N)
      for i in $(seq 1 "$n"); do
        CUDA_MPS_PIPE_DIRECTORY=$pipes CUDA_MPS_LOG_DIRECTORY=$pipes/log \
          "$rmt" bench --device "$device" --model "$model" --reps "$reps" --warmup "$warmup" --no-eval \
          --peak-gflops 1 --threads 1 --json > "$work/$i.json" 2> "$work/$i.err" &
      done
      wait
      end=$(date +%s.%N)
      python3 - "$work" "$model" "$mode" "$n" "$start" "$end" >> "$out" <<'EOF'
import glob, json, statistics, sys
work, model, mode, n, start, end = sys.argv[1:]
rows = []
for path in sorted(glob.glob(work + "/*.json")):
    for line in open(path):
        if line.strip():
            rows.append(json.loads(line))
if len(rows) != int(n):
    sys.exit(f"mps_scaling: {len(rows)} of {n} processes reported (see {work}/*.err)")
medians = [r["step_ms_median"] for r in rows]
print(json.dumps({"model": model, "mps": mode, "processes": int(n), "device": rows[0]["device"],
                  "steps_per_s": round(sum(1000.0 / m for m in medians), 1),
                  "step_ms_median": round(statistics.median(medians), 4),
                  "wall_s": round(float(end) - float(start), 2)}))
EOF
    done
    if [ "$mode" = on ]; then
      echo quit | CUDA_MPS_PIPE_DIRECTORY=$pipes nvidia-cuda-mps-control
      sleep 1
    fi
    rm -rf "$pipes"
  done
done
