#!/usr/bin/env python3
"""What a rank holds to fine-tune NLLB-200 with nmt-train, computed (not measured).

Counts the parameters of each model from its shape (as nmt-ckpt import-hf builds it: tied
embeddings, pre-norm LayerNorms, biases), then the bytes a rank keeps for the training state,
as nmt-train allocates it:
  fp32 weights 4, gradients 4 (with several ranks they live in the all-reduce's buckets),
  Adam's two moments 8 (dist.sharding none) or 8 / ranks (dist.sharding optimizer);
  train.ema_decay adds 4 (not counted here).
Activations come on top and depend on data.max_tokens; the output layer's alone is shown at
the stated tokens (bf16 logits and fp32 log-probabilities, 6 bytes per token and vocabulary
entry), since NLLB's 256,206-entry vocabulary makes it large. A cell says whether the state and
those logits fit in 90% of the GPU's memory; the layers' activations need what is left, and
data.max_tokens: auto measures that on the GPU.

  scripts/bench/memory-table.py [--tokens 4096] [--json]
"""
import argparse
import json

# name: (d_model, encoder layers, decoder layers, ffn, vocabulary, max positions)
MODELS = {
    "NLLB-200-distilled-600M": (1024, 12, 12, 4096, 256206, 1024),
    "NLLB-200-1.3B": (1024, 24, 24, 8192, 256206, 1024),
    "NLLB-200-3.3B": (2048, 24, 24, 8192, 256206, 1024),
}
GPUS_GB = (40, 80, 141)
RANKS = (1, 2, 4, 8)


def parameters(d, enc, dec, ffn, vocab, _positions):
    attention = 4 * d * d + 4 * d
    feed_forward = 2 * d * ffn + d + ffn
    norm = 2 * d
    encoder_layer = attention + feed_forward + 2 * norm
    decoder_layer = 2 * attention + feed_forward + 3 * norm
    # One tied embedding table (sinusoidal positions: no table), final LayerNorms of both stacks
    # and the embeddings' LayerNorm-free M2M100 layout.
    return vocab * d + enc * encoder_layer + dec * decoder_layer + 2 * norm


def state_bytes(params, ranks, sharding):
    adam = 8 / ranks if sharding == "optimizer" else 8
    return params * (4 + 4 + adam)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=4096, help="target tokens of a batch")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    rows = []
    for name, shape in MODELS.items():
        p = parameters(*shape)
        logits = args.tokens * shape[4] * 6
        for sharding in ("none", "optimizer"):
            for ranks in RANKS:
                if sharding == "optimizer" and ranks == 1:
                    continue
                state = state_bytes(p, ranks, sharding)
                fits = {gb: state + logits <= 0.9 * gb * 1e9 for gb in GPUS_GB}
                rows.append({"model": name, "parameters": p, "sharding": sharding, "ranks": ranks,
                             "state_gb": state / 1e9, "logits_gb": logits / 1e9,
                             "fits": {str(gb): ok for gb, ok in fits.items()}})
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"Computed by scripts/bench/memory-table.py --tokens {args.tokens}: training state per "
          f"rank (GB), and whether state + logits fit in 90% of a GPU")
    print("\n| model (parameters) | dist.sharding | ranks | state GB | + logits GB | "
          + " | ".join(f"{gb} GB" for gb in GPUS_GB) + " |")
    print("|---|---|---:|---:|---:|" + "---|" * len(GPUS_GB))
    for r in rows:
        cells = " | ".join("fits" if r["fits"][str(gb)] else "no" for gb in GPUS_GB)
        print(f"| {r['model']} ({r['parameters'] / 1e9:.2f} B) | {r['sharding']} | {r['ranks']} | "
              f"{r['state_gb']:.1f} | {r['logits_gb']:.1f} | {cells} |")


if __name__ == "__main__":
    main()
