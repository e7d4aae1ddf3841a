"""Students and int8 quantization-aware training (issue #48), run by CTest
(tests/CMakeLists.txt), each test alone:

    pytest tests/scripts/test_qat_int8.py::test_finetune_resume_export_and_codes_equal_ctranslate2 \
        --work DIR

The student preset (configs/student-tiny.yaml, data and vocabulary made tiny) trains a float
checkpoint; a fine-tune from it with train.quantize=int8 runs, stops, resumes and exports to
CTranslate2 with --quantization int8 and to transformers; then every int8 matrix of the
export's model.bin, codes and scales, equals what training computed with (int8_probe: the
model's own model::quantize_int8_rows on the same checkpoint), and every matrix CTranslate2
keeps in float is one our training keeps in float. Skipped without ctranslate2.
"""
import json
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from nmt_tools import stored_config
from nmt_tools.checkpoint import LAYOUT, SafetensorsFile, newest_checkpoint
from nmt_tools.paths import CONFIGS, ROOT, SCRIPTS
from nmt_tools.process import run
from train_support import train_slice

EXPORT = SCRIPTS / "export-ctranslate2.py"
PRESETS = ("student-tiny", "student-base")
# The preset's shape at a width and vocabulary that train in seconds on one core.
SMALL = ["model.d_model=64", "model.ffn_dim=128", "model.heads=4", "data.vocab_size=500",
         "data.max_tokens=1024", "train.threads=1", "train.valid_every=0", "train.log_every=1",
         "train.warmup_steps=2", "train.lr=0.002", "checkpoint.keep_last=5"]
PAIRS = 1500
SHIPPED_CORPORA = ("data.train=[{name: distilled, src: data/ddtp.en-de.train.en.gz, tgt: "
                   "data/ddtp.en-de.train.de.gz}, {name: original, src: "
                   "data/ddtp.en-de.train.en.gz, tgt: data/ddtp.en-de.train.de.gz, weight: 0.5}]")
# model.bin's data type ids (CTranslate2's DataType enum order).
CT2_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}


def read_model_bin(path):
    """CTranslate2's model.bin (ctranslate2.specs.model_spec._serialize): {name: array} and
    {alias: name}."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        values = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return values

    def string():
        nonlocal pos
        (length,) = take("H")
        text = data[pos:pos + length - 1].decode()
        pos += length
        return text

    take("I")  # binary version
    string()  # spec name
    take("I")  # revision
    (count,) = take("I")
    variables = {}
    for _ in range(count):
        name = string()
        (rank,) = take("B")
        shape = take("I" * rank)
        (dtype,) = take("B")
        (size,) = take("I")
        variables[name] = np.frombuffer(data[pos:pos + size], CT2_DTYPES[dtype]).reshape(shape)
        pos += size
    (aliases,) = take("I")
    return variables, dict((string(), string()) for _ in range(aliases))


def ct2_to_checkpoint(model):
    """CTranslate2 variable scope -> our parameter for each matrix the exporter writes
    (scripts/export-ctranslate2.py's build_spec), tied embeddings resolved."""
    a = LAYOUT["attention"]
    tokens = "encoder_embed.tokens.weight"
    names = {"encoder/embeddings_0": tokens, "decoder/embeddings": tokens,
             "decoder/projection": tokens}
    for side, layers in (("encoder", model["encoder_layers"]),
                         ("decoder", model["decoder_layers"])):
        for i in range(layers):
            ours, theirs = f"{side}_layers.{i}", f"{side}/layer_{i}"
            attn = f"{ours}.{a['self_attention']}"
            names[f"{theirs}/self_attention/linear_0"] = f"{attn}.{a['query_key_value']}.weight"
            names[f"{theirs}/self_attention/linear_1"] = f"{attn}.{a['output']}.weight"
            names[f"{theirs}/ffn/linear_0"] = f"{ours}.ffn.fc1.weight"
            names[f"{theirs}/ffn/linear_1"] = f"{ours}.ffn.fc2.weight"
            if side == "decoder":
                c = f"{ours}.{a['cross_attention']}"
                names[f"{theirs}/attention/linear_0"] = f"{c}.{a['query']}.weight"
                names[f"{theirs}/attention/linear_1"] = f"{c}.{a['key_value']}.weight"
                names[f"{theirs}/attention/linear_2"] = f"{c}.{a['output']}.weight"
    return names


def train(binaries, preset, run_dir, *settings):
    cmd = [binaries.train, "--config", CONFIGS / f"{preset}.yaml", "--log-level", "warn",
           "--set", f"run_dir={run_dir}"]
    for s in SMALL + list(settings):
        cmd += ["--set", s]
    return run(cmd, cwd=ROOT)


def stored_train(checkpoint):
    config = SafetensorsFile(checkpoint).metadata["config"]
    return stored_config.parse(config, str(checkpoint))


def test_finetune_resume_export_and_codes_equal_ctranslate2(binaries, work: Path) -> None:
    pytest.importorskip("ctranslate2", reason="the ctranslate2 package is not installed "
                                              "(scripts/setup.sh installs it)")
    slice_flags = train_slice(work, PAIRS)
    data = [slice_flags[i + 1] for i in range(0, len(slice_flags), 2)]
    src, tgt = (flag.split("=", 1)[1] for flag in data)
    # The preset's two corpora: the "distilled" one and the originals at half weight.
    corpora = (f"data.train=[{{name: distilled, src: {src}, tgt: {tgt}}}, "
               f"{{name: original, src: {src}, tgt: {tgt}, weight: 0.5}}]")
    float_run, qat_run = work / "float", work / "qat"
    for d in (float_run, qat_run):
        shutil.rmtree(d, ignore_errors=True)
    train(binaries, "student-tiny", float_run, corpora, "train.max_steps=3",
          "checkpoint.every_steps=3")

    # The int8 fine-tune, stopped at step 2 and resumed to step 4.
    qat = [corpora, f"train.init_from={float_run}", "train.quantize=int8",
           "checkpoint.every_steps=2"]
    train(binaries, "student-tiny", qat_run, *qat, "train.max_steps=2")
    train(binaries, "student-tiny", qat_run, *qat, "train.max_steps=4")
    checkpoint = newest_checkpoint(qat_run)
    config = stored_train(checkpoint)
    assert config["train"]["quantize"] == "int8", config["train"]
    assert int(re.sub(r"\D", "", checkpoint.stem)) == 4, checkpoint
    assert config["model"]["encoder_layers"] == 6 and config["model"]["decoder_layers"] == 2
    # Resumed from its own step-2 checkpoint (not started again from init_from): steps 1 to 4
    # logged once each.
    summary = json.loads((qat_run / "summary.json").read_text())
    assert (summary["resumed_from"] or {}).get("step") == 2, summary
    records = [json.loads(line) for line in (qat_run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["type"] == "train"] == [1, 2, 3, 4]

    # Exports: CTranslate2 int8 and transformers (MarianMT).
    out = work / "ct2-int8"
    run([sys.executable, EXPORT, checkpoint, out, "--force", "--quantization", "int8"])
    hf = work / "hf"
    shutil.rmtree(hf, ignore_errors=True)
    run([binaries.ckpt, "export-hf", checkpoint, hf])
    assert (hf / "config.json").exists()

    probe = work / "int8-probe.safetensors"
    run([binaries.int8_probe, checkpoint, probe])
    ours = SafetensorsFile(probe)
    variables, aliases = read_model_bin(out / "model.bin")
    names = ct2_to_checkpoint(config["model"])
    problems = []
    for name, value in variables.items():
        scope, _, leaf = name.rpartition("/")
        if value.ndim == 0:
            continue  # settings stored as scalars (the activation, the embedding scale)
        if value.dtype == np.int8 and scope not in names:
            problems.append(f"{name}: int8 in CTranslate2, unknown to this test")
        if value.dtype != np.int8 and leaf == "weight" and value.ndim == 2:
            problems.append(f"{name}: a float matrix CTranslate2 did not quantize")
        # Kept float by CTranslate2: layer norms, biases, position tables; ours too.
    for scope, parameter in names.items():
        codes, scales = (ours.tensor(f"model.{parameter}.{part}") for part in ("codes", "scales"))
        # A tied matrix is stored once, the others are aliases of it (its scale not aliased).
        stored = aliases.get(f"{scope}/weight", f"{scope}/weight")
        theirs, theirs_scale = variables[stored], variables[stored + "_scale"]
        if theirs.dtype != np.int8:
            problems.append(f"{scope}/weight: {theirs.dtype} in CTranslate2, int8 in training")
            continue
        if not np.array_equal(codes, theirs):
            steps = np.abs(codes.astype(np.int32) - theirs.astype(np.int32)).max()
            problems.append(f"{scope}/weight: codes differ from {parameter}'s (at most {steps} "
                            f"steps, {np.sum(codes != theirs)} of {codes.size})")
        if not np.array_equal(scales, theirs_scale.reshape(scales.shape)):
            problems.append(f"{scope}/weight_scale: scales differ from {parameter}'s")
    for p in problems:
        print(p)
    print(f"{len(names)} int8 matrices of model.bin compared with training's codes and scales, "
          f"{len(problems)} differ")
    assert not problems, "CTranslate2's int8 is not what training computed with (see above)"

    # The int8 export loads and translates.
    import ctranslate2
    translator = ctranslate2.Translator(str(out), device="cpu", compute_type="int8")
    result = translator.translate_batch([["▁Hello", "."]], beam_size=1, max_decoding_length=5)
    assert result[0].hypotheses


def test_student_presets_are_deep_shallow_and_exportable(binaries, work: Path) -> None:
    """Each preset stops naming the distilled corpus it lacks (the teacher's output does not
    ship), parses with the shipped corpora in its place, has a deeper encoder than decoder, and
    its model section is one CTranslate2's exporter expresses, with positions transformers'
    exporter takes."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("export_ctranslate2", EXPORT)
    exporter = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(exporter)
    for preset in PRESETS:
        missing = subprocess.run([binaries.train, "--config", CONFIGS / f"{preset}.yaml",
                                  "--print-config"], cwd=ROOT, capture_output=True, text=True)
        assert missing.returncode != 0
        assert re.search(rf"{preset}\.yaml:\d+:\d+: data\.train corpus distilled: file not "
                         r"found: 'data/distill/corpus\.en'", missing.stderr), missing.stderr
        printed = run([binaries.train, "--config", CONFIGS / f"{preset}.yaml", "--set",
                       SHIPPED_CORPORA, "--print-config"], cwd=ROOT).stdout
        config = stored_config.parse(printed, preset)
        model = config["model"]
        assert model["encoder_layers"] == 6 and model["decoder_layers"] == 2, model
        assert model["positions"] in ("marian", "m2m100") and model["tie_embeddings"] == "all"
        exporter.model_config(printed, preset)  # raises what CTranslate2 cannot express
        assert [c["name"] for c in config["data"]["train"]] == ["distilled", "original"]
        print(f"{preset}: {model['encoder_layers']}+{model['decoder_layers']} layers, d_model "
              f"{model['d_model']}, ffn {model['ffn_dim']}")
