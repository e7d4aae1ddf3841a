"""Token ids of an imported Hugging Face tokenizer equal the tokenizer's own (issue #35).

For one tokenizer class (--tokenizer marian|m2m100|nllb) the test builds a tokenizer directory
itself, without the hub: tiny SentencePiece models trained with the sentencepiece package on
lines of data/ddtp.en-de.*, a vocab.json where the class has one (in a shuffled order, so ids
really go through it), the class constructed from those files and written by save_pretrained.
AutoTokenizer loads it back, as a user's downloaded directory is loaded, and encodes 1,000
source and 1,000 target lines (corpus lines plus empty lines, unknown characters, leading,
trailing and repeated spaces, and language codes); hf_tokenizer_probe (tests/data/) encodes
the same through hf/hf_tokenizer.h as the training pipeline would. Every id list must be
identical, and decoding the tokenizer's target ids must give the tokenizer's decode
(skip_special_tokens=True).

Skipped when transformers or sentencepiece is not installed. One test per class:

    pytest tests/scripts/test_hf_tokenizer.py::test_ids_match_transformers[marian]
"""

import json
import os
import shutil
from pathlib import Path

import pytest
from hf_tokenizers import AWKWARD, BUILD, PAIRS, corpus_lines, hf_encode
from nmt_tools.process import run

LINES = 1000


@pytest.mark.parametrize("tokenizer", sorted(BUILD))
def test_ids_match_transformers(tokenizer: str, binaries, work: Path) -> None:
    pytest.importorskip("sentencepiece")
    transformers = pytest.importorskip("transformers")
    work = work / tokenizer
    work.mkdir(exist_ok=True)
    en = corpus_lines("en", 3000)
    de = corpus_lines("de", 3000)
    built = BUILD[tokenizer](transformers, work, en[:2000], de[:2000])
    saved = os.path.join(work, "saved")
    built.save_pretrained(saved)
    if tokenizer == "nllb":
        # A hub directory ships the model beside tokenizer.json; save_pretrained (5.x) does not.
        shutil.copy(os.path.join(work, "spm", "sentencepiece.bpe.model"), saved)
    tok = transformers.AutoTokenizer.from_pretrained(saved)
    print(f"transformers {transformers.__version__}: AutoTokenizer gives "
          f"{type(tok).__name__} for {type(built).__name__}; files: {sorted(os.listdir(saved))}")

    # 1,000 lines per side: the awkward ones, then unseen corpus lines.
    count = LINES - len(AWKWARD)
    src_lines = AWKWARD + en[2000:2000 + count]
    tgt_lines = AWKWARD + de[2000:2000 + count]
    requests, expected = [], []
    for i, (src_text, tgt_text) in enumerate(zip(src_lines, tgt_lines)):
        src_lang, tgt_lang = PAIRS[i % len(PAIRS)]
        if tokenizer == "marian" and i % 2 == 1:
            src_lang = tgt_lang = ""  # a bilingual Marian model: no code at all
        for side, text in (("source", src_text), ("target", tgt_text)):
            request = {"encode": text, "side": side}
            if tgt_lang:
                request.update(src_lang=src_lang, tgt_lang=tgt_lang)
            requests.append(request)
            expected.append(hf_encode(tokenizer, tok, text, side, src_lang, tgt_lang))
    # Decoding: the tokenizer's target ids, back to text. Without the language code that leads
    # an M2M100 or NLLB target: search forces it and nmt-translate never shows it, while
    # M2M100Tokenizer (5.x) no longer counts its codes as special and writes them out.
    decodes = [ids[1:] if tokenizer != "marian" and r.get("tgt_lang") else ids
               for ids, r in zip(expected, requests) if r["side"] == "target"]
    requests += [{"decode": ids} for ids in decodes]

    probe = run([binaries.hf_tokenizer_probe, saved],
                input="".join(json.dumps(r) + "\n" for r in requests))
    answers = [json.loads(line) for line in probe.stdout.splitlines()]
    info, answers = answers[0], answers[1:]
    print(f"probe: {info}")
    failures = []
    # M2M100Tokenizer (5.x) counts its language codes apart from len(tok).
    size = len(tok) + len(getattr(tok, "lang_token_to_id", {}))
    want = {"pad": tok.pad_token_id, "unk": tok.unk_token_id, "eos": tok.eos_token_id,
            "size": size}
    for key, value in want.items():
        if info[key] != value:
            failures.append(f"{key} id: ours {info[key]}, transformers {value}")
    mismatched = 0
    for request, ids, answer in zip(requests, expected, answers):
        if answer["ids"] != ids:
            mismatched += 1
            if mismatched <= 10:
                failures.append(f"{request}: ours {answer['ids']}, transformers {ids}")
    decoded_wrong = 0
    for ids, answer in zip(decodes, answers[len(expected):]):
        theirs = tok.decode(ids, skip_special_tokens=True)
        if answer["text"] != theirs:
            decoded_wrong += 1
            if decoded_wrong <= 10:
                failures.append(f"decode {ids}: ours {answer['text']!r}, transformers {theirs!r}")
    print(f"{tokenizer}: {len(expected)} lines encoded, {mismatched} differ; "
          f"{len(decodes)} decoded, {decoded_wrong} differ")
    assert not failures, "\n".join(failures)


