#!/usr/bin/env bash
# run.sh of the GPU bundle (made by tools/gpu_bundle.sh, `make gpu-bundle`; docs/cuda.md). On the
# GPU machine, from the folder that holds the bundle:
#
#   bash gpu-bundle/run.sh [STEP...]       find cuBLAS 13, then run the steps (default all, in
#                                          this order): smi (nvidia-smi), version (rmt --version),
#                                          suite (the GPU suite, rmt_cuda_tests), bench (rmt bench
#                                          --device cuda: the copy models and the language model),
#                                          train (a short RMT training on a generated copy dataset,
#                                          on cuda, then the same on cpu to compare); named
#                                          only: compare, cell, reproduce, scaling (below)
#   bash gpu-bundle/run.sh --find-cublas-only    only say where cuBLAS 13 is
#
# Each step's output goes to its own log, STEP.log, in $OUT when it is set (the GPU runner's
# folder that comes back) else in gpu-bundle/logs; the console gets each step's last lines and a
# summary. A failing step does not stop the others; the exit status is 1 if any failed.
# cuBLAS is looked for in LD_LIBRARY_PATH, the CUDA toolkit's folders, the system's, and pip's
# packages (nvidia/cu13/lib for CUDA 13's wheels, nvidia/cublas/lib for older ones);
# RMT_CUBLAS_SEARCH="DIR:DIR..." replaces that list (tests). Time limits per step (seconds):
# RMT_SUITE_TIMEOUT (default 300), RMT_BENCH_TIMEOUT (150), RMT_TRAIN_TIMEOUT (120): together
# under the GPU runner's 10 minutes a command; `bash gpu-bundle/run.sh suite` runs one step alone.
# compare: RMT_COMPARE_TIMEOUT (240), RMT_COMPARE_MODES (torch.compile modes, default
# reduce-overhead); cell: RMT_CELL_TIMEOUT (150), RMT_CELL_SEEDS (default "1 2 3"), RMT_CELL_STATE
# (the folder of packed states to resume from, default cell-state/ beside the bundle),
# RMT_CELL_SET (more `rmt train --set` options, space-separated); for the test on a machine
# without a GPU: RMT_CELL_DEVICE (cuda), RMT_CELL_GENERATE (`rmt generate copy` options, "--val
# 1000"). reproduce: RMT_REPRO_ITEMS (the items, required), RMT_REPRO_JOBS (runs at a time; rmt's
# default on a GPU, one per core), RMT_REPRO_MPS (rmt's --mps: auto, which starts NVIDIA's MPS daemon),
# RMT_REPRO_PACK (rmt's --pack: runs of one shape per process; default 1, none, until measured there),
# RMT_REPRO_TIMEOUT (540), RMT_REPRO_MANIFEST (experiments/reproduce/reproduce.yaml),
# RMT_REPRO_DEVICE (cuda; another for the test on a machine without a GPU).
set -u

bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
say() { echo "run.sh: $*"; }

# ---- cuBLAS 13 ---------------------------------------------------------------------------------
# The folders to look in, one a line, in order.
cublas_search_list() {
  if [ -n "${RMT_CUBLAS_SEARCH+set}" ]; then
    tr ':' '\n' <<< "$RMT_CUBLAS_SEARCH"
    return
  fi
  tr ':' '\n' <<< "${LD_LIBRARY_PATH:-}"
  echo /usr/local/cuda/lib64
  echo /usr/local/cuda/lib
  echo /usr/local/cuda/targets/x86_64-linux/lib
  echo /usr/lib/x86_64-linux-gnu
  # pip's NVIDIA packages: wherever python3 finds the `nvidia` namespace, then the usual
  # site-packages folders (a python3 other than the one that has them).
  if command -v python3 > /dev/null; then
    python3 - 2> /dev/null <<'EOF'
import os, site, sys
roots = []
try:
    import nvidia
    roots += list(nvidia.__path__)
except Exception:
    pass
try:
    roots += [os.path.join(d, "nvidia") for d in site.getsitepackages() + [site.getusersitepackages()]]
except Exception:
    pass
for r in roots:
    print(os.path.join(r, "cu13", "lib"))
    print(os.path.join(r, "cublas", "lib"))
EOF
  fi
  for d in /usr/local/lib/python3*/dist-packages /usr/local/lib/python3*/site-packages \
           /usr/lib/python3/dist-packages /opt/conda/lib/python3*/site-packages \
           "${HOME:-/root}"/.local/lib/python3*/site-packages /opt/venv/lib/python3*/site-packages; do
    echo "$d/nvidia/cu13/lib"
    echo "$d/nvidia/cublas/lib"
  done
}

# Sets cublas_dir to the first folder with both libraries; else prints one line saying where it
# looked and returns 1.
find_cublas() {
  local looked=() d
  while IFS= read -r d; do
    [ -n "$d" ] || continue
    case " ${looked[*]-} " in *" $d "*) continue ;; esac
    looked+=("$d")
    if [ -e "$d/libcublas.so.13" ] && [ -e "$d/libcublasLt.so.13" ]; then
      cublas_dir=$d
      say "cuBLAS 13: $d (libcublas.so.13, libcublasLt.so.13)"
      return 0
    fi
  done < <(cublas_search_list)
  echo "run.sh: error: cuBLAS 13 (libcublas.so.13 and libcublasLt.so.13) not found; looked in: ${looked[*]-nothing} (pip install nvidia-cublas, or put its folder in LD_LIBRARY_PATH)" >&2
  return 1
}

if [ "${1:-}" = "--find-cublas-only" ]; then
  [ $# -eq 1 ] || { echo "run.sh: error: --find-cublas-only takes no other arguments" >&2; exit 2; }
  find_cublas
  exit $?
fi

all_steps=(smi version suite bench train compare cell reproduce scaling)
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(smi version suite bench train)
for s in "${steps[@]}"; do
  case " ${all_steps[*]} " in *" $s "*) ;; *)
    echo "run.sh: error: unknown step '$s' (steps: ${all_steps[*]}; or --find-cublas-only)" >&2; exit 2 ;;
  esac
done

logs=${OUT:-$bundle/logs}
mkdir -p "$logs" || { echo "run.sh: error: cannot make the log folder $logs" >&2; exit 1; }
say "bundle $bundle; logs in $logs"
[ -f "$bundle/MANIFEST" ] && head -n 2 "$bundle/MANIFEST"

# The host's glibc must be at least the bundle's (glibc cannot travel: it must match the loader).
need=$(cat "$bundle/glibc_required" 2> /dev/null || echo unknown)
have=$(getconf GNU_LIBC_VERSION 2> /dev/null | awk '{ print $2 }')
if [ "$need" != unknown ] && [ -n "$have" ] &&
   [ "$(printf '%s\n%s\n' "$need" "$have" | sort -t. -k1,1n -k2,2n | head -n 1)" != "$need" ]; then
  say "warning: this machine's glibc is $have, the bundle needs $need: its programs will not start (build the bundle on an older system)"
fi

cublas_dir=
find_cublas || true
# Only rmt's own processes get the bundle's libraries. libstdc++ and libgcc_s: this machine's when
# the programs start with them (a newer libstdc++ serves older programs), else the bundle's
# lib/compat (they need a newer glibc than the programs, so they are not the first choice).
rmt_path="$bundle/lib${cublas_dir:+:$cublas_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# What the loader says is missing for the three programs with this machine's libstdc++: a
# "version `GLIBCXX_...' not found" line (ldd), or rmt's own error if there is no ldd.
libstdcxx_problem() {
  if command -v ldd > /dev/null; then
    for f in rmt librmt_cuda.so rmt_cuda_tests; do
      env LD_LIBRARY_PATH="$rmt_path" ldd "$bundle/$f" 2>&1 | grep -E "version .* not found" | grep -E 'libstdc|libgcc_s'
    done | head -n 1
  else
    env LD_LIBRARY_PATH="$rmt_path" "$bundle/rmt" --help 2>&1 > /dev/null | grep -E 'libstdc|libgcc_s' | head -n 1
  fi
}
problem=$(libstdcxx_problem)
if [ -z "$problem" ]; then
  say "libstdc++: this machine's"
else
  rmt_path="$bundle/lib:$bundle/lib/compat${cublas_dir:+:$cublas_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  say "libstdc++: the bundle's (lib/compat), since with this machine's: $problem"
fi
in_bundle() { env LD_LIBRARY_PATH="$rmt_path" "$@"; }

failed=()
passed=()
# run_step NAME LIMIT COMMAND...: the command (a program or one of the functions below) in a
# child bash under `timeout` (which stops its whole process group), its output into NAME.log,
# the log's last lines here.
run_step() {
  local name=$1 limit=$2 rc start
  shift 2
  say "---- $name: $*"
  start=$(date +%s)
  timeout "$limit" bash -c '"$@"' "$name" "$@" > "$logs/$name.log" 2>&1
  rc=$?
  [ $rc -ne 124 ] || echo "run.sh: $name: stopped after $limit s (timeout)" >> "$logs/$name.log"
  tail -n "$tail_lines" "$logs/$name.log"
  if [ $rc -eq 0 ]; then
    passed+=("$name")
    say "$name: ok ($(( $(date +%s) - start )) s, log $logs/$name.log)"
  else
    failed+=("$name")
    say "$name: FAILED with status $rc ($(( $(date +%s) - start )) s, log $logs/$name.log)"
  fi
}

# A short training of RMT on copy (3 segments of 6: experiments/train_rmt_copy6.yaml's recipe) on
# cuda, evaluated on cuda, then the same run on cpu: the two loss curves should agree closely.
train() {
  local work=$logs/train
  rm -rf "$work" && mkdir -p "$work" || return 1
  in_bundle "$bundle/rmt" generate copy --length 6 --train 2000 --val 200 --test 200 --out "$work/copy6" || return 1
  cat > "$work/rmt_copy6.yaml" <<EOF
data: $work/copy6
segments: 3
bptt: all
model: {kind: rmt, n_layer: 2, n_head: 2, d_head: 16, d_model: 32, d_inner: 64, dropout: 0.0,
        num_mem_tokens: 6, mem_init: normal}
train: {batch_size: 32, lr: 3.0e-3, schedule: constant, warmup_steps: 50, clip: 1.0,
        max_steps: 300, eval_every: 100, log_every: 50, seed: 1}
EOF
  in_bundle "$bundle/rmt" train --config "$work/rmt_copy6.yaml" --device cuda --out "$work/run_cuda" || return 1
  in_bundle "$bundle/rmt" eval --run "$work/run_cuda" --device cuda || return 1
  echo "run.sh: the same training on cpu, to compare:"
  # 4 threads: this small model gains nothing from more, and loses much when other steps share
  # the cores (the first GPU run: 600 tokens/s on 16 threads beside the cell's trainings).
  in_bundle "$bundle/rmt" train --config "$work/rmt_copy6.yaml" --device cpu --set train.threads=4 \
    --out "$work/run_cpu" || return 1
}
# rmt against PyTorch eager and torch.compile on this GPU (bench/README.md, "On a GPU"): the copy
# models at the paper's batch 32, then the language model (eager only: compiling 12 layers costs
# more time than the step has). compare.py runs rmt itself, so a wrapper gives rmt, and only
# rmt, the bundle's libraries (PyTorch keeps its own).
compare() {
  local repo wrapper
  repo=$(cd "$bundle/.." && pwd)
  [ -f "$repo/bench/compare.py" ] || { echo "run.sh: compare: no bench/compare.py in $repo (the bundle's folder must be in the repository)"; return 1; }
  wrapper=$(mktemp -d)/rmt
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "$rmt_path" "$bundle/rmt" > "$wrapper" && chmod +x "$wrapper" || return 1
  cd "$repo" || return 1
  python3 bench/compare.py --device cuda --rmt "$wrapper" --models copy --batch 32 \
    --compile-modes "${RMT_COMPARE_MODES:-reduce-overhead}" --out "$logs/compare_copy_b32.jsonl" || return 1
  python3 bench/compare.py --device cuda --rmt "$wrapper" --models lm --compile-modes none \
    --out "$logs/compare_lm.jsonl"
}

# Issue 20's paper-scale cell: RMT on the paper's copy in 9 segments of 8, the paper's model and
# recipe (experiments/train_rmt_copy9_paper.yaml; RMT_CELL_SET: more `--set` options, e.g.
# "train.schedule=constant"), one process a seed, all on the one GPU at once, each stopped when
# solved or 20 s before the step's time limit. A lease is too short for it, so it continues across
# leases: a seed whose packed state (cell-seedN.tar) is in RMT_CELL_STATE (default: cell-state/
# beside the bundle, if there) resumes from it (`rmt train --resume`), and every seed's state is
# packed again into cell-state/ of the logs (state, best checkpoint, config and learning curve;
# about 15 MB a seed) to be carried to the next lease. The data (57 MB, generated the same each
# time) and the runs stay in /tmp/rmt-cell, a fixed path: a resumed run must see the config it
# started with. Each seed's log and learning curve are copied to cell/ in the logs.
cell() {
  local repo work seed pids=() rc=0 train_s state_in sets=() kv resume
  repo=$(cd "$bundle/.." && pwd)
  work=/tmp/rmt-cell
  state_in=${RMT_CELL_STATE:-$repo/cell-state}
  rm -rf "$work" && mkdir -p "$work" "$logs/cell" "$logs/cell-state" || return 1
  train_s=$(( ${RMT_CELL_TIMEOUT:-150} - 20 ))
  for kv in ${RMT_CELL_SET:-}; do sets+=(--set "$kv"); done
  # shellcheck disable=SC2086  # RMT_CELL_GENERATE: options, split on spaces
  in_bundle "$bundle/rmt" generate copy ${RMT_CELL_GENERATE:---val 1000} --out "$work/copy24" || return 1
  sed "s#runs/data/copy24#$work/copy24#" "$repo/experiments/train_rmt_copy9_paper.yaml" > "$work/config.yaml" || return 1
  for seed in ${RMT_CELL_SEEDS:-1 2 3}; do
    resume=()
    if [ -f "$state_in/cell-seed$seed.tar" ]; then
      tar -C "$work" -xf "$state_in/cell-seed$seed.tar" || return 1
      resume=(--resume)
      say "cell: seed $seed resumes from $state_in/cell-seed$seed.tar (step $(grep -o '"step":[0-9]*' "$work/seed$seed/metrics.jsonl" | tail -n 1 | cut -d: -f2))"
    fi
    timeout "$train_s" env LD_LIBRARY_PATH="$rmt_path" "$bundle/rmt" train --config "$work/config.yaml" \
      --device "${RMT_CELL_DEVICE:-cuda}" --set train.seed="$seed" --set train.threads=4 ${sets[@]+"${sets[@]}"} "${resume[@]}" \
      --out "$work/seed$seed" > "$logs/cell/seed$seed.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done  # 124: stopped at the time limit
  for seed in ${RMT_CELL_SEEDS:-1 2 3}; do
    cp "$work/seed$seed/metrics.jsonl" "$logs/cell/seed$seed.metrics.jsonl" 2> /dev/null
    # the state to carry on (not last.safetensors: --resume reads state.safetensors)
    (cd "$work" && tar -cf "$logs/cell-state/cell-seed$seed.tar" --ignore-failed-read \
       "seed$seed/state.safetensors" "seed$seed/best.safetensors" "seed$seed/config.yaml" \
       "seed$seed/metrics.jsonl" "seed$seed/results.json" 2> /dev/null)
    tail -n 3 "$logs/cell/seed$seed.log"
  done
  return $rc
}
# Items of `rmt reproduce` trained on the GPU (docs/reproduction.md, "On a GPU"): the same
# recipes with --device cuda, several runs at once side by side under MPS, from the repository's root, into
# runs/reproduce-cuda and experiments/results-cuda. Stopped 30 s before the step's limit; what it
# finished (its runs' records, tables, REPORT.md) comes back packed as results-cuda.tar.gz in the
# logs, to unpack in the repository and commit. A run stopped on the way resumes from its last
# checkpoint at the next call while the machine is still warm (runs/ stays there); on a fresh
# machine it starts again, and the finished ones are restored from their records.
reproduce() {
  local repo dev rc
  repo=$(cd "$bundle/.." && pwd)
  dev=${RMT_REPRO_DEVICE:-cuda}
  [ -n "${RMT_REPRO_ITEMS:-}" ] || { echo "run.sh: reproduce: say which items in RMT_REPRO_ITEMS (rmt reproduce --list names them)"; return 1; }
  cd "$repo" || return 1
  # shellcheck disable=SC2086  # RMT_REPRO_ITEMS: names, split on spaces
  timeout $(( ${RMT_REPRO_TIMEOUT:-540} - 30 )) env LD_LIBRARY_PATH="$rmt_path" "$bundle/rmt" reproduce $RMT_REPRO_ITEMS \
    --manifest "${RMT_REPRO_MANIFEST:-experiments/reproduce/reproduce.yaml}" --device "$dev" \
    ${RMT_REPRO_JOBS:+-j "$RMT_REPRO_JOBS"} --mps "${RMT_REPRO_MPS:-auto}" --pack "${RMT_REPRO_PACK:-1}"
  rc=$?
  [ $rc -ne 124 ] || echo "run.sh: reproduce: stopped at the time limit; a call on this machine while it is warm resumes it"
  if [ -d "experiments/results-$dev" ]; then
    tar -czf "$logs/results-$dev.tar.gz" "experiments/results-$dev" || return 1
    echo "run.sh: reproduce: experiments/results-$dev packed into $logs/results-$dev.tar.gz (unpack it in the repository)"
  fi
  return $rc
}
# Issue 40's measurements: aggregate steps/s of N rmt bench processes with and without MPS
# (bench/gpu/mps_scaling.sh, N from RMT_SCALING_N, default "1 4 16 64") and of K packed runs in
# one process (rmt bench --pack K, K from RMT_PACKS, default "1 4 16 64"), at the reproduce
# shapes; JSON lines into scaling.jsonl beside the log. From the repository's root.
scaling() {
  local repo rc=0
  repo=$(cd "$bundle/.." && pwd)
  cd "$repo" || return 1
  for k in ${RMT_PACKS:-1 4 16 64 256}; do
    in_bundle "$bundle/rmt" bench --device "${RMT_SCALING_DEVICE:-cuda}" --model repro --pack "$k" \
      --reps "${RMT_SCALING_REPS:-300}" --warmup "${RMT_SCALING_WARMUP:-50}" --no-eval --peak-gflops 1 --json \
      >> "$logs/scaling.jsonl" || rc=1
  done
  # What merging the packed runs' calls gains: the same packs with each run's calls in turn.
  for k in ${RMT_PACKS_IN_TURN:-16}; do
    in_bundle env RMT_CUDA_MERGE_RUNS=0 "$bundle/rmt" bench --device "${RMT_SCALING_DEVICE:-cuda}" --model repro \
      --pack "$k" --reps "${RMT_SCALING_REPS:-300}" --warmup "${RMT_SCALING_WARMUP:-50}" --no-eval --peak-gflops 1 \
      --json >> "$logs/scaling.jsonl" || rc=1
  done
  RMT_SCALING_N=${RMT_SCALING_N:-1 4 16 64} LD_LIBRARY_PATH="$rmt_path" \
    bash bench/gpu/mps_scaling.sh "$bundle/rmt" "$logs/scaling.jsonl" || rc=1
  cat "$logs/scaling.jsonl"
  return $rc
}
export bundle logs rmt_path
export -f say in_bundle train compare cell reproduce scaling

for s in "${steps[@]}"; do
  case $s in
    smi) tail_lines=15 run_step smi 60 nvidia-smi ;;
    version) tail_lines=15 run_step version 60 in_bundle "$bundle/rmt" --version ;;
    suite)
      tail_lines=25 run_step suite "${RMT_SUITE_TIMEOUT:-300}" in_bundle "$bundle/rmt_cuda_tests"
      # Every comparison that failed, whatever the tail showed.
      say "suite: $(grep -c '^cuda-vs-cpu' "$logs/suite.log") comparisons printed, $(grep '^cuda-vs-cpu' "$logs/suite.log" | grep -c 'FAIL$') FAIL"
      grep -E '^cuda-vs-cpu.*FAIL$' "$logs/suite.log" | head -n 20 ;;
    bench) tail_lines=30 run_step bench "${RMT_BENCH_TIMEOUT:-150}" in_bundle "$bundle/rmt" bench --device cuda --model all ;;
    train) tail_lines=30 run_step train "${RMT_TRAIN_TIMEOUT:-120}" train ;;
    compare) tail_lines=40 run_step compare "${RMT_COMPARE_TIMEOUT:-240}" compare ;;
    cell) tail_lines=20 run_step cell "${RMT_CELL_TIMEOUT:-150}" cell ;;
    reproduce) tail_lines=20 run_step reproduce "${RMT_REPRO_TIMEOUT:-540}" reproduce ;;
    scaling) tail_lines=40 run_step scaling "${RMT_SCALING_TIMEOUT:-300}" scaling ;;
  esac
done

say "==== summary: passed: ${passed[*]-none}; failed: ${failed[*]-none}; logs in $logs"
[ ${#failed[@]} -eq 0 ]
