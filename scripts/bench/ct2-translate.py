#!/usr/bin/env python3
"""Translates a file with a CTranslate2 model made by scripts/export-ctranslate2.py, the way
nmt-translate does, and writes the same figures as nmt-translate --stats-json.

    scripts/bench/ct2-translate.py MODEL_DIR -i IN -o OUT [--beam N] [--threads T]
                                   [--stats-json FILE] [--max-tokens N] [--max-len-a A]
                                   [--max-len-b B] [--length-penalty A] [--tgt-lang LANG]

As nmt-translate: each line is SentencePiece-encoded (source.model) and cut to the model's
max_positions - 1 pieces (the model appends </s>); an empty line gives an empty line; lines
are sorted by length and batched by padded source tokens (--max-tokens, 4096); the output is
at most floor(A * source tokens + B) pieces (--max-len-a 1.2, --max-len-b 10, source tokens
counting </s>), may be empty (min_decoding_length 0), and is decoded by target.model. A
multilingual model (export.json's source_prefix) needs --tgt-lang: its tag goes first in
every source, before the cut, as nmt-translate --tgt-lang does.
CTranslate2 takes one max_decoding_length per call, so each batch decodes to its longest
sentence's limit and every output is cut to its own; for greedy search that is exactly
nmt-translate's limit, for beam search nearly. --length-penalty is CTranslate2's (scores
divided by length^A; nmt-translate divides by ((5 + length) / 6)^A).

The time in the figures runs from reading the input to writing the output (model loading
excluded), as nmt-translate's does.
"""
import argparse
import json
import math
import os
import sys
import time


def main(argv=None):
    parser = argparse.ArgumentParser(prog="ct2-translate.py", description=__doc__.split("\n")[0])
    parser.add_argument("model", metavar="MODEL_DIR")
    parser.add_argument("-i", "--input", required=True)
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--length-penalty", type=float, default=1.0)
    parser.add_argument("--max-len-a", type=float, default=1.2)
    parser.add_argument("--max-len-b", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=0,
                        help="CPU threads (0: CTranslate2's default)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--compute-type", default="default",
                        help="CTranslate2 compute type (default: the model's weight type)")
    parser.add_argument("--stats-json", metavar="FILE")
    parser.add_argument("--tgt-lang", help="target language of a multilingual model: its tag "
                        "(export.json's source_prefix) goes first in every source")
    args = parser.parse_args(argv)

    import ctranslate2
    import sentencepiece as spm

    with open(os.path.join(args.model, "export.json"), encoding="utf-8") as f:
        info = json.load(f)
    max_positions = info["max_positions"]
    prefixes = info.get("source_prefix", {})
    if prefixes and args.tgt_lang not in prefixes:
        parser.error(f"a multilingual model: --tgt-lang must be one of {', '.join(prefixes)}")
    if not prefixes and args.tgt_lang:
        parser.error("--tgt-lang: the model is not multilingual")
    prefix = [prefixes[args.tgt_lang]] if prefixes else []
    translator = ctranslate2.Translator(args.model, device=args.device,
                                        compute_type=args.compute_type,
                                        intra_threads=args.threads, inter_threads=1)
    src = spm.SentencePieceProcessor(model_file=os.path.join(args.model, "source.model"))
    tgt = spm.SentencePieceProcessor(model_file=os.path.join(args.model, "target.model"))

    start = time.perf_counter()
    with open(args.input, encoding="utf-8", newline="\n") as f:
        lines = [line.rstrip("\n").rstrip("\r") for line in f]
    # The tag before the pieces, then the cut, as nmt-translate; an empty line stays empty.
    sources = [(prefix + pieces)[:max_positions - 1] if pieces else []
               for pieces in (src.encode(line, out_type=str) for line in lines)]
    # Source tokens count </s>, which the model appends.
    limits = [min(math.floor(args.max_len_a * (len(s) + 1)) + args.max_len_b, max_positions - 1)
              for s in sources]
    order = sorted((i for i, s in enumerate(sources) if s), key=lambda i: len(sources[i]))
    outputs = [[] for _ in lines]
    begin = 0
    while begin < len(order):
        end = begin + 1
        # Padded source tokens (sentences x longest, </s> included), as nmt-translate.
        while (end < len(order)
               and (end - begin + 1) * (len(sources[order[end]]) + 1) <= args.max_tokens):
            end += 1
        batch = order[begin:end]
        results = translator.translate_batch(
            [sources[i] for i in batch], beam_size=args.beam, length_penalty=args.length_penalty,
            max_decoding_length=max(1, max(limits[i] for i in batch)), min_decoding_length=0,
            max_input_length=0, num_hypotheses=1)
        for i, result in zip(batch, results):
            outputs[i] = result.hypotheses[0][:limits[i]]
        begin = end
    output_tokens = 0
    with open(args.output, "w", encoding="utf-8", newline="\n") as f:
        for pieces in outputs:
            output_tokens += len(pieces)
            f.write(tgt.decode([tgt.piece_to_id(p) for p in pieces]) + "\n")
    seconds = time.perf_counter() - start

    if args.stats_json:
        stats = {
            "sentences": len(lines),
            "source_tokens": sum(len(s) + 1 for s in sources if s),
            "output_tokens": output_tokens,
            "seconds": seconds,
            "sentences_per_s": len(lines) / seconds if seconds > 0 else 0.0,
            "output_tokens_per_s": output_tokens / seconds if seconds > 0 else 0.0,
        }
        with open(args.stats_json, "w", encoding="utf-8") as f:
            json.dump(stats, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
