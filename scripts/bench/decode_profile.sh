#!/usr/bin/env bash
# Where nmt-translate's decoding time goes on CPU: samples one run with `perf record` (self time
# of each function, no call graphs) and sums the samples by what the function does (matrix
# products, attention, top-k, copies, log-softmax, ...), for greedy and beam search.
#
#   scripts/bench/decode_profile.sh RUN_DIR|CHECKPOINT
#   LINES=1000 BEAMS=4 scripts/bench/decode_profile.sh runs/demo
#
# Environment: BUILD (build), LINES (the first LINES (500) lines of data/ddtp.en-de.test.en),
# BEAMS ("1 4"), THREADS (1), FREQ (samples per second, 999). Needs perf (Debian: linux-perf)
# with kernel.perf_event_paranoid <= 2. Model loading is in the samples (a few percent:
# "startup and loading"). oneDNN's JIT kernels (the prepacked products of float32 decoding)
# are named through the perf map that ONEDNN_JIT_PROFILE=2 makes oneDNN write.
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# -eq 1 ]] || { sed -n '2,12p' "$0" >&2; exit 2; }
CHECKPOINT=$1
BUILD=${BUILD:-build}
LINES=${LINES:-500}
BEAMS=${BEAMS:-1 4}
THREADS=${THREADS:-1}
FREQ=${FREQ:-999}
command -v perf > /dev/null || { echo "decode_profile.sh: perf not found (Debian: linux-perf)" >&2; exit 1; }
[[ -x "$BUILD/nmt-translate" ]] || { echo "decode_profile.sh: $BUILD/nmt-translate not built" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -n "$LINES" data/ddtp.en-de.test.en > "$tmp/input"
for beam in $BEAMS; do
  ONEDNN_JIT_PROFILE=2 perf record -q -F "$FREQ" -o "$tmp/perf.$beam" -- "$BUILD/nmt-translate" -c "$CHECKPOINT" \
    -i "$tmp/input" -o "$tmp/out.$beam" --beam "$beam" --device cpu --threads "$THREADS" \
    --log-level warn --stats-json "$tmp/stats.$beam.json" 2> "$tmp/perf.log"
  perf report -i "$tmp/perf.$beam" --no-children --sort symbol --stdio 2> /dev/null \
    > "$tmp/report.$beam"
  python3 scripts/bench/decode_profile_table.py "$tmp/report.$beam" "$tmp/stats.$beam.json" \
    --title "beam $beam, $LINES lines, $THREADS thread(s)"
done
