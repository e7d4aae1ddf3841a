#!/usr/bin/env bash
# Kill-and-resume trials: a crash must cost at most the steps since the last checkpoint, and
# nothing else. Each trial trains the tiny config with 2 CPU ranks, kills one rank with
# SIGKILL at a random moment (odd trials: a random rank at a random time; even trials: rank 0,
# the checkpoint writer, while a checkpoint is being written), reruns the same command with
# --resume auto until it finishes, and compares the final parameters with an uninterrupted
# run bit for bit (nmt-ckpt diff --atol 0).
#
#   scripts/fault/kill-resume.sh [TRIALS] [STEPS]     (defaults 20 and 24)
#
# Exit code 0 when at least one trial killed a worker and every such trial matched; a trial
# whose run finished before its kill is reported and not counted. SEED (default: the time)
# makes the kill times repeatable.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
trials=${1:-20}
steps=${2:-24}
train=${NMT_TRAIN:-build/nmt-train}
ckpt=${NMT_CKPT:-build/nmt-ckpt}
# The venv scripts/setup.sh makes, named by the torch version that scripts/requirements.txt pins.
torch_version=$(sed -n 's/^torch==//p' "$repo/scripts/requirements.txt")
python=${NMT_PYTHON:-${NMT_CACHE:-$HOME/.cache/nmt-train}/torch-$torch_version/venv/bin/python}
[[ -x $train && -x $ckpt ]] || { echo "kill-resume.sh: build first (scripts/test.sh)" >&2; exit 1; }
command -v "$python" > /dev/null || python=python3
seed=${SEED:-$(date +%s)}
RANDOM=$seed
work=$(mktemp -d)
trap 'pkill -KILL -f "run_dir=$work/" 2> /dev/null || true; rm -rf "$work"' EXIT
# Private copies of the binaries: a rebuild during the trials must not change the numbers.
cp "$train" "$work/nmt-train" && cp "$ckpt" "$work/nmt-ckpt"
train=$work/nmt-train ckpt=$work/nmt-ckpt

# The vocabulary from the first 18,000 training pairs, as in the C++ tests: SentencePiece takes
# 2-3x as long on all 41,931.
for side in en de; do head -n 18000 <(gzip -dc data/ddtp.en-de.train.$side.gz) > "$work/slice.$side"; done
$train --config configs/tiny.yaml --dry-run --log-level warn --set data.vocab_size=1000 \
  --set data.train_src="$work/slice.en" --set data.train_tgt="$work/slice.de" \
  --set run_dir="$work/vocab" > "$work/vocab.log" 2>&1 || { cat "$work/vocab.log" >&2; exit 1; }
# Checkpoints every 2 steps, so that kills often land in or near a write.
run_args() {  # run_dir
  echo --config configs/tiny.yaml --nproc-per-node 2 --set run_dir="$1" \
    --set data.spm_model="$work/vocab/vocab/joint.model" --set data.max_tokens=1024 \
    --set train.max_steps="$steps" --set train.log_every=4 --set train.valid_every=0 \
    --set train.threads=1 --set checkpoint.every_steps=2 --set checkpoint.keep_last=2 \
    --resume auto
}
final_checkpoint() { printf '%s/checkpoints/checkpoint-%08d.safetensors' "$1" "$steps"; }

start=$(date +%s.%N)
# shellcheck disable=SC2046
$train $(run_args "$work/reference") > "$work/reference.log" 2>&1 ||
  { cat "$work/reference.log" >&2; exit 1; }
duration=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
echo "[kill-resume] uninterrupted run: $steps steps in $duration s; seed $seed"
# A fraction (percent) of the uninterrupted run's duration, in seconds.
fraction() { awk -v d="$duration" -v p="$1" 'BEGIN { printf "%.2f", d * p / 100 }'; }

# Waits until a checkpoint temp file exists in $1, then SIGKILLs pid $2 at once (Python
# polls the folder in a tight loop: a tiny checkpoint takes tens of milliseconds to write).
kill_during_write() {
  "$python" - "$1" "$2" <<'PY'
import os, signal, sys, time
folder, pid = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    try:
        if any(".tmp-" in name for name in os.listdir(folder)):
            os.kill(pid, signal.SIGKILL)
            print("killed during a checkpoint write")
            sys.exit(0)
    except FileNotFoundError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        print("the run ended before a write was caught")
        sys.exit(0)
PY
}

passed=0   # trials with a kill whose final parameters matched
killed=0   # trials in which a worker was killed: the only ones that test anything
for trial in $(seq 1 "$trials"); do
  dir="$work/trial-$trial"
  log="$dir.log"
  # shellcheck disable=SC2046
  $train $(run_args "$dir") > "$log" 2>&1 &
  launcher=$!
  # Wait for both workers to run nmt-train (a child found just after fork has not yet exec'd
  # it with its RANK), and note which one is rank 0, the checkpoint writer.
  workers=()
  rank0=""
  for _ in $(seq 1 400); do
    mapfile -t workers < <(pgrep -P "$launcher" || true)
    rank0=""
    ranked=0
    for pid in "${workers[@]}"; do
      env_of=$(tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null || true)
      grep -q '^RANK=' <<< "$env_of" && ranked=$((ranked + 1))
      grep -qx 'RANK=0' <<< "$env_of" && rank0=$pid
    done
    (( ranked == 2 )) && [[ -n $rank0 ]] && break
    sleep 0.05
  done
  if (( trial % 2 )); then
    victim=${workers[RANDOM % 2]}
    # A random moment between startup and the end of an uninterrupted run.
    delay=$(fraction $((20 + RANDOM % 75)))
    sleep "$delay"
    kill -KILL "$victim" 2> /dev/null && how="killed a rank after ${delay} s" ||
      how="the run ended before the kill"
  else
    # Skip a random number of writes first, so kills spread over the run.
    sleep "$(fraction $((RANDOM % 60)))"
    if [[ -n $rank0 ]]; then
      how=$(kill_during_write "$dir/checkpoints" "$rank0" || echo "the write watcher failed")
    else
      how="rank 0 was not found"
    fi
  fi
  kill_landed=0
  [[ $how == killed* ]] && kill_landed=1 && killed=$((killed + 1))
  first_exit=0
  wait "$launcher" || first_exit=$?
  reruns=0
  until [[ -f $(final_checkpoint "$dir") ]]; do
    (( reruns < 3 )) || { echo "[kill-resume] trial $trial: no final checkpoint after $reruns reruns" >&2; break; }
    reruns=$((reruns + 1))
    # shellcheck disable=SC2046
    $train $(run_args "$dir") >> "$log" 2>&1 || true
  done
  # Where the run that finished resumed from: its summary.json, not its log lines.
  resumed=$("$python" -c 'import json, sys
r = json.load(open(sys.argv[1])).get("resumed_from")
print(r["step"] if r else "")' "$dir/summary.json" 2> /dev/null || true)
  if [[ -f $(final_checkpoint "$dir") ]] &&
     $ckpt diff --atol 0 "$(final_checkpoint "$work/reference")" "$(final_checkpoint "$dir")" > "$dir.diff" 2>&1; then
    passed=$((passed + kill_landed))
    verdict=identical
    (( kill_landed )) || verdict="identical (not counted: nothing was killed)"
  else
    verdict="DIFFERENT (log: $log)"
    cp "$log" "/tmp/kill-resume-trial-$trial.log" 2> /dev/null || true
  fi
  echo "[kill-resume] trial $trial: $how; first run exit $first_exit; resumed at step ${resumed:-0 (fresh)}; final parameters $verdict"
done
# A trial whose run finished before its kill tests nothing: it is reported, never counted.
echo "[kill-resume] $killed of $trials trials killed a worker; $passed of those $killed ended with" \
  "parameters identical to the uninterrupted run; $((trials - killed)) finished before the kill" \
  "(not counted)"
(( killed > 0 && passed == killed ))
