#!/usr/bin/env bash
# Makes legacy-d6612cb.safetensors: a checkpoint as nmt-train wrote them before the typed tensor
# layout (checkpoint/tensor_layout.h), which tests/train/test_training_state.cpp restores and
# writes again. It was made with nmt-train built at commit d6612cb:
#
#   git worktree add --detach /tmp/old d6612cb && (cd /tmp/old && bash scripts/setup.sh)
#   tests/train/data/make-legacy-checkpoint.sh /tmp/old/build/nmt-train
#
# A model of a few thousand parameters (with every tensor group: model, ema, optim, scaler,
# rng, vocab) trained 3 updates on the first 2,000 pairs of the shipped corpus, one CPU worker.
set -euo pipefail
bin=${1:?usage: make-legacy-checkpoint.sh NMT_TRAIN_BINARY}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(zcat "$repo/data/ddtp.en-de.train.en.gz" || true) | head -n 2000 > "$work/train.en"
(zcat "$repo/data/ddtp.en-de.train.de.gz" || true) | head -n 2000 > "$work/train.de"
cd "$work"
"$bin" --config "$repo/configs/tiny.yaml" \
  --set run_dir=run --set data.train_src=train.en --set data.train_tgt=train.de \
  --set data.valid_src= --set data.valid_tgt= --set data.vocab_size=200 \
  --set model.encoder_layers=1 --set model.decoder_layers=1 --set model.d_model=16 \
  --set model.heads=2 --set model.ffn_dim=32 --set model.max_positions=64 --set data.max_len=60 \
  --set data.max_tokens=512 --set train.max_steps=3 --set train.ema_decay=0.9 \
  --set train.threads=1 --set train.valid_every=0 --set checkpoint.every_steps=3 \
  --set dist.nproc_per_node=1
cp run/checkpoints/checkpoint-00000003.safetensors "$here/legacy-d6612cb.safetensors"
ls -l "$here/legacy-d6612cb.safetensors"
