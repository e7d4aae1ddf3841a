#!/usr/bin/env bash
# The training loop against the --benchmark loop on the same batches, side by side in one go:
# one rank trains STEPS + 5 updates (log_every 1, then 50: every update's metrics record, or
# few), and `--benchmark STEPS` times the same batches after its 5 warm-up updates. Repeated
# REPS times, interleaved, so that the machine's load falls on all three alike. Figures come
# from the JSON the binary writes (summary.json: train_s, final_step, tokens_per_s;
# benchmark.json: seconds, steps, tokens_per_s); no validation, no checkpoint. The training
# figures cover all STEPS + 5 updates, its first ones too, where --benchmark times only those
# after its 5 warm-up updates: a bias against the training loop, if any. A benchmark, not a
# test.
#
#   scripts/bench/loop-vs-benchmark.sh [STEPS]     (default 100)
#
# Environment (all optional): CONFIG (configs/demo.yaml), REPS (2), THREADS (2: intra-op
# threads of the one rank), NMT_TRAIN (build/nmt-train), OUT (a temporary folder).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
steps=${1:-100}
config=${CONFIG:-configs/demo.yaml}
reps=${REPS:-2}
train=${NMT_TRAIN:-build/nmt-train}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
common=(--config "$config" --log-level warn --set dist.nproc_per_node=1
        --set train.threads="${THREADS:-2}" --set train.valid_every=0
        --set checkpoint.every_steps=100000000 --set train.max_minutes=0)
# One vocabulary for every run.
"$train" "${common[@]}" --dry-run --set run_dir="$out/vocab" > /dev/null
common+=(--set data.spm_model="$out/vocab/vocab/joint.model")
for rep in $(seq 1 "$reps"); do
  for every in 1 50; do
    rm -rf "$out/train-$every-$rep"
    "$train" "${common[@]}" --set run_dir="$out/train-$every-$rep" \
      --set train.max_steps=$((steps + 5)) --set train.log_every=$every > "$out/train-$every-$rep.log" 2>&1
  done
  rm -rf "$out/bench-$rep"
  "$train" "${common[@]}" --set run_dir="$out/bench-$rep" --benchmark "$steps" \
    --benchmark-warmup 5 > "$out/bench-$rep.log" 2>&1
done
python3 - "$out" "$reps" "$config" <<'PY'
import json, os, statistics, sys
out, reps, config = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = {"train, log_every 1": [], "train, log_every 50": [], "--benchmark": []}
for rep in range(1, reps + 1):
    for every in (1, 50):
        s = json.load(open(os.path.join(out, f"train-{every}-{rep}", "summary.json")))
        rows[f"train, log_every {every}"].append((s["train_s"] / s["final_step"], s["tokens_per_s"]))
    b = json.load(open(os.path.join(out, f"bench-{rep}", "benchmark.json")))
    rows["--benchmark"].append((b["seconds"] / b["steps"], b["tokens_per_s"]))
print(f"{config}, 1 rank, {reps} interleaved repetitions (train: every update; benchmark: after 5 warm-up)")
print(f"{'loop':22} {'ms/update (each)':>26} {'tokens/s (median)':>18}")
for name, values in rows.items():
    each = ", ".join(f"{1000 * t:.1f}" for t, _ in values)
    print(f"{name:22} {each:>26} {statistics.median(v for _, v in values):>18.0f}")
bench = statistics.median(v for _, v in rows["--benchmark"])
for name in ("train, log_every 1", "train, log_every 50"):
    print(f"{name} / --benchmark (tokens/s): {statistics.median(v for _, v in rows[name]) / bench:.2f}x")
PY
