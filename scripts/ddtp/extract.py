#!/usr/bin/env python3
"""Build an English-LANG parallel corpus from Debian DDTP Translation files.

Standard library only (Python >= 3.7), so it runs on a fresh Debian machine.

Input: two *decompressed* Translation index files of the same Debian suite and
component (e.g. produced by `/usr/lib/apt/apt-helper cat-file ...`):
Translation-en and Translation-LANG.  Descriptions are matched by their
Description-md5 (the MD5 of the original English description), so every
translation is of exactly the English text it is paired with.

Pairing:
  * short descriptions (first line) are paired one to one;
  * long descriptions are split into paragraphs at the " ." separator lines;
    if the paragraph counts differ the long description is dropped;
  * inside a paragraph, list items (lines starting with '*', '-', 'o', '+',
    or '1.' / '1)' / 'a)') start a new unit; the marker is stripped on both
    sides; if the unit counts differ the paragraph is dropped;
  * each unit is split into sentences with a small regex splitter; when the
    sentence counts agree the sentences are paired one to one, otherwise the
    whole unit is kept as one pair if neither side exceeds --max-words.

Then every candidate pair goes through the filters (empty, mostly_markup,
package_name_only, untranslated_identical, too_long, length_mismatch), is
deduplicated by its English side (keeping the most frequent translation),
shuffled with a fixed seed and split into test / valid / train.

Every dropped candidate is counted under its reason; the counts are printed
and written to a JSON stats file.
"""

import argparse
import collections
import gzip
import hashlib
import json
import os
import random
import re
import sys
import time
import unicodedata

# --------------------------------------------------------------------------
# Parsing of Translation-XX files
# --------------------------------------------------------------------------


class Progress:
    """Prints a progress line to stderr at most every `every` seconds."""

    def __init__(self, label, total=None, every=1.0):
        self.label = label
        self.total = total
        self.every = every
        self.last = 0.0
        self.start = time.time()
        self.tty = sys.stderr.isatty()

    def update(self, done, force=False):
        now = time.time()
        if not force and now - self.last < self.every:
            return
        self.last = now
        if self.total:
            msg = "%s: %d/%d (%.0f%%)" % (self.label, done, self.total,
                                          100.0 * done / max(1, self.total))
        else:
            msg = "%s: %d" % (self.label, done)
        if self.tty:
            sys.stderr.write("\r" + msg + " " * 8)
        else:
            sys.stderr.write(msg + "\n")
        sys.stderr.flush()

    def finish(self, done):
        self.update(done, force=True)
        if self.tty:
            sys.stderr.write("\n")
        sys.stderr.write("%s: done in %.1fs\n" % (self.label, time.time() - self.start))
        sys.stderr.flush()


def parse_translation(path, lang):
    """Returns (descriptions, packages).

    descriptions: dict md5 -> (short, [long lines]) (first occurrence wins),
    packages: set of package names seen in the file.
    """
    field = "description-" + lang.lower()
    descs = {}
    packages = set()
    size = os.path.getsize(path)
    prog = Progress("parsing %s" % os.path.basename(path), total=size)
    done = 0

    stanza_pkg = None
    stanza_md5 = None
    short = None
    long_lines = None
    in_desc = False

    def flush():
        if stanza_md5 is not None and short is not None and stanza_md5 not in descs:
            descs[stanza_md5] = (short, long_lines)

    with open(path, "rb") as f:
        for raw in f:
            done += len(raw)
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if not line.strip():
                # blank line: end of stanza
                flush()
                stanza_pkg = stanza_md5 = short = long_lines = None
                in_desc = False
                prog.update(done)
                continue
            if line[0] in " \t":
                if in_desc:
                    long_lines.append(line[1:])
                continue
            in_desc = False
            name, _, value = line.partition(":")
            key = name.strip().lower()
            value = value.strip()
            if key == "package":
                stanza_pkg = value
                packages.add(value)
            elif key == "description-md5":
                stanza_md5 = value.lower()
            elif key == field:
                short = value
                long_lines = []
                in_desc = True
            prog.update(done)
        flush()
    prog.finish(done)
    return descs, packages


# --------------------------------------------------------------------------
# Text segmentation
# --------------------------------------------------------------------------

# list markers: * - o + # bullets, en/em dashes and minus signs (French
# translations use "\u2013\xa0" or "\u2212\u22c5"), "1." "1)" "a)"
BULLET_RE = re.compile(
    r"^\s*(?:[*\-o+#\u2013\u2014\u2212\u2022\u00b7\u2023\u25aa\u25e6]"
    r"|\d{1,2}[.)]|[a-z]\))[\s\u22c5]+(?=\S)")
CTRL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\ufeff]")
WS_RE = re.compile(r"\s+")


def normalize(text):
    text = unicodedata.normalize("NFC", text)
    text = CTRL_RE.sub("", text)
    return WS_RE.sub(" ", text).strip()


def paragraphs(long_lines):
    """Splits the long description lines into paragraphs (lists of lines)."""
    paras = []
    cur = []
    for line in long_lines:
        if line.strip() == "." or not line.strip():
            if cur:
                paras.append(cur)
            cur = []
        else:
            cur.append(line)
    if cur:
        paras.append(cur)
    return paras


def units(para_lines):
    """Splits a paragraph into units: leading prose + one unit per list item.

    List markers are stripped.  Returns a list of normalized strings.
    """
    out = []
    cur = []
    for line in para_lines:
        m = BULLET_RE.match(line)
        if m:
            if cur:
                out.append(cur)
            cur = [line[m.end():]]
        else:
            cur.append(line)
    if cur:
        out.append(cur)
    return [normalize(" ".join(u)) for u in out]


# Tokens (lower-cased, including the final '.') after which a period does not
# end a sentence.  Both sides use the same list, so the splitter stays
# symmetric: e.g. "etc." and "usw." are both treated as non-final.
ABBREVIATIONS = set("""
e.g. i.e. etc. cf. vs. approx. incl. esp. resp. viz. al. ca. no. nr. vol.
ver. rev. min. max. dr. mr. mrs. ms. prof. inc. ltd. co. corp. st. jr. sr.
jan. feb. mar. apr. jun. jul. aug. sep. sept. oct. nov. dec. fig. ex. eg. ie.
z.b. zb. d.h. dh. usw. bzw. u.a. u.ä. o.ä. v.a. u.u. evtl. ggf. inkl. bspw.
sog. ggü. u.s.w. z.t. s.o. s.u. vgl. hrsg. allg. einschl. zzgl. abs. bsp.
c.-à-d. c-à-d. env. p.ex. mme. mlle. n°. cf.
""".split())
SINGLE_INITIAL_RE = re.compile(r"^(?:\w\.)+$")  # "z.", "B.", "J.", "u.a."
NUMBER_RE = re.compile(r"^\d+\.$")  # German ordinals "3." / list numbers
BOUNDARY_RE = re.compile(r"[.!?\u2026]+[\"'\u00bb\u201d\u2019)\]]*\s+")
OPENERS = "\"'\u00ab\u201e\u201c\u2018(["


def split_sentences(text):
    sents = []
    start = 0
    for m in BOUNDARY_RE.finditer(text):
        end = m.end()
        if end >= len(text):
            break
        # the next sentence must start with an uppercase letter
        j = end
        while j < len(text) and (text[j] in OPENERS or text[j].isspace()):
            j += 1
        if j >= len(text) or not text[j].isupper():
            continue
        punct = m.group(0).strip()
        if punct.startswith(".") and not punct.startswith(".."):
            # examine the token that ends with this period
            k = m.start()
            tok_start = text.rfind(" ", 0, k) + 1
            token = text[tok_start:k + 1].lower().lstrip("(\"'\u00ab\u201e\u201c")
            if (token in ABBREVIATIONS or SINGLE_INITIAL_RE.match(token)
                    or NUMBER_RE.match(token)):
                continue
        sents.append(text[start:m.end()].strip())
        start = m.end()
    last = text[start:].strip()
    if last:
        sents.append(last)
    return sents


# --------------------------------------------------------------------------
# Filters
# --------------------------------------------------------------------------

URL_RE = re.compile(r"(?:<?(?:URL:)?(?:https?|ftp|git|svn)://\S+>?|www\.\S+|\S+@\S+\.\w+)", re.I)
WORD_RE = re.compile(r"[^\W\d_]{2,}")  # a word: two or more letters
IDENT_CHARS_RE = re.compile(r"[0-9._+:/\-]")


def markup_reason(text, packages):
    """Returns a filter reason if `text` is mostly markup, else None."""
    stripped = text.strip(" .,:;!?()[]{}<>\"'*-")
    if not stripped:
        return "mostly_markup"
    if " " not in stripped and stripped in packages:
        # a single token that is exactly a Debian package name, e.g. "gzip"
        return "package_name_only"
    no_urls = URL_RE.sub(" ", text)
    if not WORD_RE.search(no_urls):
        return "mostly_markup"
    non_space = [c for c in text if not c.isspace()]
    letters = sum(1 for c in non_space if c.isalpha())
    if letters < 0.5 * len(non_space):
        return "mostly_markup"
    if URL_RE.search(text) and len(WORD_RE.findall(no_urls)) < 2:
        return "mostly_markup"
    return None


def filter_reason(en, tgt, packages, max_words, max_ratio):
    if not en or not tgt:
        return "empty"
    for side in (en, tgt):
        r = markup_reason(side, packages)
        if r:
            return r
    if en.casefold() == tgt.casefold():
        return "untranslated_identical"
    if len(en.split()) > max_words or len(tgt.split()) > max_words:
        return "too_long"
    if not ratio_ok(en, tgt, max_ratio):
        return "length_mismatch"
    return None


def ratio_ok(en, tgt, max_ratio):
    """Character length ratio test, smoothed for short strings."""
    a, b = len(en) + 10, len(tgt) + 10
    return max(a, b) <= max_ratio * min(a, b)


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--en", required=True, help="decompressed Translation-en")
    ap.add_argument("--tgt", required=True, help="decompressed Translation-LANG")
    ap.add_argument("--lang", required=True, help="target language code, e.g. de")
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--prefix", default=None,
                    help="output file prefix (default: ddtp.en-LANG)")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--test-size", type=int, default=1000)
    ap.add_argument("--valid-size", type=int, default=1000)
    ap.add_argument("--train-size", type=int, default=0,
                    help="write at most this many training pairs (a random "
                         "sample of the shuffled set); 0 = all")
    ap.add_argument("--max-words", type=int, default=100,
                    help="max words per side of a pair")
    ap.add_argument("--max-ratio", type=float, default=2.5,
                    help="max (len+10) ratio between the two sides")
    ap.add_argument("--sentence-max-ratio", type=float, default=2.0,
                    help="sentence pairs of a unit are only used if every one "
                         "passes this length ratio; else the unit is kept whole")
    ap.add_argument("--gzip-train", action="store_true",
                    help="write the train files gzip-compressed (.gz; no name or "
                         "time stamp in the header, so a rebuild is byte-identical)")
    ap.add_argument("--stats-file", default="stats.json",
                    help="name of the stats file inside OUTDIR")
    ap.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                    help="provenance information copied into the stats file")
    args = ap.parse_args(argv)

    lang = args.lang
    prefix = args.prefix or "ddtp.en-%s" % lang
    t0 = time.time()

    en_descs, packages = parse_translation(args.en, "en")
    tgt_descs, tgt_packages = parse_translation(args.tgt, lang)
    packages |= tgt_packages

    drops = collections.Counter()
    info = collections.Counter()
    info["descriptions_en"] = len(en_descs)
    info["descriptions_" + lang] = len(tgt_descs)

    matched = sorted(md5 for md5 in tgt_descs if md5 in en_descs)
    info["descriptions_matched"] = len(matched)
    info["descriptions_%s_without_en" % lang] = len(tgt_descs) - len(matched)

    candidates = []  # (en, tgt)
    prog = Progress("pairing", total=len(matched))

    def add_unit(en_u, tgt_u):
        s_en = split_sentences(en_u)
        s_tgt = split_sentences(tgt_u)
        if len(s_en) == len(s_tgt) and (len(s_en) == 1 or all(
                ratio_ok(a, b, args.sentence_max_ratio) for a, b in zip(s_en, s_tgt))):
            if len(s_en) > 1:
                info["units_split_into_sentences"] += 1
            candidates.extend(zip(s_en, s_tgt))
        else:
            if len(s_en) == len(s_tgt):
                info["units_sentence_lengths_disagree_kept_whole"] += 1
            else:
                info["units_sentence_count_mismatch_kept_whole"] += 1
            candidates.append((en_u, tgt_u))

    for i, md5 in enumerate(matched):
        en_short, en_long = en_descs[md5]
        tgt_short, tgt_long = tgt_descs[md5]
        info["candidates_short"] += 1
        candidates.append((normalize(en_short), normalize(tgt_short)))

        p_en = paragraphs(en_long)
        p_tgt = paragraphs(tgt_long)
        info["paragraphs_en"] += len(p_en)
        if len(p_en) != len(p_tgt):
            drops["paragraph_count_mismatch"] += len(p_en)
        else:
            for pe, pt in zip(p_en, p_tgt):
                u_en = units(pe)
                u_tgt = units(pt)
                if len(u_en) != len(u_tgt):
                    drops["list_item_count_mismatch"] += len(u_en)
                    continue
                info["units"] += len(u_en)
                for ue, ut in zip(u_en, u_tgt):
                    add_unit(ue, ut)
        prog.update(i + 1)
    prog.finish(len(matched))
    info["candidate_pairs"] = len(candidates)

    # filters
    kept = []
    for en, tgt in candidates:
        r = filter_reason(en, tgt, packages, args.max_words, args.max_ratio)
        if r:
            drops[r] += 1
        else:
            kept.append((en, tgt))
    info["pairs_after_filters"] = len(kept)

    # dedup by English side: keep the most frequent translation (ties: the
    # lexicographically smallest), independent of input order
    by_en = collections.defaultdict(collections.Counter)
    for en, tgt in kept:
        by_en[en][tgt] += 1
    pairs = []
    for en in sorted(by_en):
        c = by_en[en]
        best = min(c, key=lambda t: (-c[t], t))
        pairs.append((en, best))
    drops["duplicate_en"] = len(kept) - len(pairs)
    info["pairs_unique_en"] = len(pairs)

    # deterministic shuffle and split
    rng = random.Random(args.seed)
    rng.shuffle(pairs)
    n_test = min(args.test_size, len(pairs))
    n_valid = min(args.valid_size, len(pairs) - n_test)
    test = pairs[:n_test]
    valid = pairs[n_test:n_test + n_valid]
    train = pairs[n_test + n_valid:]
    info["train_available"] = len(train)
    if args.train_size and args.train_size < len(train):
        train = train[:args.train_size]

    os.makedirs(args.outdir, exist_ok=True)
    splits = {}
    for name, data in (("train", train), ("valid", valid), ("test", test)):
        for side, idx in (("en", 0), (lang, 1)):
            path = os.path.join(args.outdir, "%s.%s.%s" % (prefix, name, side))
            text = "".join(p[idx] + "\n" for p in data).encode("utf-8")
            if name == "train" and args.gzip_train:
                with open(path + ".gz", "wb") as raw, gzip.GzipFile(
                        filename="", mode="wb", compresslevel=9, fileobj=raw, mtime=0) as f:
                    f.write(text)
            else:
                with open(path, "wb") as f:
                    f.write(text)
        splits[name] = len(data)

    meta = {}
    for kv in args.meta:
        k, _, v = kv.partition("=")
        meta[k] = v
    meta["input_en"] = {"file": os.path.basename(args.en), "sha256": sha256_of(args.en)}
    meta["input_" + lang] = {"file": os.path.basename(args.tgt), "sha256": sha256_of(args.tgt)}

    stats = {
        "corpus": "%s (Debian DDTP, en-%s)" % (prefix, lang),
        "source": meta,
        "params": {
            "seed": args.seed, "test_size": args.test_size,
            "valid_size": args.valid_size, "train_size": args.train_size,
            "max_words": args.max_words, "max_ratio": args.max_ratio,
            "sentence_max_ratio": args.sentence_max_ratio,
            "gzip_train": args.gzip_train,
        },
        "counts": dict(sorted(info.items())),
        "filtered": dict(sorted(drops.items())),
        "splits": splits,
    }
    with open(os.path.join(args.outdir, args.stats_file), "w", encoding="utf-8") as f:
        json.dump(stats, f, indent=2, ensure_ascii=False)
        f.write("\n")

    w = sys.stdout.write
    w("== DDTP en-%s ==\n" % lang)
    for k, v in sorted(info.items()):
        w("  %-45s %8d\n" % (k, v))
    w("filtered (per reason):\n")
    for k, v in sorted(drops.items(), key=lambda kv: -kv[1]):
        w("  %-45s %8d\n" % (k, v))
    w("splits:\n")
    for k in ("train", "valid", "test"):
        w("  %-45s %8d\n" % (k, splits[k]))
    w("written to %s (%s.*, %s) in %.1fs\n" % (args.outdir, prefix, args.stats_file,
                                                time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
