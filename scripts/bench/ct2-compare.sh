#!/usr/bin/env bash
# Compares a model served by CTranslate2 (float32 and int8 exports, scripts/export-ctranslate2.py)
# with nmt-translate on the same checkpoint: for beam 1 and 4, the share of output lines
# identical to nmt-translate's, corpus BLEU against the references (sacreBLEU), and
# sentences/s with the same number of CPU threads. Every figure comes from the JSON that the
# translators write (--stats-json) and from the output files, not from logs.
#
#   scripts/bench/ct2-compare.sh RUN_DIR|CHECKPOINT
#   THREADS=1 REPEATS=3 scripts/bench/ct2-compare.sh runs/demo
#
# Environment: BUILD (build), PYTHON (the venv's python, as the build was configured with),
# SRC and REF (data/ddtp.en-de.test.en/.de), THREADS (CPU threads for both, 1), REPEATS
# (timed runs of each; the median rate is reported, 1), OUT (where exports and outputs go;
# a temporary folder, removed at the end, when unset), JSON (also write the table as JSON).
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# -eq 1 ]] || { sed -n '2,15p' "$0" >&2; exit 2; }
CHECKPOINT=$1
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-$(sed -n 's/^NMT_PYTHON:FILEPATH=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)}
SRC=${SRC:-data/ddtp.en-de.test.en}
REF=${REF:-data/ddtp.en-de.test.de}
# One thread by default: on a machine that other jobs share, both LibTorch's and CTranslate2's
# OpenMP threads spin while they wait for each other, and 2 threads on 2 busy cores ran 5-10x
# slower than 1 here.
THREADS=${THREADS:-1}
REPEATS=${REPEATS:-1}
[[ -x "$BUILD/nmt-translate" ]] || { echo "ct2-compare.sh: $BUILD/nmt-translate not built" >&2; exit 1; }
[[ -n "$PYTHON" && -x "$PYTHON" ]] || { echo "ct2-compare.sh: no venv python (set PYTHON)" >&2; exit 1; }

if [[ -n "${OUT:-}" ]]; then
  mkdir -p "$OUT"
else
  OUT=$(mktemp -d)
  trap 'rm -rf "$OUT"' EXIT
fi
for q in none int8; do
  "$PYTHON" scripts/export-ctranslate2.py "$CHECKPOINT" "$OUT/ct2-$q" --quantization "$q" --force
done

# run NAME BEAM REPEAT: one translation of SRC into $OUT/NAME.bBEAM with its stats JSON.
run() {
  local name=$1 beam=$2 rep=$3 out="$OUT/$1.b$2"
  case $name in
    nmt) "$BUILD/nmt-translate" -c "$CHECKPOINT" -i "$SRC" -o "$out" --beam "$beam" --device cpu \
           --threads "$THREADS" --log-level warn --stats-json "$out.$rep.json" ;;
    ct2-*) "$PYTHON" scripts/bench/ct2-translate.py "$OUT/$name" -i "$SRC" -o "$out" --beam "$beam" \
             --threads "$THREADS" --stats-json "$out.$rep.json" ;;
  esac
}
# Interleaved, so a change of machine load spreads over all three.
for beam in 1 4; do
  for rep in $(seq 1 "$REPEATS"); do
    for name in nmt ct2-none ct2-int8; do run "$name" "$beam" "$rep"; done
  done
done

"$PYTHON" - "$OUT" "$REF" "$REPEATS" "$THREADS" "${JSON:-}" <<'EOF'
import json, statistics, sys
import sacrebleu
out, ref, repeats, threads, json_out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
refs = open(ref, encoding="utf-8").read().split("\n")[:-1]
rows = []
print(f"threads {threads}; {len(refs)} sentences; median of {repeats} run(s)")
print(f"{'beam':<5}{'translator':<22}{'exact_match':>12}{'BLEU':>8}{'sentences/s':>13}{'speedup':>9}")
for beam in (1, 4):
    lines = {n: open(f"{out}/{n}.b{beam}", encoding="utf-8").read().split("\n")[:-1]
             for n in ("nmt", "ct2-none", "ct2-int8")}
    rate = {n: statistics.median(json.load(open(f"{out}/{n}.b{beam}.{r}.json"))["sentences_per_s"]
                                 for r in range(1, repeats + 1)) for n in lines}
    for n, label in (("nmt", "nmt-translate"), ("ct2-none", "ctranslate2 float32"),
                     ("ct2-int8", "ctranslate2 int8")):
        same = sum(a == b for a, b in zip(lines[n], lines["nmt"])) / len(lines["nmt"])
        bleu = sacrebleu.corpus_bleu(lines[n], [refs]).score
        rows.append({"beam": beam, "translator": label, "exact_match": same, "bleu": bleu,
                     "sentences_per_s": rate[n], "speedup": rate[n] / rate["nmt"]})
        print(f"{beam:<5}{label:<22}{same:>12.3f}{bleu:>8.2f}{rate[n]:>13.1f}{rate[n] / rate['nmt']:>9.2f}")
if json_out:
    with open(json_out, "w") as f:
        json.dump({"threads": int(threads), "repeats": repeats, "rows": rows}, f, indent=2)
EOF
