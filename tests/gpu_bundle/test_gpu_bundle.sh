#!/usr/bin/env bash
# ctest gpu_bundle (part of make test): the GPU bundle (tools/gpu_bundle.sh, make gpu-bundle) on
# this machine, without a GPU. Stages a bundle from this build's programs into a temp folder with
# the same script `make gpu-bundle` uses (--stage-only: building the portable bundle here would
# take too long for make test), then:
#   1. every library the bundle's programs and libraries load resolves inside its lib/ and
#      lib/compat (libstdc++, libgcc_s), except glibc's, the NVIDIA driver's and cuBLAS (which the
#      GPU machine provides); and this check fails on a bundle with one library taken out;
#   2. the bundle's rmt runs its CPU path (--version, generate, a 20-step training) under `env -i`
#      with LD_LIBRARY_PATH naming only the bundle's lib/ and lib/compat; --version also with
#      lib/ alone (this machine's libstdc++, as run.sh prefers); its GPU suite starts and says, as
#      it must here, that there is no GPU;
#   3. run.sh: its cuBLAS search says in one line where it looked when cuBLAS is not there, and
#      finds it where it is; its steps run on, and the exit status is 1, when one fails; the
#      paper-scale cell (on the cpu) packs its state and a later "lease" resumes it; an item of
#      `rmt reproduce` runs on another device and its results come back packed; the scaling
#      step (packed runs, separate processes) writes its points;
#   4. staging refuses a bundle over the size limit.
# What this does not prove: `env -i` clears the environment, but the loader still searches the
# programs' RUNPATH (this build's: the CUDA toolkit's folder) and the system's default folders
# (/lib, /usr/lib, ld.so.cache), which here hold fmt, yaml-cpp and oneDNN too; so step 2 alone
# would pass with a library missing from the bundle. Step 1 (ldd: where each library is actually
# found) is what catches that. Nor does it prove that the bundle starts on the GPU machine's system
# (its glibc must be at least glibc_required), or anything about the GPU.
#
# Usage: tests/gpu_bundle/test_gpu_bundle.sh BUILD_DIR   (a build with the CUDA backend)
set -euo pipefail

fail() { echo "test_gpu_bundle: FAILED: $*" >&2; exit 1; }
[ $# -eq 1 ] || fail "usage: tests/gpu_bundle/test_gpu_bundle.sh BUILD_DIR"
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bundle=$tmp/gpu-bundle

"$root/tools/gpu_bundle.sh" --stage-only "$build" "$bundle" || fail "staging the bundle"
for f in rmt librmt_cuda.so rmt_cuda_tests run.sh MANIFEST glibc_required; do
  [ -f "$bundle/$f" ] || fail "the bundle has no $f"
done
for lib in lib/libfmt lib/libyaml-cpp lib/libgomp lib/libdnnl lib/compat/libstdc++ lib/compat/libgcc_s; do
  ls "$bundle/$lib".so* > /dev/null 2>&1 || fail "the bundle has no $lib"
done
held=$(find "$bundle" -name 'libcublas*' -o -name 'libcuda.so*' -o -name 'libc.so*' -o -name 'ld-linux*')
[ -z "$held" ] || fail "the bundle holds $held, which must come from the GPU machine"

# ---- 1. every library resolves inside the bundle ----------------------------------------------
# Prints each library a file loads from outside the bundle (other than those the host provides);
# returns 1 if there is any.
outside_the_bundle() {
  local b=$1 f name arrow path bad=0
  for f in "$b/rmt" "$b/librmt_cuda.so" "$b/rmt_cuda_tests" "$b"/lib/*.so* "$b"/lib/compat/*; do
    while read -r name arrow path _; do
      [ "$arrow" = "=>" ] || continue
      case "$name" in
        ld-linux-x86-64.so.*|libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*) continue ;;
        libcuda.so.*|libcublas.so.*|libcublasLt.so.*) continue ;;
      esac
      case "$path" in
        "$b/lib/"*) ;;  # lib/compat too
        *) echo "  $(basename "$f") loads $name from $path"; bad=1 ;;
      esac
    done < <(env -i LD_LIBRARY_PATH="$b/lib:$b/lib/compat" ldd "$f")
  done
  return $bad
}
outside_the_bundle "$bundle" || fail "libraries above are loaded from outside the bundle"
# The check must see a missing library: take libfmt out of a copy.
cp -r "$bundle" "$tmp/incomplete"
rm "$tmp/incomplete"/lib/libfmt.so*
if outside_the_bundle "$tmp/incomplete" > "$tmp/incomplete.txt"; then
  fail "a bundle without libfmt passed the check"
fi
grep -q 'loads libfmt' "$tmp/incomplete.txt" || fail "the check did not name libfmt: $(cat "$tmp/incomplete.txt")"
rm -rf "$tmp/incomplete"

# ---- 2. the CPU path with only the bundle's libraries -----------------------------------------
in_bundle() { env -i LD_LIBRARY_PATH="$bundle/lib:$bundle/lib/compat" PATH=/usr/bin:/bin "$@"; }
version=$(in_bundle "$bundle/rmt" --version) || fail "rmt --version"
grep -q '^cuda: CUDA runtime ' <<< "$version" || fail "rmt --version did not load librmt_cuda.so: $version"
version=$(env -i LD_LIBRARY_PATH="$bundle/lib" "$bundle/rmt" --version) || fail "rmt --version with lib/ alone"
grep -q '^cuda: CUDA runtime ' <<< "$version" || fail "rmt --version with lib/ alone: $version"

in_bundle "$bundle/rmt" generate copy --length 4 --train 200 --val 20 --test 20 --out "$tmp/copy4" > /dev/null ||
  fail "rmt generate copy"
cat > "$tmp/train.yaml" <<EOF
data: $tmp/copy4
segments: 2
bptt: all
model: {kind: rmt, n_layer: 1, n_head: 2, d_head: 8, d_model: 16, d_inner: 32, dropout: 0.0,
        num_mem_tokens: 2, mem_init: normal}
train: {batch_size: 8, lr: 3.0e-3, schedule: constant, warmup_steps: 0, clip: 1.0,
        max_steps: 20, eval_every: 10, log_every: 10, seed: 1}
EOF
in_bundle "$bundle/rmt" train --config "$tmp/train.yaml" --device cpu --out "$tmp/run" > "$tmp/train.log" 2>&1 ||
  fail "rmt train (20 steps, cpu): $(tail -n 5 "$tmp/train.log")"
[ -f "$tmp/run/results.json" ] || fail "rmt train wrote no results.json"

suite_out=$(in_bundle "$bundle/rmt_cuda_tests" 2>&1) && fail "the GPU suite passed without a GPU"
grep -q 'rmt_cuda_tests: FAIL: no usable GPU, nothing was tested' <<< "$suite_out" ||
  fail "the GPU suite did not start or did not say there is no GPU: $suite_out"

# ---- 3. run.sh ------------------------------------------------------------------------------
mkdir "$tmp/no-cublas" "$tmp/fake-cublas"
out=$(env -i PATH=/usr/bin:/bin RMT_CUBLAS_SEARCH="$tmp/no-cublas" bash "$bundle/run.sh" --find-cublas-only 2>&1) &&
  fail "run.sh found cuBLAS where there is none: $out"
[ "$out" = "run.sh: error: cuBLAS 13 (libcublas.so.13 and libcublasLt.so.13) not found; looked in: $tmp/no-cublas (pip install nvidia-cublas, or put its folder in LD_LIBRARY_PATH)" ] ||
  fail "run.sh's message without cuBLAS: $out"
touch "$tmp/fake-cublas/libcublas.so.13" "$tmp/fake-cublas/libcublasLt.so.13"
out=$(env -i PATH=/usr/bin:/bin RMT_CUBLAS_SEARCH="$tmp/no-cublas:$tmp/fake-cublas" bash "$bundle/run.sh" --find-cublas-only 2>&1) ||
  fail "run.sh did not find cuBLAS in $tmp/fake-cublas: $out"
[ "$out" = "run.sh: cuBLAS 13: $tmp/fake-cublas (libcublas.so.13, libcublasLt.so.13)" ] || fail "run.sh: $out"

# Two steps, the second failing here (no GPU): both run, the summary names each, status 1.
out=$(env -i PATH=/usr/bin:/bin OUT="$tmp/logs" RMT_CUBLAS_SEARCH="$tmp/no-cublas" bash "$bundle/run.sh" version suite 2>&1) &&
  fail "run.sh passed with a failing step: $out"
grep -q '^run.sh: ==== summary: passed: version; failed: suite; logs in ' <<< "$out" || fail "run.sh's summary: $out"
grep -q '^cuda: CUDA runtime ' "$tmp/logs/version.log" || fail "run.sh's version.log: $(cat "$tmp/logs/version.log")"
grep -q 'no usable GPU' "$tmp/logs/suite.log" || fail "run.sh's suite.log: $(cat "$tmp/logs/suite.log")"

# The paper-scale cell continues across leases: its packed state, carried to the next lease,
# is resumed there (on the cpu here, with a tiny dataset and 4 steps; the first lease finishes
# them, so the second resumes a finished run: the round trip of state, config and regenerated data).
cell_env=(env -i PATH=/usr/bin:/bin RMT_CUBLAS_SEARCH="$tmp/no-cublas" RMT_CELL_DEVICE=cpu RMT_CELL_SEEDS=1
          RMT_CELL_GENERATE="--train 64 --val 8 --test 8" RMT_CELL_TIMEOUT=200
          RMT_CELL_SET="train.max_steps=4 train.eval_every=2 train.batch_size=4")
mkdir -p "$tmp/experiments" && cp "$root/experiments/train_rmt_copy9_paper.yaml" "$tmp/experiments/"  # as in the repository
out=$("${cell_env[@]}" OUT="$tmp/lease1" bash "$bundle/run.sh" cell 2>&1) || fail "run.sh cell (cpu): $out"
[ -s "$tmp/lease1/cell-state/cell-seed1.tar" ] || fail "run.sh cell packed no state: $(ls -R "$tmp/lease1")"
# The listing is read whole first: `tar | grep -q` under pipefail fails when grep stops early and tar
# is killed writing the rest (SIGPIPE), which is a race, not a missing file.
listing=$(tar -tf "$tmp/lease1/cell-state/cell-seed1.tar")
grep -q '^seed1/state.safetensors$' <<< "$listing" || fail "the packed state has no state.safetensors: $listing"
grep -q '"step":4' "$tmp/lease1/cell/seed1.metrics.jsonl" || fail "the cell's run did not reach step 4"
out=$("${cell_env[@]}" OUT="$tmp/lease2" RMT_CELL_STATE="$tmp/lease1/cell-state" bash "$bundle/run.sh" cell 2>&1) ||
  fail "run.sh cell resuming (cpu): $out"
grep -q '^run.sh: cell: seed 1 resumes from .*cell-seed1.tar (step 4)$' <<< "$out" || fail "run.sh cell did not resume: $out"
grep -q '^resuming rmt on copy' "$tmp/lease2/cell/seed1.log" || fail "rmt train did not resume: $(head -n 5 "$tmp/lease2/cell/seed1.log")"
rm -rf /tmp/rmt-cell

# An item of `rmt reproduce` on another device (the checked CPU backend here), from the
# repository's root, its results packed into the logs.
mkdir -p "$tmp/experiments/reproduce"
cat > "$tmp/experiments/reproduce/tiny.yaml" <<'EOF'
data: {task: copy, length: 4, symbols: 4, train: 64, val: 8, test: 8, seed: 0}
base:
  model: {kind: baseline, n_layer: 1, n_head: 1, d_head: 8, d_model: 8, d_inner: 16, dropout: 0.0}
  train: {batch_size: 4, max_steps: 4, eval_every: 2, log_every: 2}
grid: {segments: [1]}
EOF
printf 'paper: p.yaml\nitems:\n  tiny:\n    kind: sweep\n    title: t\n    paper_says: p\n    sweep: tiny.yaml\n    metrics: [acc_teacher_forced]\n' \
  > "$tmp/experiments/reproduce/m.yaml"
echo '{}' > "$tmp/experiments/reproduce/p.yaml"
cp "$root/experiments/reproduce/report_templates.md" "$tmp/experiments/reproduce/"  # the report's prose, beside the manifest
out=$(env -i PATH=/usr/bin:/bin RMT_CUBLAS_SEARCH="$tmp/no-cublas" OUT="$tmp/repro-logs" RMT_REPRO_ITEMS=tiny \
      RMT_REPRO_DEVICE=cpu-guarded RMT_REPRO_JOBS=1 RMT_REPRO_MANIFEST=experiments/reproduce/m.yaml \
      bash "$bundle/run.sh" reproduce 2>&1) || fail "run.sh reproduce (cpu-guarded): $out"
tar -tzf "$tmp/repro-logs/results-cpu-guarded.tar.gz" | grep -q '^experiments/results-cpu-guarded/REPORT.md$' ||
  fail "run.sh reproduce packed no report: $(tar -tzf "$tmp/repro-logs/results-cpu-guarded.tar.gz" 2>&1)"
# shellcheck disable=SC2016  # the backquotes are the report's markdown
grep -qF 'The runs trained on device `cpu-guarded`' "$tmp/experiments/results-cpu-guarded/REPORT.md" ||
  fail "the report does not name the device: $(head -n 5 "$tmp/experiments/results-cpu-guarded/REPORT.md")"
out=$(env -i PATH=/usr/bin:/bin RMT_CUBLAS_SEARCH="$tmp/no-cublas" OUT="$tmp/repro-logs" bash "$bundle/run.sh" reproduce 2>&1) &&
  fail "run.sh reproduce passed without RMT_REPRO_ITEMS"
grep -q 'say which items in RMT_REPRO_ITEMS' <<< "$out" || fail "run.sh reproduce without items: $out"

# Issue 40's scaling step on the CPU: packed runs in one process and separate processes (MPS off),
# one JSON line per point.
mkdir -p "$tmp/bench/gpu"
cp "$root/bench/gpu/mps_scaling.sh" "$tmp/bench/gpu/"
# The repro_* models' shapes are read from the reproduction manifest (rmt bench --manifest), at
# the repository's root on the GPU machine as here.
cp "$root/experiments/reproduce/"*.yaml "$tmp/experiments/reproduce/" && cp "$root/experiments/paper_results.yaml" "$tmp/experiments/"
out=$(env -i PATH=/usr/bin:/bin RMT_CUBLAS_SEARCH="$tmp/no-cublas" OUT="$tmp/scaling-logs" RMT_SCALING_DEVICE=cpu \
      RMT_PACKS="1 2" RMT_PACKS_IN_TURN="2" RMT_SCALING_N="1 2" RMT_SCALING_MPS=off RMT_SCALING_MODELS="repro_copy_rmt repro_retrieval_rmt" RMT_SCALING_REPS=3 RMT_SCALING_WARMUP=1 \
      bash "$bundle/run.sh" scaling 2>&1) || fail "run.sh scaling (cpu): $out"
lines=$(wc -l < "$tmp/scaling-logs/scaling.jsonl")
[ "$lines" -eq 10 ] || fail "run.sh scaling wrote $lines lines, not 10 (2 models x 2 packs, 2 models x 1 pack in turn, 2 models x 2 process counts): $(cat "$tmp/scaling-logs/scaling.jsonl")"
grep -q '"merged_runs":false' "$tmp/scaling-logs/scaling.jsonl" || fail "run.sh scaling: no merged_runs field"
grep -q '"pack":2' "$tmp/scaling-logs/scaling.jsonl" || fail "run.sh scaling: no packed point"
grep -q '"processes": 2' "$tmp/scaling-logs/scaling.jsonl" || fail "run.sh scaling: no point of 2 processes"

# ---- 4. the size limit ------------------------------------------------------------------------
out=$(BUNDLE_LIMIT_MIB=1 "$root/tools/gpu_bundle.sh" --stage-only "$build" "$tmp/too-big" 2>&1) &&
  fail "staging passed a bundle over 1 MiB with BUNDLE_LIMIT_MIB=1"
grep -q 'MiB, over the 1 MiB that can be carried to the GPU machine' <<< "$out" || fail "the size error: $out"

echo "test_gpu_bundle: ok ($(du -sm "$bundle" | cut -f1) MiB bundle from $build; libraries: $(cd "$bundle/lib" && find . -type f -printf '%P\n' | sort | tr '\n' ' '))"
