#!/usr/bin/env python3
"""Checks that a build sees LibTorch's fmt, not another one, in a source that sees LibTorch.

    scripts/gpu/include_order.py BUILD_DIR [SOURCE]      (default SOURCE: src/dist/device.cpp)

LibTorch ships fmt 12 headers; Debian's fmt 9 (what spdlog is built with) lives in
/usr/include. On CI /usr/include is the compiler's own system folder, searched after every
-I and -isystem of the command line, so LibTorch's fmt wins in every target that sees Torch
(CMakeLists.txt, nmt::torch). On the GPU box Debian's headers are unpacked into a private
prefix: passed as an ordinary include folder it would come before LibTorch's and swap the fmt
of those targets. scripts/gpu/check.sh's configure step runs this after CMake, and its CI
rehearsal runs it on the CI build.

Preprocesses `#include <fmt/core.h>` with SOURCE's include folders and definitions (from
BUILD_DIR/compile_commands.json) and the compiler's environment, then prints the include
folders in search order, the fmt header found and its version; exits 1 unless that header is
under the first folder named .../torch/include.
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile


def flags_of(build, source):
    with open(os.path.join(build, "compile_commands.json")) as f:
        commands = json.load(f)
    wanted = os.path.realpath(source)
    for entry in commands:
        path = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
        if path == wanted:
            args = entry.get("arguments") or shlex.split(entry["command"])
            return entry["directory"], args
    sys.exit(f"include_order: {source} is not in {build}/compile_commands.json")


def include_flags(args):
    """The compiler, then only what decides which header a name finds: include folders,
    definitions and the language standard (no precompiled header, no output, no -c)."""
    kept = [args[0]]
    i = 1
    while i < len(args):
        a = args[i]
        if a in ("-isystem", "-I", "-iquote", "-idirafter", "-D"):
            kept += [a, args[i + 1]]
            i += 2
            continue
        if re.match(r"-(I|D|isystem|iquote|idirafter)\S", a) or a.startswith("-std="):
            kept.append(a)
        i += 1
    return kept


def main():
    build = sys.argv[1]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    source = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "src", "dist", "device.cpp")
    directory, args = flags_of(build, source)
    command = include_flags(args)
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "probe.cpp")
        with open(probe, "w") as f:
            f.write("#include <fmt/core.h>\nfmt_version_is FMT_VERSION\n")
        r = subprocess.run(command + ["-E", "-v", "-x", "c++", probe], cwd=directory,
                           capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"include_order: the preprocessor failed:\n{r.stderr}")
    # gcc -v lists the folders it searches, in order, between these two lines.
    search = re.search(r"search starts here:\n(.*?)End of search list", r.stderr, re.S)
    folders = [l.strip() for l in search.group(1).splitlines() if l.startswith(" ")] if search else []
    found = next((m.group(1) for m in re.finditer(r'^# \d+ "([^"]*/fmt/core\.h)"', r.stdout, re.M)),
                 None)
    # The expansion may follow on another line, after a line marker (# 2 "probe.cpp" 3 4).
    tail = r.stdout[r.stdout.rfind("fmt_version_is"):]
    version = re.search(r"(\d+)", "\n".join(l for l in tail.splitlines() if not l.startswith("#")))
    print("include folders, in search order:")
    for folder in folders:
        print(f"  {folder}")
    print(f"fmt/core.h: {found}; FMT_VERSION {version.group(1) if version else '?'}")
    torch = next((f for f in folders if os.path.normpath(f).endswith(os.path.join("torch", "include"))),
                 None)
    if torch is None:
        sys.exit("include_order: no .../torch/include among the include folders")
    if not found or not os.path.realpath(found).startswith(os.path.realpath(torch) + os.sep):
        sys.exit(f"include_order: fmt/core.h came from {found}, not from LibTorch's {torch}: "
                 "another fmt's headers are searched before LibTorch's (a prefix passed as an "
                 "include folder instead of a system one)")
    print(f"include order as on CI: LibTorch's fmt ({torch}) first")


if __name__ == "__main__":
    main()
