#!/usr/bin/env bash
# nmt-train against the plain PyTorch reference loop (scripts/bench/reference_train.py), side by
# side in one run: the same model, initial parameters, batches, loss, optimizer, AMP mode and
# thread settings, interleaved over several repetitions so that load on the machine hits both
# alike. Prints a table of medians and the ratio ours / reference, then the 2-rank scaling of
# the base config (equal per-rank batch).
#
#   scripts/bench/compare.sh [REPS] [STEPS]     (defaults 3 and 10; base and big run STEPS/2)
#
# Environment: DEVICE=cuda runs both on the GPU (bf16 and fp16 for base and big there);
# THREADS (default: all cores) intra-op threads on CPU; CONFIGS (default "tiny base" on CPU,
# "base big" on a GPU); MAX_TOKENS (default: 4096 for base on CPU, the config's on CPU
# otherwise, 32768 on a GPU, which a 141 GB H200 holds for big with room to spare: the
# config's 4096 would leave a large GPU idle); OUT (default: a temp folder) keeps the JSON
# reports; DEADLINE (unix seconds): no run starts after it, and the table shows what finished
# (the GPU check sets it from its time budget); SPM_MODEL (a SentencePiece model) is used
# instead of training one; TRAIN_ARGS (words) are added to every nmt-train run (the GPU check's
# CPU rehearsal trains on a small corpus); AMP_MODES (default: "config" on CPU, each config's own
# mode; "bf16 fp16" on a GPU) the amp.mode values to run each config in, e.g. "off bf16";
# SCALING=0 skips the 2-rank scaling runs; NMT_TRAIN (default build/nmt-train) the binary, e.g.
# another build's for a before/after pair of runs.
#
# The headline tokens/s of both sides comes from a pass without device syncs inside it, as
# training runs; the step split comes from a separate pass that syncs at every phase boundary
# (on a GPU; on a CPU the work is synchronous and one pass gives both). The table shows both.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
reps=${1:-3}
steps=${2:-10}
device=${DEVICE:-cpu}
threads=${THREADS:-$(nproc)}
train=${NMT_TRAIN:-build/nmt-train}
# The venv scripts/setup.sh makes, named by the torch version that scripts/requirements.txt pins.
torch_version=$(sed -n 's/^torch==//p' "$repo/scripts/requirements.txt")
python=${NMT_PYTHON:-${NMT_CACHE:-$HOME/.cache/nmt-train}/torch-$torch_version/venv/bin/python}
out=${OUT:-$(mktemp -d)}
deadline=${DEADLINE:-0}
mkdir -p "$out"
[[ -x $train ]] || { echo "compare.sh: $train not built (run scripts/test.sh or cmake --build build)" >&2; exit 1; }
"$python" -c "import torch, safetensors" 2>/dev/null || { echo "compare.sh: $python lacks torch/safetensors (run scripts/setup.sh)" >&2; exit 1; }
# Both sides run under the same environment: OMP_WAIT_POLICY, if set, reaches both (PASSIVE
# keeps idle OpenMP workers from spinning, which helps where other pools compete for the cores).

if [[ $device == cuda ]]; then
  configs=${CONFIGS:-"base big"}
  amp_modes=${AMP_MODES:-"bf16 fp16"}
else
  configs=${CONFIGS:-"tiny base"}
  amp_modes=${AMP_MODES:-config}
fi

config_file() {
  case $1 in
    tiny) echo configs/tiny.yaml ;;
    base) echo configs/transformer-base.yaml ;;
    big) echo configs/transformer-big.yaml ;;
    *) echo "compare.sh: unknown config '$1' (tiny, base, big)" >&2; exit 1 ;;
  esac
}

# One vocabulary for every run, trained once: runs time training only.
vocab_dir="$out/vocab"
read -r -a train_args <<< "${TRAIN_ARGS:-}"
if [[ -n ${SPM_MODEL:-} ]]; then
  mkdir -p "$vocab_dir/vocab" && cp "$SPM_MODEL" "$vocab_dir/vocab/joint.model"
elif [[ ! -f $vocab_dir/vocab/joint.model ]]; then
  $train --config configs/tiny.yaml --dry-run --log-level warn --set data.vocab_size=8000 \
    --set run_dir="$vocab_dir" > "$out/vocab.log" 2>&1 || { cat "$out/vocab.log" >&2; exit 1; }
fi
common=(--set data.spm_model="$vocab_dir/vocab/joint.model" --log-level warn "${train_args[@]}")
[[ $device == cpu ]] && common+=(--set train.threads="$threads")

ours() {  # name config amp steps extra...
  local name=$1 config=$2 amp=$3 n=$4; shift 4
  local amp_set=()
  [[ $amp != config ]] && amp_set=(--set amp.mode="$amp")
  $train --config "$(config_file "$config")" --set run_dir="$out/$name" "${common[@]}" \
    "${amp_set[@]}" --benchmark "$n" --benchmark-warmup 2 "$@" > "$out/$name.log" 2>&1 ||
    { cat "$out/$name.log" >&2; exit 1; }
}

reference() {  # name dump
  mkdir -p "$out/$1"
  "$python" scripts/bench/reference_train.py "$2" --out "$out/$1/benchmark.json" \
    --device "$device" ${THREADS:+--threads "$threads"} > "$out/$1.log" 2>&1 ||
    { cat "$out/$1.log" >&2; exit 1; }
}

# Past the deadline: say so once and start nothing more.
out_of_time() {
  (( deadline > 0 && $(date +%s) >= deadline )) || return 1
  [[ -n ${said_out_of_time:-} ]] || echo "[compare] the deadline has passed: no more runs" >&2
  said_out_of_time=1
}

rows=()
for config in $configs; do
  n=$steps
  [[ $config != tiny ]] && n=$(( steps / 2 > 2 ? steps / 2 : 2 ))
  extra=()
  if [[ -n ${MAX_TOKENS:-} ]]; then
    extra=(--set data.max_tokens="$MAX_TOKENS")
  elif [[ $device == cuda ]]; then
    extra=(--set data.max_tokens=32768)
  elif [[ $config == base ]]; then
    extra=(--set data.max_tokens=4096)
  fi
  for amp in $amp_modes; do
    key="$config-$amp"
    dump="$out/$key.dump.safetensors"
    out_of_time && break 2
    echo "[compare] $key: dumping the batches and initial parameters" >&2
    ours "$key-dump" "$config" "$amp" "$n" "${extra[@]}" --dump-batches "$dump"
    done_reps=0
    for rep in $(seq 1 "$reps"); do
      out_of_time && break
      echo "[compare] $key: repetition $rep of $reps" >&2
      # Alternate who goes first, so warming of the machine favours neither.
      if (( rep % 2 )); then
        ours "$key-ours-$rep" "$config" "$amp" "$n" "${extra[@]}"
        reference "$key-ref-$rep" "$dump"
      else
        reference "$key-ref-$rep" "$dump"
        ours "$key-ours-$rep" "$config" "$amp" "$n" "${extra[@]}"
      fi
      done_reps=$rep
    done
    (( done_reps > 0 )) && rows+=("$key:$done_reps")
  done
done
(( ${#rows[@]} )) || { echo "compare.sh: no configuration finished a repetition" >&2; exit 1; }

# 2 ranks against 1 on the base config (CPU): equal per-rank batch and threads per rank.
scaling=""
if [[ $device == cpu && " $configs " == *" base "* && ${SCALING:-1} != 0 ]] && (( threads >= 2 )) &&
   ! out_of_time; then
  per_rank=$(( threads / 2 ))
  for rep in $(seq 1 "$reps"); do
    echo "[compare] base: 1 rank vs 2 ranks, repetition $rep of $reps" >&2
    ours "scale-1rank-$rep" base config "$(( steps / 2 > 2 ? steps / 2 : 2 ))" \
      --set data.max_tokens=4096 --set train.threads="$per_rank" --nproc-per-node 1
    ours "scale-2ranks-$rep" base config "$(( steps / 2 > 2 ? steps / 2 : 2 ))" \
      --set data.max_tokens=4096 --set train.threads="$per_rank" --nproc-per-node 2
  done
  scaling=yes
fi

"$python" - "$out" "$reps" "$scaling" "${rows[@]}" <<'PY'
import json, os, statistics, sys
out, reps, scaling = sys.argv[1], int(sys.argv[2]), sys.argv[3]
# "key:repetitions done" (fewer than asked where the deadline came first).
rows = [(row.split(":")[0], int(row.split(":")[1])) for row in sys.argv[4:]]
def load(name):
    with open(os.path.join(out, name, "benchmark.json")) as f:
        return json.load(f)
def median(key, runs, sub=None):
    return statistics.median(r[key][sub] if sub else r[key] for r in runs)
def percent(key, runs):
    # MFU is null where the hardware's peak is unknown (e.g. a CPU without cpufreq).
    values = [r[key] for r in runs if r.get(key) is not None]
    return f"{100 * statistics.median(values):.1f}%" if values else "?"
first = load(f"{rows[0][0]}-ours-1")
print(f"device {first['device']}, {first['threads_per_rank']} thread(s), "
      f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}, medians of "
      f"{', '.join(str(done) for _, done in rows)} repetition(s) of {reps}\n")
print(f"MFU: model FLOPs on real tokens against the hardware's peak ({first['hardware_peak_source']});"
      f" ceiling: the same against the matmul peak measured here ({first['peak_method']})\n")
print(f"{'config':<12}{'ours tok/s':>11}{'ref tok/s':>11}{'ratio':>7}{'ours step s':>13}"
      f"{'ref step s':>12}{'ours MFU':>10}{'ref MFU':>9}{'ours ceil':>11}{'ref ceil':>10}")
def runs(row, side, done):
    return [load(f"{row}-{side}-{i}") for i in range(1, done + 1)]
for row, done in rows:
    ours, ref = runs(row, "ours", done), runs(row, "ref", done)
    o, r = median("tokens_per_s", ours), median("tokens_per_s", ref)
    print(f"{row:<12}{o:>11.0f}{r:>11.0f}{o / r:>6.2f}x{median('step_time_s', ours, 'median'):>13.3f}"
          f"{median('step_time_s', ref, 'median'):>12.3f}{percent('mfu', ours):>10}"
          f"{percent('mfu', ref):>9}{percent('matmul_ceiling_fraction', ours):>11}"
          f"{percent('matmul_ceiling_fraction', ref):>10}")
timing = first.get("phase_timing", {})
how = ("a separate pass with a device sync at every phase boundary"
       if timing.get("pass") == "separate" else "the same pass (CPU work is synchronous)"
       if timing.get("device_synced", True) else "the same pass, host time only (no device sync)")
print(f"\nsplit per step (s) from {how}; tok/s: that pass's throughput")
print(f"{'':<20}   data    fwd     bwd     sync    optim   tok/s")
for row, done in rows:
    for side in ("ours", "ref"):
        reports = runs(row, side, done)
        split = " ".join(f"{median('time_split_s', reports, k):7.4f}"
                         for k in ("data_wait", "forward", "backward", "grad_sync", "optimizer"))
        synced = [r["phase_timing"]["tokens_per_s"] for r in reports if "phase_timing" in r]
        print(f"{row + ' ' + side:<20}{split}{statistics.median(synced) if synced else float('nan'):8.0f}")
if scaling and all(os.path.exists(os.path.join(out, f"scale-2ranks-{i}", "benchmark.json"))
                   for i in range(1, reps + 1)):
    one = [load(f"scale-1rank-{i}") for i in range(1, reps + 1)]
    two = [load(f"scale-2ranks-{i}") for i in range(1, reps + 1)]
    s1, s2 = median("step_time_s", one, "median"), median("step_time_s", two, "median")
    print(f"\nbase, equal per-rank batch, {one[0]['threads_per_rank']} thread(s) per rank: "
          f"1 rank {s1:.3f} s/step, 2 ranks {s2:.3f} s/step: {s2 / s1:.2f}x "
          f"(grad sync {median('time_split_s', two, 'grad_sync'):.3f} s/step)")
PY
echo "[compare] reports in $out" >&2
