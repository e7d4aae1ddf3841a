"""log.tensorboard end to end, read back with the PyPI tensorboard package (run by CTest).

    pytest tests/scripts/test_tensorboard.py --nmt-train BIN --work DIR

Trains a tiny model with two validation sets to step 10, loses its step-10 checkpoint (as a
crash after the step-10 records would), resumes from step 8 to step 14, and reads
DIR/run/tensorboard with tensorboard's EventAccumulator (its record reader checks every CRC).
Every number of the metrics.jsonl records must be there as a scalar at its step, tagged
type[/set]/path: the first run's records up to step 8, then the resumed run's; neither the
events nor metrics.jsonl may keep the first run's records after step 8, and no tag may have a
step twice in either. Before the resume the folder also gets another tool's events file (the
tensorboard package's own writer: a file with no scalars) and a temp file named as our rewrites
name theirs but of a live process (this script's): both must be there, unchanged, after it, and
the temp name must be one TensorBoard's loader does not read. Then it loses the step-14
checkpoint and resumes from step 12 with log.tensorboard off: the events and metrics.jsonl must
end at step 12. Skipped without the tensorboard package.
"""
import json
import math
import os
import shutil
import struct
import time
from pathlib import Path

import pytest
from nmt_tools.paths import DATA, ROOT
from nmt_tools.process import run
from nmt_tools.text import first_lines, read_lines, write_lines

TRAIN_PAIRS = 3000
VALID_LINES = 40

CONFIG = """\
model: {{encoder_layers: 2, decoder_layers: 2, d_model: 64, heads: 4, ffn_dim: 256}}
data:
  train_src: {work}/train.en
  train_tgt: {work}/train.de
  valid:
    - {{name: dev-a, src: {work}/a.en, tgt: {work}/a.de}}
    - {{name: dev-b, src: {work}/b.en, tgt: {work}/b.de}}
  vocab_size: 1000
  max_tokens: 1024
train: {{lr: 0.005, warmup_steps: 20, log_every: 2, valid_every: 4, valid_translate: true,
         threads: 1}}
checkpoint: {{every_steps: 4, keep_last: 3}}
log: {{tensorboard: true}}
"""


def fail(message):
    pytest.fail(message)


def prepare(work):
    for side in ("en", "de"):
        first_lines(DATA / f"ddtp.en-de.train.{side}.gz", TRAIN_PAIRS, work / f"train.{side}")
        lines = read_lines(DATA / f"ddtp.en-de.valid.{side}", 2 * VALID_LINES)
        write_lines(work / f"a.{side}", lines[:VALID_LINES])
        write_lines(work / f"b.{side}", lines[VALID_LINES:])
    config = os.path.join(work, "tb.yaml")
    with open(config, "w", encoding="utf-8") as f:
        f.write(CONFIG.format(work=work))
    return config


def flatten(value, path, out):
    """The numbers of a JSON value by path, as the C++ sink tags them (bool and null skipped)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, (int, float)):
        out[path] = float(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            flatten(item, f"{path}/{key}", out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            flatten(item, f"{path}/{i}", out)


def expected_scalars(metrics_file):
    """(tag, step) -> value that TensorBoard must show: every record of metrics.jsonl; and
    the count of steps that metrics.jsonl has twice (0: the resumed run dropped the first
    run's records that it repeats)."""
    expected, seen, repeated = {}, set(), 0
    with open(metrics_file, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            prefix = record.get("type", "metrics")
            if isinstance(record.get("set"), str):
                prefix += "/" + record["set"]
            key = (prefix, record["step"])
            repeated += key in seen
            seen.add(key)
            for name, value in record.items():
                if name != "step":
                    numbers = {}
                    flatten(value, prefix + "/" + name, numbers)
                    for tag, number_value in numbers.items():
                        expected[(tag, record["step"])] = number_value
    return expected, repeated


def read_events(folder):
    from tensorboard.backend.event_processing import event_accumulator

    acc = event_accumulator.EventAccumulator(folder, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    found, wall_times = {}, []
    for tag in acc.Tags()["scalars"]:
        steps = [e.step for e in acc.Scalars(tag)]
        if steps != sorted(set(steps)):
            fail(f"{tag}: steps repeat or go back: {steps}")
        for e in acc.Scalars(tag):
            found[(tag, e.step)] = e.value
            wall_times.append(e.wall_time)
    return found, wall_times


def plant_foreign_files(folder):
    """Another tool's events file (tensorboard's own writer, no scalars) and a temp file named
    as our rewrites name theirs, of a live process (this one); returns {path: bytes} of both."""
    from tensorboard.backend.event_processing import io_wrapper
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(folder)
    writer.close()
    live_temp = os.path.join(folder, f"nmt-train-rewrite.tmp-{os.getpid()}")
    with open(live_temp, "wb") as f:
        f.write(b"being written")
    if io_wrapper.IsTensorFlowEventsFile(live_temp):
        fail(f"TensorBoard's loader would read the rewrite temp file {live_temp}")
    if not io_wrapper.IsTensorFlowEventsFile(writer._file_name):
        fail(f"{writer._file_name} is not an events file to TensorBoard's loader")
    foreign = {}
    for path in (writer._file_name, live_temp):
        with open(path, "rb") as f:
            foreign[path] = f.read()
    return foreign


def check_foreign_files(foreign):
    for path, data in foreign.items():
        if not os.path.exists(path):
            fail(f"the resume removed {path}, which nmt-train did not write")
        with open(path, "rb") as f:
            if f.read() != data:
                fail(f"the resume changed {path}, which nmt-train did not write")


def test_events_match_metrics_across_a_resume(binaries, work: Path) -> None:
    pytest.importorskip("tensorboard", reason="the tensorboard package is not installed "
                                              "(scripts/setup.sh installs it)")
    shutil.rmtree(work, ignore_errors=True)  # emptied first
    work.mkdir()
    config = prepare(work)
    run_dir = os.path.join(work, "run")
    started = time.time()
    train = [binaries.train, "--config", config, "--set", f"run_dir={run_dir}"]
    run(train + ["--set", "train.max_steps=10"], cwd=ROOT)
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
        after_8 = sum(1 for line in f if json.loads(line)["step"] > 8)
    if after_8 == 0:
        fail("the first run logged nothing after step 8: the test does not exercise the resume")
    folder = os.path.join(run_dir, "tensorboard")
    foreign = plant_foreign_files(folder)
    os.remove(os.path.join(run_dir, "checkpoints", "checkpoint-00000010.safetensors"))
    resumed = run(train + ["--set", "train.max_steps=14"], cwd=ROOT)
    if "resumed from" not in resumed.stderr or "checkpoint-00000008" not in resumed.stderr:
        fail(f"the second run did not resume from step 8:\n{resumed.stderr}")

    check_foreign_files(foreign)
    files = sorted(f for f in os.listdir(folder) if f.endswith(".nmt-train"))
    if len(files) != 2 or not all(f.startswith("events.out.tfevents.") for f in files):
        fail(f"expected one events file per run in {folder}, found {sorted(os.listdir(folder))}")
    expected, repeated = expected_scalars(os.path.join(run_dir, "metrics.jsonl"))
    if repeated:
        fail(f"metrics.jsonl has {repeated} record(s) of a step twice after the resume")
    found, wall_times = read_events(folder)

    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    if missing or extra:
        fail(f"scalars missing from the events: {missing[:10]}; not in metrics.jsonl: {extra[:10]}")
    for key, value in sorted(expected.items()):
        as_float = struct.unpack("f", struct.pack("f", value))[0] if math.isfinite(value) else value
        if found[key] != as_float:
            fail(f"{key}: {found[key]} in the events, {value} in metrics.jsonl")
    if not all(started - 1 <= t <= time.time() + 1 for t in wall_times):
        fail("a wall time lies outside the test's run")
    for tag in ("train/loss", "train/nll", "train/ppl", "train/lr", "train/grad_norm",
                "train/tokens_per_s", "train/padded_tokens_per_s", "train/loss_scale",
                "train/peak_memory_mb", "valid/dev-a/loss", "valid/dev-a/bleu",
                "valid/dev-a/chrf", "valid/dev-b/loss", "valid/dev-b/bleu", "valid/dev-b/chrf"):
        steps = sorted(step for t, step in found if t == tag)
        # Validation every 4 updates and at the end of each run; the first run's at its end
        # (step 10) is gone with the checkpoint it wrote.
        want = [2, 4, 6, 8, 10, 12, 14] if tag.startswith("train/") else [4, 8, 12, 14]
        if steps != want:
            fail(f"{tag}: steps {steps}, expected {want}")

    # log.tensorboard off: the resume from step 12 still drops the events of steps 13 and 14.
    os.remove(os.path.join(run_dir, "checkpoints", "checkpoint-00000014.safetensors"))
    off = run(train + ["--set", "train.max_steps=12", "--set", "log.tensorboard=false"],
              cwd=ROOT)
    if "checkpoint-00000012" not in off.stderr:
        fail(f"the third run did not resume from step 12:\n{off.stderr}")
    check_foreign_files(foreign)
    expected_off, _ = expected_scalars(os.path.join(run_dir, "metrics.jsonl"))
    found_off, _ = read_events(folder)
    if set(found_off) != set(expected_off) or max(step for _, step in found_off) != 12:
        fail(f"after a resume from step 12 without log.tensorboard the events have steps "
             f"{sorted({step for _, step in found_off})}, metrics.jsonl "
             f"{sorted({step for _, step in expected_off})}: both should end at 12")

    print(f"{len(found)} scalars under {len({t for t, _ in found})} tags match metrics.jsonl "
          f"(the resume dropped {after_8} record(s) after step 8 from it), in {len(files)} "
          f"events files; another tool's file and a live process's temp file stayed; without "
          f"log.tensorboard a resume from step 12 left {len(found_off)} scalars, none after it")
