#!/usr/bin/env bash
# nmt-train against transformers' Seq2SeqTrainer, side by side in one run: one MarianMT of
# transformer-base shape (random weights, seeded, with a MarianTokenizer built on data/ddtp
# lines) imported with `nmt-ckpt import-hf`, fine-tuned by both for the same UPDATES updates on
# the same batches (transformers trains on the ones nmt-train's loader yields, which
# `nmt-train --benchmark --dump-batches` writes), lr schedule, label smoothing, dropout, fp32 on
# CPU and threads. Prints updates, target tokens per update, tokens/s of each and the ratio,
# and the validation loss of both final models at equal updates (both scored in transformers).
# The work is scripts/bench/hf_finetune_compare.py (its docstring says each step).
#
#   scripts/bench/hf-finetune-compare.sh [UPDATES]      (default 10: 4-7 minutes on a 2-core VM)
#
# Environment: MAX_TOKENS (default 1024) nmt-train's data.max_tokens, padded tokens per batch
# and update; THREADS (default: all cores) intra-op threads of both sides; LR (default 5e-5)
# and WARMUP (default 4 updates); OUT (default: a temp folder) keeps the model directory, both
# runs and result.json; BUILD (default build) the folder with nmt-train and nmt-ckpt;
# NMT_PYTHON the Python with torch, transformers 5 and sentencepiece (default: the venv of
# scripts/setup.sh).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
updates=${1:-10}
build=${BUILD:-build}
torch_version=$(sed -n 's/^torch==//p' "$repo/scripts/requirements.txt")
python=${NMT_PYTHON:-${NMT_CACHE:-$HOME/.cache/nmt-train}/torch-$torch_version/venv/bin/python}
out=${OUT:-$(mktemp -d)}
for binary in nmt-train nmt-ckpt; do
  [[ -x $build/$binary ]] || { echo "hf-finetune-compare.sh: $build/$binary not built (cmake --build build)" >&2; exit 1; }
done
"$python" -c "import torch, transformers, sentencepiece, safetensors" 2>/dev/null ||
  { echo "hf-finetune-compare.sh: $python lacks torch/transformers/sentencepiece (run scripts/setup.sh)" >&2; exit 1; }
"$python" scripts/bench/hf_finetune_compare.py --bin "$build" --work "$out" --updates "$updates" \
  --max-tokens "${MAX_TOKENS:-1024}" --threads "${THREADS:-$(nproc)}" --lr "${LR:-5e-5}" \
  --warmup "${WARMUP:-4}"
echo "[hf-compare] model directory, runs and result.json in $out" >&2
