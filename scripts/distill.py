#!/usr/bin/env python3
"""Sequence-level distillation of a teacher into a small, fast student, with our commands
(docs/distillation.md; scripts/distill.sh starts this with the venv's python):

  import     (--teacher-hf DIR only) nmt-ckpt import-hf: the teacher as our checkpoint
  corpus     the training corpus (its first --corpus-lines pairs) and test set as plain files
  translate  the teacher translates the corpus: nmt-translate --nproc-per-node N, beam or
             sampling, several --teacher as an ensemble (-c A -c B)
  score      nmt-translate --score: the teacher's, and --backward's, scores of the pairs
  filter     scripts/filter-by-score.py keeps the best --keep % (cross-entropy, or dual
             conditional cross-entropy with --backward); score and filter do nothing at 100
  student    nmt-train: the --student preset on the distilled pairs and the original pairs
             (weight --original-weight)
  qat        nmt-train: train.quantize int8 from the student (train.init_from)
  export     scripts/export-ctranslate2.py: teacher and student float32, student int8 without
             and after QAT
  evaluate   BLEU and chrF (nmt-score), size on disk, CTranslate2 sentences/s on 1 thread and
             on all cores (scripts/bench/ct2-translate.py); the teacher also with nmt-translate

  scripts/distill.sh --teacher runs/teacher --work-dir runs/distill
  scripts/distill.sh --teacher runs/teacher --work-dir runs/distill     # again: resumes

Each stage, once finished, leaves WORK/stages/NAME.json (written atomically at its end) and is
not done again; a stage that was stopped resumes (nmt-train its run directory, nmt-translate its
OUTPUT.parts/). A finished stage asked for with other settings is refused, naming them:
--redo NAME redoes it and every later one. The result is WORK/report.json and a table.
"""
import argparse
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from nmt_tools.distill_setup import PROG, WORK_DIR_MARKER, Context, Layout, Tools
from nmt_tools.output_guard import path_within
from nmt_tools.paths import CONFIGS, DATA, ROOT
from nmt_tools.process import Interrupted
from nmt_tools.stages import Pipeline, StageError
from nmt_tools.venv import reexec_with_venv

SHIPPED = DATA / "ddtp.en-de"
# What the stages import (ctranslate2 and sentencepiece: the exports and their evaluation).
PACKAGES = ("yaml", "numpy", "ctranslate2", "sentencepiece")
# Keys the pipeline sets itself: a --set of one would train on other data or in another place.
OWN_KEYS = ("run_dir", "data.train", "data.train_src", "data.train_tgt", "train.init_from")


def fail(prog: str, message: str) -> None:
    """`prog: error: message` on stderr, exit status 1 (as the binaries report errors)."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    sys.exit(1)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="distill.sh", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="docs/distillation.md has the details.")
    p.add_argument("--work-dir", type=Path, required=True,
                   help="where every stage writes; a new or empty directory, or one this "
                        "pipeline made (then it resumes there)")
    teacher = p.add_mutually_exclusive_group(required=True)
    teacher.add_argument("--teacher", type=Path, action="append", default=[],
                         help="checkpoint file or run directory; repeat for an ensemble "
                              "(nmt-translate -c A -c B)")
    teacher.add_argument("--teacher-hf", type=Path, metavar="DIR",
                         help="a Hugging Face model directory (MarianMT, M2M100, NLLB), imported")
    p.add_argument("--backward", type=Path, metavar="CKPT",
                   help="target-to-source model: filter by dual conditional cross-entropy")
    p.add_argument("--src", type=Path, default=Path(f"{SHIPPED}.train.en.gz"),
                   help="training corpus, source side (plain or gzip)")
    p.add_argument("--tgt", type=Path, default=Path(f"{SHIPPED}.train.de.gz"),
                   help="training corpus, target side: the original pairs")
    p.add_argument("--corpus-lines", type=int, default=0, help="first N pairs only (0: all)")
    p.add_argument("--valid-src", type=Path, default=Path(f"{SHIPPED}.valid.en"))
    p.add_argument("--valid-tgt", type=Path, default=Path(f"{SHIPPED}.valid.de"))
    p.add_argument("--test-src", type=Path, default=Path(f"{SHIPPED}.test.en"))
    p.add_argument("--test-tgt", type=Path, default=Path(f"{SHIPPED}.test.de"))
    p.add_argument("--test-lines", type=int, default=0, help="first N test sentences (0: all)")
    search = p.add_mutually_exclusive_group()
    search.add_argument("--beam", type=int, default=4, help="the teacher's beam (default 4)")
    search.add_argument("--sampling", metavar="SPEC", help="sample instead (nmt-translate "
                        "--sampling: topk:K, temperature:T)")
    p.add_argument("--seed", type=int, default=1, help="seed of --sampling")
    p.add_argument("--keep", type=float, default=95.0, metavar="PERCENT",
                   help="keep the best PERCENT of the distilled pairs (100: no scoring)")
    p.add_argument("--nproc", type=int, default=0, metavar="N",
                   help="workers of the teacher's corpus runs (0: one per GPU, else 1)")
    p.add_argument("--shard-lines", type=int, default=0, help="nmt-translate --shard-lines")
    p.add_argument("--amp", choices=["off", "fp16", "bf16"], default="off",
                   help="the teacher's precision (nmt-translate --amp; bf16 on a GPU)")
    p.add_argument("--src-lang", help="source language of a multilingual teacher")
    p.add_argument("--tgt-lang", help="target language of a multilingual teacher")
    p.add_argument("--teacher-arg", action="append", default=[], metavar="ARG",
                   help="passed to the teacher's nmt-translate runs (repeatable)")
    p.add_argument("--student", default="tiny",
                   help="tiny, base (configs/student-*.yaml) or a config file")
    p.add_argument("--student-steps", type=int, default=0, help="0: the preset's max_steps")
    p.add_argument("--student-minutes", type=int, default=0, help="0: no time limit")
    p.add_argument("--original-weight", type=float, default=0.5,
                   help="data.train weight of the original pairs (0: distilled pairs only)")
    p.add_argument("--qat-steps", type=int, default=5000, help="updates of the int8 fine-tune")
    p.add_argument("--qat-minutes", type=int, default=0, help="0: no time limit")
    p.add_argument("--qat-lr", type=float, default=0.0002)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="passed to both nmt-train runs, after the pipeline's own (repeatable)")
    p.add_argument("--eval-beam", type=int, default=4, help="beam of the test translations")
    p.add_argument("--threads-all", type=int, default=os.cpu_count() or 1,
                   help="CPU threads of the all-cores speed (default: this machine's cores)")
    p.add_argument("--eval-repeats", type=int, default=1, help="timed runs each, the median")
    p.add_argument("--redo", metavar="STAGE", help="redo this finished stage and every later one")
    p.add_argument("--build-dir", type=Path, default=ROOT / "build",
                   help="where nmt-train & co. are")
    return p.parse_args(argv)


def absolute(args: argparse.Namespace) -> None:
    """Every path made absolute: the stages' settings and the configs name files, not places
    relative to wherever the command was started."""
    for key in ("work_dir", "teacher_hf", "backward", "src", "tgt", "valid_src", "valid_tgt",
                "test_src", "test_tgt", "build_dir"):
        if getattr(args, key) is not None:
            setattr(args, key, getattr(args, key).absolute())
    args.teacher = [t.absolute() for t in args.teacher]


def check_options(args: argparse.Namespace) -> None:
    """Refuses what cannot run, naming the option and the file, before any stage starts."""
    files = [("--src", args.src), ("--tgt", args.tgt), ("--valid-src", args.valid_src),
             ("--valid-tgt", args.valid_tgt), ("--test-src", args.test_src),
             ("--test-tgt", args.test_tgt)]
    for option, path in files:
        if not path.is_file():
            fail(PROG, f"{option} {path}: no such file")
    for teacher in args.teacher + ([args.backward] if args.backward else []):
        if not teacher.exists():
            option = "--backward" if teacher == args.backward else "--teacher"
            fail(PROG, f"{option} {teacher}: no such checkpoint file or run directory")
    # --redo removes stage outputs inside the work directory: no input may lie there.
    inputs = files + [("--teacher", t) for t in args.teacher] + [
        (option, path) for option, path in (("--backward", args.backward),
                                            ("--teacher-hf", args.teacher_hf)) if path]
    for option, path in inputs:
        if path_within(path, args.work_dir):
            fail(PROG, f"{option} {path}: lies inside --work-dir {args.work_dir}, "
                       "where --redo removes what the stages wrote: keep inputs apart from it")
    if args.teacher_hf and not (args.teacher_hf / "config.json").is_file():
        fail(PROG, f"--teacher-hf {args.teacher_hf}: no config.json in it (a transformers "
                   "model directory, as save_pretrained writes it)")
    if not 0 < args.keep <= 100:
        fail(PROG, f"--keep {args.keep:g}: expected a percentage in (0, 100]")
    if args.backward and args.keep == 100:
        fail(PROG, "--backward scores pairs to filter them, and --keep 100 filters none: "
                   "give --keep below 100, or leave --backward out")
    for option in ("corpus_lines", "test_lines", "student_steps", "qat_steps", "shard_lines",
                   "nproc", "student_minutes", "qat_minutes"):
        if getattr(args, option) < 0:
            fail(PROG, f"--{option.replace('_', '-')} {getattr(args, option)}: expected >= 0")
    for option in ("beam", "eval_beam", "threads_all", "eval_repeats"):
        if getattr(args, option) < 1:
            fail(PROG, f"--{option.replace('_', '-')} {getattr(args, option)}: expected >= 1")
    for assignment in args.set:
        key = assignment.split("=", 1)[0].strip()
        if "=" not in assignment:
            fail(PROG, f"--set {assignment}: expected KEY=VALUE")
        if key in OWN_KEYS:
            fail(PROG, f"--set {assignment}: {key} is the pipeline's own (it sets "
                       f"{', '.join(OWN_KEYS)}); use its options instead")
    preset = CONFIGS / f"student-{args.student}.yaml"
    args.student_config = preset if preset.is_file() else Path(args.student).absolute()
    if not args.student_config.is_file():
        fail(PROG, f"--student {args.student}: neither a preset (configs/student-*.yaml: tiny, "
                   "base) nor a config file")


def gpu_count() -> int:
    """GPUs that nvidia-smi lists (0 without it)."""
    if not shutil.which("nvidia-smi"):
        return 0
    out = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True)
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines())


def claim_work_dir(work: Path) -> None:
    """A new or empty directory becomes this pipeline's (its marker file); one with the marker
    is resumed; anything else is refused, so no stage ever writes into someone's folder."""
    if work.exists() and not work.is_dir():
        fail(PROG, f"--work-dir {work} exists and is not a directory")
    if work.is_dir() and any(work.iterdir()) and not (work / WORK_DIR_MARKER).is_file():
        fail(PROG, f"--work-dir {work} is not empty and was not made by this pipeline (no "
                   f"{WORK_DIR_MARKER} in it): name a new or empty directory")
    work.mkdir(parents=True, exist_ok=True)
    marker = work / WORK_DIR_MARKER
    if not marker.exists():
        marker.write_text("made by scripts/distill.py: its stages resume in this directory, "
                          "and --redo removes their outputs in it\n", encoding="utf-8")


def build_stages(ctx: Context):
    from nmt_tools import distill_data as data
    from nmt_tools import distill_eval as evaluation
    from nmt_tools import distill_train as training

    stages = [data.import_stage(ctx)] if ctx.args.teacher_hf else []
    stages += [data.corpus_stage(ctx), data.translate_stage(ctx), data.score_stage(ctx),
               data.filter_stage(ctx), training.student_stage(ctx), training.qat_stage(ctx),
               evaluation.export_stage(ctx), evaluation.evaluate_stage(ctx)]
    return stages


def main(argv=None) -> int:
    args = parse_args(argv)
    absolute(args)
    tools = Tools(args.build_dir)
    missing = tools.missing()
    if missing:
        fail(PROG, f"{missing} not found; build first (scripts/setup.sh) or give --build-dir")
    missing = [m for m in PACKAGES if importlib.util.find_spec(m) is None]
    if missing:  # started with another python than the venv's: start again with that one
        reexec_with_venv(args.build_dir, "distill.py", "the Python packages " + ", ".join(missing))
    check_options(args)
    if args.nproc == 0:
        args.nproc = max(1, gpu_count())
    layout = Layout(args.work_dir)
    teachers = [layout.teacher_import] if args.teacher_hf else list(args.teacher)
    ctx = Context(args, layout, tools, teachers)
    from nmt_tools.distill_report import print_table, write_report

    try:
        pipeline = Pipeline(args.work_dir, build_stages(ctx), PROG)  # reads the inputs' identity
        claim_work_dir(args.work_dir)
        if args.redo:
            pipeline.redo(args.redo)
        results = pipeline.run()
    except StageError as e:
        fail(PROG, str(e))
    except (Interrupted, KeyboardInterrupt) as e:
        number = e.signal_number if isinstance(e, Interrupted) else 2
        print(f"{PROG}: stopped by {signal.Signals(number).name}; run the same command again "
              "to resume (finished stages are kept)", file=sys.stderr)
        return 128 + number
    report = write_report(ctx, results, sys.argv)
    print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
