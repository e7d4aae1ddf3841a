"""A tiny end-to-end run of scripts/backtranslation.py (a few minutes on 2 cores).

Tiny models and a few updates: BLEU is near 0 here; what is checked is the pipeline (every
step runs, in order, on the sizes asked for), its result.json (every figure present, from
the binaries' JSON, both forward runs at the same number of updates), and the tag: with it
the synthetic corpus's data.train entry has `tag: bt` and the vocabulary of that run has the
piece <BT>; with --no-tag neither (an untagged run trains the vocabulary it would without
tags). Skipped when PyYAML, which the script needs, is missing.

  pytest "tests/scripts/test_backtranslation.py::test_round_trip_writes_its_result[tagged]" \
      --build-dir BUILD --work DIR

test_work_dir_only_its_own_is_emptied checks in seconds, with stand-in binaries (no build
needed), that --work-dir is emptied only when the script made it: a directory of someone
else's files is refused and left as it was.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nmt_tools.paths import ROOT as REPO
from nmt_tools.paths import SCRIPTS
from nmt_tools.text import read_lines as lines


def test_work_dir_only_its_own_is_emptied(work: Path) -> None:
    """backtranslation.py on directories it did and did not make, with stand-in binaries."""
    # backtranslation.py needs PyYAML before it looks at --work-dir.
    pytest.importorskip("yaml", reason="no PyYAML in this python")
    scratch = str(work)
    if os.path.lexists(scratch):
        shutil.rmtree(scratch)
    build = os.path.join(scratch, "build")
    os.makedirs(build)
    for name in ("nmt-train", "nmt-translate", "nmt-score"):  # each fails at once if run
        with open(os.path.join(build, name), "w", encoding="utf-8") as f:
            f.write("#!/bin/sh\necho stand-in >&2\nexit 3\n")
        os.chmod(os.path.join(build, name), 0o755)
    script = SCRIPTS / "backtranslation.py"
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
    assert not failures, f"{len(failures)} check(s) failed: {failures}"


@pytest.mark.parametrize("tagged", [True, False], ids=["tagged", "untagged"])
def test_round_trip_writes_its_result(tagged: bool, binaries, work: Path) -> None:
    # backtranslation.py writes its configs with PyYAML.
    pytest.importorskip("yaml", reason="no PyYAML in this python (scripts/setup.sh installs it "
                                       "in the venv)")
    work_dir = work / ("tagged" if tagged else "untagged")
    command = [sys.executable, SCRIPTS / "backtranslation.py",
               "--config", "configs/tiny.yaml", "--build-dir", binaries.build_dir,
               "--work-dir", work_dir, "--mono-lines", "300", "--parallel-lines", "3000",
               "--test-lines", "40", "--reverse-steps", "12", "--forward-steps", "10",
               "--sampling", "topk:20,temperature:1.1", "--seed", "7", "--bt-weight", "2",
               "--beam", "2", "--set", "data.vocab_size=400", "--set", "model.d_model=32",
               "--set", "model.ffn_dim=64", "--set", "data.max_tokens=1024",
               "--set", "train.warmup_steps=5", "--set", "train.log_every=5"]
    if not tagged:
        command.append("--no-tag")
    subprocess.run(command, check=True, cwd=REPO)

    result = json.loads((work_dir / "result.json").read_text(encoding="utf-8"))
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
          and bt["tagged"] == tagged and 0 <= bt["bleu_vs_real_english"] <= 100,
          f"backtranslation: {bt}")
    data = os.path.join(work_dir, "data")
    check(len(lines(os.path.join(data, "bt.en"))) == 300 and
          len(lines(os.path.join(data, "mono.de"))) == 300,
          "one back-translation per monolingual line")
    # The hold-out and the parallel part do not overlap, and are both from the shipped set.
    held_out = set(zip(lines(os.path.join(data, "mono.real.en")), lines(os.path.join(data, "mono.de"))))
    parallel = set(zip(lines(os.path.join(data, "parallel.en")), lines(os.path.join(data, "parallel.de"))))
    check(len(held_out & parallel) <= 3, "held-out pairs are not in the parallel data "
          f"(shared: {len(held_out & parallel)}, duplicates in the corpus allowed)")
    config = (work_dir / "backtranslation.yaml").read_text(encoding="utf-8")
    check(("tag: bt" in config) == tagged and "weight: 2" in config,
          "the synthetic corpus's data.train entry has its weight and tag")
    # The vocabulary of the run with the synthetic data: <BT> only when its corpus is tagged
    # (and none for the baseline, whose corpus never is).
    def pieces(run):
        with open(os.path.join(work_dir, run, "vocab", "joint.vocab"), encoding="utf-8") as f:
            return {line.split("\t")[0] for line in f}

    check(("<BT>" in pieces("backtranslation")) == tagged
          and "<BT>" not in pieces("baseline"),
          f"<BT> in the vocabulary of the run with the synthetic data: {tagged}")
    assert not failures, f"{len(failures)} check(s) failed: {failures}"
