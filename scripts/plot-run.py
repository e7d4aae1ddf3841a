#!/usr/bin/env python3
"""Plots a run's metrics.jsonl into PNG files next to it.

    scripts/plot-run.py RUN_DIR [--out DIR]

Writes loss.png (training and validation loss), lr.png (learning rate), throughput.png
(tokens/s) and, when validation translated, bleu.png (validation BLEU and chrF), all against
updates. Needs matplotlib (in the venv that scripts/setup.sh makes).
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
import matplotlib.pyplot as plt  # noqa: E402


def read_metrics(path):
    train, valid = [], []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"plot-run: error: {path}:{number}: not JSON: {e}")
            (valid if record.get("type") == "valid" else train).append(record)
    # With several validation sets (data.valid), plot the first: the one that picks the best
    # checkpoint. Older files have no "set" key.
    if valid and "set" in valid[0]:
        valid = [r for r in valid if r.get("set") == valid[0]["set"]]
    return train, valid


def series(records, key):
    points = [(r["step"], r[key]) for r in records if r.get(key) is not None]
    return [p[0] for p in points], [p[1] for p in points]


def save(figure, out_dir, name):
    path = os.path.join(out_dir, name)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    print(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="run directory holding metrics.jsonl")
    parser.add_argument("--out", help="folder for the PNG files (default: RUN_DIR/plots)")
    args = parser.parse_args()
    metrics = os.path.join(args.run_dir, "metrics.jsonl")
    if not os.path.isfile(metrics):
        sys.exit(f"plot-run: error: {metrics}: no such file (has the run logged a step yet?)")
    train, valid = read_metrics(metrics)
    if not train:
        sys.exit(f"plot-run: error: {metrics}: no training records")
    out_dir = args.out or os.path.join(args.run_dir, "plots")
    os.makedirs(out_dir, exist_ok=True)
    title = os.path.basename(os.path.normpath(args.run_dir))

    figure, axes = plt.subplots(figsize=(7, 4))
    axes.plot(*series(train, "loss"), label="train loss")
    if valid:
        axes.plot(*series(valid, "loss"), marker="o", label="validation loss")
    axes.set(xlabel="update", ylabel="loss per target token", title=f"{title}: loss")
    axes.grid(alpha=0.3)
    axes.legend()
    save(figure, out_dir, "loss.png")

    figure, axes = plt.subplots(figsize=(7, 3))
    axes.plot(*series(train, "lr"))
    axes.set(xlabel="update", ylabel="learning rate", title=f"{title}: learning rate")
    axes.grid(alpha=0.3)
    save(figure, out_dir, "lr.png")

    figure, axes = plt.subplots(figsize=(7, 3))
    axes.plot(*series(train, "tokens_per_s"), label="real tokens/s")
    axes.plot(*series(train, "padded_tokens_per_s"), label="padded tokens/s")
    axes.set(xlabel="update", ylabel="tokens/s (all ranks)", title=f"{title}: throughput")
    # From 0: an axis that starts just below the data makes 10% noise look like a collapse.
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend()
    save(figure, out_dir, "throughput.png")

    if any(r.get("bleu") is not None for r in valid):
        figure, axes = plt.subplots(figsize=(7, 3.5))
        axes.plot(*series(valid, "bleu"), marker="o", label="BLEU")
        axes.plot(*series(valid, "chrf"), marker="o", label="chrF")
        axes.set(xlabel="update", ylabel="score", title=f"{title}: validation")
        axes.grid(alpha=0.3)
        axes.legend()
        save(figure, out_dir, "bleu.png")


if __name__ == "__main__":
    main()
