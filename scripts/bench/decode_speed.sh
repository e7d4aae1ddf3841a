#!/usr/bin/env bash
# Corpus decoding speed: nmt-translate with 1 and 2 workers against CTranslate2 (float32 and
# int8, exported by scripts/export-ctranslate2.py) on the same checkpoints, input and threads,
# greedy and beam 4, side by side in one run. Figures come from the JSON the translators write
# (--stats-json), never from their logs.
#
#   scripts/bench/decode_speed.sh                        # the demo's model and a base-shaped one
#   LINES=1000 BEAMS=1 scripts/bench/decode_speed.sh runs/demo
#
# Models (arguments: run directories or checkpoints): by default runs/demo, and
# runs/bench-decode-base, a transformer-base-shaped model (configs/transformer-base.yaml with an
# 8k vocabulary, fp32). Either is trained here when it holds no checkpoint: the demo's for
# DEMO_STEPS updates (600; scripts/demo.sh trains it for 10 minutes instead) and the base one
# for 1 update at the config's warmup (learning rate 1.75e-7: it stays at its initialization,
# whose next-token distribution is near uniform). The base model translates nothing, so both
# translators decode it to a fixed length, BASE_LEN (48) pieces a sentence
# (--max-len-a 0 --max-len-b BASE_LEN): its rows time decoding at base shape, not quality; the
# tokens column shows whether both wrote the same amount. Other models decode with the
# translators' default limits. (Why not a few updates with a short warmup: Adam's first
# steps at a high learning rate push such a model toward its most frequent token, EOS, and
# every output ended at once; docs/performance-log.md.)
#
# The input is the last LINES (5000) English lines of data/ddtp.en-de.train.en.gz. Each
# nmt-translate worker and each CTranslate2 translator gets THREADS (1) CPU threads; with 2
# workers nmt-translate uses twice the cores, so CTranslate2 also runs with 2 x THREADS
# (intra-op threads) for that row's ratio. Runs are interleaved (a change of machine load
# spreads over all translators) and REPEATS (1) times; the median rate is reported.
#
# Environment: BUILD (build), PYTHON (the venv's python, as the build was configured with),
# LINES, BEAMS ("1 4"), WORKERS ("1 2"), THREADS, REPEATS, DEMO_STEPS, BASE_LEN, OUT (exports
# and outputs; a temporary folder, removed at the end, when unset), JSON (also write the table
# there).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-$(sed -n 's/^NMT_PYTHON:FILEPATH=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)}
LINES=${LINES:-5000}
BEAMS=${BEAMS:-1 4}
WORKERS=${WORKERS:-1 2}
THREADS=${THREADS:-1}
REPEATS=${REPEATS:-1}
DEMO_STEPS=${DEMO_STEPS:-600}
BASE_LEN=${BASE_LEN:-48}
for bin in nmt-train nmt-translate; do
  [[ -x "$BUILD/$bin" ]] || { echo "decode_speed.sh: $BUILD/$bin not built" >&2; exit 1; }
done
[[ -n "$PYTHON" && -x "$PYTHON" ]] || { echo "decode_speed.sh: no venv python (set PYTHON)" >&2; exit 1; }
models=("$@")
[[ ${#models[@]} -gt 0 ]] || models=(runs/demo runs/bench-decode-base)

if [[ -n "${OUT:-}" ]]; then
  mkdir -p "$OUT"
else
  OUT=$(mktemp -d)
  trap 'rm -rf "$OUT"' EXIT
fi

# train_if_missing DIR: the default models are trained when they hold no checkpoint.
train_if_missing() {
  local dir=$1 args=()
  compgen -G "$dir/checkpoints/checkpoint-*.safetensors" > /dev/null && return 0
  [[ -f $dir ]] && return 0
  case $dir in
    runs/demo)
      args=(--config configs/demo.yaml --set train.max_minutes=0 --set "train.max_steps=$DEMO_STEPS") ;;
    runs/bench-decode-base)
      args=(--config configs/transformer-base.yaml --set "run_dir=$dir" --set data.vocab_size=8000
            --set amp.mode=off --set train.max_steps=1 --set data.max_tokens=2048
            --set train.valid_every=0 --set checkpoint.every_steps=1) ;;
    *) echo "decode_speed.sh: $dir holds no checkpoint" >&2; exit 1 ;;
  esac
  echo "training $dir (${args[*]}) ..." >&2
  "$BUILD/nmt-train" "${args[@]}" --log-level warn
}

zcat data/ddtp.en-de.train.en.gz | tail -n "$LINES" > "$OUT/input"
names=()
declare -A length_args  # name -> the output length options of both translators
for model in "${models[@]}"; do
  train_if_missing "$model"
  name=$(basename "$model")
  names+=("$name")
  length_args[$name]=""
  [[ $model == runs/bench-decode-base ]] && length_args[$name]="--max-len-a 0 --max-len-b $BASE_LEN"
  ln -sfn "$(realpath "$model")" "$OUT/$name.model"
  for q in none int8; do
    "$PYTHON" scripts/export-ctranslate2.py "$model" "$OUT/$name.ct2-$q" --quantization "$q" \
      --force > /dev/null
  done
done

# run MODEL TRANSLATOR BEAM REPEAT: one translation of the input with its stats JSON.
run() {
  local name=$1 translator=$2 beam=$3 rep=$4
  local out="$OUT/$name.$translator.b$beam"
  case $translator in
    nmt-w*)
      "$BUILD/nmt-translate" -c "$OUT/$name.model" -i "$OUT/input" -o "$out" --beam "$beam" \
        --device cpu --threads "$THREADS" --nproc-per-node "${translator#nmt-w}" \
        --log-level warn --stats-json "$out.$rep.json" --force ${length_args[$name]} ;;
    ct2-*-t*)
      local q=${translator#ct2-}; q=${q%-t*}
      "$PYTHON" scripts/bench/ct2-translate.py "$OUT/$name.ct2-$q" -i "$OUT/input" -o "$out" \
        --beam "$beam" --threads "${translator##*-t}" --stats-json "$out.$rep.json" \
        ${length_args[$name]} ;;
  esac
}

translators=()
for w in $WORKERS; do translators+=("nmt-w$w"); done
for w in $WORKERS; do
  translators+=("ct2-none-t$((w * THREADS))")
  [[ $w == "${WORKERS%% *}" ]] && translators+=("ct2-int8-t$((w * THREADS))")
done
for name in "${names[@]}"; do
  for beam in $BEAMS; do
    for rep in $(seq 1 "$REPEATS"); do
      for t in "${translators[@]}"; do
        echo "[$(date +%T)] $name beam $beam: $t (run $rep of $REPEATS)" >&2
        run "$name" "$t" "$beam" "$rep"
      done
    done
  done
done

"$PYTHON" scripts/bench/decode_speed_table.py "$OUT" --models "${names[@]}" --beams $BEAMS \
  --translators "${translators[@]}" --repeats "$REPEATS" --threads "$THREADS" \
  ${JSON:+--json "$JSON"}
