#!/usr/bin/env bash
# The README's first command: sets everything up, then trains configs/tiny.yaml on the
# shipped English-German corpus (run directory runs/tiny; rerunning resumes). Extra arguments
# go to nmt-train (e.g. --set train.max_steps=400).
#
# Translation, scoring and the multi-process launcher join this script as they land.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
bash scripts/setup.sh
printf '\n[demo] build/nmt-train --config configs/tiny.yaml %s\n' "$*"
build/nmt-train --config configs/tiny.yaml "$@"
