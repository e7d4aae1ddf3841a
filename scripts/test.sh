#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test with CTest.
#
#   scripts/test.sh [ctest arguments...]     e.g. scripts/test.sh -R config
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
bash scripts/setup.sh
build_dir=${NMT_BUILD_DIR:-build}
printf '\n[test] ctest in %s\n' "$build_dir"
ctest --test-dir "$build_dir" --output-on-failure -j "${NMT_JOBS:-$(nproc)}" "$@"
