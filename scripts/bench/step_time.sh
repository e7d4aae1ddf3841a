#!/usr/bin/env bash
# Training step time on this machine, measured side by side in one go, from metrics.jsonl:
#   - tiny and base configs, 1 process: tokens/s and the split of an update into data wait,
#     forward, backward, gradient sync and optimizer;
#   - tiny config, 1 vs 2 CPU ranks at equal per-rank batch, overlap on and off;
#   - checkpoint size and write time.
# Figures are means over the timed log intervals after the first (warm-up) one.
#
#   scripts/bench/step_time.sh [STEPS]        (default 30; base runs a fifth of them)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
steps=${1:-30}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
train=build/nmt-train

# One shared vocabulary, so every run times training only.
$train --config configs/tiny.yaml --dry-run --log-level warn --set data.vocab_size=8000 \
  --set run_dir="$work/vocab" > /dev/null
common=(--set data.spm_model="$work/vocab/vocab/joint.model" --set train.valid_every=0
        --set data.prefetch=4)

run() {  # name config steps log_every extra...
  local name=$1 config=$2 n=$3 every=$4; shift 4
  $train --config "$config" --set run_dir="$work/$name" --set train.max_steps="$n" \
    --set train.log_every="$every" --set checkpoint.every_steps=100000 "${common[@]}" "$@" \
    > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }
}

run tiny configs/tiny.yaml "$steps" $((steps / 3)) --set train.threads=2
run base configs/transformer-base.yaml $((steps / 5)) $((steps / 15 > 0 ? steps / 15 : 1)) \
  --set data.max_tokens=4096 --set train.threads=2
run tiny-1rank configs/tiny.yaml "$steps" $((steps / 3)) --set train.threads=1
run tiny-2ranks configs/tiny.yaml "$steps" $((steps / 3)) --nproc-per-node 2
run tiny-2ranks-no-overlap configs/tiny.yaml "$steps" $((steps / 3)) --nproc-per-node 2 \
  --set dist.overlap=false

python3 - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
def intervals(name):
    rows = [json.loads(l) for l in open(os.path.join(work, name, "metrics.jsonl"))]
    rows = [r for r in rows if r["type"] == "train"]
    return rows[1:] or rows  # the first interval includes warm-up
def mean(rows, key):
    # A GPU run leaves the phase split out (null): the host only queues the work there.
    values = [r[key] for r in rows if r[key] is not None]
    return sum(values) / len(values) if values else float("nan")
print(f"{'run':<24}{'tok/s':>9}{'step s':>9}{'data':>8}{'fwd':>8}{'bwd':>8}{'sync':>8}{'optim':>8}")
step_time = {}
for name in ["tiny", "base", "tiny-1rank", "tiny-2ranks", "tiny-2ranks-no-overlap"]:
    rows = intervals(name)
    every = rows[1]["step"] - rows[0]["step"] if len(rows) > 1 else rows[0]["step"]
    per = lambda k: mean(rows, k) / every
    step_time[name] = per("interval_s")
    print(f"{name:<24}{mean(rows,'tokens_per_s'):>9.0f}{per('interval_s'):>9.3f}{per('data_wait_s'):>8.3f}"
          f"{per('forward_s'):>8.3f}{per('backward_s'):>8.3f}{per('grad_sync_s'):>8.3f}{per('optimizer_s'):>8.3f}")
print(f"\n2 ranks / 1 rank step time (equal per-rank batch, 1 thread each): "
      f"overlap {step_time['tiny-2ranks'] / step_time['tiny-1rank']:.2f}x, "
      f"after backward {step_time['tiny-2ranks-no-overlap'] / step_time['tiny-1rank']:.2f}x")
PY
for name in tiny base; do
  sed -n 's/.*\[checkpoint\] saved \(.*\)/'"$name"' checkpoint: \1/p' "$work/$name.log" | tail -n 1
done
