#!/usr/bin/env python3
"""Back-translation round trip on the shipped en-de corpus, as a user would do it.

  1. split: hold out --mono-lines pairs of data/ddtp.en-de.train.* (a seeded shuffle) and keep
     only their German side as the "monolingual" text; the rest (or its first
     --parallel-lines) is the parallel data;
  2. reverse: train a de-en model on the parallel data for --reverse-steps updates;
  3. back-translate the German text with it, sampling (nmt-translate --sampling, --seed);
  4. baseline: train en-de on the parallel data alone for --forward-steps updates;
  5. backtranslation: train en-de on the parallel data plus the synthetic pairs (a data.train
     entry named bt, with --bt-weight and `tag: bt`, so that its sources get the <BT> tag of
     Caswell et al. 2019; --no-tag leaves the tag out), same updates, same seed;
  6. translate the test set with the last checkpoint of each (beam --beam) and score it.

Every figure comes from JSON the binaries write (summary.json, nmt-translate --stats-json,
nmt-score --json). The result goes to WORK_DIR/result.json: test BLEU and chrF with and
without the synthetic data, the updates of each run, the sizes of the data, and the BLEU of
the sampled back-translations against the held-out real English.

  scripts/backtranslation.py                       # defaults: configs/demo.yaml, a long run
  scripts/backtranslation.py --reverse-steps 600 --forward-steps 800 --mono-lines 8000

Needs the build (scripts/setup.sh) and PyYAML, which the venv that setup makes has: run with
another python, the script starts itself again with the venv's (NMT_PYTHON in the CMake cache).
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time

from nmt_tools.paths import DATA as DATA_DIR
from nmt_tools.text import read_lines, write_lines
from nmt_tools.venv import reexec_with_venv

DATA = str(DATA_DIR / "ddtp.en-de")


WORK_DIR_MARKER = ".backtranslation-work-dir"


def claim_work_dir(work):
    """Makes `work` this script's empty work directory, with its marker file.

    A directory that holds the marker was made by this script and is emptied; an empty one is
    taken; anything else is refused (sys.exit naming --work-dir): --work-dir ~ must not delete
    a home directory.
    """
    marker = os.path.join(work, WORK_DIR_MARKER)
    if os.path.lexists(work) and not os.path.isdir(work):
        sys.exit(f"backtranslation.py: error: --work-dir {work} exists and is not a directory")
    if os.path.isdir(work):
        entries = os.listdir(work)
        if entries and WORK_DIR_MARKER not in entries:
            sys.exit(f"backtranslation.py: error: --work-dir {work} is not empty and was not made "
                     f"by this script (no {WORK_DIR_MARKER} in it); it empties only its own work "
                     "directories: name a new or empty one, or remove this one yourself")
        for name in entries:
            path = os.path.join(work, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
    os.makedirs(work, exist_ok=True)
    with open(marker, "w", encoding="utf-8") as f:
        f.write("made by scripts/backtranslation.py, which empties this directory on its next "
                "run with this --work-dir\n")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="configs/demo.yaml",
                   help="base config: model, batch and optimizer settings of all three models "
                        "(its data, run_dir and step settings are replaced)")
    p.add_argument("--work-dir", default="runs/backtranslation",
                   help="data, runs and result.json go here: a new or empty directory, or "
                        "one this script made, which it empties first (others are refused)")
    p.add_argument("--build-dir", default="build", help="where nmt-train & co. are")
    p.add_argument("--mono-lines", type=int, default=10000,
                   help="training pairs held out; their German side is the monolingual text")
    p.add_argument("--parallel-lines", type=int, default=0,
                   help="parallel pairs kept of the rest (0: all)")
    p.add_argument("--test-lines", type=int, default=0,
                   help="first lines of the test set to score (0: all 1,000)")
    p.add_argument("--reverse-steps", type=int, default=1500, help="updates of the de-en model")
    p.add_argument("--forward-steps", type=int, default=2000,
                   help="updates of each en-de model (with and without the synthetic data)")
    p.add_argument("--sampling", default="topk:10",
                   help="nmt-translate --sampling of the back-translation")
    p.add_argument("--seed", type=int, default=1,
                   help="train.seed of every run, the hold-out shuffle and the sampling seed")
    p.add_argument("--bt-weight", type=float, default=1.0,
                   help="data.train weight of the synthetic corpus (relative to its size)")
    p.add_argument("--no-tag", action="store_true",
                   help="leave `tag: bt` out of the synthetic corpus (untagged back-translation)")
    p.add_argument("--beam", type=int, default=4, help="beam of the test translations")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="passed to every nmt-train run (e.g. model.d_model=64)")
    return p.parse_args()


class Pipeline:
    def __init__(self, args):
        self.args = args
        self.work = os.path.abspath(args.work_dir)
        self.bin = {name: os.path.join(os.path.abspath(args.build_dir), name)
                    for name in ("nmt-train", "nmt-translate", "nmt-score")}
        for path in self.bin.values():
            if not os.access(path, os.X_OK):
                sys.exit(f"backtranslation.py: error: {path} not found; build first "
                         "(scripts/setup.sh)")
        self.seconds = {}

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    def run(self, command, **kwargs):
        print("+ " + " ".join(command), flush=True)
        return subprocess.run(command, check=True, **kwargs)

    def timed(self, name, function, *args):
        start = time.monotonic()
        result = function(*args)
        self.seconds[name] = round(time.monotonic() - start, 1)
        return result

    # 1. split -------------------------------------------------------------------------------
    def split(self):
        en = read_lines(DATA + ".train.en.gz")
        de = read_lines(DATA + ".train.de.gz")
        assert len(en) == len(de), "the shipped training sides differ in length"
        order = list(range(len(en)))
        random.Random(self.args.seed).shuffle(order)
        mono = sorted(order[:self.args.mono_lines])
        parallel = sorted(order[self.args.mono_lines:])
        if self.args.parallel_lines > 0:
            parallel = parallel[:self.args.parallel_lines]
        os.makedirs(self.path("data"))

        def write(name, lines):
            write_lines(self.path("data", name), lines)

        write("parallel.en", (en[i] for i in parallel))
        write("parallel.de", (de[i] for i in parallel))
        write("mono.de", (de[i] for i in mono))
        write("mono.real.en", (en[i] for i in mono))  # only to score the back-translation
        test_en = read_lines(DATA + ".test.en")
        test_de = read_lines(DATA + ".test.de")
        if self.args.test_lines > 0:
            test_en, test_de = test_en[:self.args.test_lines], test_de[:self.args.test_lines]
        write("test.en", test_en)
        write("test.de", test_de)
        return {"parallel_pairs": len(parallel), "monolingual_sentences": len(mono),
                "test_sentences": len(test_en), "shipped_training_pairs": len(en)}

    # training -------------------------------------------------------------------------------
    def config(self, name, train, src, tgt, steps):
        """Writes WORK/<name>.yaml: the base config with this run's data, run_dir and steps."""
        import yaml

        with open(os.path.abspath(self.args.config), encoding="utf-8") as f:
            config = yaml.safe_load(f)
        data = config.setdefault("data", {})
        for key in ("train", "train_src", "train_tgt", "valid", "valid_src", "valid_tgt",
                    "spm_model"):
            data.pop(key, None)
        data["train"] = train
        data["valid_src"] = DATA + ".valid." + src
        data["valid_tgt"] = DATA + ".valid." + tgt
        config["run_dir"] = self.path(name)
        config.setdefault("train", {}).update(
            {"max_steps": steps, "max_minutes": 0, "max_epochs": 0, "valid_every": 0,
             "patience": 0, "seed": self.args.seed})
        config.setdefault("checkpoint", {}).update({"every_steps": steps, "keep_last": 1})
        path = self.path(name + ".yaml")
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump(config, f, sort_keys=False)
        return path

    def train(self, name, train, src, tgt, steps):
        """Trains a fresh model; returns its summary.json."""
        config = self.config(name, train, src, tgt, steps)
        command = [self.bin["nmt-train"], "--config", config, "--resume", "none"]
        for assignment in self.args.set:
            command += ["--set", assignment]
        self.timed("train_" + name, self.run, command)
        with open(self.path(name, "summary.json"), encoding="utf-8") as f:
            summary = json.load(f)
        if summary["final_step"] != steps:
            sys.exit(f"backtranslation.py: error: {name} stopped at update "
                     f"{summary['final_step']} ({summary['stop_reason']}), not {steps}")
        return summary

    # translating and scoring ----------------------------------------------------------------
    def translate(self, name, checkpoint, source, output, extra):
        stats = self.path(name + ".stats.json")
        command = [self.bin["nmt-translate"], "--checkpoint", checkpoint, "-i", source,
                   "-o", output, "--stats-json", stats, "--log-level", "warn"] + extra
        self.timed("translate_" + name, self.run, command)
        with open(stats, encoding="utf-8") as f:
            return json.load(f)

    def score(self, hypotheses, reference):
        out = self.run([self.bin["nmt-score"], "-r", reference, "-i", hypotheses,
                        "-m", "bleu", "chrf", "--json"], stdout=subprocess.PIPE, text=True)
        scores = {s["name"]: float(s["score"]) for s in json.loads(out.stdout)}
        return {"bleu": scores["BLEU"], "chrf": scores["chrF2"]}

    def test_scores(self, name, summary):
        hyp = self.path(name + ".test.hyp.de")
        self.translate(name + "_test", summary["last_checkpoint"], self.path("data", "test.en"),
                       hyp, ["--beam", str(self.args.beam)])
        return self.score(hyp, self.path("data", "test.de"))

    # the round trip -------------------------------------------------------------------------
    def main(self):
        a = self.args
        claim_work_dir(self.work)
        sizes = self.timed("split", self.split)
        d = lambda name: self.path("data", name)
        real = {"name": "real", "src": d("parallel.en"), "tgt": d("parallel.de")}

        reverse = self.train("reverse", [{"name": "real", "src": d("parallel.de"),
                                          "tgt": d("parallel.en")}], "de", "en", a.reverse_steps)
        bt_stats = self.translate("backtranslate", reverse["last_checkpoint"], d("mono.de"),
                                  d("bt.en"), ["--sampling", a.sampling, "--seed", str(a.seed)])
        bt_quality = self.score(d("bt.en"), d("mono.real.en"))

        baseline = self.train("baseline", [real], "en", "de", a.forward_steps)
        synthetic = {"name": "bt", "src": d("bt.en"), "tgt": d("mono.de"), "weight": a.bt_weight}
        if not a.no_tag:
            synthetic["tag"] = "bt"
        with_bt = self.train("backtranslation", [real, synthetic], "en", "de", a.forward_steps)

        scores = {"baseline": self.test_scores("baseline", baseline),
                  "backtranslation": self.test_scores("backtranslation", with_bt)}
        sizes["synthetic_pairs"] = bt_stats["sentences"]
        result = {
            "test_bleu": {k: v["bleu"] for k, v in scores.items()},
            "test_chrf": {k: v["chrf"] for k, v in scores.items()},
            "bleu_gain": round(scores["backtranslation"]["bleu"] - scores["baseline"]["bleu"], 2),
            "updates": {"reverse": reverse["final_step"], "baseline": baseline["final_step"],
                        "backtranslation": with_bt["final_step"]},
            "sizes": sizes,
            "backtranslation": {"sampling": a.sampling, "seed": a.seed, "weight": a.bt_weight,
                                "tagged": not a.no_tag, "bleu_vs_real_english": bt_quality["bleu"],
                                "sentences_per_s": bt_stats["sentences_per_s"]},
            "beam": a.beam,
            "config": a.config,
            "set": a.set,
            "seconds": self.seconds,
        }
        with open(self.path("result.json"), "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
        print(f"\nback-translation ({a.sampling}, seed {a.seed}, "
              f"{'tagged' if not a.no_tag else 'untagged'}, weight {a.bt_weight:g}): "
              f"{sizes['parallel_pairs']:,} real pairs + {sizes['synthetic_pairs']:,} synthetic, "
              f"{a.forward_steps:,} updates each (reverse model {a.reverse_steps:,})")
        print(f"  test BLEU without synthetic data: {scores['baseline']['bleu']:.2f} "
              f"(chrF {scores['baseline']['chrf']:.2f})")
        print(f"  test BLEU with synthetic data:    {scores['backtranslation']['bleu']:.2f} "
              f"(chrF {scores['backtranslation']['chrf']:.2f})")
        print(f"  the back-translations score BLEU {bt_quality['bleu']:.2f} against the real "
              f"English; result: {self.path('result.json')}")


if __name__ == "__main__":
    arguments = parse_args()
    try:
        import yaml  # noqa: F401
    except ImportError:
        reexec_with_venv(os.path.abspath(arguments.build_dir), "backtranslation.py", "PyYAML")
    Pipeline(arguments).main()
