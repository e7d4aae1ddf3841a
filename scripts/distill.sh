#!/usr/bin/env bash
# Distils a teacher into a student with int8 fine-tuning, export and evaluation:
# scripts/distill.py (docs/distillation.md) run by the venv's python that scripts/setup.sh made
# (NMT_PYTHON of the build's CMake cache), which has PyYAML, ctranslate2 and sacrebleu.
#
#   scripts/distill.sh --teacher runs/teacher --work-dir runs/distill [options]   # --help: all
#
# Environment: NMT_PYTHON (the python to use), NMT_BUILD_DIR (where its CMake cache is, build).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${NMT_PYTHON:-$(sed -n 's/^NMT_PYTHON:[A-Z]*=//p' "$repo/${NMT_BUILD_DIR:-build}/CMakeCache.txt" 2>/dev/null || true)}
exec "${python:-python3}" "$repo/scripts/distill.py" "$@"
