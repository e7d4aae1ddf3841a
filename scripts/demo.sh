#!/usr/bin/env bash
# The README's first command: sets everything up, then runs nmt-train on the shipped corpus
# with configs/tiny.yaml. Extra arguments go to nmt-train (e.g. --set train.max_steps=50).
#
# Today nmt-train validates the config and prints its plan (devices, workers, data, model);
# training, translation and scoring join this script as they land.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
bash scripts/setup.sh
printf '\n[demo] build/nmt-train --config configs/tiny.yaml %s\n' "$*"
build/nmt-train --config configs/tiny.yaml "$@"
