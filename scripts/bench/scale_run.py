#!/usr/bin/env python3
"""Runs nmt-train from nothing to its first updates, samples the memory of its processes, and
prints (and writes as JSON) one row per phase of the data path. Called by
scripts/bench/scale.sh, which documents the figures; phase times come from the run's
phases.jsonl (src/util/phase_record.h), memory from /proc/<pid>/smaps_rollup."""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

SAMPLE_S = 0.2
MB = 1 << 20


def children(pid):
    """Every descendant of pid (by the ppid field of /proc/*/stat)."""
    parent_of = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                text = f.read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        parent_of[int(stat.split("/")[2])] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent_of.items() if pp == p]
        found += kids
        frontier += kids
    return found


def memory_of(pid):
    """(private, shared, rss, anonymous) bytes from /proc/<pid>/smaps_rollup, or None when
    gone. Private counts every page mapped by this process alone, clean file pages too (a
    mapped file's pages that no other process has touched yet); anonymous is the memory the
    kernel cannot drop, only swap."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            fields = {}
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                    fields[parts[0][:-1]] = int(parts[1]) * 1024
    except OSError:
        return None
    private = fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)
    shared = fields.get("Shared_Clean", 0) + fields.get("Shared_Dirty", 0)
    return private, shared, fields.get("Rss", 0), fields.get("Anonymous", 0)


def run(args):
    if args.reuse_data:
        # Keep the vocabulary and the token cache: only the ranks' phases (plan, first update,
        # training) run again, e.g. to time a change to planning without encoding again.
        for name in ("phases.jsonl", "metrics.jsonl", "summary.json"):
            if os.path.exists(os.path.join(args.run_dir, name)):
                os.remove(os.path.join(args.run_dir, name))
        for name in ("checkpoints", "tensorboard"):
            shutil.rmtree(os.path.join(args.run_dir, name), ignore_errors=True)
    elif os.path.exists(args.run_dir):
        shutil.rmtree(args.run_dir)  # from nothing: no vocabulary, no cache
    command = [args.nmt_train, "--config", args.config, "--nproc-per-node", str(args.ranks),
               "--set", "run_dir=" + args.run_dir,
               "--set", "data.train_src=" + args.src, "--set", "data.train_tgt=" + args.tgt,
               "--set", "train.max_steps=%d" % args.steps, "--set", "train.log_every=1",
               "--set", "train.valid_every=0", "--set", "checkpoint.every_steps=1000000"]
    if args.spm_model:
        command += ["--set", "data.spm_model=" + args.spm_model]
    print("$ " + " ".join(command), file=sys.stderr)
    start = time.time()
    log = open(args.run_dir + ".log", "w")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    samples = []  # (time, pid, private, shared, rss, anonymous)
    known = {proc.pid}
    next_scan = 0.0
    while proc.poll() is None:
        now = time.time()
        if now >= next_scan:  # new ranks appear rarely: look for them once a second
            known.update(children(proc.pid))
            next_scan = now + 1.0
        for pid in list(known):
            m = memory_of(pid)
            if m is not None:
                samples.append((now, pid) + m)
        time.sleep(SAMPLE_S)
    log.close()
    if proc.returncode != 0:
        sys.exit("error: nmt-train exited with %d; see %s.log" % (proc.returncode, args.run_dir))
    return start, time.time(), samples


def peak(samples, pids, begin, end):
    """Peak (private, shared, rss, anonymous) MiB of each pid within [begin, end], the
    largest of them."""
    best = None
    for t, pid, private, shared, rss, anonymous in samples:
        if pid in pids and begin - SAMPLE_S <= t <= end + SAMPLE_S:
            m = (private / MB, shared / MB, rss / MB, anonymous / MB)
            best = m if best is None else tuple(max(a, b) for a, b in zip(best, m))
    return best


def file_events(args, start):
    """For a binary that writes no phases.jsonl (one from before it, as a baseline): when the
    vocabulary and the token cache files appeared (their mtimes), as seconds since start."""
    events = {}
    models = glob.glob(os.path.join(args.run_dir, "vocab", "*.model"))
    caches = glob.glob(os.path.join(args.run_dir, "cache", "train.*.tok"))
    if models:
        events["vocabulary written"] = max(os.path.getmtime(m) for m in models) - start
    if caches:
        events["token cache written"] = os.path.getmtime(caches[0]) - start
    return events


def report(args, start, end, samples):
    phases = os.path.join(args.run_dir, "phases.jsonl")
    if not os.path.exists(phases):
        return report_without_phases(args, start, end, samples)
    with open(phases) as f:
        records = [json.loads(line) for line in f if line.strip()]
    caches = glob.glob(os.path.join(args.run_dir, "cache", "train.*.tok"))
    cache_bytes = os.path.getsize(caches[0]) if caches else 0
    rows = []
    for name in ("vocabulary", "encoding", "cache write", "plan", "first update"):
        found = [r for r in records if r["phase"] == name and r.get("cache", "train") == "train"]
        if not found:
            continue
        seconds = max(r["seconds"] for r in found)
        phase_end = max(r["end_unix"] for r in found)
        pids = {r["pid"] for r in found}
        m = peak(samples, pids, phase_end - seconds, phase_end)
        row = {"phase": name, "seconds": round(seconds, 2),
               "since_start_s": round(phase_end - start, 1),
               "processes": len(pids),
               "peak_private_mb": round(m[0], 1) if m else None,
               "peak_shared_mb": round(m[1], 1) if m else None,
               "max_rss_mb": round(max(r["max_rss_mb"] for r in found), 1)}
        pairs = found[0].get("pairs", args.pairs)
        if name in ("vocabulary", "encoding", "plan") and seconds > 0:
            row["pairs_per_s"] = round(pairs / seconds)
        if name == "encoding":
            row["threads"] = found[0]["threads"]
            row["cores"] = found[0]["cores"]
            row["pairs_per_s_per_core"] = round(pairs / seconds / found[0]["cores"])
            row["tokens"] = found[0]["tokens"]
        if name == "cache write":
            row["cache_bytes"] = cache_bytes
        if name in ("plan", "first update"):
            row["per_rank"] = [{k: r.get(k) for k in ("rank", "pid", "seconds", "max_rss_mb",
                                                      "host_private_mb", "host_shared_mb",
                                                      "plans_made")
                                if k in r} for r in sorted(found, key=lambda r: r["rank"])]
            for entry in row["per_rank"]:
                p = peak(samples, {entry["pid"]}, start, end)
                if p:
                    entry["run_peak_private_mb"] = round(p[0], 1)
                    entry["run_peak_shared_mb"] = round(p[1], 1)
                    entry["run_peak_anonymous_mb"] = round(p[3], 1)
        rows.append(row)
    result = {"pairs": args.pairs, "ranks": args.ranks, "config": args.config,
              "cache_bytes": cache_bytes, "wall_s": round(end - start, 1),
              "machine": {"cores": os.cpu_count(), "cpu": cpu_name()}, "phases": rows,
              "training": training_figures(args)}
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print("%s pairs, %d ranks, %s: token cache %.2f GB, %.0f s to the end of the run"
          % (format(args.pairs, ","), args.ranks, cpu_name(), cache_bytes / 1e9, end - start))
    print("%-13s %9s %9s %10s %9s %12s %11s %8s" % (
        "phase", "wall s", "at s", "pairs/s", "/core", "private MiB", "shared MiB", "procs"))
    for r in rows:
        print("%-13s %9.1f %9.1f %10s %9s %12s %11s %8d" % (
            r["phase"], r["seconds"], r["since_start_s"], r.get("pairs_per_s", "-"),
            r.get("pairs_per_s_per_core", "-"), fmt(r["peak_private_mb"]),
            fmt(r["peak_shared_mb"]), r["processes"]))
    for r in rows:
        if r["phase"] != "plan":
            continue
        for e in r["per_rank"]:  # who planned, and what each rank held over the whole run
            print("  rank %s: %s; run peak private %s MiB (anonymous %s), shared %s MiB" % (
                e["rank"], {1: "planned", 0: "mapped the plan"}.get(e.get("plans_made"), "planned"),
                fmt(e.get("run_peak_private_mb")), fmt(e.get("run_peak_anonymous_mb")),
                fmt(e.get("run_peak_shared_mb"))))
    t = result["training"]
    if t:
        print("training, steps %d-%d of rank 0: median %.0f tokens/s, data wait %.2f s in all, "
              "host private %.0f MiB at step %d" % (t["from_step"], t["to_step"],
                                                    t["median_tokens_per_s"], t["data_wait_s"],
                                                    t["host_private_mb"], t["to_step"]))
    print("memory: peak over the phase of its busiest process (for plan and first update: of "
          "the ranks); written to %s" % args.json)


def training_figures(args):
    """Rank 0's training throughput over the second half of the steps (the first ones start
    the prefetcher and allocators): the median of metrics.jsonl's per-step tokens/s (train.
    log_every is 1), the data wait summed over them, and the private memory at the last."""
    path = os.path.join(args.run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        train = [r for r in (json.loads(line) for line in f if line.strip())
                 if r.get("type") == "train"]
    if not train:
        return None
    last = train[-1]["step"]
    half = [r for r in train if r["step"] > last // 2] or train
    rates = sorted(r["tokens_per_s"] for r in half)
    return {"from_step": half[0]["step"], "to_step": last,
            "median_tokens_per_s": round(rates[len(rates) // 2], 1),
            "data_wait_s": round(sum(r.get("data_wait_s", 0) for r in half), 3),
            "host_private_mb": round(train[-1].get("host_private_mb", 0), 1)}


def report_without_phases(args, start, end, samples):
    caches = glob.glob(os.path.join(args.run_dir, "cache", "train.*.tok"))
    per_pid = {}
    for t, pid, private, shared, rss, _ in samples:
        p = per_pid.setdefault(pid, [0, 0, 0])
        p[0], p[1], p[2] = max(p[0], private / MB), max(p[1], shared / MB), max(p[2], rss / MB)
    result = {"pairs": args.pairs, "ranks": args.ranks, "config": args.config,
              "cache_bytes": os.path.getsize(caches[0]) if caches else 0,
              "wall_s": round(end - start, 1), "phases_jsonl": False,
              "file_events_s": {k: round(v, 1) for k, v in file_events(args, start).items()},
              "machine": {"cores": os.cpu_count(), "cpu": cpu_name()},
              "processes": [{"pid": pid, "peak_private_mb": round(p[0], 1),
                             "peak_shared_mb": round(p[1], 1), "peak_rss_mb": round(p[2], 1)}
                            for pid, p in sorted(per_pid.items())]}
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print("no phases.jsonl (a binary from before it): whole-run figures only")
    print(json.dumps(result, indent=2))


def fmt(v):
    return "-" if v is None else "%.0f" % v


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nmt-train", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--pairs", type=int, required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--tgt", required=True)
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--spm-model", help="data.spm_model: a vocabulary to use, none trained")
    ap.add_argument("--reuse-data", action="store_true",
                    help="keep the run's vocabulary and token cache (time the ranks' phases only)")
    args = ap.parse_args()
    start, end, samples = run(args)
    report(args, start, end, samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
