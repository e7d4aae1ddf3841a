#!/usr/bin/env bash
# Installs what nmt-train needs and builds it. Idempotent: a second run skips what is done.
#
#   scripts/setup.sh            # apt packages, Python venv with torch, CMake configure, build
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
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

torch_version=$(sed -n 's/^torch==//p' scripts/requirements.txt)
cache=${NMT_CACHE:-$HOME/.cache/nmt-train}
venv=$cache/torch-$torch_version/venv
build_dir=${NMT_BUILD_DIR:-build}
build_type=${NMT_BUILD_TYPE:-Release}
jobs=${NMT_JOBS:-$(nproc)}

step() { printf '\n[setup %s] %s\n' "$1" "$2"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

# --- 1. Debian packages -------------------------------------------------------------------
apt_packages=(
  build-essential cmake ninja-build ccache pkg-config
  libcli11-dev libspdlog-dev libfmt-dev libyaml-cpp-dev nlohmann-json3-dev
  libsentencepiece-dev sentencepiece zlib1g-dev catch2 libxxhash-dev
  openmpi-bin libopenmpi-dev libgloo-dev
  slurm-wlm munge  # tests/e2e/test_slurm.sh starts its own; 7 packages, 13 MB
  python3 python3-venv
  iso-codes  # ISO 639 JSON: ctest checks src/data/iso639_codes.h against it (not used at run time)
)
step 1/4 "Debian packages"
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
step 2/4 "Python venv with torch $torch_version ($venv)"
req_hash=$(sha256sum scripts/requirements.txt | cut -c1-16)
if [ -f "$venv/.nmt-complete" ] && [ "$(cat "$venv/.nmt-complete")" = "$req_hash" ]; then
  echo "present"
else
  command -v python3 >/dev/null || die "python3 not found"
  mkdir -p "$(dirname "$venv")"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  # The CUDA wheel is large (several GB with its nvidia-* dependencies): pip shows progress.
  "$venv/bin/python" -m pip install --progress-bar on -r scripts/requirements.txt
  echo "$req_hash" > "$venv/.nmt-complete"
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
