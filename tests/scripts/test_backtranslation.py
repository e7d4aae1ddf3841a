#!/usr/bin/env python3
"""A tiny end-to-end run of scripts/backtranslation.py (a few minutes on 2 cores).

Tiny models and a few updates: BLEU is near 0 here; what is checked is the pipeline (every
step runs, in order, on the sizes asked for), its result.json (every figure present, from
the binaries' JSON, both forward runs at the same number of updates), and the tag: with it
the synthetic corpus's data.train entry has `tag: bt` and the vocabulary of that run has the
piece <BT>; with --no-tag neither (an untagged run trains the vocabulary it would without
tags). Exits 77 (skipped) when PyYAML, which the script needs, is missing.

  test_backtranslation.py --build-dir BUILD --work-dir DIR [--no-tag]

With --work-dir-only it checks in seconds, with stand-in binaries (no build needed), that
--work-dir is emptied only when the script made it: a directory of someone else's files is
refused and left as it was. Exits 77 (skipped) without PyYAML.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def check_work_dir(scratch):
    """backtranslation.py on directories it did and did not make, with stand-in binaries."""
    try:
        import yaml  # noqa: F401  (backtranslation.py needs it before it looks at --work-dir)
    except ImportError:
        print("SKIPPED: no PyYAML in this python")
        sys.exit(77)
    if os.path.lexists(scratch):
        shutil.rmtree(scratch)
    build = os.path.join(scratch, "build")
    os.makedirs(build)
    for name in ("nmt-train", "nmt-translate", "nmt-score"):  # each fails at once if run
        with open(os.path.join(build, name), "w", encoding="utf-8") as f:
            f.write("#!/bin/sh\necho stand-in >&2\nexit 3\n")
        os.chmod(os.path.join(build, name), 0o755)
    script = os.path.join(REPO, "scripts", "backtranslation.py")
    failures = []

    def check(condition, what):
        print(("ok   " if condition else "FAIL ") + what)
        if not condition:
            failures.append(what)

    def run(work):
        r = subprocess.run([sys.executable, script, "--build-dir", build, "--work-dir", work,
                            "--mono-lines", "10", "--parallel-lines", "20", "--test-lines", "5"],
                           cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return r.returncode, r.stderr

    # Someone else's directory: refused by name, every file left.
    theirs = os.path.join(scratch, "theirs")
    os.makedirs(os.path.join(theirs, "sub"))
    for name in ("notes.txt", os.path.join("sub", "thesis.tex")):
        with open(os.path.join(theirs, name), "w", encoding="utf-8") as f:
            f.write("keep me\n")
    code, err = run(theirs)
    check(code != 0 and f"--work-dir {theirs} is not empty and was not made by this script" in err,
          f"a non-empty directory it did not make is refused, naming it (exit {code}): "
          f"{err.strip()[-300:]}")
    check(sorted(os.listdir(theirs)) == ["notes.txt", "sub"]
          and os.listdir(os.path.join(theirs, "sub")) == ["thesis.tex"],
          f"and left as it was: {sorted(os.listdir(theirs))}")
    # A file where the directory would be: refused, kept.
    a_file = os.path.join(scratch, "a-file")
    with open(a_file, "w", encoding="utf-8") as f:
        f.write("keep me\n")
    code, err = run(a_file)
    check(code != 0 and "exists and is not a directory" in err and os.path.isfile(a_file),
          f"a file as --work-dir is refused and kept (exit {code})")
    # A new directory: made, marked, the split written, then the stand-in nmt-train fails.
    ours = os.path.join(scratch, "ours")
    code, err = run(ours)
    marker = os.path.join(ours, ".backtranslation-work-dir")
    check(code != 0 and "stand-in" in err and os.path.isfile(marker)
          and os.path.isfile(os.path.join(ours, "data", "parallel.en")),
          f"a new directory is made and marked (exit {code}, {sorted(os.listdir(ours))})")
    # Its own directory again: emptied (a stray file goes) and used.
    with open(os.path.join(ours, "stale.txt"), "w", encoding="utf-8") as f:
        f.write("from an earlier run\n")
    code, err = run(ours)
    check(code != 0 and "stand-in" in err and not os.path.exists(os.path.join(ours, "stale.txt"))
          and os.path.isfile(marker) and os.path.isfile(os.path.join(ours, "data", "mono.de")),
          f"its own directory is emptied and used again: {sorted(os.listdir(ours))}")
    # An empty directory it did not make: taken.
    empty = os.path.join(scratch, "empty")
    os.makedirs(empty)
    code, err = run(empty)
    check("stand-in" in err and os.path.isfile(os.path.join(empty, ".backtranslation-work-dir")),
          "an empty directory is taken and marked")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build-dir", required=True)
    p.add_argument("--work-dir", required=True)
    p.add_argument("--no-tag", action="store_true")
    p.add_argument("--work-dir-only", action="store_true",
                   help="only the --work-dir checks, in seconds, under WORK_DIR (no build used)")
    a = p.parse_args()
    if a.work_dir_only:
        check_work_dir(os.path.abspath(a.work_dir))
        return
    try:
        import yaml  # noqa: F401  (backtranslation.py writes its configs with it)
    except ImportError:
        print("SKIPPED: no PyYAML in this python (scripts/setup.sh installs it in the venv)")
        sys.exit(77)
    command = [sys.executable, os.path.join(REPO, "scripts", "backtranslation.py"),
               "--config", "configs/tiny.yaml", "--build-dir", a.build_dir,
               "--work-dir", a.work_dir, "--mono-lines", "300", "--parallel-lines", "3000",
               "--test-lines", "40", "--reverse-steps", "12", "--forward-steps", "10",
               "--sampling", "topk:20,temperature:1.1", "--seed", "7", "--bt-weight", "2",
               "--beam", "2", "--set", "data.vocab_size=400", "--set", "model.d_model=32",
               "--set", "model.ffn_dim=64", "--set", "data.max_tokens=1024",
               "--set", "train.warmup_steps=5", "--set", "train.log_every=5"]
    if a.no_tag:
        command.append("--no-tag")
    subprocess.run(command, check=True, cwd=REPO)

    result = json.load(open(os.path.join(a.work_dir, "result.json"), encoding="utf-8"))
    failures = []

    def check(condition, what):
        print(("ok   " if condition else "FAIL ") + what)
        if not condition:
            failures.append(what)

    check(result["updates"] == {"reverse": 12, "baseline": 10, "backtranslation": 10},
          f"updates as asked, the same for both forward runs: {result['updates']}")
    sizes = result["sizes"]
    check(sizes["parallel_pairs"] == 3000 and sizes["monolingual_sentences"] == 300
          and sizes["synthetic_pairs"] == 300 and sizes["test_sentences"] == 40,
          f"sizes: {sizes}")
    for table in ("test_bleu", "test_chrf"):
        values = result[table]
        check(set(values) == {"baseline", "backtranslation"}
              and all(isinstance(v, float) and 0 <= v <= 100 for v in values.values()),
              f"{table}: {values}")
    check(result["bleu_gain"] == round(result["test_bleu"]["backtranslation"]
                                       - result["test_bleu"]["baseline"], 2),
          f"bleu_gain: {result['bleu_gain']}")
    bt = result["backtranslation"]
    check(bt["sampling"] == "topk:20,temperature:1.1" and bt["seed"] == 7 and bt["weight"] == 2
          and bt["tagged"] == (not a.no_tag) and 0 <= bt["bleu_vs_real_english"] <= 100,
          f"backtranslation: {bt}")
    data = os.path.join(a.work_dir, "data")
    check(len(lines(os.path.join(data, "bt.en"))) == 300 and
          len(lines(os.path.join(data, "mono.de"))) == 300,
          "one back-translation per monolingual line")
    # The hold-out and the parallel part do not overlap, and are both from the shipped set.
    held_out = set(zip(lines(os.path.join(data, "mono.real.en")), lines(os.path.join(data, "mono.de"))))
    parallel = set(zip(lines(os.path.join(data, "parallel.en")), lines(os.path.join(data, "parallel.de"))))
    check(len(held_out & parallel) <= 3, "held-out pairs are not in the parallel data "
          f"(shared: {len(held_out & parallel)}, duplicates in the corpus allowed)")
    config = open(os.path.join(a.work_dir, "backtranslation.yaml"), encoding="utf-8").read()
    check(("tag: bt" in config) == (not a.no_tag) and "weight: 2" in config,
          "the synthetic corpus's data.train entry has its weight and tag")
    # The vocabulary of the run with the synthetic data: <BT> only when its corpus is tagged
    # (and none for the baseline, whose corpus never is).
    def pieces(run):
        with open(os.path.join(a.work_dir, run, "vocab", "joint.vocab"), encoding="utf-8") as f:
            return {line.split("\t")[0] for line in f}

    check(("<BT>" in pieces("backtranslation")) == (not a.no_tag)
          and "<BT>" not in pieces("baseline"),
          f"<BT> in the vocabulary of the run with the synthetic data: {not a.no_tag}")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
