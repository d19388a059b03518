#!/usr/bin/env bash
# Two builds of rmt compute the same bits (make check-build-flags; docs/reliability.md, "Compilers
# and CPUs"), and so do a refactor's binary and the one before it. Each binary, in a work
# directory of its own, generates every task's dataset, trains every model kind for a few steps
# (and an RMT with truncated BPTT, armt with bptt 0, xl_rmt with bptt 1, one with recomputation,
# a language model, a packed sweep), evaluates each run (armt also with the diagonal schedule,
# three kinds also on longer data) and writes predictions, an attention dump and the language
# model's samples; tools/compare_outputs.py then demands the same bytes of every file but what
# records the build or the clock. Flags that change no arithmetic (-ffp-contract=off: the
# target's FMA is never contracted in) must give identical results; a file that differs is a
# miscompile in one of the builds, or arithmetic that depends on the target.
# Usage: tools/check_build_flags.sh RMT_A RMT_B WORK   (WORK is emptied first)
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 RMT_A RMT_B WORK" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
rmt_a=$(realpath "$1") rmt_b=$(realpath "$2") work=$3
for r in "$rmt_a" "$rmt_b"; do [ -x "$r" ] || { echo "check_build_flags: $r is not an executable" >&2; exit 2; }; done
rm -rf "$work"
mkdir -p "$work"
work=$(realpath "$work")

# The kinds as the binary lists them (a kind added later is checked without editing this file).
kinds=$({ "$rmt_a" train --config "$root/experiments/train_rmt_copy6.yaml" --set model.kind=none \
           --out "$work/kinds" 2>&1 || true; } | sed -n 's/.*expected one of \([a-z_|]*\).*/\1/p' | tr '|' ' ')
[ -n "$kinds" ] || { echo "check_build_flags: could not read the model kinds from $rmt_a" >&2; exit 1; }

# The same commands for each binary: relative paths, so that the files name the same paths.
outputs() {  # outputs RMT DIR
  local rmt=$1 dir=$2
  mkdir -p "$dir"
  cd "$dir"
  set -x
  "$rmt" generate copy --length 6 --train 300 --val 64 --test 64 --out data/copy6 --seed 3
  "$rmt" generate reverse --length 6 --train 200 --val 32 --test 32 --out data/reverse6 --seed 4
  "$rmt" generate retrieval --pairs 4 --train 200 --val 32 --test 32 --out data/retrieval --seed 5
  "$rmt" generate sqeq --train 200 --val 32 --test 32 --out data/sqeq --seed 6
  "$rmt" generate memorize --segments 2 --segment-length 16 --train 200 --val 32 --test 32 --out data/memorize --seed 7
  "$rmt" generate reasoning --segments 2 --segment-length 32 --facts 2 --train 200 --val 32 --test 32 --out data/reasoning --seed 8
  "$rmt" generate ar_remember --pairs 4 --train 200 --val 32 --test 32 --out data/ar_remember --seed 9
  "$rmt" generate ar_rewrite --pairs 4 --train 200 --val 32 --test 32 --out data/ar_rewrite --seed 10
  "$rmt" generate text --input "$root/README.md" --out data/text
  local common=(--config "$root/experiments/train_rmt_copy6.yaml" --set data=data/copy6 --set train.max_steps=60
                --set train.eval_every=30 --set train.log_every=30 --set train.warmup_steps=10 --threads 2)
  for kind in $kinds; do
    "$rmt" train "${common[@]}" --set model.kind="$kind" --set model.mem_len=6 --out "runs/$kind"
    "$rmt" eval "runs/$kind" --threads 2 --predictions "runs/$kind.predictions.jsonl" > "runs/$kind.eval.json"
  done
  "$rmt" train "${common[@]}" --set bptt=1 --out runs/rmt_bptt1
  "$rmt" train "${common[@]}" --set bptt_recompute=true --set model.dropout=0.1 --out runs/rmt_recompute
  "$rmt" eval runs/armt --threads 2 --schedule diagonal > runs/armt.diagonal.json
  # No memory gradient across borders, and truncation in a kind with both cache and memory.
  "$rmt" train "${common[@]}" --set model.kind=armt --set bptt=0 --out runs/armt_bptt0
  "$rmt" train "${common[@]}" --set model.kind=xl_rmt --set model.mem_len=6 --set bptt=1 --out runs/xl_rmt_bptt1
  # Evaluation on other data (length generalisation: 2x the length, the trained segment length).
  "$rmt" generate copy --length 12 --train 8 --val 8 --test 32 --out data/copy12 --seed 11
  for kind in rmt armt xl_rmt; do
    "$rmt" eval "runs/$kind" --threads 2 --data data/copy12 > "runs/$kind.copy12.json"
  done
  # Attention maps (every layer, segment and head).
  "$rmt" attn --run runs/xl_rmt --threads 2 --dump runs/xl_rmt.attn.json
  "$rmt" train --config "$root/experiments/train_rmt_gcide.yaml" --set data=data/text --set train.max_steps=20 \
    --set train.eval_every=10 --set train.log_every=10 --set train.eval_samples=4096 --set train.batch_size=4 \
    --set segment_length=32 --threads 2 --out runs/lm
  "$rmt" eval runs/lm --threads 2 > runs/lm.eval.json
  "$rmt" sample runs/lm --threads 2 --prompt 'The ' --bytes 40 > runs/lm.sample.txt
  "$rmt" sample runs/lm --threads 2 --prompt 'rmt ' --bytes 40 --temperature 0.8 --seed 3 > runs/lm.sample_t.txt
  # Packed runs (one computation a step for several runs), as make run's sweep, shortened.
  "$rmt" sweep "$root/experiments/quick_copy.yaml" --pack 4 --runs-dir sweep --set train.max_steps=40 \
    --set train.eval_every=20 --set train.log_every=20 --set train.warmup_steps=10
  set +x
}
echo "== check_build_flags: A = $rmt_a"
"$rmt_a" --version | sed -n 's/^build_flags: /   build flags: /p'
(outputs "$rmt_a" "$work/a") > "$work/a.log" 2>&1 || { tail -n 30 "$work/a.log"; echo "check_build_flags: A failed (log: $work/a.log)" >&2; exit 1; }
echo "== check_build_flags: B = $rmt_b"
"$rmt_b" --version | sed -n 's/^build_flags: /   build flags: /p'
(outputs "$rmt_b" "$work/b") > "$work/b.log" 2>&1 || { tail -n 30 "$work/b.log"; echo "check_build_flags: B failed (log: $work/b.log)" >&2; exit 1; }
python3 "$root/tools/compare_outputs.py" "$work/a" "$work/b"
