#!/usr/bin/env bash
# A real single-node Slurm cluster on this machine (munged, slurmctld and slurmd on localhost,
# with a private configuration, ports, key and state in a temporary directory), and three ways
# of training under it, each compared with the built-in launcher (--nproc-per-node 2) on the
# same tiny config:
#   1. srun --ntasks=2 nmt-train ...                   (every task a rank)
#   2. sbatch --ntasks=2 with a script that runs srun  (the usual batch job)
#   3. sbatch --ntasks=1 with a script that runs nmt-train itself: SLURM_PROCID=0 and
#      SLURM_NTASKS are set for the script too, yet it is no rank; nmt-train must start its
#      built-in launcher with 2 workers.
# The final parameters must be identical: the parameter hashes of every rank in summary.json
# and the checkpoint (nmt-ckpt diff --atol 0).
#
#   tests/e2e/test_slurm.sh [STEPS]        (default 10)
#
# Needs root and Debian's slurm-wlm and munge; elsewhere it prints "SKIPPED: <reason>" and
# exits 0 (CTest reports it as skipped). Where it can, it runs in a PID namespace of its own,
# so no daemon or job step outlives it even when it is killed; the EXIT trap stops them too.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
steps=${1:-10}
say() { echo "test_slurm.sh: $*"; }
skip() { echo "SKIPPED: test_slurm.sh: $*"; exit 0; }
failure=""
fail() { failure="$*"; exit 1; }
trap '[[ -n $failure ]] || failure="line $LINENO failed: $BASH_COMMAND"' ERR

[[ $(id -u) == 0 ]] || skip "needs root (slurmd and munged run as root here)"
for tool in munged slurmctld slurmd srun sbatch sinfo scancel python3; do
  command -v "$tool" > /dev/null || skip "$tool not found (apt-get install slurm-wlm munge)"
done
train=$(realpath "${NMT_TRAIN:-build/nmt-train}")
ckpt=$(realpath "${NMT_CKPT:-build/nmt-ckpt}")
[[ -x $train && -x $ckpt ]] || fail "$train or $ckpt not built"

# A PID namespace: when this script ends (or unshare is killed: --kill-child), the kernel kills
# every process left in it, slurmstepd and job tasks included.
pidns=(unshare --pid --fork --mount-proc --kill-child)
if [[ -z ${NMT_SLURM_PIDNS:-} ]] && "${pidns[@]}" true 2> /dev/null; then
  NMT_SLURM_PIDNS=1 exec "${pidns[@]}" -- "$BASH" "$0" "$@"
fi

work=$(mktemp -d)
chmod 755 "$work"  # munged wants every directory above its socket searchable by all
pids=()
cleanup() {
  local code=$?
  if [[ -n ${SLURM_CONF:-} ]]; then
    scancel --quiet --user=root 2> /dev/null || true
  fi
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2> /dev/null && alive=1; done
    (( alive )) || break
    sleep 0.5
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2> /dev/null || true; done
  if (( code != 0 )); then
    for log in "$work"/*.log "$work"/*.out; do
      [[ -f $log ]] && { echo "--- $log"; tail -n 8 "$log"; }
    done >&2
    say "FAILED: ${failure:-exit code $code}" >&2
  fi
  rm -rf "$work"
}
trap cleanup EXIT

free_ports() {  # N free TCP ports on localhost
  python3 -c 'import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}
read -r ctld_port slurmd_port master_port1 master_port2 < <(free_ports 4)
host=$(hostname -s)

# munged with a key of its own, on a socket of its own.
head -c 1024 /dev/urandom > "$work/munge.key"
chmod 400 "$work/munge.key"
munged -F --key-file="$work/munge.key" --socket="$work/munge.sock" --pid-file="$work/munged.pid" \
  --seed-file="$work/munged.seed" --log-file="$work/munged.log" > /dev/null 2>&1 &
pids+=($!)

mkdir -p "$work/state" "$work/spool"
: > "$work/plugstack.conf"  # no SPANK plugins of the system's
cat > "$work/slurm.conf" <<EOF
ClusterName=nmttest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge.sock
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
PlugStackConfig=$work/plugstack.conf
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# 2 CPUs whatever the hardware has: each rank gets one.
SlurmdParameters=config_overrides
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=nmt Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$work/slurm.conf  # srun, sbatch, sinfo and scancel read this one

for _ in $(seq 50); do [[ -S $work/munge.sock ]] && break; sleep 0.1; done
slurmctld -D -f "$SLURM_CONF" > "$work/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$host" > "$work/slurmd.out" 2>&1 &
pids+=($!)
state=""
for _ in $(seq 60); do
  state=$(sinfo -h -N -o %T 2> /dev/null || true)
  [[ $state == idle ]] && break
  sleep 0.5
done
[[ $state == idle ]] || fail "the node did not become idle (state '$state')"
say "$(sinfo -V), node $host idle"

# One vocabulary for all runs (SentencePiece training is the slow part), then the same flags.
# The vocabulary from the first 18,000 training pairs, as in the C++ tests: SentencePiece takes
# 2-3x as long on all 41,931.
for side in en de; do head -n 18000 <(gzip -dc data/ddtp.en-de.train.$side.gz) > "$work/slice.$side"; done
"$train" --config configs/tiny.yaml --dry-run --log-level warn --set data.vocab_size=1000 \
  --set data.train_src="$work/slice.en" --set data.train_tgt="$work/slice.de" \
  --set run_dir="$work/vocab" > "$work/vocab.log" 2>&1
args=(--config configs/tiny.yaml --set data.spm_model="$work/vocab/vocab/joint.model"
      --set model.dropout=0 --set train.threads=1 --set data.max_tokens=1024
      --set train.valid_every=0 --set train.log_every=5 --set checkpoint.every_steps="$steps"
      --set train.max_steps="$steps" --set dist.timeout_s=60)
quoted=$(printf '%q ' "$train" "${args[@]}")

# The reference: the built-in launcher, 2 workers.
timeout 300 "$train" "${args[@]}" --nproc-per-node 2 --set run_dir="$work/builtin" \
  > "$work/builtin.log" 2>&1

# 1. srun from here: it makes the allocation and starts both ranks.
MASTER_PORT=$master_port1 timeout 300 srun --ntasks=2 --cpus-per-task=1 --chdir="$repo" \
  "$train" "${args[@]}" --set run_dir="$work/srun" > "$work/srun.log" 2>&1

# 2. A batch script that calls srun.
cat > "$work/srun-job.sh" <<EOF
#!/bin/bash
#SBATCH --ntasks=2
#SBATCH --cpus-per-task=1
export MASTER_PORT=$master_port2
srun $quoted --set run_dir=$work/sbatch
EOF
timeout 300 sbatch --wait --quiet --chdir="$repo" --output="$work/sbatch.log" "$work/srun-job.sh"

# 3. A batch script that runs nmt-train itself: the built-in launcher must start 2 workers.
cat > "$work/direct-job.sh" <<EOF
#!/bin/bash
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=2
echo "batch script: SLURM_PROCID=\${SLURM_PROCID-unset} SLURM_NTASKS=\${SLURM_NTASKS-unset}" \
     "SLURM_STEP_ID=\${SLURM_STEP_ID-unset}"
$quoted --nproc-per-node 2 --set run_dir=$work/direct
EOF
timeout 300 sbatch --wait --quiet --chdir="$repo" --output="$work/direct.log" "$work/direct-job.sh"

# The evidence: who started the ranks, then the parameters.
expect() {  # FILE PATTERN WHAT
  grep -q -- "$2" "$1" 2> /dev/null || fail "$3: '$2' not found in $1"
}
expect "$work/srun/logs/rank1.log" "started by slurm as rank 1 of 2" "srun"
expect "$work/sbatch/logs/rank1.log" "started by slurm as rank 1 of 2" "sbatch + srun"
head -n 1 "$work/direct.log"
expect "$work/direct/logs/launcher-node0.log" "2 CPU worker(s)" "sbatch, no srun"
expect "$work/direct/logs/rank1.log" "started by nmt-train as rank 1 of 2" "sbatch, no srun"

hashes() {  # the parameter hash of every rank, from the run's summary.json
  python3 -c 'import json, sys; print(" ".join(json.load(open(sys.argv[1]))["parameter_hashes"]))' \
    "$1/summary.json"
}
reference=$(hashes "$work/builtin")
[[ $reference =~ ^[0-9a-f]{16}\ [0-9a-f]{16}$ ]] ||
  fail "built-in launcher: parameter hashes '$reference'"
name=$(printf 'checkpoint-%08d.safetensors' "$steps")
for run in srun sbatch direct; do
  got=$(hashes "$work/$run")
  [[ $got == "$reference" ]] || fail "$run: parameter hashes $got, built-in launcher $reference"
  "$ckpt" diff --atol 0 "$work/builtin/checkpoints/$name" "$work/$run/checkpoints/$name" \
    > "$work/diff-$run.out" 2>&1 || fail "$run: checkpoint differs from the built-in launcher's"
done
say "srun, sbatch + srun and sbatch without srun (built-in launcher) give the built-in" \
  "launcher's parameters after $steps steps (hashes $reference; nmt-ckpt diff --atol 0)"
