#!/usr/bin/env python3
"""The batch arithmetic of the fine-tuning benchmarks against transformers
(scripts/nmt_tools/hf_finetune.py, used by scripts/bench/hf_finetune_race.py): the padding
ratio, a sentence-count epoch's updates, and the token budget paired with it by bisection, on
made-up plans (no torch, no binary; well under a second)."""
import math

import pytest

from nmt_tools.hf_finetune import pair_max_tokens, padding_ratio, sentence_batches


def test_padding_ratio_is_padded_over_real():
    assert padding_ratio(100, 100) == 1.0
    assert padding_ratio(330, 100) == pytest.approx(3.3)
    with pytest.raises(ValueError, match="expected >= real tokens"):
        padding_ratio(99, 100)
    with pytest.raises(ValueError, match="expected > 0"):
        padding_ratio(10, 0)


def test_sentence_batches_keep_the_short_last_batch():
    assert sentence_batches(300, 16) == 19
    assert sentence_batches(320, 16) == 20
    assert sentence_batches(1, 32) == 1
    with pytest.raises(ValueError):
        sentence_batches(0, 16)


def plan(total_tokens=48_000, efficiency=0.8):
    """Updates of an epoch of `total_tokens` real tokens cut into budgets of max_tokens padded
    tokens, a made-up plan that never increases with the budget, as nmt-train's."""
    calls = []

    def updates_of(max_tokens):
        calls.append(max_tokens)
        return math.ceil(total_tokens / (max_tokens * efficiency))
    return updates_of, calls


@pytest.mark.parametrize("target", [1, 7, 19, 63, 100, 1000])
def test_pair_max_tokens_finds_the_closest_updates(target):
    updates_of, calls = plan()
    chosen = pair_max_tokens(target, updates_of, 16, 65536)
    assert len(set(calls)) <= 2 + math.ceil(math.log2(65536 - 16))  # a bisection, not a scan
    best = min(abs(updates_of(b) - target) for b in range(16, 65537))
    assert abs(updates_of(chosen) - target) == best


def test_pair_max_tokens_stays_in_its_range():
    updates_of, _ = plan()
    assert pair_max_tokens(10**6, updates_of, 514, 65536) == 514  # the floor: max_len + 2
    assert pair_max_tokens(1, updates_of, 16, 1024) == 1024  # never above the ceiling
    with pytest.raises(ValueError, match="target updates"):
        pair_max_tokens(0, updates_of)
    with pytest.raises(ValueError, match="budget range"):
        pair_max_tokens(5, updates_of, 100, 100)
