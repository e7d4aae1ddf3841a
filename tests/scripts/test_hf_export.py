"""`nmt-ckpt export-hf` writes what transformers loads and runs as nmt-translate does (#35).

    pytest tests/scripts/test_hf_export.py::test_train_tiny_models --work DIR
    pytest tests/scripts/test_hf_export.py::test_generate_matches_nmt_translate[demo] --work DIR

test_train_tiny_models (a CTest fixture) trains each variant briefly into DIR/<variant> on a slice of the
shipped corpus: `demo` (configs/demo.yaml, smaller: pre-norm, positions m2m100, one shared
table: an M2M100 export), `postnorm` (post-norm, positions marian, separate
vocabularies, decoder-tied embeddings, silu, a logits bias: a MarianMT export with
separate_vocabs), `multilingual` (configs/multilingual-tiny.yaml on both directions of the
shipped corpus: `<2xx>` tags, exported as Marian's `>>xx<<` tokens, and compared with
">>de<< " leading each line against nmt-translate --tgt-lang de) and `learned` (learned
positions, which no transformers architecture has).

test_generate_matches_nmt_translate exports the run, loads it with AutoTokenizer and AutoModelForSeq2SeqLM alone,
and checks on the first 200 test sentences:
  - the tokenizer's ids equal the checkpoint's own SentencePiece ids (+ </s>), on those lines and
    on awkward text (unknown characters, empty lines, leading, trailing, repeated spaces);
  - generate (greedy: num_beams=1, do_sample=False; pad and bos suppressed and eos forced at
    the length limit by the exported generation_config, as our search does; our length limit
    of 1.2 x source + 10 per line) gives nmt-translate --beam 1's output on every line,
    compared as the target SentencePiece model decodes the ids, and as the tokenizer's
    decode(skip_special_tokens=True) gives them on lines without <unk>.
test_learned_positions_are_refused checks that the learned-positions model is refused with one error line naming
model.positions, and that nothing is written. test_weights_and_average_as_nmt_translate checks that --weights raw|ema|auto and
--average 2 export the tensors nmt-translate would translate with (the demo run has a moving
average and a checkpoint at each of its two updates). test_import_hf_translates_as_the_run
imports the export
back with `nmt-ckpt import-hf` and checks that nmt-translate gives, greedy and with its default
beam, the original run's output on every one of the 200 lines (train -> export-hf -> import-hf),
up to outer whitespace: the import decodes as the exported tokenizer does (MarianTokenizer
strips it), the run with its SentencePiece model (which keeps the spaces of trailing "▁" pieces).

Without transformers (or sentencepiece, safetensors) a test that needs them is skipped.
"""
import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from nmt_tools.checkpoint import list_checkpoints, newest_checkpoint
from nmt_tools.paths import CONFIGS as CONFIG_DIR
from nmt_tools.paths import DATA, ROOT
from nmt_tools.process import run
from nmt_tools.text import first_lines, read_lines, write_lines
from train_support import train_slice

TEST_SRC = DATA / "ddtp.en-de.test.en"
SENTENCES = 200
TRAIN_PAIRS = 6000
# Two updates: the model stays close to its random start, whose greedy outputs vary with the
# input (a few dozen updates on this slice collapse a post-norm model onto one output).
STEPS = 2
# nmt-translate's default length limit (decode/search_options.h).
MAX_LEN_A, MAX_LEN_B = 1.2, 10

# One thread: CTest runs tests side by side.
COMMON = ["model.encoder_layers=2", "model.decoder_layers=2", "model.d_model=64", "model.heads=4",
          "model.ffn_dim=256", "data.vocab_size=800", "data.max_tokens=1024", "train.lr=0.005",
          "train.warmup_steps=10", f"train.max_steps={STEPS}", "train.valid_every=0",
          "train.threads=1", "checkpoint.every_steps=1", "train.log_every=1"]
VARIANTS = {
    # configs/demo.yaml's own norm, positions and embeddings: the shipped config exports. With
    # a moving average, for the --weights and --average choices.
    "demo": (["train.ema_decay=0.9"], "m2m_100"),
    "postnorm": (["model.norm=post", "model.positions=marian", "model.tie_embeddings=decoder",
                  "data.joint_vocab=false", "model.activation=silu", "model.output_bias=true"],
                 "marian"),
    "learned": (["model.norm=post", "model.positions=learned"], None),
    # configs/multilingual-tiny.yaml, both directions of the shipped corpus: the target's tag
    # <2xx> first in every source, which the exported tokenizer reads as ">>xx<< text".
    "multilingual": ([], "m2m_100"),
}
# The variants trained from another config than demo.yaml, with the shipped corpora it names.
CONFIGS = {"multilingual": "multilingual-tiny.yaml"}
# The target language of a multilingual variant.
TGT_LANG = {"multilingual": "de"}

AWKWARD = ["", " ", "  leading spaces", "trailing spaces   ", "repeated    spaces   inside",
           "\ttabs\tand\ttabs\t", "unknown characters: \U0001F600 \u6f22\u5b57 \u0915\u0916",
           "\U0001F600", "mixed\U0001F600unknown\u6f22inside words",
           "Umlaute: \u00fcber \u00c4rger \u00df", "full width \uff21\uff22 and \ufb01le",
           "numbers 1,234.56 and (brackets) [x] {y}", "a", ".", "Hello, World!",
           "the tag <2de> and <BT> as text"]


# The variants exported (the others are refused).
EXPORTED = [name for name, (_, model_type) in VARIANTS.items() if model_type]


def test_train_tiny_models(binaries, work: Path) -> None:
    """The fixture of the others (CTest's FIXTURES_SETUP hf_export_models)."""
    slice_flags = train_slice(work, TRAIN_PAIRS)
    for name, (settings, _) in VARIANTS.items():
        run_dir = os.path.join(work, name)
        shutil.rmtree(run_dir, ignore_errors=True)
        config = CONFIGS.get(name, "demo.yaml")
        cmd = [binaries.train, "--config", CONFIG_DIR / config,
               "--log-level", "warn", "--set", f"run_dir={run_dir}"]
        for s in COMMON + settings:
            cmd += ["--set", s]
        run(cmd + ([] if name in CONFIGS else slice_flags), cwd=ROOT)
        print(f"trained {name}")


def import_or_skip():
    for module in ("sentencepiece", "torch", "transformers", "safetensors"):
        pytest.importorskip(module, reason=f"{module} is not installed (scripts/setup.sh "
                                           "installs it)")


def stored_spm(checkpoint, name):
    """The SentencePiece model a checkpoint stores as vocab.<name> (our ids)."""
    import sentencepiece
    from safetensors import safe_open

    with safe_open(checkpoint, "np") as f:
        data = f.get_tensor(f"vocab.{name}").tobytes()
    return sentencepiece.SentencePieceProcessor(model_proto=data)


def check_tokenizer(name, tokenizer, src_spm, lines, tgt_lang=None):
    """The tokenizer's ids equal our SentencePiece ids + </s> on every line (after the target
    language's tag, given to the tokenizer as Marian's ">>xx<< " text); failures."""
    eos = src_spm.eos_id()
    tag = [src_spm.piece_to_id(f"<2{tgt_lang}>")] if tgt_lang else []
    code = f">>{tgt_lang}<< " if tgt_lang else ""
    different = []
    for line in lines + AWKWARD:
        ours = tag + src_spm.encode(line) + [eos]
        theirs = tokenizer(code + line).input_ids
        if ours != theirs:
            different.append(line)
            if len(different) <= 3:
                print(f"{name}: ids differ on {line!r}\n  ours {ours}\n  theirs {theirs}")
    print(f"{name}: tokenizer: {len(lines) + len(AWKWARD) - len(different)} of "
          f"{len(lines) + len(AWKWARD)} lines give our ids")
    return [f"{len(different)} lines encode otherwise"] if different else []


def hf_greedy(model, tokenizer, lines, max_positions, code=""):
    """transformers' greedy ids per line (without the start token and eos), cut to our limit;
    `code` (">>de<< ") leads each line of a multilingual model."""
    import torch

    outputs = []
    for start in range(0, len(lines), 50):
        batch = tokenizer([code + line for line in lines[start:start + 50]], return_tensors="pt",
                          padding=True)
        lengths = batch.attention_mask.sum(1).tolist()
        limits = [min(int(math.floor(MAX_LEN_A * n)) + MAX_LEN_B, max_positions - 1)
                  for n in lengths]
        with torch.no_grad():
            out = model.generate(**batch, num_beams=1, do_sample=False,
                                 max_length=max(limits) + 2)
        for seq, limit in zip(out.tolist(), limits):
            tokens = []
            for token in seq[1:]:
                if token == model.generation_config.eos_token_id:
                    break
                tokens.append(token)
            outputs.append(tokens[:limit])
    return outputs


@pytest.mark.parametrize("name", EXPORTED)
def test_generate_matches_nmt_translate(name: str, binaries, work: Path) -> None:
    import_or_skip()
    import torch
    import transformers

    torch.set_num_threads(1)
    expected_type = VARIANTS[name][1]
    run_dir = os.path.join(work, name)
    out = os.path.join(work, "export-" + name)
    shutil.rmtree(out, ignore_errors=True)
    run([binaries.ckpt, "export-hf", run_dir, out])

    failures = []
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(out)
    model.eval()
    if model.config.model_type != expected_type:
        failures.append(f"model_type {model.config.model_type}, expected {expected_type}")
    print(f"{name}: loaded {type(tokenizer).__name__} and {type(model).__name__}")

    checkpoint = str(newest_checkpoint(run_dir))
    src_spm = stored_spm(checkpoint, "src_model")
    with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
        joint = json.load(f).get("share_encoder_decoder_embeddings", True)
    tgt_spm = src_spm if joint else stored_spm(checkpoint, "tgt_model")
    lines = read_lines(TEST_SRC, SENTENCES)
    tgt_lang = TGT_LANG.get(name)
    failures += check_tokenizer(name, tokenizer, src_spm, lines, tgt_lang)

    src_file = write_lines(work / "test-200.en", lines)
    ours_file = os.path.join(work, f"nmt-{name}.b1")
    run([binaries.translate, "-c", run_dir, "-i", src_file, "-o", ours_file, "--beam", "1",
         "--device", "cpu", "--threads", "1", "--log-level", "warn"] +
        (["--tgt-lang", tgt_lang] if tgt_lang else []))
    ours = read_lines(ours_file)
    theirs_ids = hf_greedy(model, tokenizer, lines, model.config.max_position_embeddings,
                           f">>{tgt_lang}<< " if tgt_lang else "")
    theirs = [tgt_spm.decode(ids) for ids in theirs_ids]
    different = [i for i in range(SENTENCES) if ours[i] != theirs[i]]
    for i in different[:5]:
        print(f"{name}: line {i + 1} differs\n  nmt-translate: {ours[i]!r}\n"
              f"  transformers:  {theirs[i]!r}")
    print(f"{name}: greedy: {SENTENCES - len(different)} of {SENTENCES} lines identical "
          f"({len(set(ours))} distinct outputs, mean length "
          f"{sum(map(len, theirs_ids)) / SENTENCES:.1f} tokens)")
    if different:
        failures.append(f"{len(different)} greedy outputs differ")
    if len(set(ours)) < SENTENCES // 4:
        failures.append(f"the model is degenerate ({len(set(ours))} distinct outputs): the "
                        "comparison shows little")

    unk = tokenizer.unk_token_id
    clean = [i for i in range(SENTENCES) if unk not in theirs_ids[i]]
    decoded = [i for i in clean
               if tokenizer.decode(theirs_ids[i], skip_special_tokens=True) != ours[i]]
    for i in decoded[:3]:
        print(f"{name}: line {i + 1}: the tokenizer decodes "
              f"{tokenizer.decode(theirs_ids[i], skip_special_tokens=True)!r}, "
              f"nmt-translate wrote {ours[i]!r}")
    print(f"{name}: tokenizer.decode: {len(clean) - len(decoded)} of {len(clean)} lines "
          f"without <unk> as nmt-translate writes them")
    if decoded:
        failures.append(f"{len(decoded)} lines decode otherwise")
    assert not failures, f"{name}: " + "; ".join(failures)


def test_learned_positions_are_refused(binaries, work: Path) -> None:
    run_dir = os.path.join(work, "learned")
    out = os.path.join(work, "export-learned")
    shutil.rmtree(out, ignore_errors=True)
    r = subprocess.run([binaries.ckpt, "export-hf", run_dir, out], capture_output=True, text=True)
    print(r.stderr, end="")
    failures = []
    if r.returncode != 1:
        failures.append(f"exit status {r.returncode}, expected 1")
    if not (r.stderr.startswith("nmt-ckpt: error: ") and r.stderr.count("\n") == 1):
        failures.append("expected one line starting 'nmt-ckpt: error: '")
    for needed in ("model.positions: learned", "model.positions: marian",
                   "model.positions: m2m100"):
        if needed not in r.stderr:
            failures.append(f"the message does not name {needed!r}")
    left = [f for f in os.listdir(work) if f.startswith("export-learned")]
    if left:
        failures.append(f"written anyway: {left}")
    assert not failures, "refuses: " + "; ".join(failures)


def test_weights_and_average_as_nmt_translate(binaries, work: Path) -> None:
    import_or_skip()
    import numpy as np
    from safetensors.numpy import load_file

    run_dir = os.path.join(work, "demo")
    files = list(reversed(list_checkpoints(os.path.join(run_dir, "checkpoints"))))  # oldest first
    ours, theirs = "encoder_embed.tokens.weight", "model.shared.weight"
    cases = [(["--weights", "raw"], files[-1:], "model."),
             (["--weights", "ema"], files[-1:], "ema."),
             ([], files[-1:], "ema."),  # auto: the moving average when there is one
             (["--average", "2", "--weights", "raw"], files[-2:], "model.")]
    failures = []
    out = os.path.join(work, "export-weights")
    shutil.rmtree(out, ignore_errors=True)  # one of an older build holds no marker
    for flags, inputs, group in cases:
        run([binaries.ckpt, "export-hf", run_dir, out, "--force"] + flags)  # replaces the last
        exported = load_file(os.path.join(out, "model.safetensors"))[theirs]
        expected = np.mean([load_file(f)[group + ours].astype(np.float64) for f in inputs],
                           axis=0).astype(np.float32)
        same = exported.dtype == np.float32 and np.array_equal(exported, expected)
        print(f"weights: {' '.join(flags) or '(auto)'}: {theirs} "
              f"{'equals' if same else 'differs from'} {group}{ours} of {len(inputs)} file(s)")
        if not same:
            failures.append(f"{' '.join(flags) or 'auto'} exported other tensors")
    if len(files) < 2 or np.array_equal(load_file(files[-1])["model." + ours],
                                        load_file(files[-1])["ema." + ours]):
        failures.append("the run has too few checkpoints, or raw and ema weights are equal")
    assert not failures, "weights: " + "; ".join(failures)


@pytest.mark.parametrize("name", EXPORTED)
def test_import_hf_translates_as_the_run(name: str, binaries, work: Path) -> None:
    """train -> export-hf -> import-hf: the import translates as the run it came from."""
    run_dir = os.path.join(work, name)
    out = os.path.join(work, "reimport-" + name)
    shutil.rmtree(out, ignore_errors=True)
    run([binaries.ckpt, "export-hf", run_dir, out])
    # Beside the export: import-hf never writes into the directory it reads.
    imported = out + ".safetensors"
    if os.path.exists(imported):
        os.remove(imported)
    summary = json.loads(run([binaries.ckpt, "import-hf", out, "-o", imported]).stdout)
    print(f"{name}: imported {summary['model_type']} with {summary['tokenizer']} tokenizer, "
          f"{summary['parameters']} parameters")
    src_file = first_lines(TEST_SRC, SENTENCES, Path(out) / "test-200.en")
    tgt_lang = TGT_LANG.get(name)
    failures = []
    for beam in (["--beam", "1"], []):
        outputs = []
        for label, checkpoint in (("run", run_dir), ("import", imported)):
            out_file = os.path.join(out, f"{label}{''.join(beam)}.txt")
            run([binaries.translate, "-c", checkpoint, "-i", src_file, "-o", out_file, "--device",
                 "cpu", "--threads", "1", "--log-level", "warn"] + beam +
                (["--tgt-lang", tgt_lang] if tgt_lang else []))
            outputs.append(read_lines(out_file))
        ours, theirs = outputs
        different = [i for i in range(SENTENCES) if ours[i].strip() != theirs[i]]
        for i in different[:3]:
            print(f"{name}: line {i + 1}: the run {ours[i]!r}, the import {theirs[i]!r}")
        spaces = sum(ours[i] != theirs[i] for i in range(SENTENCES)) - len(different)
        what = " ".join(beam) or "default beam"
        print(f"{name}: {what}: {SENTENCES - len(different)} of {SENTENCES} lines identical "
              f"({spaces} of them but for outer whitespace; {len(set(ours))} distinct outputs)")
        if different or len(ours) != SENTENCES:
            failures.append(f"{what}: {len(different)} lines differ")
    assert not failures, f"reimport: {name}: " + "; ".join(failures)
