#!/usr/bin/env bash
# The GPU run, in one go, on a box with nvcc, CMake, ninja and a CUDA PyTorch (LibTorch from
# torch.utils.cmake_prefix_path, NCCL from its nvidia wheels) but no package registry:
#   1. unpacks the .debs of scripts/gpu/pack-deps.sh (gpu-deps/) into a private prefix
#      (dpkg-deb -x, never into /) and builds the project against the box's torch;
#   2. runs the [cuda] test cases (with NMT_REQUIRE_CUDA=1: a case that finds no GPU fails);
#   3. trains the base config on the shipped corpus in bf16 and fp16 (loss, NaN, loss scale);
#   4. NCCL with world size 1 through the real code path; 2 ranks on the one GPU with Gloo
#      (identical parameters, per-rank peak memory with token-balanced and with naive
#      sentence-count batches: the seed's problem, measured); sharded optimizer state,
#      activation checkpointing and an injected out-of-memory skip on the same runs;
#   5. data.max_tokens: auto on the base config (the budget it measures, and the peak after);
#   5b. a corpus decoded by nmt-translate --nproc-per-node 2 (2 ranks on the one GPU, bf16,
#      beam 4): killed part-way, resumed, and compared with one process decoding the same
#      shards (the checkpoint of step 3);
#   5c. an ensemble (nmt-translate -c A -c B) of step 3's bf16 and fp16 checkpoints on the same
#      input: a checkpoint with itself writes the file of it alone, and lines/s of one model
#      against two;
#   6. benchmark and MFU of base and big in bf16 and fp16 next to the PyTorch reference loop
#      (32768-token batches; unsynced tokens/s as the headline, the synced split beside it);
#   7. CTest on the GPU-relevant unit tests (CHECK_CTEST_REGEX), GPU visible: the [cuda] cases
#      through CTest's own names and guards, and the CPU cases of the same components as built
#      with CUDA. The whole suite (20+ minutes on 2 cores) does not fit after a cold build; CI
#      runs it.
# A failed step is recorded and the next one still runs. Aimed at ~8 minutes on 16 cores; steps
# that would start after CHECK_BUDGET_S (540 s) are skipped, and a running step is stopped at
# it, so the summary is always written inside the device tool's 10-minute limit.
#
# OUTDIR gets four files (the device tool returns at most 8): summary.md, results.json,
# machine.txt and logs.tar.gz (every step's log, metrics.jsonl, benchmark.json and run logs;
# no checkpoints or token caches). Should one call not suffice, split it in two: the build
# and its unpacked dependencies (build-gpu/, build-gpu-deps/) stay on a warm machine:
#   scripts/gpu/check.sh $OUT build test train dist     then     scripts/gpu/check.sh $OUT auto translate bench ctest
#   (translate needs step 3's checkpoint: on a second call, run train again or leave translate out)
#
#   scripts/gpu/check.sh OUTDIR [STEP...]     (steps: build test train dist auto translate bench ctest; default all;
#                                              configure: the build's first half alone, not in all)
#
# Sizes: CHECK_TRAIN_STEPS (300), CHECK_DIST_STEPS (40), CHECK_AUTO_STEPS (30), CHECK_BENCH
# ("1 20": repetitions and steps of compare.sh), CHECK_CORPUS_LINES (1000), CHECK_BUDGET_S (540).
#
# A rehearsal on a CPU machine (CHECK_REHEARSAL=1, CHECK_BUILD_DIR=an existing CI build, PYTHON
# a Python with torch) runs every step with CPU stand-ins: the build step only checks the
# binaries and the include order (scripts/gpu/include_order.py), the configs are tiny.yaml on
# the test set's 1,000 pairs with a 500-piece vocabulary, NCCL is Gloo, the benchmark is the
# tiny config on the CPU and CTest runs CHECK_CTEST_REGEX. On a CPU the [cuda] step fails, as
# it must. CI runs it (tests/scripts/test_gpu_check.py), so this script's own code is tested
# before a device runs it. CI also runs `configure` on freshly packed .debs (CHECK_DEPS_DIR,
# CHECK_PREFIX, CHECK_BUILD_DIR, CHECK_CMAKE_ARGS="-DCMAKE_IGNORE_PREFIX_PATH=/usr;/"), which the
# rehearsal's build stand-in cannot show.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
dest=${1:?usage: scripts/gpu/check.sh OUTDIR [STEP...]}
shift
steps=("$@")
(( ${#steps[@]} )) || steps=(build test train dist auto translate bench ctest)
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
out=$dest/work  # logs and run directories, packed into $dest/logs.tar.gz at the end
rm -rf "$out"
mkdir -p "$out"
budget=${CHECK_BUDGET_S:-540}
python=${PYTHON:-python3}
jobs=$(nproc)
rehearsal=${CHECK_REHEARSAL:-0}
build=${CHECK_BUILD_DIR:-build-gpu}
# The unit tests whose code differs with a GPU: each has [cuda] cases or device paths.
ctest_regex=${CHECK_CTEST_REGEX:-'^(test_model|test_decode|test_dist|test_dist_collectives|test_amp|test_optim|test_checkpoint|test_benchmark):'}
# What the steps train: the GPU's sizes, or the CPU stand-ins of a rehearsal.
if [[ $rehearsal == 1 ]]; then
  config=configs/tiny.yaml vocab_size=500 max_tokens=1024 nccl=gloo bench_device=cpu
  decode=(--device cpu --amp off --max-len-a 0 --max-len-b 20) corpus_lines=${CHECK_CORPUS_LINES:-200}
  # The test set's 1,000 pairs as the training corpus: the shipped 42,000 made the vocabulary
  # and each run's encoding most of the rehearsal's time.
  data=(--set data.train_src=data/ddtp.en-de.test.en --set data.train_tgt=data/ddtp.en-de.test.de)
  # One thread per rank: CTest runs other tests beside the rehearsal.
  threads=(--set train.threads=1)
  sizes=(--set train.valid_every=0 --set train.log_every=2)
else
  config=configs/transformer-base.yaml vocab_size=8000 max_tokens=8192 nccl=nccl bench_device=cuda
  decode=(--device cuda --amp bf16) corpus_lines=${CHECK_CORPUS_LINES:-1000}
  threads=() data=()
  sizes=(--set train.valid_every=100 --set train.log_every=20)
fi
start_all=$(date +%s)
results=()

# Runs one step: name, then the command; its output goes to $out/<name>.log. Past the budget
# it is skipped (exit 125); a running step is stopped at the budget (exit 124).
step() {
  local name=$1; shift
  local t0=$(date +%s) status=0
  local left=$(( start_all + budget - t0 ))
  if (( left < 10 )); then
    results+=("{\"step\": \"$name\", \"exit\": 125, \"seconds\": 0}")
    echo "[check] $name: skipped, the ${budget} s budget is spent" >&2
    return 125
  fi
  echo "[check] $name ..." >&2
  if declare -F "$1" > /dev/null; then
    # A function of this script (the build) runs in a child bash, so the budget bounds it too.
    local fn=$1; shift
    timeout --kill-after=10 "$left" bash -c "$(declare -f); $fn \"\$@\"" _ "$@" \
      > "$out/$name.log" 2>&1 || status=$?
  else
    timeout --kill-after=10 "$left" "$@" > "$out/$name.log" 2>&1 || status=$?
  fi
  local seconds=$(( $(date +%s) - t0 ))
  results+=("{\"step\": \"$name\", \"exit\": $status, \"seconds\": $seconds}")
  echo "[check] $name: exit $status in ${seconds} s" >&2
  return $status
}
wants() { [[ " ${steps[*]} " == *" $1 "* ]]; }

# --- 0. The machine ----------------------------------------------------------------------------
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1
  nvcc --version 2>&1 | tail -n 2
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())' 2>&1
  cmake --version | head -n 1; ninja --version; echo "cores $jobs"; ldd --version | head -n 1
} > "$out/machine.txt" 2>&1

# --- 1. Build ----------------------------------------------------------------------------------
# A fixed prefix, so that a second call on a warm machine finds the libraries the build links.
prefix=${CHECK_PREFIX:-$repo/build-gpu-deps}
deps=${CHECK_DEPS_DIR:-gpu-deps}
cmake_args=${CHECK_CMAKE_ARGS:-}
export prefix deps cmake_args build python jobs  # for the functions step runs in a child bash
if [[ $rehearsal != 1 ]]; then
  mkdir -p "$prefix"
  export PKG_CONFIG_SYSROOT_DIR=$prefix
  export PKG_CONFIG_LIBDIR=$prefix/usr/lib/x86_64-linux-gnu/pkgconfig:$prefix/usr/share/pkgconfig
  export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # The prefix's headers take the place of CI's /usr/include: a system folder searched after
  # every -I and -isystem of the command line (GCC's CPLUS_INCLUDE_PATH), which CMake then
  # counts as implicit and leaves out of the flags. Passed as an ordinary include folder, its
  # fmt 9 would come before LibTorch's fmt 12 (scripts/gpu/include_order.py checks).
  export CPLUS_INCLUDE_PATH=$prefix/usr/include${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}
fi
# Unpacks the .debs and configures. On its own (step `configure`) it is what CI tests against
# the packages pack-deps.sh downloads, with /usr and / out of CMake's search (CHECK_CMAKE_ARGS; /
# too, since /lib is /usr/lib on a merged-/usr system), so
# that a package CMakeLists.txt needs and pack-deps.sh lacks fails there, not on the GPU box.
configure_project() {
  ls "$deps"/*.deb > /dev/null || { echo "no $deps/*.deb: run scripts/gpu/pack-deps.sh and carry $deps"; return 1; }
  local deb
  for deb in "$deps"/*.deb; do dpkg-deb -x "$deb" "$prefix" || return 1; done
  # Everything the build needs, checked up front: one line naming what is missing, not a
  # CMake error several minutes in.
  local missing=() f
  for f in CLI/CLI.hpp spdlog/spdlog.h fmt/format.h yaml-cpp/yaml.h sentencepiece_processor.h \
           catch2/catch.hpp gloo/config.h zlib.h nlohmann/json.hpp xxhash.h; do
    [[ -f $prefix/usr/include/$f || -f /usr/include/$f ]] || missing+=("$f")
  done
  [[ -x $prefix/usr/bin/pkgconf ]] || missing+=(pkgconf)
  if (( ${#missing[@]} )); then
    echo "[check] missing for the build: ${missing[*]} (rerun scripts/gpu/pack-deps.sh and carry $deps)"
    return 1
  fi
  local torch_prefix
  torch_prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)') || return 1
  # shellcheck disable=SC2086  # CHECK_CMAKE_ARGS: several words
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$torch_prefix;$prefix/usr" \
    -DPKG_CONFIG_EXECUTABLE="$prefix/usr/bin/pkgconf" \
    -DTORCH_CUDA_ARCH_LIST=9.0 -DNMT_PYTHON="$(command -v "$python")" $cmake_args || return 1
  # The include order as on CI, checked before minutes of compiling. A build folder configured
  # before CPLUS_INCLUDE_PATH was set keeps the old order: remove build-gpu/ then.
  "$python" scripts/gpu/include_order.py "$build"
}
build_project() {
  configure_project && cmake --build "$build" -j "$jobs"
}
# The rehearsal's stand-in: the binaries of the given build are there.
check_build() {
  local t
  for t in nmt-train nmt-ckpt tests/test_util; do
    [[ -x $build/$t ]] || { echo "[check] missing $build/$t"; return 1; }
  done
  echo "[check] using the build in $build"
  "$python" scripts/gpu/include_order.py "$build"
}
if wants configure; then
  step configure configure_project || { echo "[check] the configuration failed; see $out/configure.log" >&2; }
fi
if wants build; then
  what=build_project
  [[ $rehearsal == 1 ]] && what=check_build
  step build $what || { echo "[check] the build failed; see $out/build.log" >&2; }
fi
train=$build/nmt-train
have_binary() { [[ -x $train ]]; }

# --- 2. The [cuda] test cases -------------------------------------------------------------------
# NMT_REQUIRE_CUDA=1 (tests/skip.h): a [cuda] case that finds no GPU fails instead of skipping,
# so a box whose GPU the tests cannot see does not pass this step.
export NMT_REQUIRE_CUDA=1
cuda_tests() {
  local status=0 t
  for t in test_model test_decode test_dist test_dist_collectives test_amp test_optim test_checkpoint \
           test_e2e_training; do
    [[ -x $build/tests/$t ]] || { echo "missing $build/tests/$t"; status=1; continue; }
    "$build/tests/$t" "[cuda]" -s -r compact || status=1
  done
  return $status
}
if wants test && have_binary; then
  step test-cuda timeout 300 bash -c "$(declare -f cuda_tests); build=$build; cuda_tests"
fi

# --- 3. bf16 and fp16 training of the base config on the shipped corpus -------------------------
common=(--set data.vocab_size=$vocab_size "${data[@]}" "${threads[@]}" "${sizes[@]}" --set checkpoint.every_steps=100000
        --set train.warmup_steps=100 --set train.lr=0.001)
if wants train && have_binary; then
  # The vocabulary, trained once for the steps after it; a step, so the budget bounds it too.
  step vocab "$train" --config $config --dry-run --log-level warn --set data.vocab_size=$vocab_size \
    "${data[@]}" --set run_dir="$out/vocab"
  common+=(--set data.spm_model="$out/vocab/vocab/joint.model")
  for amp in bf16 fp16; do
    step "train-$amp" "$train" --config $config --set run_dir="$out/train-$amp" \
      "${common[@]}" --set amp.mode=$amp --set train.max_steps=${CHECK_TRAIN_STEPS:-300} \
      --set data.max_tokens=$max_tokens
  done
fi

# --- 4. Distributed on one GPU --------------------------------------------------------------
if wants dist && have_binary; then
  dist=(--config $config "${common[@]}" --set amp.mode=bf16
        --set train.max_steps=${CHECK_DIST_STEPS:-40} --set model.dropout=0 --set data.max_tokens=$max_tokens)
  step nccl-world1 "$train" "${dist[@]}" --set run_dir="$out/nccl-world1" --set dist.backend=$nccl
  step gloo-2ranks "$train" "${dist[@]}" --set run_dir="$out/gloo-2ranks" --nproc-per-node 2 \
    --set dist.backend=gloo
  step gloo-2ranks-naive "$train" "${dist[@]}" --set run_dir="$out/gloo-2ranks-naive" \
    --nproc-per-node 2 --set dist.backend=gloo --set data.batching=sentences
  # Memory for big models (#46): optimizer state sharded over the 2 ranks (parameters must match
  # gloo-2ranks'), each layer's forward recomputed in backward (peak against nccl-world1's), and
  # an out-of-memory throw in the middle of a CUDA backward that the run skips and survives.
  step gloo-2ranks-sharded "$train" "${dist[@]}" --set run_dir="$out/gloo-2ranks-sharded" \
    --nproc-per-node 2 --set dist.backend=gloo --set dist.sharding=optimizer
  step nccl-world1-recompute "$train" "${dist[@]}" --set run_dir="$out/nccl-world1-recompute" \
    --set dist.backend=$nccl --set train.activation_checkpointing=true
  step nccl-world1-oom env NMT_FAULT_OOM=0:3:backward "$train" "${dist[@]}" \
    --set run_dir="$out/nccl-world1-oom" --set dist.backend=$nccl
fi

# --- 5. data.max_tokens: auto ---------------------------------------------------------------
if wants auto && have_binary; then
  # The vocabulary of step 3 when it ran; the default limit (65536 tokens) caps the search.
  auto_vocab=()
  [[ -f $out/vocab/vocab/joint.model ]] && auto_vocab=(--set data.spm_model="$out/vocab/vocab/joint.model")
  step auto-base "$train" --config $config --set run_dir="$out/auto-base" "${data[@]}" "${threads[@]}" \
    --set data.vocab_size=$vocab_size "${auto_vocab[@]}" --set amp.mode=bf16 --set data.max_tokens=auto \
    --set train.max_steps=${CHECK_AUTO_STEPS:-30} --set train.log_every=10 --set train.valid_every=0 \
    --set checkpoint.every_steps=100000 --log-level debug
fi

# --- 5b. A corpus decoded on 2 ranks, killed and resumed ------------------------------------
# Rank 0 kills itself (SIGKILL, as a lost node) after its first shard; the run started again
# decodes only the missing shards (corpus/resumed.json) into the file that one process writes
# from the same shards (the same batches, so bf16 rounds alike), and leaves no .parts folder.
corpus_decoding() {
  local translate=$build/nmt-translate dir=$out/corpus
  mkdir -p "$dir"
  head -n "$corpus_lines" data/ddtp.en-de.test.en > "$dir/in.en"
  local args=(-c "$out/train-bf16" -i "$dir/in.en" "$@" --beam 4 --shard-lines 50)
  "$translate" "${args[@]}" -o "$dir/one.de" --nproc-per-node 1 --stats-json "$dir/one.json" || return 1
  if NMT_TRANSLATE_TEST_KILL_AFTER=0:1 "$translate" "${args[@]}" -o "$dir/two.de" --nproc-per-node 2; then
    echo "[check] the run meant to be killed ended normally"; return 1
  fi
  "$translate" "${args[@]}" -o "$dir/two.de" --nproc-per-node 2 --stats-json "$dir/resumed.json" || return 1
  cmp "$dir/one.de" "$dir/two.de" || { echo "[check] 2 ranks resumed differ from one process"; return 1; }
  [[ ! -e $dir/two.de.parts ]] || { echo "[check] $dir/two.de.parts remains"; return 1; }
  echo "[check] corpus: 2 ranks, killed and resumed, wrote the file of one process"
}
# --- 5c. An ensemble of two checkpoints ------------------------------------------------------
# One process decodes the corpus input with the bf16 run's checkpoint alone, with it twice (the
# same file: 0.5 x + 0.5 x is x in float32) and with the bf16 and fp16 runs' checkpoints
# together (one vocabulary, step 3's); ensemble/one.json and two.json hold the rates.
ensemble_decoding() {
  local translate=$build/nmt-translate dir=$out/ensemble a=$out/train-bf16 b=$out/train-fp16
  mkdir -p "$dir"
  head -n "$corpus_lines" data/ddtp.en-de.test.en > "$dir/in.en"
  local args=(-i "$dir/in.en" "$@" --beam 4)
  "$translate" -c "$a" "${args[@]}" -o "$dir/one.de" --stats-json "$dir/one.json" || return 1
  "$translate" -c "$a" -c "$a" "${args[@]}" -o "$dir/self.de" || return 1
  cmp "$dir/one.de" "$dir/self.de" || { echo "[check] a checkpoint with itself differs from it alone"; return 1; }
  "$translate" -c "$a" -c "$b" "${args[@]}" -o "$dir/two.de" --stats-json "$dir/two.json" || return 1
  echo "[check] ensemble: a checkpoint with itself wrote the file of it alone"
}
if wants translate && have_binary; then
  export out corpus_lines  # for corpus_decoding and ensemble_decoding, which steps run in a child bash
  step corpus corpus_decoding "${decode[@]}"
  step ensemble ensemble_decoding "${decode[@]}"
fi

# --- 6. Benchmarks next to the reference loop ------------------------------------------------
if wants bench && have_binary; then
  # One repetition of each of the 4 runs (base and big, bf16 and fp16) first; compare.sh starts
  # nothing past DEADLINE and prints the table of what finished, so a short budget still
  # reports. The headline tokens/s is unsynced; the split comes from a synced second pass.
  # The vocabulary of step 3 when it ran (compare.sh trains one otherwise).
  bench_configs=()
  [[ -f $out/vocab/vocab/joint.model ]] && bench_configs+=(SPM_MODEL="$out/vocab/vocab/joint.model")
  [[ $rehearsal == 1 ]] && bench_configs+=(CONFIGS=tiny THREADS=1 TRAIN_ARGS="${data[*]}")
  step bench env DEVICE=$bench_device "${bench_configs[@]}" NMT_TRAIN="$train" NMT_PYTHON="$python" OUT="$out/bench" \
    DEADLINE=$(( start_all + budget - 30 )) scripts/bench/compare.sh ${CHECK_BENCH:-1 20}
fi

# --- 7. CTest on the GPU-relevant unit tests -------------------------------------------------
# The rest of the suite (end-to-end training, bitwise resume, launchers) is CPU work that CI
# runs; after a cold build it would not fit the budget here.
if wants ctest && have_binary; then
  step ctest ctest --test-dir "$build" -R "$ctest_regex" --no-tests=error -j "$(( jobs / 2 > 0 ? jobs / 2 : 1 ))" \
    --timeout 300 --output-on-failure
fi

# --- Summary -----------------------------------------------------------------------------------
{
  echo "[$(IFS=,; echo "${results[*]}")]"
} > "$out/results.json"
"$python" scripts/gpu/summary.py "$out" > "$out/summary.md" 2>&1
cp "$out/summary.md" "$out/results.json" "$out/machine.txt" "$dest/"
tar -czf "$dest/logs.tar.gz" -C "$out" --exclude='*.safetensors' --exclude='*.tok' --exclude='*.tmp*' .
rm -rf "$out"
echo "[check] done in $(( $(date +%s) - start_all )) s; $dest/summary.md, logs in $dest/logs.tar.gz" >&2
cat "$dest/summary.md" >&2
