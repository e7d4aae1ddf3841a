#!/usr/bin/env python3
"""A second English-German data set for fine-tuning checks: the German UI translations of the
software installed on this machine (gettext .mo files under /usr/share/locale/de/).

    scripts/bench/ui-messages-corpus.py OUTDIR [--locale-dir DIR] [--test 1000] [--seed 1]

Writes OUTDIR/ui.en-de.{train,test}.{en,de} and OUTDIR/ui.stats.json. Pairs are msgid/msgstr
of singular messages with a translation, one line each side, accelerator marks (_ and &)
removed, 2 to 40 words on the English side, no printf-style placeholders (they are not
sentences), deduplicated by the English side, shuffled with the seed; the first --test pairs
are the test split. The set depends on what is installed, so scripts report its size.
"""
import argparse
import gettext
import glob
import json
import os
import random
import re
import sys

PLACEHOLDER = re.compile(r"%[-+ #0-9.*]*[a-zA-Z]|\{[^}]*\}|\$\{|<[^>]+>")


def clean(text):
    text = text.replace("_", "").replace("&", "")
    return " ".join(text.split())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--locale-dir", default="/usr/share/locale/de/LC_MESSAGES")
    ap.add_argument("--test", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    files = sorted(glob.glob(os.path.join(args.locale_dir, "*.mo")))
    if not files:
        sys.exit(f"ui-messages-corpus: error: no .mo files in {args.locale_dir}")
    pairs, seen = [], set()
    for path in files:
        try:
            with open(path, "rb") as f:
                catalog = gettext.GNUTranslations(f)._catalog
        except Exception as e:  # a damaged catalog is skipped, and said so
            print(f"ui-messages-corpus: skipping {path}: {e}", file=sys.stderr)
            continue
        for key, value in catalog.items():
            if not isinstance(key, str) or not key or not value or "\x00" in key:
                continue
            if "\n" in key or "\n" in value or PLACEHOLDER.search(key) or PLACEHOLDER.search(value):
                continue
            en, de = clean(key), clean(value)
            if not 2 <= len(en.split()) <= 40 or not de or en == de or en in seen:
                continue
            seen.add(en)
            pairs.append((en, de))
    pairs.sort()
    random.Random(args.seed).shuffle(pairs)
    if len(pairs) <= 2 * args.test:
        sys.exit(f"ui-messages-corpus: error: only {len(pairs)} pairs; need more than {2 * args.test}")
    os.makedirs(args.outdir, exist_ok=True)
    splits = {"test": pairs[: args.test], "train": pairs[args.test:]}
    for split, items in splits.items():
        for side, index in (("en", 0), ("de", 1)):
            with open(os.path.join(args.outdir, f"ui.en-de.{split}.{side}"), "w", encoding="utf-8") as f:
                f.writelines(item[index] + "\n" for item in items)
    stats = {"catalogs": len(files), "train": len(splits["train"]), "test": len(splits["test"]),
             "locale_dir": args.locale_dir, "seed": args.seed}
    with open(os.path.join(args.outdir, "ui.stats.json"), "w", encoding="utf-8") as f:
        json.dump(stats, f, indent=2)
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
