"""The checks of tests/scripts/test_hf_import.py that need no model of their own: the
refusals of import-hf, the import -> export-hf round trip, and CTranslate2's translations of
an import.
"""
import json
import os
import shutil
import subprocess
import sys

import hf_tokenizers as tokenizers
import pytest
from nmt_tools.paths import SCRIPTS
from nmt_tools.process import run

MAX_LEN_B = 12  # our limit: 0 * source tokens + 12 output tokens


def refusals(binaries, model_dir, work):
    """What cannot be imported exactly is refused naming the file and key; nothing is written."""
    cases = [
        ("config.json", {"activation_function": "tanh"}, "activation_function"),
        ("config.json", {"pad_token_id": 1, "decoder_start_token_id": 1},
         "pad_token_id is 1, but the tokenizer"),
        ("config.json", {"vocab_size": 1000}, "vocab_size"),
        # 32-wide weights under a config.json of d_model 64: each tensor's shape is checked.
        ("config.json", {"d_model": 64}, ", 32], but config.json implies ["),
        ("pytorch_model.bin", None, "safetensors"),
    ]
    for file, edits, expected in cases:
        key = next(iter(edits)) if edits else None
        bad = os.path.join(work, f"bad-{key or 'bin'}")
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(model_dir, bad)
        if key:
            with open(os.path.join(bad, file), encoding="utf-8") as f:
                config = json.load(f)
            config.update(edits)
            with open(os.path.join(bad, file), "w", encoding="utf-8") as f:
                json.dump(config, f)
        else:
            os.rename(os.path.join(bad, "model.safetensors"), os.path.join(bad, file))
        out = os.path.join(work, f"bad-{key or 'bin'}.safetensors")
        r = subprocess.run([binaries.ckpt, "import-hf", bad, "-o", out],
                           capture_output=True, text=True)
        message = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        print(f"{file} {edits}: exit {r.returncode}: {message}")
        if r.returncode != 1 or expected not in message or os.path.exists(out):
            pytest.fail(f"expected exit 1, a message naming {expected!r}, and no {out}")
    # A checkpoint already there is kept unless --force, which writes the same bytes again.
    checkpoint = os.path.join(work, "imported.safetensors")
    ckpt = binaries.ckpt
    run([ckpt, "import-hf", model_dir, "-o", checkpoint])
    with open(checkpoint, "rb") as f:
        first = f.read()
    again = subprocess.run([ckpt, "import-hf", model_dir, "-o", checkpoint], capture_output=True,
                           text=True)
    if again.returncode != 1 or "--force" not in again.stderr:
        pytest.fail(f"a second import-hf to {checkpoint}: exit {again.returncode}, {again.stderr!r}")
    run([ckpt, "import-hf", model_dir, "-o", checkpoint, "--force"])
    with open(checkpoint, "rb") as f:
        if f.read() != first:
            pytest.fail("import-hf --force wrote other bytes than the first import")
    print("a second import-hf is refused without --force; with it, the same bytes")


def round_trip(binaries, model_dir, checkpoint, kind, lines, work):
    """import -> export: the same fp32 tensors bit for bit, the same tokenizer ids."""
    import torch
    import transformers

    out = os.path.join(work, "exported")
    run([binaries.ckpt, "export-hf", checkpoint, out, "--force"])
    load = transformers.AutoModelForSeq2SeqLM.from_pretrained
    before, after = load(model_dir).state_dict(), load(out).state_dict()
    if sorted(before) != sorted(after):
        pytest.fail(f"tensor names differ: {sorted(set(before) ^ set(after))[:10]}")
    differing = [name for name in before if not torch.equal(before[name], after[name])]
    if differing:
        pytest.fail(f"{len(differing)} tensors differ after the round trip, e.g. {differing[:5]}")
    tok_before = transformers.AutoTokenizer.from_pretrained(model_dir)
    tok_after = transformers.AutoTokenizer.from_pretrained(out)
    bad = 0
    for line in lines:
        for side in ("source", "target"):
            src_lang, tgt_lang = ("en", "de") if kind != "marian" else ("", "")
            a = tokenizers.hf_encode(kind, tok_before, line, side, src_lang, tgt_lang)
            b = tokenizers.hf_encode(kind, tok_after, line, side, src_lang, tgt_lang)
            bad += a != b
    print(f"round trip: {len(before)} tensors bitwise equal; {type(tok_after).__name__} ids "
          f"equal on {2 * len(lines) - bad} of {2 * len(lines)} encodings")
    if bad:
        pytest.fail(f"{bad} encodings differ after the round trip")


def ct2_translations(checkpoint, kind, lines, src_lang, tgt_lang, work):
    """scripts/export-ctranslate2.py's model of the checkpoint, greedy, decoded as
    hf_translations decodes (the tokenizer's decode, language codes left out)."""
    import ctranslate2
    import sentencepiece as spm
    import transformers

    out = os.path.join(work, "ct2")
    run([sys.executable, SCRIPTS / "export-ctranslate2.py", checkpoint, out,
         "--force"])
    with open(os.path.join(out, "export.json"), encoding="utf-8") as f:
        info = json.load(f)
    source = spm.SentencePieceProcessor(model_file=os.path.join(out, "source.model"))
    hf_code = tokenizers.HF_CODE[kind]
    prefix, target_prefix = [], None
    if kind == "marian" and tgt_lang:
        prefix = [info["source_prefix"][hf_code[tgt_lang][2:-2]]]
    elif kind != "marian":
        code = (lambda lang: hf_code[lang]) if kind == "nllb" else (lambda lang: lang)
        prefix = [info["source_prefix"][code(src_lang)]]
        target_prefix = [info["target_prefix"][code(tgt_lang)]]
    # NLLB's tokenizer (transformers 5) ends a line that ends in whitespace with a "▁" piece,
    # which nmt-train reproduces (data/hf_id_map.h) and plain SentencePiece does not.
    final = (lambda line: ["\u2581"] if kind == "nllb" and line != line.rstrip() else [])
    batch = [prefix + source.encode(line, out_type=str) + final(line) for line in lines]
    translator = ctranslate2.Translator(out, device="cpu", intra_threads=1)
    results = translator.translate_batch(
        batch, beam_size=1, max_decoding_length=MAX_LEN_B,
        target_prefix=[target_prefix] * len(batch) if target_prefix else None)
    tok = transformers.AutoTokenizer.from_pretrained(os.path.join(work, "hf"))
    codes = {i for token, i in tok.get_vocab().items()
             if token.startswith(">>") and token.endswith("<<")}
    codes |= set((getattr(tok, "lang_code_to_id", {}) or {}).values())
    texts = []
    for result in results:
        tokens = result.hypotheses[0][len(target_prefix or []):]
        ids = [i for i in tok.convert_tokens_to_ids(tokens) if i not in codes]
        texts.append(tok.decode(ids, skip_special_tokens=True))
    return texts
