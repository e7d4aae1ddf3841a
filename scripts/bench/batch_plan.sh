#!/usr/bin/env bash
# Batch-plan figures at two scales: the shipped DDTP training set and a generated corpus of
# PAIRS pairs (scripts/bench/make-large-corpus.py, not shipped), each planned for 2 and 8
# ranks by `nmt-train --dry-run --nproc-per-node R --set data.max_tokens=4096`. Prints one
# table: padding efficiency, max rank token imbalance, time to plan epoch 1, encode
# throughput and peak memory (RSS) of the dry run.
#
# usage: scripts/bench/batch_plan.sh [OUT_DIR]     (default runs/bench-batching)
#
# Environment (all optional): PAIRS (1000000), RANKS ("2 8"), MAX_TOKENS (4096),
# CONFIG (configs/tiny.yaml), NMT_TRAIN (build/nmt-train).
#
# Where the figures come from:
#   - padding efficiency, imbalance, plan time (the token plan only): summary.json;
#   - encode: each corpus is prepared once cold (no token cache) and once warm (the cache
#     reused) with the same flags; throughput = pairs read / (cold - warm wall_s of
#     summary.json), so it counts reading, encoding and writing the cache;
#   - peak memory: the process's maximum RSS (/usr/bin/time), for the warm runs (planning)
#     and the cold one (encoding, then planning).
# Both corpora use one vocabulary, trained by CONFIG on the shipped set (the generated
# corpus is made of the same sentences), so SentencePiece training is not in any figure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

OUT=${1:-runs/bench-batching}
PAIRS=${PAIRS:-1000000}
RANKS=${RANKS:-"2 8"}
MAX_TOKENS=${MAX_TOKENS:-4096}
CONFIG=${CONFIG:-configs/tiny.yaml}
NMT_TRAIN=${NMT_TRAIN:-build/nmt-train}
[[ -x "$NMT_TRAIN" ]] || { echo "error: $NMT_TRAIN not built (cmake --build build --target nmt-train)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "error: /usr/bin/time not found (apt-get install time)" >&2; exit 1; }
mkdir -p "$OUT/results"

full_src=data/ddtp.en-de.train.en.gz
full_tgt=data/ddtp.en-de.train.de.gz
large_dir=$OUT/large-corpus
if [[ ! -f "$large_dir/large.en-de.json" ]] ||
   ! python3 -c "import json,sys; sys.exit(json.load(open('$large_dir/large.en-de.json'))['pairs'] != $PAIRS)"; then
  python3 scripts/bench/make-large-corpus.py "$large_dir" --pairs "$PAIRS"
fi

# dry_run NAME RUN_DIR RANKS FLAGS...: one dry run; keeps its summary.json and peak RSS.
dry_run() {
  local name=$1 run_dir=$2 ranks=$3
  shift 3
  echo "== $name" >&2
  /usr/bin/time -f %M -o "$OUT/results/$name.rss_kb" \
    "$NMT_TRAIN" --config "$CONFIG" --dry-run --log-level warn --nproc-per-node "$ranks" \
    --set data.max_tokens="$MAX_TOKENS" --set run_dir="$run_dir" "$@" > "$OUT/results/$name.out"
  cp "$run_dir/summary.json" "$OUT/results/$name.summary.json"
  cp "$run_dir/batch_stats.json" "$OUT/results/$name.batch_stats.json"
}

# The vocabulary, trained on the shipped set (not timed).
full_run=$OUT/full
if [[ ! -f "$full_run/vocab/joint.model" ]]; then
  echo "== training the vocabulary on the shipped set" >&2
  "$NMT_TRAIN" --config "$CONFIG" --dry-run --log-level warn --set run_dir="$full_run" \
    --set data.train_src="$full_src" --set data.train_tgt="$full_tgt" > /dev/null
fi
vocab=$full_run/vocab/joint.model

declare -A src=([full]=$full_src [large]=$large_dir/large.en-de.train.en.gz)
declare -A tgt=([full]=$full_tgt [large]=$large_dir/large.en-de.train.de.gz)
first_ranks=${RANKS%% *}
for corpus in full large; do
  run_dir=$OUT/$corpus
  flags=(--set data.train_src="${src[$corpus]}" --set data.train_tgt="${tgt[$corpus]}"
         --set data.spm_model="$vocab")
  zcat -f "${src[$corpus]}" | wc -l > "$OUT/results/$corpus.pairs"
  rm -rf "$run_dir/cache"
  dry_run "$corpus.cold" "$run_dir" "$first_ranks" "${flags[@]}"
  for r in $RANKS; do dry_run "$corpus.r$r" "$run_dir" "$r" "${flags[@]}"; done
done

python3 - "$OUT/results" "$RANKS" "$first_ranks" <<'EOF'
import json, os, sys
res, ranks, first = sys.argv[1], sys.argv[2].split(), sys.argv[3]
def load(name):
    with open(os.path.join(res, name + ".summary.json")) as f:
        return json.load(f)
def stats(name):
    with open(os.path.join(res, name + ".batch_stats.json")) as f:
        return json.load(f)
def rss_mib(name):
    with open(os.path.join(res, name + ".rss_kb")) as f:
        return int(f.read().split()[-1]) / 1024
print("%-6s %5s %9s %9s %7s %8s %9s %8s %14s %11s %9s %9s" % (
    "corpus", "ranks", "pairs", "kept", "steps", "padding", "imbalance", "plan s",
    "encode pairs/s", "encode s", "RSS MiB", "cold RSS"))
for corpus in ("full", "large"):
    with open(os.path.join(res, corpus + ".pairs")) as f:
        pairs = int(f.read())
    cold = load(corpus + ".cold")
    encode_s = cold["wall_s"] - load("%s.r%s" % (corpus, first))["wall_s"]
    for r in ranks:
        name = "%s.r%s" % (corpus, r)
        d = load(name)["dry_run"]
        b = stats(name)
        print("%-6s %5s %9d %9d %7d %8.4f %9.4f %8.3f %14.0f %11.1f %9.0f %9.0f" % (
            corpus, r, pairs, b["sentences"], d["steps"], d["padding_efficiency"],
            d["max_rank_token_imbalance"], d["plan_seconds"], pairs / encode_s, encode_s,
            rss_mib(name), rss_mib(corpus + ".cold")))
    b = stats("%s.r%s" % (corpus, first))
    print("%-6s tokens (src + tgt, kept pairs): %d" % (corpus, b["src_tokens"] + b["tgt_tokens"]))
EOF
