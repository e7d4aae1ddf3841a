#!/usr/bin/env bash
# Fuzzes the config loader and the corpus reader/tokenizer path with libFuzzer (clang, with
# AddressSanitizer and UndefinedBehaviorSanitizer), each for SECONDS, starting from the
# regression inputs in tests/fuzz/corpus/<target>/. New interesting inputs go to
# build-fuzz/corpus/<target>/; a crash is written to build-fuzz/crash-<target>-* and stops
# that target. A crash found becomes a regression input: copy it into
# tests/fuzz/corpus/<target>/ with the fix, and `ctest -R fuzz` replays it in every build.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      (default 60; targets: config corpus)
#
# Prints each target's executions and crashes. Runs the targets one after the other; set
# PARALLEL=1 to run them side by side (one core each).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
seconds=${1:-60}
shift || true
targets=("$@")
(( ${#targets[@]} )) || targets=(config corpus)
out=build-fuzz
mkdir -p "$out"
command -v clang++ > /dev/null || { echo "fuzz.sh: clang++ not found (apt-get install clang)" >&2; exit 1; }

flags=(-std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined -Isrc -DNMT_VERSION='"fuzz"')
util=(src/util/log.cpp src/util/main_guard.cpp src/util/utf8.cpp)
sources_config=(tests/fuzz/fuzz_config.cpp src/config/schema.cpp src/config/run_config.cpp "${util[@]}")
libs_config=(-lyaml-cpp -lspdlog -lfmt)
sources_corpus=(tests/fuzz/fuzz_corpus.cpp src/data/corpus_reader.cpp src/eval/*.cpp "${util[@]}")
libs_corpus=(-lz -lspdlog -lfmt)

build() {  # target
  local target=$1 binary="$out/fuzz_$1"
  local -n sources="sources_$target" libs="libs_$target"
  local newest
  newest=$(ls -t "${sources[@]}" src/*/*.h | head -n 1)
  if [[ ! -x $binary || $newest -nt $binary ]]; then
    echo "[fuzz] building $binary with clang" >&2
    clang++ "${flags[@]}" "${sources[@]}" "${libs[@]}" -o "$binary"
  fi
}

run() {  # target
  local target=$1
  local corpus="$out/corpus/$target" log="$out/fuzz_$target.log"
  mkdir -p "$corpus"
  local status=0
  # -timeout: one input taking over 10 s counts as a hang; -rss_limit_mb bounds memory.
  ASAN_OPTIONS=detect_leaks=1 "$out/fuzz_$target" "$corpus" "tests/fuzz/corpus/$target" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$out/crash-$target-" > "$log" 2>&1 || status=$?
  local execs
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1 || true)
  local crashes
  crashes=$(find "$out" -maxdepth 1 -name "crash-$target-*" | wc -l)
  echo "[fuzz] $target: ${execs:-?} executions in $seconds s, $(ls "$corpus" | wc -l) corpus inputs, $crashes crash file(s), exit $status (log $log)"
  (( status == 0 ))
}

for target in "${targets[@]}"; do build "$target"; done
failed=0
if [[ ${PARALLEL:-0} == 1 ]]; then
  pids=()
  for target in "${targets[@]}"; do run "$target" & pids+=($!); done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
else
  for target in "${targets[@]}"; do run "$target" || failed=1; done
fi
exit $failed
