"""scripts/distill.sh (scripts/distill.py): the distillation pipeline at a tiny size.

test_tiny_pipeline_resumes_stage_by_stage (about a minute and a half on 2 cores): a tiny teacher
and a tiny backward model (a few updates each) are distilled into a tiny student, fine-tuned
for int8, exported and evaluated; BLEU is near 0 here, what is checked is the pipeline:
  1. the first run is stopped by SIGTERM during the student's training: it exits 143, the
     student has no marker and its run stopped by the signal, the earlier stages have theirs;
  2. run again, it does not redo the finished stages (their markers and files keep their
     modification times), resumes the student from its checkpoint (summary.json's
     resumed_from) to the updates asked for, and writes report.json: every model's BLEU,
     chrF, size and CTranslate2 speeds;
  3. a third run redoes nothing: no file of the work directory changes but report.json;
  4. with the filter's marker removed, the filter alone runs again;
  5. a finished stage asked for with other settings is refused, naming the setting and
     --redo, before anything runs or is removed (also under --redo of a later stage).
Skipped without the ctranslate2 or sentencepiece package.

test_refusals_and_commands (seconds, stand-in binaries that record their command line): bad
options name the option and file, a work directory the pipeline did not make is refused, a
--set of a key the pipeline owns is refused, and two teachers reach nmt-translate as
`-c A -c B` (an ensemble), with a hint when it refuses them.

  pytest tests/scripts/test_distill.py --build-dir BUILD --work DIR
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nmt_tools.paths import CONFIGS, DATA, ROOT, SCRIPTS
from nmt_tools.process import run
from train_support import train_slice

DISTILL = SCRIPTS / "distill.py"
STEPS = 60  # the student's: the first run is stopped after its first checkpoint, at update 10
# Tiny shapes for every model; one thread each (CTest runs tests side by side).
TINY = ["data.vocab_size=400", "model.d_model=32", "model.ffn_dim=64", "model.heads=4",
        "data.max_tokens=1024", "train.warmup_steps=5", "train.threads=1", "amp.mode=off",
        "train.valid_every=0", "train.log_every=10",
        # A tiny teacher's outputs are short repetitions: keep them whatever their length.
        "data.max_len_ratio=100"]


def skip_unless_ctranslate2():
    for module in ("ctranslate2", "sentencepiece", "yaml"):
        pytest.importorskip(module, reason=f"the {module} package is not installed "
                                           "(scripts/setup.sh installs it)")


def train_tiny(binaries, work: Path, name: str, src: str, tgt: str) -> subprocess.Popen:
    """Starts a tiny model's training (80 updates: fewer give mostly empty outputs) on the
    slice, src -> tgt."""
    cmd = [binaries.train, "--config", CONFIGS / "tiny.yaml", "--log-level", "warn",
           "--set", f"run_dir={work / name}", "--set", f"data.train_src={work}/train-slice.{src}",
           "--set", f"data.train_tgt={work}/train-slice.{tgt}",
           "--set", f"data.valid_src={DATA}/ddtp.en-de.valid.{src}",
           "--set", f"data.valid_tgt={DATA}/ddtp.en-de.valid.{tgt}",
           "--set", "train.max_steps=80", "--set", "checkpoint.every_steps=80",
           "--set", "train.lr=0.005"]
    for s in TINY:
        cmd += ["--set", s]
    return subprocess.Popen([os.fspath(c) for c in cmd])


def distill_command(binaries, work: Path, *extra: str) -> list[str]:
    cmd = [sys.executable, DISTILL, "--build-dir", binaries.build_dir,
           "--work-dir", work / "distill", "--teacher", work / "teacher",
           "--backward", work / "backward", "--corpus-lines", "120", "--test-lines", "20",
           "--beam", "2", "--teacher-arg=--max-len-a=0", "--teacher-arg=--max-len-b=16",
           "--keep", "80", "--nproc", "1", "--student-steps", str(STEPS), "--qat-steps", "4",
           "--eval-beam", "1", "--threads-all", "2",
           "--set", "model.encoder_layers=2", "--set", "model.decoder_layers=1",
           "--set", "checkpoint.every_steps=10", *extra]
    for s in TINY:
        cmd += ["--set", s]
    return [os.fspath(c) for c in cmd]


def mtimes(folder: Path) -> dict[str, int]:
    """Every file's modification time under `folder` (report.json aside: rewritten each run)."""
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")
            if p.is_file() and p.name != "report.json"}


def marker(work: Path, stage: str) -> dict:
    return json.loads((work / "distill" / "stages" / f"{stage}.json").read_text(encoding="utf-8"))


def run_stopped_in_student(cmd: list[str], student: Path) -> subprocess.CompletedProcess:
    """Runs the pipeline and sends it SIGTERM once the student has its first checkpoint."""
    process = subprocess.Popen(cmd, cwd=ROOT)
    checkpoints = student / "checkpoints"
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        if checkpoints.is_dir() and any(checkpoints.glob("checkpoint-*.safetensors")):
            process.send_signal(signal.SIGTERM)
            break
        time.sleep(0.02)
    process.wait(timeout=300)
    return process


def test_tiny_pipeline_resumes_stage_by_stage(binaries, work: Path) -> None:
    skip_unless_ctranslate2()
    if (work / "distill").exists():
        shutil.rmtree(work / "distill")
    train_slice(work, 2000)
    models = [train_tiny(binaries, work, "teacher", "en", "de"),
              train_tiny(binaries, work, "backward", "de", "en")]
    assert [m.wait() for m in models] == [0, 0], "training the tiny teacher and backward model"
    cmd = distill_command(binaries, work)
    failures = []

    def check(condition, what):
        print(("ok   " if condition else "FAIL ") + what, flush=True)
        if not condition:
            failures.append(what)

    # 1. Stopped during the student's training.
    stopped = run_stopped_in_student(cmd, work / "distill" / "student")
    early = ["corpus", "translate", "score", "filter"]
    stages = work / "distill" / "stages"
    check(stopped.returncode == 128 + signal.SIGTERM and not (stages / "student.json").exists()
          and all((stages / f"{s}.json").exists() for s in early),
          f"stopped in the student (exit {stopped.returncode}): the earlier stages have their "
          f"markers, the student none ({sorted(p.name for p in stages.glob('*.json'))})")
    summary = json.loads((work / "distill" / "student" / "summary.json").read_text())
    check(summary["stop_reason"] == "signal" and summary["final_step"] < STEPS,
          f"the student stopped by the signal at update {summary['final_step']}")
    before = mtimes(work / "distill" / "data")
    first = {s: marker(work, s)["finished_utc"] for s in early}

    # 2. Resumed: the finished stages are not redone, the student resumes.
    run([*cmd], cwd=ROOT)
    check(mtimes(work / "distill" / "data") == before
          and {s: marker(work, s)["finished_utc"] for s in early} == first,
          "the resumed run left the finished stages' files and markers as they were")
    student = marker(work, "student")["result"]
    check(student["final_step"] == STEPS and student["resumed_from"] is not None,
          f"the student resumed from {student['resumed_from']} to update {student['final_step']}")
    report = json.loads((work / "distill" / "report.json").read_text())
    rows = {row["model"]: row for row in report["models"]}
    check(list(rows) == ["teacher-nmt", "teacher", "student", "student-int8",
                         "student-qat-int8"], f"a row per model: {list(rows)}")
    for name, row in rows.items():
        speeds = (["nmt_translate_sentences_per_s"] if name == "teacher-nmt" else
                  ["ct2_sentences_per_s_1_thread", "ct2_sentences_per_s_all_cores"])
        check(0 <= row["bleu"] <= 100 and 0 <= row["chrf"] <= 100 and row["model_bytes"] > 0
              and all(row[s] > 0 for s in speeds), f"{name}: {row}")
    check(rows["student-int8"]["model_bytes"] < rows["student"]["model_bytes"],
          "int8 is smaller than float32 on disk")
    kept = marker(work, "filter")["result"]["kept"]
    check(report["corpus"]["pairs"] == 120 and 0 < kept <= 96
          and report["corpus"]["student_distilled_pairs"] == kept
          and report["qat"]["final_step"] == 4,
          f"120 pairs, at most the best 80% kept, 4 QAT updates: {report['corpus']}")

    # 3. Nothing to do.
    everything = mtimes(work / "distill")
    out = run([*cmd], cwd=ROOT).stdout
    check(mtimes(work / "distill") == everything and out.count("), skipped") == 8,
          "a third run redoes no stage and changes no file")

    # 4. A marker lost: that stage alone runs again.
    (stages / "filter.json").unlink()
    out = run([*cmd], cwd=ROOT).stdout
    after = mtimes(work / "distill")
    changed = sorted(k for k in after if after[k] != everything.get(k))
    check(changed == ["data/filter.json", "data/kept.src", "data/kept.tgt", "stages/filter.json"],
          f"without its marker the filter alone runs again: changed {changed}")

    # 5. Other settings for a finished stage: refused, naming them, before anything is run or
    # removed (also with --redo of a later stage).
    other = cmd[:cmd.index("--keep")] + ["--keep", "70"] + cmd[cmd.index("--keep") + 2:]
    refused = subprocess.run(other, cwd=ROOT, capture_output=True, text=True)
    check(refused.returncode == 1 and "stage filter finished earlier with other settings"
          in refused.stderr and "keep: 80.0 -> 70.0" in refused.stderr
          and "--redo filter" in refused.stderr, f"other settings refused: {refused.stderr}")
    refused = subprocess.run(other + ["--redo", "student"], cwd=ROOT, capture_output=True,
                             text=True)
    check(refused.returncode == 1 and "keep: 80.0 -> 70.0" in refused.stderr
          and mtimes(work / "distill") == after,
          "and with --redo student, before the student's outputs are removed")
    assert not failures, f"{len(failures)} check(s) failed: {failures}"


def stand_in_build(folder: Path) -> Path:
    """Binaries that write their command line to CALLS and fail (exit 3) at once."""
    build = folder / "build"
    build.mkdir(parents=True)
    for name in ("nmt-train", "nmt-translate", "nmt-score", "nmt-ckpt"):
        path = build / name
        path.write_text(f'#!/bin/sh\necho "$0 $*" >> "{folder}/calls"\n'
                        "echo stand-in refuses >&2\nexit 3\n", encoding="utf-8")
        path.chmod(0o755)
    return build


def test_refusals_and_commands(work: Path) -> None:
    skip_unless_ctranslate2()
    scratch = work / "stand-ins"
    if scratch.exists():
        shutil.rmtree(scratch)
    build = stand_in_build(scratch)
    teachers = [scratch / "a.safetensors", scratch / "b.safetensors"]
    for t in teachers:
        t.write_bytes(b"not read by the pipeline itself")

    def distill(*args):
        r = subprocess.run([sys.executable, DISTILL, "--build-dir", build, *args], cwd=ROOT,
                           capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr

    failures = []

    def check(condition, what):
        print(("ok   " if condition else "FAIL ") + what)
        if not condition:
            failures.append(what)

    base = ["--work-dir", str(scratch / "w"), "--teacher", str(teachers[0])]
    code, out = distill(*base, "--src", str(scratch / "missing.en"))
    check(code == 1 and f"--src {scratch / 'missing.en'}: no such file" in out,
          f"a missing corpus is named with its option: {out.strip()[-200:]}")
    code, out = distill("--work-dir", str(scratch / "w"), "--teacher", str(scratch / "nope"))
    check(code == 1 and f"--teacher {scratch / 'nope'}: no such checkpoint" in out,
          f"a missing teacher is named: {out.strip()[-200:]}")
    code, out = distill(*base, "--set", "run_dir=/tmp/elsewhere")
    check(code == 1 and "run_dir is the pipeline's own" in out,
          f"a --set of the pipeline's own key is refused: {out.strip()[-200:]}")
    code, out = distill(*base, "--keep", "0")
    check(code == 1 and "--keep 0: expected a percentage" in out, "--keep 0 is refused")
    code, out = distill(*base, "--backward", str(teachers[1]), "--keep", "100")
    check(code == 1 and "--keep 100 filters none" in out, "--backward without filtering is refused")
    theirs = scratch / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("keep me\n")
    code, out = distill("--work-dir", str(theirs), "--teacher", str(teachers[0]))
    check(code == 1 and "was not made by this pipeline" in out
          and os.listdir(theirs) == ["notes.txt"], "someone else's directory is refused, kept")
    # Two teachers: the corpus is copied (no binary), then nmt-translate gets both.
    code, out = distill(*base, "--teacher", str(teachers[1]), "--corpus-lines", "10",
                        "--test-lines", "5")
    calls = (scratch / "calls").read_text().splitlines()
    check(code == 1 and len(calls) == 1 and
          f"-c {teachers[0]} -c {teachers[1]} -i {scratch / 'w' / 'data' / 'train.src'}"
          in calls[0] and "an ensemble" in out,
          f"two teachers reach nmt-translate as -c A -c B, with the hint: {calls} {out[-300:]}")
    check((scratch / "w" / "stages" / "corpus.json").is_file()
          and not (scratch / "w" / "stages" / "translate.json").exists(),
          "the corpus stage finished, the translation did not")
    # An input inside the work directory is refused before --redo removes anything there.
    inside = scratch / "w" / "student" / "teacher.safetensors"
    inside.parent.mkdir(parents=True, exist_ok=True)
    inside.write_bytes(b"someone's teacher")
    code, out = distill("--work-dir", str(scratch / "w"), "--teacher", str(inside),
                        "--corpus-lines", "10", "--test-lines", "5", "--redo", "student")
    check(code == 1 and f"--teacher {inside}: lies inside --work-dir" in out and inside.is_file(),
          f"a teacher inside the work directory is refused and kept: {out.strip()[-200:]}")
    assert not failures, f"{len(failures)} check(s) failed: {failures}"
