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
# "base big" on a GPU); OUT (default: a temp folder) keeps the JSON reports.
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
mkdir -p "$out"
[[ -x $train ]] || { echo "compare.sh: $train not built (run scripts/test.sh or cmake --build build)" >&2; exit 1; }
"$python" -c "import torch, safetensors" 2>/dev/null || { echo "compare.sh: $python lacks torch/safetensors (run scripts/setup.sh)" >&2; exit 1; }
# Both sides run under the same environment: OMP_WAIT_POLICY, if set, reaches both (PASSIVE
# keeps idle OpenMP workers from spinning, which helps where other pools compete for the cores).

if [[ $device == cuda ]]; then
  configs=${CONFIGS:-"base big"}
  amp_modes="bf16 fp16"
else
  configs=${CONFIGS:-"tiny base"}
  amp_modes="config"
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
if [[ ! -f $vocab_dir/vocab/joint.model ]]; then
  $train --config configs/tiny.yaml --dry-run --log-level warn --set data.vocab_size=8000 \
    --set run_dir="$vocab_dir" > "$out/vocab.log" 2>&1 || { cat "$out/vocab.log" >&2; exit 1; }
fi
common=(--set data.spm_model="$vocab_dir/vocab/joint.model" --log-level warn)
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

rows=()
for config in $configs; do
  n=$steps
  [[ $config != tiny ]] && n=$(( steps / 2 > 2 ? steps / 2 : 2 ))
  extra=()
  [[ $config == base && $device == cpu ]] && extra=(--set data.max_tokens=4096)
  for amp in $amp_modes; do
    key="$config-$amp"
    dump="$out/$key.dump.safetensors"
    echo "[compare] $key: dumping the batches and initial parameters" >&2
    ours "$key-dump" "$config" "$amp" "$n" "${extra[@]}" --dump-batches "$dump"
    for rep in $(seq 1 "$reps"); do
      echo "[compare] $key: repetition $rep of $reps" >&2
      # Alternate who goes first, so warming of the machine favours neither.
      if (( rep % 2 )); then
        ours "$key-ours-$rep" "$config" "$amp" "$n" "${extra[@]}"
        reference "$key-ref-$rep" "$dump"
      else
        reference "$key-ref-$rep" "$dump"
        ours "$key-ours-$rep" "$config" "$amp" "$n" "${extra[@]}"
      fi
    done
    rows+=("$key")
  done
done

# 2 ranks against 1 on the base config (CPU): equal per-rank batch and threads per rank.
scaling=""
if [[ $device == cpu && " $configs " == *" base "* ]] && (( threads >= 2 )); then
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
out, reps, scaling, rows = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
def load(name):
    with open(os.path.join(out, name, "benchmark.json")) as f:
        return json.load(f)
def median(key, runs, sub=None):
    return statistics.median(r[key][sub] if sub else r[key] for r in runs)
def percent(key, runs):
    # MFU is null where the hardware's peak is unknown (e.g. a CPU without cpufreq).
    values = [r[key] for r in runs if r.get(key) is not None]
    return f"{100 * statistics.median(values):.1f}%" if values else "?"
first = load(f"{rows[0]}-ours-1")
print(f"device {first['device']}, {first['threads_per_rank']} thread(s), "
      f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}, medians of {reps} repetition(s)\n")
print(f"MFU: model FLOPs on real tokens against the hardware's peak ({first['hardware_peak_source']});"
      f" ceiling: the same against the matmul peak measured here ({first['peak_method']})\n")
print(f"{'config':<12}{'ours tok/s':>11}{'ref tok/s':>11}{'ratio':>7}{'ours step s':>13}"
      f"{'ref step s':>12}{'ours MFU':>10}{'ref MFU':>9}{'ours ceil':>11}{'ref ceil':>10}")
for row in rows:
    ours = [load(f"{row}-ours-{i}") for i in range(1, reps + 1)]
    ref = [load(f"{row}-ref-{i}") for i in range(1, reps + 1)]
    o, r = median("tokens_per_s", ours), median("tokens_per_s", ref)
    print(f"{row:<12}{o:>11.0f}{r:>11.0f}{o / r:>6.2f}x{median('step_time_s', ours, 'median'):>13.3f}"
          f"{median('step_time_s', ref, 'median'):>12.3f}{percent('mfu', ours):>10}"
          f"{percent('mfu', ref):>9}{percent('matmul_ceiling_fraction', ours):>11}"
          f"{percent('matmul_ceiling_fraction', ref):>10}")
print("\nsplit per step (s)   data    fwd     bwd     sync    optim")
for row in rows:
    for side in ("ours", "ref"):
        runs = [load(f"{row}-{side}-{i}") for i in range(1, reps + 1)]
        split = " ".join(f"{median('time_split_s', runs, k):7.4f}"
                         for k in ("data_wait", "forward", "backward", "grad_sync", "optimizer"))
        print(f"{row + ' ' + side:<20}{split}")
if scaling:
    one = [load(f"scale-1rank-{i}") for i in range(1, reps + 1)]
    two = [load(f"scale-2ranks-{i}") for i in range(1, reps + 1)]
    s1, s2 = median("step_time_s", one, "median"), median("step_time_s", two, "median")
    print(f"\nbase, equal per-rank batch, {one[0]['threads_per_rank']} thread(s) per rank: "
          f"1 rank {s1:.3f} s/step, 2 ranks {s2:.3f} s/step: {s2 / s1:.2f}x "
          f"(grad sync {median('time_split_s', two, 'grad_sync'):.3f} s/step)")
PY
echo "[compare] reports in $out" >&2
