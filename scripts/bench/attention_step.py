#!/usr/bin/env python3
"""The attention of one decoding step on the CPU: SDPA (its flash kernel) against the plain
math path (matmul, softmax, matmul) that model/attention.cpp took for a few queries per row in
float32 inference until model/few_query_attention.h replaced it (2026-12-06; measured end to
end, docs/performance-log.md). Prints microseconds per call and the ratio, for the shapes of a decoding
step: self-attention (one query per row over the decoded positions) and beam search's grouped
cross-attention (one query per beam over the source).

    scripts/bench/attention_step.py [--threads 1] [--heads 4] [--d-head 48] [--calls 300]

Run it with the venv's python (torch installed): ~/.cache/nmt-train/torch-*/venv/bin/python.
"""
import argparse
import time

import torch
import torch.nn.functional as F


def per_call_us(fn, calls):
    for _ in range(5):
        fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-head", type=int, default=48)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    heads, d_head = args.heads, args.d_head
    print(f"{'rows':>5} {'queries':>7} {'keys':>5} {'SDPA us':>8} {'math us':>8} {'ratio':>6} {'max diff':>9}")
    # (rows, queries per row, keys): greedy/beam self-attention, then grouped cross-attention.
    for rows, queries, keys in ((16, 1, 10), (64, 1, 10), (64, 1, 30), (256, 1, 20),
                                (16, 4, 25), (64, 4, 25)):
        q = torch.randn(rows, heads, queries, d_head)
        k = torch.randn(rows, heads, keys, d_head)
        v = torch.randn(rows, heads, keys, d_head)
        mask = torch.ones(rows, 1, 1, keys, dtype=torch.bool)
        mask[::2, :, :, -3:] = False  # padded sources
        scale = d_head ** -0.5

        def sdpa():
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

        def math():
            scores = torch.matmul(q * scale, k.transpose(-2, -1))
            scores.masked_fill_(mask.logical_not(), float("-inf"))
            return torch.matmul(scores.softmax(-1), v)

        with torch.inference_mode():
            a = per_call_us(sdpa, args.calls)
            b = per_call_us(math, args.calls)
            diff = (sdpa() - math()).abs().max().item()
        print(f"{rows:>5} {queries:>7} {keys:>5} {a:>8.0f} {b:>8.0f} {a / b:>5.2f}x {diff:>9.1e}")


if __name__ == "__main__":
    main()
