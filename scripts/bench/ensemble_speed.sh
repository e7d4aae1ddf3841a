#!/usr/bin/env bash
# Times nmt-translate with one model against an ensemble of two (-c A -c B) on the shipped test
# set, side by side in one run: beam 1 and 5, the two commands alternating REPEATS times, and
# prints sentences/s and output tokens/s as nmt-translate measures them (--stats-json: reading,
# search and writing; model loading excluded), the best of the repetitions, and the ensemble's
# rate as a fraction of one model's.
#
#   scripts/bench/ensemble_speed.sh RUN_DIR_OR_CHECKPOINT_A [CHECKPOINT_B]
#   LINES=500 DEVICE=cpu THREADS=2 scripts/bench/ensemble_speed.sh build/tests/work/translate-run/run
# Without B, the ensemble is A twice (the same shapes: the cost of the second model alone).
# Environment: BUILD (build), LINES (test sentences, 1000), REPEATS (3), DEVICE (auto|cpu|cuda,
# auto), THREADS (CPU threads, 0 = LibTorch's default), AMP (off|fp16|bf16, off), MAX_LEN_B
# (extra output tokens allowed, 10: nmt-translate's default).
set -euo pipefail
cd "$(dirname "$0")/../.."
a=${1:?usage: scripts/bench/ensemble_speed.sh A [B]}
b=${2:-$a}
BUILD=${BUILD:-build}
LINES=${LINES:-1000}
REPEATS=${REPEATS:-3}
DEVICE=${DEVICE:-auto}
THREADS=${THREADS:-0}
AMP=${AMP:-off}
MAX_LEN_B=${MAX_LEN_B:-10}
[[ -x "$BUILD/nmt-translate" ]] || { echo "ensemble_speed.sh: $BUILD/nmt-translate not built" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -n "$LINES" data/ddtp.en-de.test.en > "$tmp/input"
echo "A: $a; B: $b; $(wc -l < "$tmp/input") sentences; device $DEVICE; threads $THREADS; amp $AMP"
# One run: the figures nmt-translate writes for scripts ("sentences/s tokens/s"), not its log.
run() {
  "$BUILD/nmt-translate" "$@" -i "$tmp/input" -o "$tmp/out" --device "$DEVICE" \
    --threads "$THREADS" --amp "$AMP" --max-len-b "$MAX_LEN_B" --stats-json "$tmp/stats.json" \
    --log-level warn
  python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
print("%.2f %.1f" % (s["sentences_per_s"], s["output_tokens_per_s"]))' "$tmp/stats.json"
}
best() { sort -g -r | head -n 1; }
printf '%-5s %-9s %12s %12s %9s\n' beam models sentences/s tokens/s relative
for beam in 1 5; do
  : > "$tmp/one" ; : > "$tmp/two"
  for _ in $(seq "$REPEATS"); do
    run -c "$a" --beam "$beam" >> "$tmp/one"
    run -c "$a" -c "$b" --beam "$beam" >> "$tmp/two"
  done
  read -r one_rate one_tokens < <(best < "$tmp/one")
  read -r two_rate two_tokens < <(best < "$tmp/two")
  printf '%-5s %-9s %12s %12s %9s\n' "$beam" 1 "$one_rate" "$one_tokens" 1.00
  printf '%-5s %-9s %12s %12s %9s\n' "$beam" 2 "$two_rate" "$two_tokens" \
    "$(awk -v a="$two_rate" -v b="$one_rate" 'BEGIN { printf "%.2f", a / b }')"
done
