"""The Hugging Face tokenizers the Python tests build themselves, without the hub (issue #35):
tiny SentencePiece models trained on lines of data/ddtp.en-de.*, a vocab.json where the class
has one (in a shuffled order, so ids really go through it), the class constructed from those
files. Shared by test_hf_tokenizer.py, test_hf_import.py and hf_import_dirs.py.
"""
import os
import random
from pathlib import Path

from nmt_tools.paths import DATA
from nmt_tools.spm import spm_pieces, train_spm
from nmt_tools.text import read_lines, write_json

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


def corpus_lines(side: str, count: int) -> list[str]:
    """The first `count` lines of the shipped en-de training corpus, side "en" or "de"."""
    return read_lines(DATA / f"ddtp.en-de.train.{side}.gz", count)


def build_marian(transformers, work: Path, en: list[str], de: list[str]):
    src = str(train_spm(en, os.path.join(work, "source"), "unigram", 300))
    tgt = str(train_spm(de, os.path.join(work, "target"), "unigram", 300))
    pieces = sorted(set(spm_pieces(src)) | set(spm_pieces(tgt)))
    random.Random(1).shuffle(pieces)
    # As OPUS-MT's conversion writes it: </s> 0, <unk> 1, the pieces, language codes, <pad> last.
    tokens = ["</s>", "<unk>"] + pieces + [">>deu<<", ">>eng<<", ">>fra<<", "<pad>"]
    vocab = os.path.join(work, "vocab.json")
    write_json(vocab, {token: i for i, token in enumerate(tokens)})
    return transformers.MarianTokenizer(source_spm=src, target_spm=tgt, vocab=vocab)


def build_m2m100(transformers, work: Path, en: list[str], de: list[str]):
    model = str(train_spm(en + de, os.path.join(work, "sentencepiece.bpe"), "bpe", 400))
    pieces = spm_pieces(model)
    random.Random(1).shuffle(pieces)
    # fairseq's dictionary order; five pieces left out, which the tokenizer maps to <unk>.
    tokens = ["<s>", "<pad>", "</s>", "<unk>"] + pieces[5:]
    vocab = os.path.join(work, "vocab.json")
    write_json(vocab, {token: i for i, token in enumerate(tokens)})
    return transformers.M2M100Tokenizer(vocab_file=vocab, spm_file=model, src_lang="en",
                                        tgt_lang="de")


def build_nllb(transformers, work: Path, en: list[str], de: list[str]):
    # transformers 5's NllbTokenizer is a tokenizers BPE converted from the SentencePiece
    # model when loaded from a directory that holds only the model, as the hub's have it.
    source = os.path.join(work, "spm")
    os.makedirs(source, exist_ok=True)
    train_spm(en + de, os.path.join(source, "sentencepiece.bpe"), "bpe", 400)
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


def hf_encode(kind: str, tok, text: str, side: str, src_lang: str, tgt_lang: str) -> list[int]:
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
