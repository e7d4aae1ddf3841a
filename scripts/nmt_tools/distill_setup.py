"""What the stages of scripts/distill.py share: where each file of the work directory lives
(Layout), the binaries and scripts they run (Tools), and the identity of an input file (what
a stage's settings hold of the files it reads from outside the work directory)."""
import argparse
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from nmt_tools.paths import SCRIPTS
from nmt_tools.process import run_forwarding_signals
from nmt_tools.stages import MARKER_FOLDER, StageError

PROG = "distill"
# The file that makes a work directory this pipeline's: it resumes in one that holds it, and
# takes a new or empty one; --redo removes only outputs inside it.
WORK_DIR_MARKER = ".distill-work-dir"


class Layout:
    """The files of a work directory (docs/distillation.md lists what each stage writes)."""

    def __init__(self, work: Path):
        self.work = Path(work)
        self.data = self.work / "data"
        self.train_src = self.data / "train.src"  # the corpus, plain text (--corpus-lines)
        self.train_tgt = self.data / "train.tgt"
        self.test_src = self.data / "test.src"
        self.test_tgt = self.data / "test.tgt"
        self.distilled = self.data / "distilled.tgt"  # the teacher's translations of train.src
        self.forward_scores = self.data / "distilled.forward.scores"
        self.backward_scores = self.data / "distilled.backward.scores"
        self.kept = self.data / "kept"  # kept.src, kept.tgt: the filtered distilled pairs
        self.filter_report = self.data / "filter.json"
        self.stats = self.work / "stats"  # --stats-json of the corpus runs
        self.teacher_import = self.work / "teacher" / "imported.safetensors"
        self.student_config = self.work / "student.yaml"
        self.student = self.work / "student"  # nmt-train run directories
        self.qat = self.work / "student-qat"
        self.ct2 = self.work / "ct2"  # CTranslate2 exports, one folder each
        self.eval = self.work / "eval"  # test translations and figures, per model
        self.report = self.work / "report.json"
        self.markers = self.work / MARKER_FOLDER  # stages.Pipeline's markers, NAME.json

    def marker(self, stage: str) -> Path:
        """The marker of a finished stage (stages.Pipeline writes it)."""
        return self.markers / f"{stage}.json"

    def part_record(self, stage: str, part: str) -> Path:
        """The record of one finished part of a stage (stages.once)."""
        return self.markers / "parts" / f"{stage}.{part}.json"

    def parts(self, output: Path) -> Path:
        """The folder nmt-translate builds a corpus output in (OUTPUT.parts/)."""
        return output.with_name(output.name + ".parts")


# Files up to this size are known by their content's hash, larger ones (a corpus, a
# checkpoint) by size and modification time: hashing a corpus of 100M lines takes minutes.
HASHED_BYTES = 1 << 20


def file_identity(path: Path) -> dict[str, Any]:
    """What a stage's settings hold of a file it reads from outside the work directory: its
    path, size and either its content's hash (small files: a config, a test set, so that a
    checkout that only touches them changes nothing) or its modification time."""
    st = os.stat(path)
    identity = {"path": str(Path(path).resolve()), "bytes": st.st_size}
    if st.st_size <= HASHED_BYTES:
        identity["sha256"] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    else:
        identity["mtime_ns"] = st.st_mtime_ns
    return identity


def checkpoint_files(given: Path) -> list[str]:
    """The checkpoint file nmt-translate takes for `given` (a file, or a run directory's best
    or newest); StageError naming it when there is none."""
    from nmt_tools.checkpoint import CheckpointError, resolve_checkpoints  # numpy: in the venv

    try:
        return resolve_checkpoints(str(given), 0, prog=PROG)
    except CheckpointError as e:
        raise StageError(str(e)) from e


def model_bytes(checkpoint: str) -> int:
    """Bytes of a checkpoint's model.* tensors as stored (no optimizer state, no EMA)."""
    from nmt_tools.checkpoint import SafetensorsFile

    file = SafetensorsFile(checkpoint)
    return sum(e["data_offsets"][1] - e["data_offsets"][0]
               for name, e in file.entries.items() if name.startswith("model."))


def directory_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


class Tools:
    """The binaries (from --build-dir) and scripts the stages run, and how they are run: each
    command printed, its output shown as it comes, a signal passed on and waited for."""

    def __init__(self, build_dir: Path):
        self.build_dir = Path(build_dir)
        self.train = self.build_dir / "nmt-train"
        self.translate = self.build_dir / "nmt-translate"
        self.score = self.build_dir / "nmt-score"
        self.ckpt = self.build_dir / "nmt-ckpt"
        self.python = sys.executable
        self.filter = SCRIPTS / "filter-by-score.py"
        self.export = SCRIPTS / "export-ctranslate2.py"
        self.ct2_translate = SCRIPTS / "bench" / "ct2-translate.py"

    def missing(self) -> Optional[str]:
        """The first binary that is not built, or None."""
        for path in (self.train, self.translate, self.score, self.ckpt):
            if not os.access(path, os.X_OK):
                return str(path)
        return None

    def run(self, stage: str, command: list[Any], **kwargs: Any) -> None:
        """Runs `command` to its end; StageError naming the stage and command when it fails."""
        command = [os.fspath(c) for c in command]
        print("+ " + " ".join(command), flush=True)
        status = run_forwarding_signals(command, **kwargs)
        if status != 0:
            raise StageError(f"stage {stage}: {Path(command[0]).name} exited with status "
                             f"{status} (its message is above); fix the cause and run the same "
                             "command again: finished stages are kept")

    def output_of(self, stage: str, command: list[Any]) -> str:
        """Runs `command` and returns its standard output (its errors shown as they come)."""
        command = [os.fspath(c) for c in command]
        print("+ " + " ".join(command), flush=True)
        result = subprocess.run(command, stdout=subprocess.PIPE, text=True)
        if result.returncode != 0:
            raise StageError(f"stage {stage}: {Path(command[0]).name} exited with status "
                             f"{result.returncode} (its message is above)")
        return result.stdout

    def bleu_chrf(self, stage: str, hypotheses: Path, reference: Path) -> dict[str, float]:
        """BLEU and chrF of a translation (nmt-score --json: sacreBLEU's figures)."""
        out = self.output_of(stage, [self.score, "-r", reference, "-i", hypotheses,
                                     "-m", "bleu", "chrf", "--json"])
        scores = {s["name"]: float(s["score"]) for s in json.loads(out)}
        return {"bleu": scores["BLEU"], "chrf": scores["chrF2"]}


@dataclass
class Context:
    """What every stage reads: the options, the work directory's files, the tools."""
    args: argparse.Namespace  # scripts/distill.py's options, paths made absolute
    layout: Layout
    tools: Tools
    teachers: list[Path]  # what nmt-translate gets as -c: the given ones, or the import

    def say(self, text: str) -> None:
        print(f"[{PROG}] {text}", flush=True)


def read_json(path: Path, stage: str) -> Any:
    """A JSON file a binary wrote; StageError naming it when absent or malformed."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise StageError(f"stage {stage}: cannot read {path}: {e}") from e
