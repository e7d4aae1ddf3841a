#!/usr/bin/env python3
"""Filters a parallel corpus by the teacher-forced scores of nmt-translate --score.

    nmt-translate -c FWD -i corpus.en --score corpus.de -o fwd.scores        # p(de | en)
    nmt-translate -c BWD -i corpus.de --score corpus.en -o bwd.scores        # p(en | de)
    scripts/filter-by-score.py --src corpus.en --tgt corpus.de --scores fwd.scores \\
        --backward-scores bwd.scores --keep-best 80 --out kept --report report.json

A score line is "SUM<TAB>MEAN<TAB>TOKENS" (MEAN: log-probability per target token, EOS
included). Per pair, H = -MEAN is the per-token cross-entropy. Pairs are ranked by a cost,
lower is better:

    forward only:                  cost = H_fwd
    with --backward-scores (dual conditional cross-entropy, Junczys-Dowmunt 2018):
                                   cost = |H_fwd - H_bwd| + 0.5 * (H_fwd + H_bwd)

and their score is -cost (higher is better; forward only it is MEAN itself).
--threshold T keeps the pairs whose score is >= T, in one streaming pass. --keep-best X keeps
the best X% of the scored pairs: a first pass reads the score files only and holds one cost
per pair (an array of doubles: 8 bytes a pair, 800 MB for 100M pairs; the text is never
held), whose k-th smallest is the threshold; a second pass streams every file and keeps the
pairs below it and, in input order, those equal to it until k are kept. Pairs with a blank
side or a non-finite score are always dropped. Writes OUT.src and OUT.tgt (the kept lines,
in input order) and a JSON report: counts kept and dropped, the thresholds, the inputs.
"""
import argparse
import json
import math
import sys
from array import array
from pathlib import Path


def read_cost(fwd: str, bwd: str | None, where: str) -> float:
    """The cost of one pair from its score line(s); ValueError naming `where` if malformed."""
    def cross_entropy(line: str, name: str) -> float:
        fields = line.rstrip("\n").split("\t")
        if len(fields) < 2:
            raise ValueError(f"{where} ({name}): expected SUM<TAB>MEAN<TAB>TOKENS, found {line!r}")
        return -float(fields[1])
    h_fwd = cross_entropy(fwd, "forward")
    if bwd is None:
        return h_fwd
    h_bwd = cross_entropy(bwd, "backward")
    return abs(h_fwd - h_bwd) + 0.5 * (h_fwd + h_bwd)


def open_all(paths: list[str]):
    return [open(p, encoding="utf-8", newline="\n") for p in paths]


def pairs(args):
    """Yields (line number, src, tgt, cost) streaming over all files; refuses unequal lengths."""
    paths = [args.src, args.tgt, args.scores] + ([args.backward_scores] if args.backward_scores else [])
    files = open_all(paths)
    try:
        number = 0
        while True:
            lines = [f.readline() for f in files]
            ended = [not line for line in lines]
            if all(ended):
                return
            number += 1
            if any(ended):
                short = [p for p, e in zip(paths, ended) if e]
                raise SystemExit(f"filter-by-score: {', '.join(short)} ended at line {number - 1} "
                                 f"but {paths[ended.index(False)]} goes on: the files must have "
                                 "as many lines")
            where = f"line {number}"
            cost = read_cost(lines[2], lines[3] if len(lines) > 3 else None, where)
            yield number, lines[0], lines[1], cost
    finally:
        for f in files:
            f.close()


def usable(src: str, tgt: str, cost: float) -> bool:
    return bool(src.strip()) and bool(tgt.strip()) and math.isfinite(cost)


def best_threshold(args) -> tuple[float | None, int]:
    """First pass (scores only): the cost of the k-th best usable pair, and how many pairs of
    exactly that cost are kept (those below it all are)."""
    costs = array("d")
    for _, src, tgt, cost in pairs(args):
        if usable(src, tgt, cost):
            costs.append(cost)
    keep = math.ceil(len(costs) * args.keep_best / 100.0)
    if keep == 0:
        return None, 0
    ordered = sorted(costs)
    threshold = ordered[keep - 1]
    below = sum(1 for c in ordered[:keep] if c < threshold)
    return threshold, keep - below


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", required=True, help="source side of the corpus")
    parser.add_argument("--tgt", required=True, help="target side of the corpus")
    parser.add_argument("--scores", required=True,
                        help="nmt-translate -i SRC --score TGT of a forward (src->tgt) model")
    parser.add_argument("--backward-scores",
                        help="nmt-translate -i TGT --score SRC of a backward (tgt->src) model: "
                             "rank by dual conditional cross-entropy")
    how = parser.add_mutually_exclusive_group(required=True)
    how.add_argument("--keep-best", type=float, metavar="PERCENT",
                     help="keep the best PERCENT%% of the pairs (two passes)")
    how.add_argument("--threshold", type=float,
                     help="keep the pairs whose score (-cost) is >= THRESHOLD (one pass)")
    parser.add_argument("--out", required=True, help="writes OUT.src and OUT.tgt")
    parser.add_argument("--report", required=True, help="the JSON report")
    args = parser.parse_args(argv)
    if args.keep_best is not None and not 0 <= args.keep_best <= 100:
        parser.error(f"--keep-best: expected a percentage in [0, 100], found {args.keep_best}")

    max_cost, ties = (-args.threshold, None) if args.threshold is not None else best_threshold(args)
    counts = {"pairs": 0, "kept": 0, "dropped": 0, "dropped_unusable": 0}
    ties_kept = 0
    with open(args.out + ".src", "w", encoding="utf-8") as out_src, \
            open(args.out + ".tgt", "w", encoding="utf-8") as out_tgt:
        for _, src, tgt, cost in pairs(args):
            counts["pairs"] += 1
            if not usable(src, tgt, cost):
                counts["dropped_unusable"] += 1
                continue
            keep = max_cost is not None and (cost < max_cost or (
                cost == max_cost and (ties is None or ties_kept < ties)))
            if keep and max_cost is not None and cost == max_cost:
                ties_kept += 1
            if keep:
                out_src.write(src if src.endswith("\n") else src + "\n")
                out_tgt.write(tgt if tgt.endswith("\n") else tgt + "\n")
                counts["kept"] += 1
    counts["dropped"] = counts["pairs"] - counts["kept"]
    report = {
        **counts,
        "scoring": "dual_conditional_cross_entropy" if args.backward_scores else "forward",
        "mode": "keep_best" if args.keep_best is not None else "threshold",
        "keep_best_percent": args.keep_best,
        "cost_threshold": max_cost,
        "score_threshold": None if max_cost is None else -max_cost,
        "inputs": {"src": args.src, "tgt": args.tgt, "scores": args.scores,
                   "backward_scores": args.backward_scores},
        "outputs": {"src": args.out + ".src", "tgt": args.out + ".tgt"},
    }
    Path(args.report).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"filter-by-score: kept {counts['kept']} of {counts['pairs']} pairs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
