#!/usr/bin/env python3
"""Plots a run's metrics.jsonl into PNG files next to it.

    scripts/plot-run.py RUN_DIR [--out DIR]

Writes loss.png (training and validation loss), lr.png (learning rate), throughput.png
(tokens/s) and, when validation translated, bleu.png (validation BLEU and chrF), all against
updates. With several validation sets (data.valid) each set has its own curves, labelled by
its language pair when it has one ("en-de"), else by its name. Needs matplotlib (in the venv
that scripts/setup.sh makes).
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
    return train, valid


def by_set(valid):
    """The validation records per set, in the order the sets first appear, with a label:
    [(label, records)]; one unlabelled group for a single set (and older files without a
    "set" key)."""
    groups = {}
    for r in valid:
        groups.setdefault(r.get("set"), []).append(r)
    if len(groups) <= 1:
        return [("", valid)]
    return [(records[0].get("pair") or name, records) for name, records in groups.items()]


def series(records, key):
    points = [(r["step"], r[key]) for r in records if r.get(key) is not None]
    return [p[0] for p in points], [p[1] for p in points]


def save(figure, out_dir, name, print_series=False):
    if print_series:
        for axes in figure.axes:
            for line in axes.get_lines():
                print(f"{line.get_label()}: {len(line.get_xdata())} points")
    path = os.path.join(out_dir, name)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    print(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="run directory holding metrics.jsonl")
    parser.add_argument("--out", help="folder for the PNG files (default: RUN_DIR/plots)")
    parser.add_argument("--print-series", action="store_true",
                        help="also print each curve's label and point count (for tests)")
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
    for label, records in by_set(valid) if valid else []:
        axes.plot(*series(records, "loss"), marker="o",
                  label=f"validation loss {label}".strip())
    axes.set(xlabel="update", ylabel="loss per target token", title=f"{title}: loss")
    axes.grid(alpha=0.3)
    axes.legend()
    save(figure, out_dir, "loss.png", args.print_series)

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
        for label, records in by_set(valid):
            axes.plot(*series(records, "bleu"), marker="o", label=f"BLEU {label}".strip())
            axes.plot(*series(records, "chrf"), marker="s", label=f"chrF {label}".strip())
        axes.set(xlabel="update", ylabel="score", title=f"{title}: validation")
        axes.grid(alpha=0.3)
        axes.legend()
        save(figure, out_dir, "bleu.png", args.print_series)


if __name__ == "__main__":
    main()
