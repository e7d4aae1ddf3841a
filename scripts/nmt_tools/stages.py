"""A pipeline of stages that resumes where it stopped (scripts/distill.py runs one).

    stages = [Stage("corpus", "copy the corpus", settings={...}, run=copy, outputs=[...]), ...]
    results = Pipeline(work_dir, stages, prog="distill").run()   # {name: result}

Each stage, once finished, has a marker WORK/stages/NAME.json (written atomically at its end:
its settings, its result, its time). Running the pipeline again skips every stage whose marker
is there with the same settings, and runs the others in order: a stage killed half-way has no
marker and runs again, resuming its own partial output where the binary it runs can (nmt-train
its run directory, nmt-translate its OUTPUT.parts/). A finished stage whose settings differ
from the ones asked for now is refused, naming what differs, rather than silently reused or
silently redone (every marker is checked before anything runs): `redo(NAME)` clears it and
every later stage (markers and outputs) first.

A stage's settings are what its output depends on: options, and the identity (path, size,
modification time) of inputs from outside the work directory. Outputs of earlier stages are
not part of them: those are redone only together with their later stages (redo), so a stage
whose marker alone was lost runs again on the same settings and leaves the later ones valid.
"""
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from nmt_tools.output_guard import path_within
from nmt_tools.text import write_json_atomic

MARKER_FOLDER = "stages"


class StageError(Exception):
    """A stage that cannot run as asked (settings that differ from its finished run, a failed
    command, a bad result); the message names the stage and says what to do."""


@dataclass
class Stage:
    """One step of a pipeline, done once per work directory."""
    name: str  # its marker's name and what redo() takes: lower case, no spaces
    what: str  # one line saying what it does, for the progress lines
    settings: dict[str, Any]  # what its output depends on (JSON values); see the module's doc
    run: Callable[[], dict[str, Any]]  # does the work, returns its result (JSON values)
    outputs: list[Path] = field(default_factory=list)  # what it writes (in the work dir): redo removes them
    budget_s: Optional[float] = None  # the longest it may take (a training time limit), for the ETA
    skip_reason: Optional[str] = None  # set when these options make the stage do nothing


def duration(seconds: float) -> str:
    """H:MM:SS."""
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _normalized(value: Any) -> Any:
    """The value as it reads back from a marker (tuples become lists, keys strings)."""
    return json.loads(json.dumps(value))


def settings_differences(finished: dict[str, Any], asked: dict[str, Any]) -> list[str]:
    """One "key: finished -> asked" line per setting that differs."""
    keys = sorted(set(finished) | set(asked))
    return [f"{k}: {json.dumps(finished.get(k))} -> {json.dumps(asked.get(k))}"
            for k in keys if finished.get(k) != asked.get(k)]


class Pipeline:
    """Runs its stages in order, each at most once per work directory (see the module's doc)."""

    def __init__(self, work: Path, stages: list[Stage], prog: str):
        names = [s.name for s in stages]
        if len(set(names)) != len(names):
            raise ValueError(f"stage names repeat: {names}")
        self.work = Path(work)
        self.stages = stages
        self.prog = prog
        self.markers = self.work / MARKER_FOLDER

    def marker(self, name: str) -> Path:
        return self.markers / f"{name}.json"

    def finished(self, name: str) -> Optional[dict[str, Any]]:
        """The marker of a finished stage, or None."""
        path = self.marker(name)
        if not path.is_file():
            return None
        try:
            with open(path, encoding="utf-8") as f:
                marker = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise StageError(f"{path}: unreadable stage marker ({e}); remove it to redo the "
                             f"stage {name}") from e
        if not isinstance(marker, dict) or marker.get("stage") != name:
            raise StageError(f"{path}: not the marker of stage {name}; remove it to redo it")
        return marker

    def check(self, redo: Optional[str] = None) -> None:
        """Refuses, before anything is run or removed, a finished stage whose settings differ
        (those from `redo` on are to be redone and are not checked)."""
        names = [s.name for s in self.stages]
        if redo is not None and redo not in names:
            raise StageError(f"--redo {redo}: no such stage; the stages are {', '.join(names)}")
        for stage in self.stages[:names.index(redo) if redo else len(names)]:
            marker = self.finished(stage.name)
            if marker is not None:
                self._check_same_settings(stage, marker)

    def redo(self, name: str) -> None:
        """Removes the markers and outputs of stage `name` and of every stage after it."""
        self.check(name)
        names = [s.name for s in self.stages]
        for stage in self.stages[names.index(name):]:
            for output in stage.outputs:
                if not path_within(output, self.work) or Path(output) == self.work:
                    raise StageError(f"stage {stage.name}: output {output} is not inside the "
                                     f"work directory {self.work}; not removed")
                if os.path.isdir(output) and not os.path.islink(output):
                    shutil.rmtree(output)
                elif os.path.lexists(output):
                    os.remove(output)
            if self.marker(stage.name).exists():
                os.remove(self.marker(stage.name))
                self.say(f"redo: cleared stage {stage.name}")

    def say(self, text: str) -> None:
        print(f"[{self.prog}] {text}", flush=True)

    def run(self) -> dict[str, dict[str, Any]]:
        """Runs what is not finished; returns every stage's result by name."""
        self.check()
        self.markers.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        results = {}
        total = len(self.stages)
        for k, stage in enumerate(self.stages, 1):
            head = f"stage {k}/{total} {stage.name}"
            marker = self.finished(stage.name)
            if marker is not None:
                self._check_same_settings(stage, marker)
                self.say(f"{head}: finished earlier ({marker['finished_utc']}, "
                         f"{duration(marker['seconds'])}), skipped")
                results[stage.name] = marker["result"]
                continue
            results[stage.name] = self._run_one(stage, head, start, k)
        self.say(f"all {total} stages finished; pipeline time this run "
                 f"{duration(time.monotonic() - start)}")
        return results

    def _check_same_settings(self, stage: Stage, marker: dict[str, Any]) -> None:
        differences = settings_differences(marker.get("settings", {}),
                                           _normalized(stage.settings))
        if differences:
            raise StageError(
                f"stage {stage.name} finished earlier with other settings "
                f"({self.marker(stage.name)}):\n  " + "\n  ".join(differences) +
                f"\nrun with --redo {stage.name} to redo it and every later stage, or use "
                "another --work-dir")

    def _run_one(self, stage: Stage, head: str, start: float, k: int) -> dict[str, Any]:
        elapsed = time.monotonic() - start
        self.say(f"{head}: {stage.what} (pipeline {duration(elapsed)} so far"
                 + (f"; this stage at most {duration(stage.budget_s)}" if stage.budget_s else "")
                 + self._eta(k) + ")")
        began = time.monotonic()
        if stage.skip_reason:
            result = {"skipped": stage.skip_reason}
            self.say(f"{head}: nothing to do ({stage.skip_reason})")
        else:
            result = stage.run()
        seconds = time.monotonic() - began
        write_json_atomic(self.marker(stage.name), {
            "stage": stage.name, "settings": _normalized(stage.settings),
            "result": _normalized(result), "seconds": round(seconds, 1),
            "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        self.say(f"{head}: done in {duration(seconds)} (pipeline "
                 f"{duration(time.monotonic() - start)})")
        return _normalized(result)

    def _eta(self, k: int) -> str:
        """What is known of the time the later stages take: their time limits, where they have
        them (the binaries print the ETA within a stage)."""
        later = [s for s in self.stages[k:] if not s.skip_reason]
        known = [s for s in later if s.budget_s]
        if not known:
            return ""
        total = duration(sum(s.budget_s for s in known))
        if len(known) == len(later):
            return f"; the later stages at most {total}"
        return f"; later time-limited stages ({', '.join(s.name for s in known)}) at most {total}"


def once(record: Path, settings: dict[str, Any], run: Callable[[], dict[str, Any]],
         say: Callable[[str], None]) -> dict[str, Any]:
    """One part of a stage (a scoring pass, an export, one model's evaluation), done once:
    skipped when `record` holds the same settings, else run and its result kept in `record`
    (atomically, at its end). A stage killed between two parts redoes only the unfinished one."""
    wanted = _normalized(settings)
    if Path(record).is_file():
        try:
            with open(record, encoding="utf-8") as f:
                done = json.load(f)
        except (OSError, json.JSONDecodeError):
            done = {}
        if isinstance(done, dict) and done.get("settings") == wanted and "result" in done:
            say(f"{Path(record).stem}: kept from an earlier run ({record})")
            return done["result"]
    result = _normalized(run())
    Path(record).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(record, {"settings": wanted, "result": result})
    return result
