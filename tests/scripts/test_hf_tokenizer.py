#!/usr/bin/env python3
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

Exit status 77 (CTest's skip) when transformers or sentencepiece is not installed.
"""

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(REPO, "data")
LINES = 1000

# Lines that stress the text handling; each is used on both sides.
AWKWARD = [
    "",
    " ",
    "   ",
    "  leading spaces",
    "trailing spaces   ",
    "repeated    spaces   inside",
    "\ttab and\ttabs\t",
    "unknown characters: \U0001F600 \u6f22\u5b57 \u0915\u0916",
    "\U0001F600",
    "mixed\U0001F600unknown\u6f22inside words",
    "Umlaute: \u00fcber \u00c4rger \u00df",
    "full width \uff21\uff22\uff23 and ligature \ufb01le",
    "zero\u200bwidth and non\u00a0breaking",
    "numbers 1,234.56 and (brackets) [x] {y}",
    "a",
    ".",
    "Hello, World!",
    "quotes \"double\" 'single' \u201ccurly\u201d",
]


def skip(why):
    print(f"SKIPPED: {why}")
    sys.exit(77)


def read_lines(name, count):
    path = os.path.join(DATA, name)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for _, line in zip(range(count), f)]


def train_spm(spm, lines, prefix, model_type, vocab_size):
    text = prefix + ".txt"
    with open(text, "w", encoding="utf-8") as f:
        f.write("\n".join(line for line in lines if line.strip()) + "\n")
    spm.SentencePieceTrainer.train(input=text, model_prefix=prefix, vocab_size=vocab_size,
                                   model_type=model_type, character_coverage=1.0,
                                   num_threads=1, minloglevel=2)
    return prefix + ".model"


def spm_pieces(spm, model):
    sp = spm.SentencePieceProcessor(model_file=model)
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size())
            if not (sp.is_unknown(i) or sp.is_control(i))]


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=1)


def build_marian(spm, transformers, work, en, de):
    src = train_spm(spm, en, os.path.join(work, "source"), "unigram", 300)
    tgt = train_spm(spm, de, os.path.join(work, "target"), "unigram", 300)
    pieces = sorted(set(spm_pieces(spm, src)) | set(spm_pieces(spm, tgt)))
    random.Random(1).shuffle(pieces)
    # As OPUS-MT's conversion writes it: </s> 0, <unk> 1, the pieces, language codes, <pad> last.
    tokens = ["</s>", "<unk>"] + pieces + [">>deu<<", ">>eng<<", ">>fra<<", "<pad>"]
    vocab = os.path.join(work, "vocab.json")
    write_json(vocab, {token: i for i, token in enumerate(tokens)})
    return transformers.MarianTokenizer(source_spm=src, target_spm=tgt, vocab=vocab)


def build_m2m100(spm, transformers, work, en, de):
    model = train_spm(spm, en + de, os.path.join(work, "sentencepiece.bpe"), "bpe", 400)
    pieces = spm_pieces(spm, model)
    random.Random(1).shuffle(pieces)
    # fairseq's dictionary order; five pieces left out, which the tokenizer maps to <unk>.
    tokens = ["<s>", "<pad>", "</s>", "<unk>"] + pieces[5:]
    vocab = os.path.join(work, "vocab.json")
    write_json(vocab, {token: i for i, token in enumerate(tokens)})
    return transformers.M2M100Tokenizer(vocab_file=vocab, spm_file=model, src_lang="en",
                                        tgt_lang="de")


def build_nllb(spm, transformers, work, en, de):
    # transformers 5's NllbTokenizer is a tokenizers BPE converted from the SentencePiece
    # model when loaded from a directory that holds only the model, as the hub's have it.
    source = os.path.join(work, "spm")
    os.makedirs(source, exist_ok=True)
    train_spm(spm, en + de, os.path.join(source, "sentencepiece.bpe"), "bpe", 400)
    from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES
    return transformers.NllbTokenizer.from_pretrained(
        source, src_lang="eng_Latn", tgt_lang="deu_Latn", extra_special_tokens=FAIRSEQ_LANGUAGE_CODES)


BUILD = {"marian": build_marian, "m2m100": build_m2m100, "nllb": build_nllb}
# The language codes as our configs name them, and as each tokenizer class does.
PAIRS = [("en", "de"), ("de", "en"), ("en", "fr")]
HF_CODE = {
    "marian": {"de": ">>deu<<", "en": ">>eng<<", "fr": ">>fra<<"},
    "m2m100": {"de": "de", "en": "en", "fr": "fr"},
    "nllb": {"de": "deu_Latn", "en": "eng_Latn", "fr": "fra_Latn"},
}


def hf_encode(kind, tok, text, side, src_lang, tgt_lang):
    """The ids the tokenizer gives, with the language codes its users give it."""
    if kind == "marian":
        # Multilingual OPUS-MT: the target's code leads the source text; none on the target.
        if side == "source":
            if tgt_lang:
                text = HF_CODE[kind][tgt_lang] + " " + text
            return tok(text)["input_ids"]
        return tok(text_target=text)["input_ids"]
    tok.src_lang = HF_CODE[kind][src_lang]
    tok.tgt_lang = HF_CODE[kind][tgt_lang]
    if side == "source":
        return tok(text)["input_ids"]
    return tok(text_target=text)["input_ids"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--probe", required=True, help="the hf_tokenizer_probe binary")
    p.add_argument("--tokenizer", required=True, choices=sorted(BUILD))
    p.add_argument("--work", required=True, help="a folder for the tokenizer files")
    a = p.parse_args()
    try:
        import sentencepiece as spm
        import transformers
    except ImportError as e:
        skip(f"no {e.name} in {sys.executable}")
    os.makedirs(a.work, exist_ok=True)
    work = os.path.join(a.work, a.tokenizer)
    os.makedirs(work, exist_ok=True)
    en = read_lines("ddtp.en-de.train.en.gz", 3000)
    de = read_lines("ddtp.en-de.train.de.gz", 3000)
    built = BUILD[a.tokenizer](spm, transformers, work, en[:2000], de[:2000])
    saved = os.path.join(work, "saved")
    built.save_pretrained(saved)
    if a.tokenizer == "nllb":
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
        if a.tokenizer == "marian" and i % 2 == 1:
            src_lang = tgt_lang = ""  # a bilingual Marian model: no code at all
        for side, text in (("source", src_text), ("target", tgt_text)):
            request = {"encode": text, "side": side}
            if tgt_lang:
                request.update(src_lang=src_lang, tgt_lang=tgt_lang)
            requests.append(request)
            expected.append(hf_encode(a.tokenizer, tok, text, side, src_lang, tgt_lang))
    # Decoding: the tokenizer's target ids, back to text. Without the language code that leads
    # an M2M100 or NLLB target: search forces it and nmt-translate never shows it, while
    # M2M100Tokenizer (5.x) no longer counts its codes as special and writes them out.
    decodes = [ids[1:] if a.tokenizer != "marian" and r.get("tgt_lang") else ids
               for ids, r in zip(expected, requests) if r["side"] == "target"]
    requests += [{"decode": ids} for ids in decodes]

    run = subprocess.run([a.probe, saved], input="".join(json.dumps(r) + "\n" for r in requests),
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"hf_tokenizer_probe failed ({run.returncode}): {run.stderr}")
    answers = [json.loads(line) for line in run.stdout.splitlines()]
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
    print(f"{a.tokenizer}: {len(expected)} lines encoded, {mismatched} differ; "
          f"{len(decodes)} decoded, {decoded_wrong} differ")
    if failures:
        print("\n".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
