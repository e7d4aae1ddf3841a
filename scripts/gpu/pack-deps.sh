#!/usr/bin/env bash
# Downloads the Debian packages that building nmt-train needs besides CUDA and LibTorch (which
# the GPU box has) into a git-ignored folder, so that scripts/gpu/check.sh can build there
# without a package registry: run this where Debian's archive is reachable, then pass the
# folder along with the working tree (the device tool's `carry`).
#
#   scripts/gpu/pack-deps.sh [DIR]        (default gpu-deps; prints what it packed)
#
# Packed: the -dev packages (headers, CMake and pkg-config files) of every find_package and
# pkg_check_modules of CMakeLists.txt besides Torch (CI configures from this list alone: tests/
# scripts/test_gpu_check.py::test_packed_packages_are_all_the_build_needs), the shared
# libraries they depend on, pkgconf, whose pkg-config CMake uses to find SentencePiece and
# xxhash, and zlib1g-dev, since CMakeLists.txt requires ZLIB and a box with only the runtime library lacks its header. Left
# out: what every glibc system has (libc6, libstdc++6, libgcc-s1, zlib1g).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=${1:-$repo/gpu-deps}
mkdir -p "$dir"
cd "$dir"
dev=(libcli11-dev libspdlog-dev libfmt-dev libyaml-cpp-dev libsentencepiece-dev catch2 libgloo-dev
     nlohmann-json3-dev libxxhash-dev
     zlib1g-dev pkgconf pkgconf-bin libpkgconf3)
base='^(libc6|libstdc\+\+6|libgcc-s1|zlib1g|libc6-dev|libc-dev)$'
# One level of Depends of each -dev package: the runtime libraries (libspdlog1.x, libfmt10, ...).
mapfile -t deps < <(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
                      --no-replaces --no-enhances "${dev[@]}" |
                    awk '$1 == "Depends:" && $2 !~ /^</ { print $2 }' | sort -u | grep -Ev "$base")
mapfile -t wanted < <(printf '%s\n' "${dev[@]}" "${deps[@]}" | sort -u)
rm -f ./*.deb
# apt warns when root downloads outside its sandbox: harmless here, so that line is dropped.
if ! apt-get download "${wanted[@]}" > /dev/null 2> download.err; then
  cat download.err >&2
  exit 1
fi
grep -v "unsandboxed" download.err >&2 || true
rm -f download.err
echo "packed ${#wanted[@]} packages into $dir ($(du -sh . | cut -f1)):"
ls -1 ./*.deb | sed 's|^\./|  |'
