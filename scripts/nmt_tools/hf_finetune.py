"""What the two fine-tuning benchmarks against transformers share (scripts/bench/
hf_finetune_compare.py, hf_finetune_race.py): the MarianMT of transformer-base shape they both
fine-tune, nmt-train's warm-up as a transformers scheduler, the one function that scores both
sides' models, and the arithmetic of batches (padding, pairing a token budget with a sentence
count). The arithmetic imports nothing heavy, so tests/scripts/test_hf_finetune.py checks it
without torch."""
import json
import math
import os
import random
from collections.abc import Callable
from typing import Any

from .paths import DATA
from .spm import spm_pieces, train_spm
from .text import read_lines, write_json

SPM_LINES = 20000  # lines per side the SentencePiece models are trained on
SPM_PIECES = 4000  # pieces per side; the union is the vocabulary (a few thousand)
DROPOUT = 0.1
LABEL_SMOOTHING = 0.1
SEED = 1
MODEL_SHAPE = "MarianMT transformer-base (6+6, d 512, 8 heads, ffn 2048, swish)"


def build_tokenizer(transformers: Any, work: str) -> Any:
    """A MarianTokenizer as OPUS-MT's conversion writes one: two SentencePiece models, one id
    table (</s> 0, <unk> 1, the pieces of both, <pad> last)."""
    en = read_lines(DATA / "ddtp.en-de.train.en.gz", SPM_LINES)
    de = read_lines(DATA / "ddtp.en-de.train.de.gz", SPM_LINES)
    src = str(train_spm(en, os.path.join(work, "source"), "unigram", SPM_PIECES))
    tgt = str(train_spm(de, os.path.join(work, "target"), "unigram", SPM_PIECES))
    pieces = sorted(set(spm_pieces(src)) | set(spm_pieces(tgt)))
    random.Random(SEED).shuffle(pieces)
    vocab = os.path.join(work, "vocab.json")
    tokens = ["</s>", "<unk>"] + pieces + ["<pad>"]
    write_json(vocab, {token: i for i, token in enumerate(tokens)})
    return transformers.MarianTokenizer(source_spm=src, target_spm=tgt, vocab=vocab)


def make_model_dir(model_dir: str, work: str) -> tuple[int, int]:
    """Saves a seeded MarianMT of transformer-base shape and its tokenizer in model_dir;
    returns the vocabulary size and the parameter count."""
    import torch
    import transformers

    tok = build_tokenizer(transformers, work)
    tok.save_pretrained(model_dir)
    vocab = len(tok)
    config = transformers.MarianConfig(
        vocab_size=vocab, decoder_vocab_size=vocab, d_model=512, encoder_layers=6,
        decoder_layers=6, encoder_attention_heads=8, decoder_attention_heads=8,
        encoder_ffn_dim=2048, decoder_ffn_dim=2048, max_position_embeddings=512,
        activation_function="swish", dropout=DROPOUT, attention_dropout=0.0,
        activation_dropout=0.0, scale_embedding=True, pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.pad_token_id,
        forced_eos_token_id=None)
    torch.manual_seed(SEED)
    model = transformers.MarianMTModel(config)
    model.save_pretrained(model_dir, safe_serialization=True)
    return vocab, sum(p.numel() for p in model.parameters())


def nmt_warmup(step: int, warmup: int) -> float:
    """nmt-train's linear warm-up then constant, as a factor of the peak rate for the update
    after `step` finished ones (update k, from 1, at lr * k / warmup); transformers'
    constant_with_warmup gives update k lr * (k - 1) / warmup, the first at 0."""
    return min(1.0, (step + 1) / max(1, warmup))


def valid_loss(model: Any, tok: Any, src_lines: list[str], tgt_lines: list[str]) -> float:
    """Cross entropy per target token (no label smoothing), teacher-forced, in eval mode: the
    one function that scores both sides' models."""
    import torch

    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for begin in range(0, len(src_lines), 25):
            batch = tok(src_lines[begin:begin + 25], text_target=tgt_lines[begin:begin + 25],
                        return_tensors="pt", padding=True)
            labels = batch["labels"].masked_fill(batch["labels"].eq(tok.pad_token_id), -100)
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                           labels=labels).logits
            total += torch.nn.functional.cross_entropy(
                logits.float().reshape(-1, logits.size(-1)), labels.reshape(-1),
                ignore_index=-100, reduction="sum").item()
            tokens += int(labels.ne(-100).sum())
    return total / tokens


def read_metrics(run_dir: str, kind: str = "train") -> list[dict]:
    """The records of one type ("train", "valid") of a run's metrics.jsonl."""
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    return [r for r in records if r.get("type") == kind]


def padding_ratio(padded_tokens: int, real_tokens: int) -> float:
    """Padded over real tokens (source + target, as nmt-train counts both: a batch's padded
    tokens are its sentences x (longest source + longest target)); 1.0: no padding."""
    if real_tokens <= 0:
        raise ValueError(f"real tokens: expected > 0, found {real_tokens}")
    if padded_tokens < real_tokens:
        raise ValueError(f"padded tokens: expected >= real tokens {real_tokens}, "
                         f"found {padded_tokens}")
    return padded_tokens / real_tokens


def sentence_batches(pairs: int, batch_size: int) -> int:
    """Updates of one epoch of `pairs` pairs in batches of `batch_size` sentences, the last
    batch short (transformers' dataloader_drop_last off, its default)."""
    if pairs < 1 or batch_size < 1:
        raise ValueError(f"pairs and batch size: expected >= 1, found {pairs}, {batch_size}")
    return math.ceil(pairs / batch_size)


def pair_max_tokens(target_updates: int, updates_of: Callable[[int], int], low: int = 16,
                    high: int = 65536) -> int:
    """The data.max_tokens whose epoch has the number of updates closest to target_updates,
    so that its mean real tokens per update (the epoch's real tokens, the same on both sides,
    over its updates) match a sentence-count run of target_updates updates. `updates_of`
    gives the updates of one epoch for a budget (nmt-train --dry-run's steps); it must not
    increase with the budget. A bisection: about log2(high / low) calls. Of two budgets as
    close, the larger (fewer, fuller batches)."""
    if target_updates < 1:
        raise ValueError(f"target updates: expected >= 1, found {target_updates}")
    if not 1 <= low < high:
        raise ValueError(f"budget range: expected 1 <= low < high, found {low}, {high}")
    seen: dict[int, int] = {}

    def updates(budget: int) -> int:
        if budget not in seen:
            seen[budget] = updates_of(budget)
        return seen[budget]

    # The smallest budget in (low, high] with at most target_updates updates (high if none).
    lo, hi = low, high
    if updates(lo) <= target_updates:
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if updates(mid) <= target_updates:
            hi = mid
        else:
            lo = mid
    # hi has at most the target, lo more: the closer of the two.
    return hi if abs(updates(hi) - target_updates) <= abs(updates(lo) - target_updates) else lo
