#!/usr/bin/env bash
# Installs what nmt-train needs and builds it. Idempotent: a second run skips what is done.
#
#   scripts/setup.sh            # apt packages, Python venv with torch, CMake configure, build
#
# Two profiles (NMT_SETUP): `demo` (what scripts/demo.sh runs: the compiler's packages and
# torch + matplotlib) and `full` (the default; scripts/test.sh: also MPI, Slurm, sacrebleu,
# CTranslate2, TensorBoard, ... that tests and other scripts use). A full setup after a demo
# one adds what is missing.
#
# Everything comes from Debian's archive and PyPI. The virtual environment and the compiler
# cache live outside the clone (NMT_CACHE, default ~/.cache/nmt-train/), keyed by the torch
# version, so a fresh clone on the same machine reuses them.
#
# Environment:
#   NMT_CACHE        cache root (venv, ccache)                  [~/.cache/nmt-train]
#   NMT_BUILD_DIR    CMake build directory                      [build]
#   NMT_BUILD_TYPE   CMake build type                           [Release]
#   NMT_JOBS         parallel compile jobs                      [nproc]
#   NMT_SKIP_APT=1   do not check or install Debian packages
#   NMT_TARGETS      build only these targets (space-separated); unset: everything, tests too
#   NMT_SETUP        demo | full: which packages to install            [full]
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

torch_version=$(sed -n 's/^torch==//p' scripts/requirements.txt)
cache=${NMT_CACHE:-$HOME/.cache/nmt-train}
venv=$cache/torch-$torch_version/venv
build_dir=${NMT_BUILD_DIR:-build}
build_type=${NMT_BUILD_TYPE:-Release}
jobs=${NMT_JOBS:-$(nproc)}
uv_version=0.13.9  # the installer of the venv's packages (step 2)
profile=${NMT_SETUP:-full}

step() { printf '\n[setup %s] %s\n' "$1" "$2"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }
case "$profile" in demo|full) ;; *) die "NMT_SETUP=$profile: expected demo or full" ;; esac

# --- 1. Debian packages -------------------------------------------------------------------
# What building nmt-train and running the demo needs (catch2: CMake configures the tests too).
apt_packages=(
  build-essential cmake ninja-build ccache pkg-config
  libcli11-dev libspdlog-dev libfmt-dev libyaml-cpp-dev nlohmann-json3-dev
  libsentencepiece-dev zlib1g-dev catch2 libxxhash-dev
  libgloo-dev  # LibTorch's c10d/ProcessGroupGloo.hpp includes gloo's headers
  python3 python3-venv
)
# What only the tests and other scripts use.
[ "$profile" = full ] && apt_packages+=(
  sentencepiece  # the spm_* command-line tools, to inspect a vocabulary (not used by the build)
  openmpi-bin libopenmpi-dev
  slurm-wlm munge  # tests/e2e/test_slurm.sh starts its own; 7 packages, 13 MB
  iso-codes  # ISO 639 JSON: ctest checks src/data/iso639_codes.h against it (not used at run time)
)
step 1/4 "Debian packages ($profile)"
if [ "${NMT_SKIP_APT:-0}" = 1 ]; then
  echo "skipped (NMT_SKIP_APT=1)"
else
  missing=()
  for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "all ${#apt_packages[@]} packages present"
  else
    echo "installing: ${missing[*]}"
    sudo=""
    if [ "$(id -u)" != 0 ]; then
      command -v sudo >/dev/null || die "not root and no sudo; install these packages: ${missing[*]}"
      sudo=sudo
    fi
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
fi

# --- 2. Python virtual environment with torch ----------------------------------------------
step 2/4 "Python venv with torch $torch_version ($venv, $profile)"
# The demo needs torch (the LibTorch we build against) and matplotlib (scripts/plot-run.py);
# `full` installs all of scripts/requirements.txt. Each profile has its own marker, holding
# the hash of what it installed.
demo_pins=$(grep -E '^(torch|matplotlib)==' scripts/requirements.txt)
if [ "$profile" = demo ]; then
  req_hash=$(printf '%s\n' "$demo_pins" | sha256sum | cut -c1-16)
  marker=$venv/.nmt-demo-complete
else
  req_hash=$(sha256sum scripts/requirements.txt | cut -c1-16)
  marker=$venv/.nmt-complete
fi
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$req_hash" ]; then
  echo "present"
elif [ "$profile" = demo ] && [ -f "$venv/.nmt-complete" ] &&
     [ "$(cat "$venv/.nmt-complete")" = "$(sha256sum scripts/requirements.txt | cut -c1-16)" ]; then
  echo "present (full)"
else
  command -v python3 >/dev/null || die "python3 not found"
  mkdir -p "$(dirname "$venv")"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  if [ "$profile" = demo ]; then
    read -r -a packages <<< "$(echo $demo_pins)"
  else
    packages=(-r scripts/requirements.txt)
  fi
  # uv installs the wheels (several GB with torch's nvidia-* dependencies) in parallel, pip
  # one at a time; pip is the fallback when uv cannot be had or cannot reach the index (uv
  # does not read pip's configuration, e.g. a private index).
  if "$venv/bin/python" -m pip install -q "uv==$uv_version" &&
     "$venv/bin/uv" pip install --native-tls --python "$venv/bin/python" "${packages[@]}"; then
    :
  else
    echo "uv could not install them; installing with pip"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install --progress-bar on "${packages[@]}"
  fi
  echo "$req_hash" > "$marker"
fi
torch_prefix=$("$venv/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)') ||
  die "the venv's torch cannot be imported ($venv); remove $venv and rerun"

# --- 3. CMake configure ----------------------------------------------------------------------
step 3/4 "configure ($build_dir, $build_type)"
export CCACHE_DIR=${CCACHE_DIR:-$cache/ccache}
# Clones live in different folders: hash paths relative to the clone so they share the cache.
export CCACHE_BASEDIR=$repo CCACHE_NOHASHDIR=true
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
cached_prefix=$(sed -n 's/^CMAKE_PREFIX_PATH:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)
if [ -f "$build_dir/build.ninja" ] && [ "$cached_prefix" = "$torch_prefix" ]; then
  echo "already configured"
else
  cmake -S . -B "$build_dir" -G Ninja \
    -DCMAKE_BUILD_TYPE="$build_type" \
    -DCMAKE_PREFIX_PATH="$torch_prefix" \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DNMT_PYTHON="$venv/bin/python"
fi

# --- 4. Build --------------------------------------------------------------------------------
targets=()
[ -n "${NMT_TARGETS:-}" ] && read -r -a targets <<< "$NMT_TARGETS"
step 4/4 "build with $jobs jobs${targets[*]:+: ${targets[*]}}"
start=$(date +%s)
cmake --build "$build_dir" -j "$jobs" ${targets[@]:+--target "${targets[@]}"}
echo "build finished in $(( $(date +%s) - start )) s; ccache: $(ccache -s 2>/dev/null | grep -m1 -iE 'hits' | tr -s ' ' || true)"
