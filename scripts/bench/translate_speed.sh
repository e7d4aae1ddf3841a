#!/usr/bin/env bash
# Times nmt-translate on the shipped test set (data/ddtp.en-de.test.en): beam 1 and 5, with
# the cached incremental decoder and without it (--no-cache), printing sentences/s and output
# tokens/s (SentencePiece pieces) as nmt-translate measures them (reading, search and writing;
# model loading excluded), the wall time of the whole command, and whether cached and uncached
# outputs are identical (the exit status is 1 when they are not).
#
# A tiny checkpoint is trained first unless RUN_DIR already holds one.
#   scripts/bench/translate_speed.sh                 # all 1000 test sentences, default device
#   LINES=200 DEVICE=cpu THREADS=2 scripts/bench/translate_speed.sh
# Environment: BUILD (build), RUN_DIR (runs/bench-translate-tiny), STEPS (training steps of a
# new checkpoint, 20), LINES (test sentences, 1000), DEVICE (auto|cpu|cuda, auto),
# THREADS (CPU threads, 0 = LibTorch's default), AMP (off|fp16|bf16, off).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
RUN_DIR=${RUN_DIR:-runs/bench-translate-tiny}
STEPS=${STEPS:-20}
LINES=${LINES:-1000}
DEVICE=${DEVICE:-auto}
THREADS=${THREADS:-0}
AMP=${AMP:-off}

for bin in nmt-train nmt-translate; do
  [[ -x "$BUILD/$bin" ]] || { echo "translate_speed.sh: $BUILD/$bin not built" >&2; exit 1; }
done
if ! compgen -G "$RUN_DIR/checkpoints/checkpoint-*.safetensors" >/dev/null; then
  echo "training a tiny checkpoint ($STEPS steps) in $RUN_DIR ..." >&2
  "$BUILD/nmt-train" --config configs/tiny.yaml --log-level warn --set "run_dir=$RUN_DIR" \
    --set "train.max_steps=$STEPS" --set data.vocab_size=500 --set train.valid_every=0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -n "$LINES" data/ddtp.en-de.test.en > "$tmp/input"
echo "checkpoint: $RUN_DIR; $(wc -l < "$tmp/input") sentences; device $DEVICE; threads $THREADS; amp $AMP"
differ=0
printf '%-5s %-9s %10s %12s %12s %10s %s\n' beam decoder search_s sentences/s tokens/s wall_s same_output
for beam in 1 5; do
  for decoder in cached uncached; do
    flag=""
    [[ $decoder == uncached ]] && flag="--no-cache"
    start=$(date +%s.%N)
    "$BUILD/nmt-translate" -c "$RUN_DIR" -i "$tmp/input" -o "$tmp/out.$beam.$decoder" \
      --beam "$beam" --device "$DEVICE" --threads "$THREADS" --amp "$AMP" $flag \
      --stats-json "$tmp/stats.json" 2> "$tmp/log" || { cat "$tmp/log" >&2; exit 1; }
    end=$(date +%s.%N)
    # The figures nmt-translate writes for scripts, not its log line.
    # (An assignment, not `read < <(...)`: a failing command substitution stops the script
    # under set -e, a failing process substitution would leave the columns empty.)
    figures=$(python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
print("%.2f %.1f %.0f" % (s["seconds"], s["sentences_per_s"], s["output_tokens_per_s"]))' "$tmp/stats.json")
    read -r seconds rate tokens <<< "$figures"
    same="-"
    if [[ $decoder == uncached ]]; then
      cmp -s "$tmp/out.$beam.cached" "$tmp/out.$beam.uncached" && same=yes || { same=NO; differ=1; }
    fi
    printf '%-5s %-9s %10s %12s %12s %10.2f %s\n' "$beam" "$decoder" "$seconds" "$rate" \
      "$tokens" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$same"
  done
done
if (( differ )); then
  echo "translate_speed.sh: cached and uncached outputs differ (same_output NO above)" >&2
  exit 1
fi
