#!/bin/bash
# `make test-slurm`: runs `rmt sweep --emit slurm` on a real SLURM (Debian's slurm-wlm).
#
# Starts munged, slurmctld and slurmd on this machine with a one-node slurm.conf (this host, its
# CPUs and memory; select/cons_tres, proctrack/linuxproc, no cgroups), all state in a temp
# directory and on free ports, so nothing outside it is touched. Then, on a tiny sweep (copy of 6
# symbols, a 2-layer d_model 16 model, 40 steps, 4 runs):
#   1. emits the job array with every resource option, one run deliberately broken; submits it;
#      waits for the array; `rmt sweep --collect` must list the broken run as failed (its error
#      recorded by the array task) and the 3 others done, each once, trained with the threads of
#      their allocation (--cpus-per-task);
#   2. repairs the run, emits again (one task: only the unfinished run), submits, collects:
#      results.csv has each of the 4 runs exactly once, all done;
#   3. a plain `rmt sweep FILE` then finds nothing to run and leaves results.csv as it was.
# The daemons are stopped and the temp directory removed on any exit (KEEP=1 keeps it).
#
# Usage: tests/slurm/run_slurm_test.sh [RMT_BINARY]   (default build/rmt)
# Installs slurm-wlm and munge with apt-get when missing (as root; re-runs itself under sudo
# otherwise, since slurmd must run as root). Exit 0 on success, 1 on a failed check or when the
# daemons do not start (their logs are printed).
set -euo pipefail

RMT=${1:-build/rmt}
WAIT_S=${SLURM_TEST_WAIT_S:-180}  # for the daemons to come up, and for each array to finish
log() { printf 'test-slurm: %s\n' "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

[ -x "$RMT" ] || die "$RMT is not an executable rmt (build it first: make build)"
RMT=$(cd "$(dirname "$RMT")" && pwd)/$(basename "$RMT")

if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || die "slurmd must run as root: run this as root, or install sudo"
  exec sudo -E "$0" "$RMT"
fi

# ---- packages ---------------------------------------------------------------------------------
missing=()
for p in slurm-wlm munge; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  # The packages' own services (the system munged, slurmctld, slurmd) are not wanted: this test
  # starts its own. A policy-rc.d that says "no" stops the maintainer scripts from starting them
  # (only for this install: it is removed again, unless one was there before).
  policy=/usr/sbin/policy-rc.d made_policy=0
  if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && made_policy=1; fi
  status=0
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >&2 || status=$?
  [ "$made_policy" = 1 ] && rm -f "$policy"
  [ "$status" = 0 ] || die "apt-get install ${missing[*]} failed (status $status)"
fi
for cmd in munged slurmctld slurmd sbatch squeue scontrol sinfo; do
  command -v "$cmd" >/dev/null || [ -x "/usr/sbin/$cmd" ] || die "$cmd not found after installing slurm-wlm and munge"
done
export PATH="/usr/sbin:$PATH"

# ---- a one-node cluster in a temp directory ---------------------------------------------------
T=$(mktemp -d /tmp/rmt-slurm-test.XXXXXX)
chmod 755 "$T"
PIDS=()
JOBS=()
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [ -f "$T/slurm.conf" ]; then
    for j in "${JOBS[@]}"; do SLURM_CONF="$T/slurm.conf" timeout 10 scancel "$j" >/dev/null 2>&1 || true; done
  fi
  # The daemons this script started, by pid: TERM, then KILL what is still there after 10 s.
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 100); do
    alive=0
    for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "$status" != 0 ]; then
    for f in "$T"/munged.log "$T"/slurmctld.log "$T"/slurmd.log "$T"/runs/tiny/slurm-*.log; do
      [ -f "$f" ] && { log "--- last lines of $f"; tail -n 20 "$f" >&2; }
    done
  fi
  if [ "${KEEP:-0}" = 1 ]; then log "kept $T"; else rm -rf "$T"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
CTLD_PORT=$(free_port)
SLURMD_PORT=$(free_port)
[ "$CTLD_PORT" != "$SLURMD_PORT" ] || SLURMD_PORT=$(free_port)
HOST=$(hostname -s)
CPUS=$(nproc)
MEM_MB=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)  # below what slurmd measures

mkdir -p "$T/munge" "$T/state" "$T/spool"
chmod 700 "$T/munge"
# munged: its own key and socket, so a system munged (if any) is neither needed nor disturbed.
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$T/munge/munge.key"
munged -F --key-file="$T/munge/munge.key" --socket="$T/munge/munge.socket" \
  --pid-file="$T/munge/munged.pid" --seed-file="$T/munge/munged.seed" --log-file="$T/munged.log" \
  --num-threads=2 --force >/dev/null 2>&1 &
PIDS+=($!)

cat > "$T/slurm.conf" <<EOF
ClusterName=rmttest
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/munge.socket
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SchedulerType=sched/backfill
SlurmdParameters=config_overrides
MailProg=/bin/true
ReturnToService=2
MinJobAge=600
KillWait=5
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=rmttest Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$T/slurm.conf"

deadline() { echo $(( $(date +%s) + $1 )); }
until_ok() {  # until_ok SECONDS WHAT COMMAND...: retries COMMAND every 0.5 s
  local secs=$1 what=$2 end; end=$(deadline "$1"); shift 2
  until "$@" >/dev/null; do
    [ "$(date +%s)" -lt "$end" ] || die "$what (waited $secs s)"
    sleep 0.5
  done
}
alive() { kill -0 "$1" 2>/dev/null; }

start=$(date +%s)
until_ok 20 "munged did not start (see $T/munged.log)" test -S "$T/munge/munge.socket"
alive "${PIDS[0]}" || die "munged exited"
slurmctld -D -i -f "$T/slurm.conf" >"$T/slurmctld.out" 2>&1 &
PIDS+=($!)
slurmd -D -f "$T/slurm.conf" -N "$HOST" >"$T/slurmd.out" 2>&1 &
PIDS+=($!)
ctld_up() { alive "${PIDS[1]}" || die "slurmctld exited: $(tail -n 3 "$T/slurmctld.out" "$T/slurmctld.log" 2>/dev/null)"; scontrol ping | grep -q UP; }
until_ok 30 "slurmctld did not answer scontrol ping" ctld_up
node_idle() {
  alive "${PIDS[2]}" || die "slurmd exited: $(tail -n 3 "$T/slurmd.out" "$T/slurmd.log" 2>/dev/null)"
  [ "$(sinfo -h -n "$HOST" -o %T)" = idle ]
}
until_ok 60 "node $HOST did not become idle (sinfo: $(sinfo -h -N -o '%N %T %E' 2>&1))" node_idle
log "cluster up in $(( $(date +%s) - start )) s: $HOST, $CPUS CPUs, ${MEM_MB} MB, ports $CTLD_PORT/$SLURMD_PORT"

# ---- the sweep --------------------------------------------------------------------------------
cd "$T"
WORK=$T
cat > tiny.yaml <<'EOF'
data: {task: copy, length: 6, symbols: 6, train: 256, val: 32, test: 32, seed: 0}
base:
  model: {n_layer: 2, n_head: 2, d_head: 8, d_model: 16, d_inner: 32, dropout: 0.0}
  train: {batch_size: 16, lr: 1.0e-3, schedule: constant, max_steps: 40, eval_every: 20, log_every: 20}
grid:
  model.kind: [baseline, rmt]
  segments: [1, 2]
derive:
  model.num_mem_tokens: segment_length
EOF
CPT=$(( CPUS >= 2 ? 2 : 1 ))  # not the default 1 where possible, so the threads column shows it
EMIT=(--emit slurm --cpus-per-task "$CPT" --time 10 --mem 256M --partition rmttest --account rmttest)

wait_array() {  # wait_array JOBID: until no task of the array is queued or running
  local end; end=$(deadline "$WAIT_S")
  while [ -n "$(squeue -h -j "$1" -o %i 2>/dev/null)" ]; do
    [ "$(date +%s)" -lt "$end" ] || die "array $1 not finished after $WAIT_S s: $(squeue -h -j "$1" -o '%i %T %R')"
    alive "${PIDS[1]}" && alive "${PIDS[2]}" || die "a SLURM daemon died while array $1 ran"
    sleep 1
  done
}
submit() {  # submit: sbatch the emitted script (of $WORK), wait for it; prints nothing
  local out id
  out=$(sbatch --parsable "$WORK/runs/tiny/sweep.slurm") || die "sbatch refused $WORK/runs/tiny/sweep.slurm"
  id=${out%%;*}
  JOBS+=("$id")
  log "submitted array $id"
  wait_array "$id"
}
rows() { tail -n +2 runs/tiny/results.csv | grep -c . || true; }
column() {  # column NAME: that column of results.csv, one line per row (no quoted commas in these)
  awk -F, -v name="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i; next } { print $c }' runs/tiny/results.csv
}

# 1. One run broken from outside: a checkpoint whose saved config differs makes its
#    `rmt train --resume` fail; the array task must record that for --collect.
broken=$("$RMT" sweep tiny.yaml --dry-run | awk 'NR == 3 { print $2 }')
mkdir -p "runs/tiny/$broken"
"$RMT" sweep tiny.yaml --emit commands >/dev/null 2>&1  # writes the config files
sed 's/max_steps: 40/max_steps: 41/' "runs/tiny/configs/$broken.yaml" > "runs/tiny/$broken/config.yaml"
echo "not a checkpoint" > "runs/tiny/$broken/state.safetensors"
# The first array with a throttle and a prologue (each task records that it ran it); GPUs are
# refused for runs on the CPU; the script names no path of this directory (it runs where it is
# submitted from).
printf 'echo "prologue of task $SLURM_ARRAY_TASK_ID" >> prologue_ran.txt\n' > prologue.sh
"$RMT" sweep tiny.yaml "${EMIT[@]}" --gpus 1 >"$T/gpus.out" 2>&1 && die "--gpus for runs on the CPU was accepted"
grep -q "no run to submit is on a GPU" "$T/gpus.out" || die "--gpus for CPU runs: $(cat "$T/gpus.out")"
"$RMT" sweep tiny.yaml "${EMIT[@]}" --array-limit 2 --prologue prologue.sh >&2 || die "rmt sweep --emit slurm failed"
grep -q "^#SBATCH --array=0-3%2$" runs/tiny/sweep.slurm || die "expected a 4-task array, 2 at a time"
! grep -q "$PWD" runs/tiny/sweep.slurm || die "the script names this directory: $(grep "$PWD" runs/tiny/sweep.slurm)"
t1=$(date +%s)
submit
[ "$(grep -c '^prologue of task' prologue_ran.txt)" = 4 ] || die "the prologue ran $(grep -c . prologue_ran.txt) times, not 4"
status=0
"$RMT" sweep tiny.yaml --collect >"$T/collect1.out" 2>&1 || status=$?
[ "$status" = 1 ] || die "--collect with a failed run: expected exit 1, got $status: $(cat "$T/collect1.out")"
grep -q "1 of 4 runs are not done: $broken (failed)" "$T/collect1.out" || die "collect: $(cat "$T/collect1.out")"
[ "$(rows)" = 4 ] || die "results.csv: expected 4 rows, got $(rows)"
[ "$(column status | sort | uniq -c | tr -s ' ' | paste -sd, -)" = " 3 done, 1 failed" ] ||
  die "results.csv statuses: $(column status | paste -sd' ' -)"
grep -q "$broken.*,failed,.*(SLURM task [0-9]*_[0-9], exit status 1; log " runs/tiny/results.csv ||
  die "the failed run's error is not in results.csv: $(grep "$broken" runs/tiny/results.csv)"
[ "$(column threads | grep . | sort -u)" = "$CPT" ] ||
  die "threads: expected $CPT (--cpus-per-task) for every finished run, got $(column threads | paste -sd' ' -)"
log "array 1 (4 tasks, 1 broken) done in $(( $(date +%s) - t1 )) s"

# 2. Repair the run; the next emit holds only it; then every run is in results.csv once.
rm -rf "runs/tiny/$broken"
# The second with --chdir, submitted from another directory (its paths lead from --chdir).
"$RMT" sweep tiny.yaml "${EMIT[@]}" --chdir "$PWD" >&2 || die "second rmt sweep --emit slurm failed"
grep -q "^#SBATCH --array=0-0$" runs/tiny/sweep.slurm || die "the second array should hold only $broken"
grep -q "$broken" runs/tiny/sweep.slurm || die "the second array does not run $broken"
t2=$(date +%s)
here=$PWD
cd / && submit && cd "$here"
"$RMT" sweep tiny.yaml --collect >"$T/collect2.out" 2>&1 || die "collect after the repair: $(cat "$T/collect2.out")"
[ "$(rows)" = 4 ] || die "results.csv: expected 4 rows, got $(rows)"
[ "$(column run_id | sort -u | grep -c .)" = 4 ] || die "results.csv: a run is missing or twice: $(column run_id | paste -sd' ' -)"
[ "$(column status | sort -u)" = done ] || die "results.csv statuses: $(column status | paste -sd' ' -)"
[ "$(column steps | sort -u)" = 40 ] || die "steps: $(column steps | paste -sd' ' -)"
[ "$(column threads | sort -u)" = "$CPT" ] || die "threads: $(column threads | paste -sd' ' -), expected $CPT"
log "array 2 (the repaired run) done in $(( $(date +%s) - t2 )) s"

# 3. A plain sweep finds nothing to run and leaves results.csv as it is; nothing left to submit.
cp runs/tiny/results.csv "$T/results.before"
"$RMT" sweep tiny.yaml 2>"$T/rerun.out" || die "rmt sweep after the arrays: $(cat "$T/rerun.out")"
grep -q "4 done, 0 to run" "$T/rerun.out" || die "rmt sweep after the arrays: $(cat "$T/rerun.out")"
cmp -s runs/tiny/results.csv "$T/results.before" || die "results.csv changed on a sweep with nothing to run"
"$RMT" sweep tiny.yaml "${EMIT[@]}" | grep -q "all 4 runs are done; nothing to submit" || die "a third emit found runs to submit"

log "PASSED in $(( $(date +%s) - start )) s (cluster start to end)"
