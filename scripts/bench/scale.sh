#!/usr/bin/env bash
# Data path at scale, phase by phase (issue #36): makes a synthetic corpus of PAIRS pairs
# (scripts/bench/make-large-corpus.py, reused when it exists), runs nmt-train from nothing
# (no vocabulary, no token cache) with 2 ranks to its first updates, and prints one row per
# phase: vocabulary, encoding, cache write, plan, first update, with wall time, pairs/s (and
# per core), peak private and shared memory of the process(es) in the phase, and the token
# cache's size on disk. The same goes into OUT_DIR/scale-PAIRS.json. A benchmark, not a test:
# figures of a shared machine move from run to run.
#
# usage: scripts/bench/scale.sh PAIRS [OUT_DIR]     (default runs/bench-scale)
#
# Environment (all optional): RANKS (2), STEPS (5: updates to run), CONFIG (configs/tiny.yaml),
# NMT_TRAIN (build/nmt-train), PYTHON (python3), SPM_MODEL (a SentencePiece model to use as
# data.spm_model: no vocabulary phase, e.g. to time the other phases again, or to compare two
# binaries' token caches byte for byte), REUSE_DATA=1 (keep the run's vocabulary and token
# cache from the last run of this size: only plan, first update and training run again).
#
# Where the figures come from (scripts/bench/scale_run.py):
#   - phase times, pairs and threads: <run_dir>/phases.jsonl, which nmt-train writes as each
#     phase ends (src/util/phase_record.h): vocabulary, encoding and cache write from the
#     launcher, plan and first update from every rank;
#   - memory: /proc/<pid>/smaps_rollup of the launcher and of each rank, sampled every 0.2 s
#     (private: Private_Clean + Private_Dirty; shared: Shared_Clean + Shared_Dirty, the token
#     cache's mapped pages among them), the peak within each phase's time span; plus each
#     process's own peak RSS (getrusage) in phases.jsonl;
#   - cache size: the token cache file in <run_dir>/cache.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

PAIRS=${1:?usage: scripts/bench/scale.sh PAIRS [OUT_DIR]}
OUT=${2:-runs/bench-scale}
RANKS=${RANKS:-2}
STEPS=${STEPS:-5}
CONFIG=${CONFIG:-configs/tiny.yaml}
NMT_TRAIN=${NMT_TRAIN:-build/nmt-train}
PYTHON=${PYTHON:-python3}
[[ -x "$NMT_TRAIN" ]] || { echo "error: $NMT_TRAIN not built (cmake --build build --target nmt-train)" >&2; exit 1; }

corpus=$OUT/corpus-$PAIRS
if [[ ! -f "$corpus/large.en-de.json" ]] ||
   ! "$PYTHON" -c "import json,sys; sys.exit(json.load(open('$corpus/large.en-de.json'))['pairs'] != $PAIRS)"; then
  "$PYTHON" scripts/bench/make-large-corpus.py "$corpus" --pairs "$PAIRS"
fi
exec "$PYTHON" scripts/bench/scale_run.py --nmt-train "$NMT_TRAIN" --config "$CONFIG" \
  --ranks "$RANKS" --steps "$STEPS" --pairs "$PAIRS" \
  --src "$corpus/large.en-de.train.en.gz" --tgt "$corpus/large.en-de.train.de.gz" \
  --run-dir "$OUT/run-$PAIRS" --json "$OUT/scale-$PAIRS.json" ${SPM_MODEL:+--spm-model "$SPM_MODEL"} \
  ${REUSE_DATA:+--reuse-data}
