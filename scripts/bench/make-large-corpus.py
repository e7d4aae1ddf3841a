#!/usr/bin/env python3
"""Writes a large synthetic parallel corpus from the shipped DDTP training text, for
batching benchmarks at scale (not for training: its pairs repeat the shipped sentences).

Each output pair joins 1-3 shipped pairs, drawn at random with replacement, on both sides
alike ("A B" / "A' B'"), so lengths spread over a wider range than the shipped text's and
source and target stay aligned. The same seed and input give byte-identical files (gzip
without a name or time stamp).

usage: scripts/bench/make-large-corpus.py OUTDIR [--pairs N] [--seed S]
writes OUTDIR/large.en-de.train.{en,de}.gz and OUTDIR/large.en-de.json (what was made)
"""

import argparse
import gzip
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from nmt_tools.paths import ROOT  # noqa: E402
from nmt_tools.text import read_lines  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--pairs", type=int, default=1_000_000, help="pairs to write (default 1,000,000)")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--src", default=os.path.join(ROOT, "data", "ddtp.en-de.train.en.gz"))
    ap.add_argument("--tgt", default=os.path.join(ROOT, "data", "ddtp.en-de.train.de.gz"))
    ap.add_argument("--level", type=int, default=1, help="gzip level (default 1: fast)")
    args = ap.parse_args(argv)
    t0 = time.time()
    src, tgt = read_lines(args.src), read_lines(args.tgt)
    if len(src) != len(tgt) or not src:
        sys.exit("error: %s and %s: %d and %d lines; expected the same, non-zero"
                 % (args.src, args.tgt, len(src), len(tgt)))
    os.makedirs(args.outdir, exist_ok=True)
    rng = random.Random(args.seed)
    n = len(src)
    words = [0, 0]
    paths = [os.path.join(args.outdir, "large.en-de.train.%s.gz" % side) for side in ("en", "de")]
    with open(paths[0], "wb") as raw_en, open(paths[1], "wb") as raw_de:
        with gzip.GzipFile(filename="", mode="wb", compresslevel=args.level, fileobj=raw_en, mtime=0) as out_en, \
             gzip.GzipFile(filename="", mode="wb", compresslevel=args.level, fileobj=raw_de, mtime=0) as out_de:
            chunk_en, chunk_de = [], []
            for i in range(args.pairs):
                picks = [rng.randrange(n) for _ in range(rng.randint(1, 3))]
                en = " ".join(src[j] for j in picks)
                de = " ".join(tgt[j] for j in picks)
                words[0] += en.count(" ") + 1
                words[1] += de.count(" ") + 1
                chunk_en.append(en)
                chunk_de.append(de)
                if len(chunk_en) == 10000 or i + 1 == args.pairs:
                    out_en.write(("\n".join(chunk_en) + "\n").encode("utf-8"))
                    out_de.write(("\n".join(chunk_de) + "\n").encode("utf-8"))
                    chunk_en, chunk_de = [], []
    info = {
        "pairs": args.pairs,
        "seed": args.seed,
        "joined": "1-3 shipped pairs per pair, uniform, drawn with replacement",
        "from": [os.path.relpath(args.src, ROOT), os.path.relpath(args.tgt, ROOT)],
        "from_pairs": n,
        "words": {"en": words[0], "de": words[1]},
        "files": {os.path.basename(p): os.path.getsize(p) for p in paths},
    }
    with open(os.path.join(args.outdir, "large.en-de.json"), "w", encoding="utf-8") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
    print("wrote %d pairs (%d / %d words) to %s in %.1f s"
          % (args.pairs, words[0], words[1], args.outdir, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
