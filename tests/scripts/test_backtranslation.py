#!/usr/bin/env python3
"""A tiny end-to-end run of scripts/backtranslation.py (a few minutes on 2 cores).

Tiny models and a few updates: BLEU is near 0 here; what is checked is the pipeline (every
step runs, in order, on the sizes asked for), its result.json (every figure present, from
the binaries' JSON, both forward runs at the same number of updates), and the tag: with it
the synthetic corpus's data.train entry has `tag: bt` and the vocabulary of that run has the
piece <BT>; with --no-tag neither (an untagged run trains the vocabulary it would without
tags). Exits 77 (skipped) when PyYAML, which the script needs, is missing.

  test_backtranslation.py --build-dir BUILD --work-dir DIR [--no-tag]
"""

import argparse
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build-dir", required=True)
    p.add_argument("--work-dir", required=True)
    p.add_argument("--no-tag", action="store_true")
    a = p.parse_args()
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
