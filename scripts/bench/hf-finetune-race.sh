#!/usr/bin/env bash
# nmt-train against transformers as a user of each fine-tunes a MarianMT (issue #49): one epoch
# of PAIRS ddtp en-de pairs, then one validation pass with BLEU, side by side in one run.
# transformers: Seq2SeqTrainer with DataCollatorForSeq2Seq, batches of 16 and 32 sentences,
# group_by_length off and on, predict_with_generate; nmt-train: its token-bucketed batches with
# data.max_tokens paired to each batch size (the same real tokens per update), valid_translate.
# Same model (the imported transformer-base MarianMT of hf-finetune-compare.sh), optimizer,
# lr per update, label smoothing, dropout, precision and threads. Prints per run the training
# time, real tokens/s, padded / real tokens, updates, the validation pass's time and BLEU and the
# validation loss (both models scored in transformers), and the ratios. The work is
# scripts/bench/hf_finetune_race.py (its docstring says each step). A benchmark, not a test.
#
#   scripts/bench/hf-finetune-race.sh [PAIRS]     (default 600: 13 minutes in fp32, 14 in bf16, on
#                                                   a quiet 2-core Xeon with the 500 validation pairs)
#
# Environment: BATCH_SIZES (default 16,32) transformers' sentences per batch; VALID_PAIRS
# (default 500); PRECISION (fp32, the default, or bf16 on both sides); THREADS (default: all
# cores); LR (default 3e-4); OUT (default: a temp folder) keeps the model directory, the runs and
# result.json; BUILD (default build) the folder with nmt-train and nmt-ckpt; NMT_PYTHON the
# Python with torch, transformers 5, accelerate, sacrebleu and sentencepiece (default: the venv
# of scripts/setup.sh).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
pairs=${1:-600}
build=${BUILD:-build}
torch_version=$(sed -n 's/^torch==//p' "$repo/scripts/requirements.txt")
python=${NMT_PYTHON:-${NMT_CACHE:-$HOME/.cache/nmt-train}/torch-$torch_version/venv/bin/python}
out=${OUT:-$(mktemp -d)}
for binary in nmt-train nmt-ckpt; do
  [[ -x $build/$binary ]] || { echo "hf-finetune-race.sh: $build/$binary not built (cmake --build build)" >&2; exit 1; }
done
"$python" -c "import torch, transformers, accelerate, sacrebleu, sentencepiece, safetensors" 2>/dev/null ||
  { echo "hf-finetune-race.sh: $python lacks torch/transformers/accelerate/sacrebleu/sentencepiece (run scripts/setup.sh)" >&2; exit 1; }
"$python" scripts/bench/hf_finetune_race.py --bin "$build" --work "$out" --pairs "$pairs" \
  --batch-sizes "${BATCH_SIZES:-16,32}" --valid-pairs "${VALID_PAIRS:-500}" \
  --threads "${THREADS:-$(nproc)}" --lr "${LR:-3e-4}" --precision "${PRECISION:-fp32}"
echo "[hf-race] model directory, runs and result.json in $out" >&2
