#!/usr/bin/env python3
"""Memory of the ranks while they load a checkpoint, binary against binary (issue #46): makes
one checkpoint of a model whose weights dominate (scripts/bench/load-memory.sh says which),
then, for each nmt-train binary given, starts 2 CPU ranks from it twice: a fine-tune
(train.init_from, the model's weights) and a resume of a copy of its run (weights and Adam's
moments). Each rank's /proc/<pid>/smaps_rollup is sampled every 0.1 s; the figures are each
rank's peaks from its start to the start of its plan phase (phases.jsonl), i.e. while it sets
up and loads, before training allocates anything of its own:
  - anonymous: memory only this process holds and the kernel cannot drop (a copy of the
    checkpoint read into the rank's memory is counted here);
  - rss: every resident page, the mapped file's page-cache pages included (shared by the ranks
    of a node: one copy however many map it).
A benchmark, not a test: prints a table and writes it as JSON."""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale_run import children  # noqa: E402

SAMPLE_S = 0.1
MB = 1 << 20


def smaps(pid):
    """(anonymous, rss, private) bytes of pid, or None when it is gone."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            fields = {}
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                    fields[parts[0][:-1]] = int(parts[1]) * 1024
    except OSError:
        return None
    return (fields.get("Anonymous", 0), fields.get("Rss", 0),
            fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0))


def sampled_run(command, log_path):
    """Runs command, sampling its descendants; returns [(time, pid, anonymous, rss, private)]."""
    print("$ " + " ".join(command), file=sys.stderr)
    samples = []
    with open(log_path, "w") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        known, next_scan = set(), 0.0
        while proc.poll() is None:
            now = time.time()
            if now >= next_scan:
                known.update(children(proc.pid))
                next_scan = now + 0.5
            for pid in list(known):
                m = smaps(pid)
                if m is not None:
                    samples.append((now,) + (pid,) + m)
            time.sleep(SAMPLE_S)
    if proc.returncode != 0:
        sys.exit("error: exit %d; see %s" % (proc.returncode, log_path))
    return samples


def loading_peaks(run_dir, samples):
    """Per rank: peak (anonymous, rss, private) MiB from its first sample to its plan phase."""
    with open(os.path.join(run_dir, "phases.jsonl")) as f:
        plans = [r for r in (json.loads(line) for line in f if line.strip()) if r["phase"] == "plan"]
    rows = []
    for record in sorted(plans, key=lambda r: r["rank"]):
        plan_start = record["end_unix"] - record["seconds"]
        mine = [s for s in samples if s[1] == record["pid"] and s[0] <= plan_start]
        if not mine:
            continue
        rows.append({"rank": record["rank"],
                     "anonymous_mb": round(max(s[2] for s in mine) / MB),
                     "rss_mb": round(max(s[3] for s in mine) / MB),
                     "private_mb": round(max(s[4] for s in mine) / MB)})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True, help="a scratch folder (its checkpoint is reused)")
    ap.add_argument("--json", required=True)
    ap.add_argument("--model-flags", required=True, help="nmt-train flags of the model and data")
    ap.add_argument("binaries", nargs="+", help="nmt-train binaries to compare")
    args = ap.parse_args()
    model = args.model_flags.split()
    source = os.path.join(args.work, "source")
    base = model + ["--set", "train.valid_every=0", "--set", "amp.mode=off",
                    "--set", "train.threads=1", "--log-level", "warn"]
    if not os.path.isdir(os.path.join(source, "checkpoints")):
        # One update on one rank: a checkpoint with the weights and Adam's moments.
        subprocess.run([args.binaries[0]] + base + ["--set", "run_dir=" + source,
                                                    "--set", "train.max_steps=1",
                                                    "--nproc-per-node", "1"], check=True)
    checkpoint = sorted(f for f in os.listdir(os.path.join(source, "checkpoints"))
                        if f.endswith(".safetensors"))[-1]
    size = os.path.getsize(os.path.join(source, "checkpoints", checkpoint))
    results = []
    for i, binary in enumerate(args.binaries):
        for kind in ("init_from", "resume"):
            run_dir = os.path.join(args.work, "%s-%d" % (kind, i))
            shutil.rmtree(run_dir, ignore_errors=True)
            if kind == "resume":
                shutil.copytree(source, run_dir)
                extra = ["--set", "train.max_steps=2"]
            else:
                extra = ["--set", "train.init_from=" + os.path.join(source, "checkpoints"),
                         "--set", "train.max_steps=1"]
            samples = sampled_run([binary] + base + extra + ["--set", "run_dir=" + run_dir,
                                                              "--nproc-per-node", "2"],
                                  run_dir + ".log")
            results.append({"binary": binary, "load": kind, "ranks": loading_peaks(run_dir, samples)})
    with open(args.json, "w") as f:
        json.dump({"checkpoint_bytes": size, "runs": results}, f, indent=2)
        f.write("\n")
    print("checkpoint %s: %.0f MiB; per rank, peak while it sets up and loads (MiB):"
          % (checkpoint, size / MB))
    print("%-40s %-10s %5s %10s %8s %8s" % ("binary", "load", "rank", "anonymous", "rss", "private"))
    for r in results:
        for rank in r["ranks"]:
            print("%-40s %-10s %5d %10d %8d %8d" % (r["binary"][-40:], r["load"], rank["rank"],
                                                   rank["anonymous_mb"], rank["rss_mb"],
                                                   rank["private_mb"]))
    print("written to %s" % args.json)


if __name__ == "__main__":
    main()
