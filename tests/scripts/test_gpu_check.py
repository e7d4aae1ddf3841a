"""Tests of scripts/gpu/check.sh and its summary, run by CTest (tests/CMakeLists.txt), so the
script's own code is tested on every CI run before a GPU box runs it.

    test_summary_reports_a_diverged_run                     the summary of a diverged run
    test_rehearsal_runs_every_step_on_cpu                   check.sh end to end, CPU stand-ins
    test_a_spent_budget_skips_every_step_and_still_reports  every step skipped, a summary
    test_include_order_is_checked                           include_order.py, CI build and a bad one
    test_packed_packages_are_all_the_build_needs            CMake configures from pack-deps.sh's
                                                            packages alone (/usr and / out of its
                                                            search); skipped where Debian's archive
                                                            cannot be reached

    pytest tests/scripts/test_gpu_check.py::test_summary_reports_a_diverged_run --build-dir build

The rehearsal runs every step (CHECK_REHEARSAL=1: the tiny config, Gloo for NCCL, the benchmark on
the CPU, a few CTest cases) and checks what comes back: the four files, each step's exit, each
section of the summary. On a CPU machine the [cuda] step must fail (its cases find no GPU and
NMT_REQUIRE_CUDA=1 forbids the skip); every other step must pass.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

import pytest
from nmt_tools.paths import ROOT

CHECK = os.path.join(ROOT, "scripts", "gpu", "check.sh")
SUMMARY = os.path.join(ROOT, "scripts", "gpu", "summary.py")
STEPS = ["build", "test-cuda", "vocab", "train-bf16", "train-fp16", "nccl-world1", "gloo-2ranks",
         "gloo-2ranks-naive", "gloo-2ranks-sharded", "nccl-world1-recompute", "nccl-world1-oom",
         "auto-base", "corpus", "ensemble", "bench", "ctest"]


def fail(message):
    pytest.fail(message)


def expect(condition, message):
    if not condition:
        fail(message)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def test_summary_reports_a_diverged_run() -> None:
    """A NaN loss is JSON null in metrics.jsonl: the summary reports it and every later section."""
    with tempfile.TemporaryDirectory() as out:
        write(os.path.join(out, "machine.txt"), "a machine\n")
        write(os.path.join(out, "results.json"), json.dumps(
            [{"step": "train-bf16", "exit": 0, "seconds": 3}, {"step": "bench", "exit": 125, "seconds": 0}]))
        rows = [{"type": "train", "step": 10, "loss": 8.5, "loss_scale": 65536.0, "skipped_updates": 0,
                 "tokens_per_s": 1000.0, "peak_memory_mb": 700.0},
                {"type": "valid", "step": 10, "loss": None},
                {"type": "train", "step": 20, "loss": None, "loss_scale": None, "skipped_updates": 3,
                 "tokens_per_s": None, "peak_memory_mb": None}]
        write(os.path.join(out, "train-bf16", "metrics.jsonl"),
              "".join(json.dumps(r) + "\n" for r in rows) + '{"type": "tra')  # cut short by a kill
        write(os.path.join(out, "gloo-2ranks", "summary.json"), json.dumps(
            {"final_step": 20, "stop_reason": "max_steps", "parameter_hashes": ["ab", "ab"],
             "peak_memory_mb": [None, 10.0], "tokens_per_s": None}))
        write(os.path.join(out, "auto-base", "summary.json"), json.dumps(
            {"max_tokens": 4096, "max_tokens_fit": None, "peak_memory_mb": None}))
        write(os.path.join(out, "test-cuda.log"), "SKIPPED: no GPU\nPassed 1 test case\n")
        write(os.path.join(out, "bench.log"), "a table\n")
        r = subprocess.run([sys.executable, SUMMARY, out], capture_output=True, text=True)
        print(r.stdout + r.stderr)
        expect(r.returncode == 0, f"summary.py exited {r.returncode}")
        for wanted in ("- train-bf16: exit 0 in 3 s", "bench: exit 125 in 0 s (skipped: the budget",
                       "bf16: loss 8.500 -> NaN over 20 steps; NaN: True (first at step 20)",
                       "NaN tok/s; peak NaN MiB", "gloo-2ranks: step 20 (max_steps)",
                       "auto-base: max_tokens 4096", "SKIPPED: no GPU", "a table"):
            expect(wanted in r.stdout, f"the summary lacks {wanted!r}")
        expect("section failed" not in r.stdout, "a section of the summary failed")


def run_check(build, out, budget, steps=()):
    env = dict(os.environ, CHECK_REHEARSAL="1", CHECK_BUILD_DIR=os.path.abspath(build),
               PYTHON=os.environ.get("PYTHON", sys.executable), CHECK_BUDGET_S=str(budget),
               CHECK_TRAIN_STEPS="6", CHECK_DIST_STEPS="4", CHECK_AUTO_STEPS="2",
               CHECK_BENCH="1 4", CHECK_CTEST_REGEX="^test_util:json")
    start = time.time()
    r = subprocess.run(["bash", CHECK, out, *steps], cwd=ROOT, env=env, capture_output=True,
                       text=True)
    print(r.stderr[-6000:])
    print(f"[test] check.sh exited {r.returncode} in {time.time() - start:.0f} s")
    expect(r.returncode == 0, f"check.sh exited {r.returncode}")
    for name in ("summary.md", "results.json", "machine.txt", "logs.tar.gz"):
        expect(os.path.isfile(os.path.join(out, name)), f"check.sh left no {name}")
    expect(sorted(os.listdir(out)) == ["logs.tar.gz", "machine.txt", "results.json", "summary.md"],
           f"check.sh left more than its four files: {sorted(os.listdir(out))}")
    with open(os.path.join(out, "results.json")) as f:
        results = {r["step"]: r for r in json.load(f)}
    with open(os.path.join(out, "summary.md")) as f:
        summary = f.read()
    print(summary)
    expect("section failed" not in summary, "a section of the summary failed")
    return results, summary


def log(out, name):
    with tarfile.open(os.path.join(out, "logs.tar.gz")) as tar:
        member = tar.extractfile(f"./{name}")
        return member.read().decode(errors="replace") if member else ""


def test_rehearsal_runs_every_step_on_cpu(binaries) -> None:
    build = str(binaries.build_dir)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        results, summary = run_check(build, out, budget=400)
        expect(list(results) == STEPS, f"steps {list(results)}, expected {STEPS}")
        cuda = results["test-cuda"]
        if cuda["exit"] != 0:  # no GPU here: the cases must fail, not skip
            expect("NMT_REQUIRE_CUDA=1, but this [cuda] case found no GPU" in log(out, "test-cuda.log"),
                   "test-cuda failed for another reason than the missing GPU")
        failed = {s: r["exit"] for s, r in results.items() if s != "test-cuda" and r["exit"] != 0}
        for step in failed:
            print(f"--- {step}.log\n{log(out, step + '.log')[-3000:]}")
        expect(not failed, f"steps failed: {failed}")
        for wanted in ("bf16: loss", "fp16: loss", "nccl-world1: step 4", "gloo-2ranks: step 4",
                       "gloo-2ranks-naive: step 4", "gloo-2ranks-sharded: step 4",
                       "nccl-world1-recompute: step 4", "nccl-world1-oom: step 4",
                       "out-of-memory skips 1", "[cuda] test cases:", "auto-base: max_tokens",
                       "corpus: 200 lines in 4 shards", "ensemble: 200 lines, beam 4",
                       "tiny-config"):
            expect(wanted in summary, f"the summary lacks {wanted!r}")
        with tarfile.open(os.path.join(out, "logs.tar.gz")) as tar:
            names = tar.getnames()
        expect("./train-bf16/metrics.jsonl" in names, "logs.tar.gz lacks train-bf16/metrics.jsonl")
        expect(not any(n.endswith(".safetensors") for n in names), "logs.tar.gz holds checkpoints")


def test_a_spent_budget_skips_every_step_and_still_reports(binaries) -> None:
    """No time left: every step is skipped (exit 125), and the summary still comes back."""
    build = str(binaries.build_dir)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        results, summary = run_check(build, out, budget=0, steps=("build", "train", "ctest"))
        wanted = ["build", "vocab", "train-bf16", "train-fp16", "ctest"]
        expect(list(results) == wanted, f"steps {list(results)}, expected {wanted}")
        expect(all(r["exit"] == 125 for r in results.values()), f"not all skipped: {results}")
        expect("(skipped: the budget was spent)" in summary, "the summary does not say why")


def test_include_order_is_checked(binaries) -> None:
    """include_order.py passes on the CI build and fails where another fmt comes first."""
    build = str(binaries.build_dir)
    check = os.path.join(ROOT, "scripts", "gpu", "include_order.py")
    r = subprocess.run([sys.executable, check, build], capture_output=True, text=True)
    print(r.stdout + r.stderr)
    expect(r.returncode == 0 and "include order as on CI" in r.stdout, "the CI build's order failed")
    with tempfile.TemporaryDirectory() as tmp:
        # The GPU box's mistake: a prefix with fmt 9 as an include folder before LibTorch's.
        write(os.path.join(tmp, "prefix", "fmt", "core.h"), "#define FMT_VERSION 90100\n")
        with open(os.path.join(build, "compile_commands.json")) as f:
            commands = json.load(f)
        for entry in commands:
            args = entry.get("arguments") or entry["command"].split()
            entry.pop("command", None)
            entry["arguments"] = [args[0], "-isystem", os.path.join(tmp, "prefix")] + args[1:]
        write(os.path.join(tmp, "build", "compile_commands.json"), json.dumps(commands))
        r = subprocess.run([sys.executable, check, os.path.join(tmp, "build")], capture_output=True,
                           text=True)
        print(r.stdout + r.stderr)
        expect(r.returncode != 0 and "not from LibTorch's" in r.stderr,
               "another fmt before LibTorch's went unnoticed")


PACK_DEPS = os.path.join(ROOT, "scripts", "gpu", "pack-deps.sh")
# What CMakeLists.txt finds by its CMake files: each must come from the unpacked packages.
CONFIG_PACKAGES = ["yaml-cpp", "CLI11", "spdlog", "fmt", "nlohmann_json", "Catch2"]


def configure_from(deps, tmp, name):
    """check.sh's `configure` step on the packages in `deps`, with /usr and / out of CMake's
    search (the GPU box has none of them there; / too, since /lib is /usr/lib on a merged-/usr
    system); pkg-config sees only the prefix in every run."""
    out, prefix, build = (os.path.join(tmp, f"{name}-{what}") for what in ("out", "prefix", "build"))
    env = dict(os.environ, CHECK_DEPS_DIR=deps, CHECK_PREFIX=prefix, CHECK_BUILD_DIR=build,
               CHECK_CMAKE_ARGS="-DCMAKE_IGNORE_PREFIX_PATH=/usr;/",
               PYTHON=os.environ.get("PYTHON", sys.executable))
    r = subprocess.run(["bash", CHECK, out, "configure"], cwd=ROOT, env=env, capture_output=True,
                       text=True)
    with open(os.path.join(out, "results.json")) as f:
        exit_code = {s["step"]: s["exit"] for s in json.load(f)}.get("configure")
    configure_log = log(out, "configure.log")
    print(f"[test] {name}: check.sh exited {r.returncode}, configure {exit_code}")
    cache = {}
    cache_path = os.path.join(build, "CMakeCache.txt")
    if os.path.exists(cache_path):
        for line in open(cache_path):
            key, _, value = line.rstrip("\n").partition("=")
            cache[key.split(":")[0]] = value
    return exit_code, configure_log, cache, prefix


def found_in_system(cache):
    """Cache entries of what CMake found (package folders, headers, libraries) that lie in the
    system's folders rather than the prefix: each would be missing on the GPU box. /usr/local is
    not one of them, itself included: the CUDA toolkit is the GPU box's own, and where PATH finds
    nvcc as /usr/local/bin/nvcc (a wrapper, as on CI's machine) CMake's toolkit root is
    /usr/local."""
    found = re.compile(r"(_DIR|_INCLUDE_DIR|_LIBRARY|_LIBRARY_RELEASE|_LIBRARY_DEBUG)$|^pkgcfg_lib_")

    def in_system(path):
        in_local = path == "/usr/local" or path.startswith("/usr/local/")
        return path.startswith(("/usr/", "/lib/", "/lib64/")) and not in_local

    return {key: value for key, value in cache.items() if found.search(key) and in_system(value)}


def test_system_folders_are_told_from_usr_local() -> None:
    """found_in_system tells the system's folders from /usr/local and the prefix (CI failed when
    CMake's CUDA toolkit root was /usr/local itself, without a trailing slash)."""
    cache = {
        "CUDA_TOOLKIT_ROOT_DIR": "/usr/local",
        "CUDA_INCLUDE_DIRS": "/usr/local/cuda/include",
        "CUDA_CUDART_LIBRARY": "/usr/local/cuda/lib64/libcudart.so",
        "yaml-cpp_DIR": "/tmp/check/prefix/usr/lib/x86_64-linux-gnu/cmake/yaml-cpp",
        "spdlog_DIR": "/usr/lib/x86_64-linux-gnu/cmake/spdlog",
        "nlohmann_json_DIR": "/usr/share/cmake/nlohmann_json",
        "pkgcfg_lib_XXHASH_xxhash": "/lib/x86_64-linux-gnu/libxxhash.so",
        "ZLIB_LIBRARY_RELEASE": "/usr/localized/libz.so",
        "CMAKE_INSTALL_PREFIX": "/usr",
    }
    leaks = found_in_system(cache)
    expected = {"spdlog_DIR", "nlohmann_json_DIR", "pkgcfg_lib_XXHASH_xxhash",
                "ZLIB_LIBRARY_RELEASE"}
    expect(set(leaks) == expected, f"found_in_system gave {sorted(leaks)}, not {sorted(expected)}")


def test_packed_packages_are_all_the_build_needs() -> None:
    """Everything CMakeLists.txt needs besides CUDA and LibTorch is in pack-deps.sh's list: the
    GPU box has no package registry, and a package added to the build but not to the list
    failed there, minutes into a rare device session (nlohmann-json and xxhash were missing)."""
    if shutil.which("apt-cache") is None or shutil.which("apt-get") is None:
        pytest.skip("no apt here (pack-deps.sh downloads Debian packages)")
    if subprocess.run(["apt-cache", "show", "zlib1g-dev"], capture_output=True).returncode != 0:
        pytest.skip("apt knows no packages here (empty package lists: apt-get update)")
    with tempfile.TemporaryDirectory() as tmp:
        deps = os.path.join(tmp, "deps")
        try:
            r = subprocess.run(["bash", PACK_DEPS, deps], capture_output=True, text=True,
                               timeout=180)
        except subprocess.TimeoutExpired:
            pytest.skip("Debian's archive did not answer within 180 s")
        print(r.stdout[-3000:] + r.stderr[-3000:])
        if r.returncode != 0:
            # A 404 is this machine's stale package lists, not the network: a failure to fix.
            expect("404" not in r.stderr, "pack-deps.sh: a package was not found on the archive "
                   "(404): this machine's package lists are stale (apt-get update)")
            unreachable = ("Failed to fetch", "Could not resolve", "Temporary failure resolving")
            if any(u in r.stderr for u in unreachable):
                pytest.skip("Debian's archive cannot be reached from here")
            fail(f"pack-deps.sh exited {r.returncode}")
        debs = sorted(f for f in os.listdir(deps) if f.endswith(".deb"))
        exit_code, configure_log, cache, prefix = configure_from(deps, tmp, "all")
        if exit_code != 0:
            print(configure_log[-6000:])
        expect(exit_code == 0, "CMake did not configure from the packed packages alone")
        for package in CONFIG_PACKAGES:
            where = cache.get(f"{package}_DIR", "")
            expect(where.startswith(prefix + "/"),
                   f"{package} was found at {where!r}, not among the packed packages")
        leaks = found_in_system(cache)
        expect(not leaks, f"found in the system's folders, not among the packed packages: {leaks}")
        # The check can fail: without one package (found by its CMake files in /usr/lib, where
        # / also leads on a merged-/usr system; in /usr/share; by pkg-config), the
        # configuration fails and says which.
        for dropped, message in (("libyaml-cpp-dev_", 'provided by "yaml-cpp"'),
                                 ("nlohmann-json3-dev_", 'provided by "nlohmann_json"'),
                                 ("libxxhash-dev_", "Package 'libxxhash', required by")):
            fewer = os.path.join(tmp, "without-" + dropped.rstrip("_"))
            os.makedirs(fewer)
            for deb in debs:
                if not deb.startswith(dropped):
                    os.link(os.path.join(deps, deb), os.path.join(fewer, deb))
            expect(len(os.listdir(fewer)) == len(debs) - 1, f"pack-deps.sh packed no {dropped}*.deb")
            exit_code, configure_log, _, _ = configure_from(fewer, tmp, os.path.basename(fewer))
            expect(exit_code not in (0, None) and message in configure_log,
                   f"without {dropped}*.deb the configuration did not fail with {message!r}")
