#!/usr/bin/env bash
# Peak memory per rank of the options for big models (docs/memory.md), measured side by side in
# one go on this machine: 2 CPU ranks training a model whose state dominates (d_model 1024, 6+6
# layers, ffn 4096, an 8,000-piece vocabulary: 184M parameters), fp32, with dist.sharding none
# and optimizer, each without and with train.activation_checkpointing; --benchmark on synthetic
# batches of MAX_TOKENS padded tokens (default 1024), WARMUP + STEPS updates (default 1 + 2).
# Each rank's peak is its resident set's high-water mark (summary.json's peak_memory_mb, which
# the binary writes), so it includes the process's code and libraries: compare the rows.
# Next to each saving, the analytic one: dist.sharding optimizer saves Adam's 8 bytes x (1 -
# 1 / ranks) per trained parameter.
#
#   scripts/bench/memory.sh [MAX_TOKENS]          (WARMUP, STEPS, THREADS from the environment)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
max_tokens=${1:-1024}
warmup=${WARMUP:-1}
steps=${STEPS:-2}
threads=${THREADS:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
train=build/nmt-train
python=${NMT_PYTHON:-python3}

model=(--set model.d_model=1024 --set model.heads=16 --set model.ffn_dim=4096
       --set model.encoder_layers=6 --set model.decoder_layers=6 --set model.dropout=0.1)
# One shared vocabulary, so that every run times and measures training only.
$train --config configs/transformer-base.yaml --dry-run --log-level warn \
  --set data.vocab_size=8000 --set run_dir="$work/vocab" > /dev/null
common=(--config configs/transformer-base.yaml "${model[@]}" --set amp.mode=off
        --set data.spm_model="$work/vocab/vocab/joint.model" --set data.max_tokens="$max_tokens"
        --set train.threads="$threads" --nproc-per-node 2 --benchmark "$steps"
        --benchmark-warmup "$warmup" --synthetic)

for sharding in none optimizer; do
  for recompute in false true; do
    name=$sharding-$recompute
    $train "${common[@]}" --set run_dir="$work/$name" --set dist.sharding=$sharding \
      --set train.activation_checkpointing=$recompute > "$work/$name.log" 2>&1 \
      || { cat "$work/$name.log"; exit 1; }
  done
done

"$python" - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
rows = {}
for name in ("none-false", "none-true", "optimizer-false", "optimizer-true"):
    summary = json.load(open(os.path.join(work, name, "summary.json")))
    bench = json.load(open(os.path.join(work, name, "benchmark.json")))
    rows[name] = (summary["peak_memory_mb"], bench["parameters"], bench["step_time_s"]["median"])
params = rows["none-false"][1]
ranks = len(rows["none-false"][0])
print(f"2 CPU ranks, {params / 1e6:.0f}M parameters, fp32; peak resident memory per rank (MiB)")
print(f"{'dist.sharding':<15}{'recompute':<11}{'rank 0':>9}{'rank 1':>9}{'step s':>9}"
      f"{'saved':>9}{'analytic':>10}")
for name, (peaks, _, step) in rows.items():
    sharding, recompute = name.split("-")
    base = rows[f"none-{recompute}"][0]
    saved = sum(base) / len(base) - sum(peaks) / len(peaks)
    analytic = 8 * params * (1 - 1 / ranks) / 2**20 if sharding == "optimizer" else 0
    print(f"{sharding:<15}{recompute:<11}{peaks[0]:>9.0f}{peaks[1]:>9.0f}{step:>9.2f}"
          f"{saved:>9.0f}{analytic:>10.0f}")
print("saved: against dist.sharding none with the same recompute setting; analytic: Adam's "
      "moments, 8 bytes x (1 - 1/ranks) per parameter")
PY
