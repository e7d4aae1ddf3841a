#!/usr/bin/env bash
# Memory of 2 CPU ranks while they load a checkpoint (issue #46: a checkpoint is mapped, one
# copy in the page cache for the node's ranks, not read into each rank's memory): a fine-tune
# from it (train.init_from) and a resume of its run, for each nmt-train binary given, side by
# side in one go (scripts/bench/load_memory.py says what is sampled and how). The model is the
# one scripts/bench/memory.sh measures: d_model 1024, 6+6 layers, ffn 4096, an 8,000-piece
# vocabulary, 184M parameters; its checkpoint after one update holds the fp32 weights and Adam's
# two moments (2.2 GB).
#
#   scripts/bench/load-memory.sh [NMT_TRAIN...]     (default build/nmt-train)
#   WORK: a folder to keep (and reuse the checkpoint of); JSON: where the figures go
#   (default runs/load-memory.json)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
python=${NMT_PYTHON:-python3}
work=${WORK:-$(mktemp -d)}
[ -n "${WORK:-}" ] || trap 'rm -rf "$work"' EXIT
binaries=("$@")
[ ${#binaries[@]} -gt 0 ] || binaries=(build/nmt-train)
model="--config configs/transformer-base.yaml --set model.d_model=1024 --set model.heads=16
  --set model.ffn_dim=4096 --set model.encoder_layers=6 --set model.decoder_layers=6
  --set data.vocab_size=8000 --set data.max_tokens=1024"
mkdir -p runs
exec "$python" scripts/bench/load_memory.py --work "$work" --json "${JSON:-runs/load-memory.json}" \
  --model-flags "$model" "${binaries[@]}"
