#!/usr/bin/env python3
"""nmt-translate's start-up, binary against binary: for each binary given, REPEATS runs
(alternating the binaries) of one line of data/ddtp.en-de.test.en through a checkpoint whose
loading dominates, on the CPU, reporting per binary the medians of:
  - wall_s: the whole command (process start to exit);
  - load_s: load_seconds of its --stats-json (reading the checkpoint, building and packing the
    model; "-" for a binary that does not write it);
  - peak_rss_mib: the process's peak resident memory (wait4's ru_maxrss): anonymous memory, the
    pages of the libraries' code it ran (LibTorch's: about 250 to 300 MiB) and of files it maps;
  - peak_anon_mib: the peak of its anonymous memory in one more run of each binary, sampled
    from smaps_rollup every 5 ms (not a median; the timed runs are not sampled): what only this
    process holds and the kernel cannot drop (a checkpoint read into memory counts here, a
    mapped one does not).
The outputs of all runs must be identical (the script exits 1 if not).

The default checkpoint, trained when missing (--run runs/bench-load-big): configs/
transformer-big.yaml's shape (d_model 1024, 6+6 layers, ffn 4096) with a 32,000-piece joint
vocabulary, 209M parameters, after one update: fp32 weights and Adam's two moments, 2.5 GB.
A benchmark, not a test: prints a table and writes it as JSON (--json)."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SAMPLE_S = 0.005
MIB = 1 << 20
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def train_if_missing(nmt_train, run):
    checkpoints = os.path.join(run, "checkpoints")
    if os.path.isdir(checkpoints) and any(n.endswith(".safetensors") for n in os.listdir(checkpoints)):
        return
    command = [nmt_train, "--config", "configs/transformer-big.yaml", "--set", "run_dir=" + run,
               "--set", "data.vocab_size=32000", "--set", "amp.mode=off", "--set",
               "train.max_steps=1", "--set", "data.max_tokens=1024", "--set",
               "train.valid_every=0", "--set", "checkpoint.every_steps=1", "--log-level", "warn"]
    print("training %s: %s" % (run, " ".join(command)), file=sys.stderr)
    subprocess.run(command, cwd=REPO, check=True)


def anonymous_bytes(pid):
    """The process's anonymous memory (smaps_rollup), 0 when it cannot be read."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Anonymous:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def one_run(binary, run, source, work, threads, sample):
    """(wall seconds, load seconds or None, peak RSS bytes, peak anonymous bytes or None, output
    text) of one run; the anonymous memory is sampled only when `sample` (reading smaps_rollup
    of a process that maps gigabytes costs time of its own, so timed runs go unsampled)."""
    output, stats = os.path.join(work, "out"), os.path.join(work, "stats.json")
    for path in (output, stats):
        if os.path.exists(path):
            os.remove(path)
    command = [binary, "-c", run, "-i", source, "-o", output, "--device", "cpu", "--threads",
               str(threads), "--force", "--log-level", "warn", "--stats-json", stats]
    start = time.monotonic()
    with open(os.path.join(work, "log"), "w+") as log:
        proc = subprocess.Popen(command, cwd=REPO, stderr=log)
        anonymous = 0 if sample else None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG if sample else 0)
            if pid:
                break
            anonymous = max(anonymous, anonymous_bytes(proc.pid))
            time.sleep(SAMPLE_S)
        wall = time.monotonic() - start
        log.seek(0)
        err = log.read()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    if proc.returncode != 0:
        sys.exit("%s failed:\n%s" % (" ".join(command), err))
    with open(stats) as f:
        load = json.load(f).get("load_seconds")
    with open(output) as f:
        text = f.read()
    return wall, load, usage.ru_maxrss * 1024, anonymous, text


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binaries", nargs="*", default=["build/nmt-translate"],
                        help="nmt-translate binaries (default build/nmt-translate)")
    parser.add_argument("--run", default="runs/bench-load-big",
                        help="checkpoint file or run directory (the default is trained if missing)")
    parser.add_argument("--nmt-train", default="build/nmt-train",
                        help="trains the default --run when it holds no checkpoint")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="nmt-translate --threads")
    parser.add_argument("--json", default="runs/translate-load.json")
    args = parser.parse_args()
    if args.run == "runs/bench-load-big":
        train_if_missing(args.nmt_train, args.run)
    figures = {b: [] for b in args.binaries}
    outputs = set()
    with tempfile.TemporaryDirectory() as work:
        source = os.path.join(work, "input")
        with open(os.path.join(REPO, "data/ddtp.en-de.test.en")) as f, open(source, "w") as out:
            out.write(f.readline())
        for _ in range(args.repeats):
            for binary in args.binaries:
                wall, load, rss, _, text = one_run(binary, args.run, source, work, args.threads,
                                                   sample=False)
                figures[binary].append({"wall_s": wall, "load_s": load, "peak_rss_bytes": rss})
                outputs.add(text)
        anonymous = {}
        for binary in args.binaries:
            anonymous[binary] = one_run(binary, args.run, source, work, args.threads, sample=True)[3]
    rows = []
    print("checkpoint %s; one line, --threads %d, %d runs each, alternating; medians (anonymous:"
          " one sampled run)"
          % (args.run, args.threads, args.repeats))
    print("%-40s %8s %8s %13s %13s" % ("binary", "wall_s", "load_s", "peak_rss_mib",
                                        "peak_anon_mib"))
    for binary, runs in figures.items():
        loads = [r["load_s"] for r in runs if r["load_s"] is not None]
        row = {"binary": binary, "runs": runs,
               "wall_s": statistics.median(r["wall_s"] for r in runs),
               "load_s": statistics.median(loads) if loads else None,
               "peak_rss_mib": statistics.median(r["peak_rss_bytes"] for r in runs) / MIB,
               "peak_anonymous_mib": anonymous[binary] / MIB}
        rows.append(row)
        print("%-40s %8.2f %8s %13.0f %13.0f" % (
            binary, row["wall_s"], "-" if row["load_s"] is None else "%.2f" % row["load_s"],
            row["peak_rss_mib"], row["peak_anonymous_mib"]))
    same = len(outputs) == 1
    print("outputs identical: %s" % ("yes" if same else "NO"))
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"checkpoint": args.run, "threads": args.threads, "repeats": args.repeats,
                   "outputs_identical": same, "binaries": rows}, f, indent=2)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
