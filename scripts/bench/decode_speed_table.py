#!/usr/bin/env python3
"""The table of scripts/bench/decode_speed.sh, from the --stats-json files of its runs.

    decode_speed_table.py OUT --models M ... --beams B ... --translators T ... --repeats R
                          --threads N [--json FILE]

For each model and beam, one row per translator: lines/s and target tokens/s (the median of the
repeats), the output's target tokens, the share of output lines identical to nmt-translate's
with one worker, and the rate against CTranslate2 float32 with as many threads in all (a
translator nmt-wW with W workers of N threads each is set against ct2-none-t(W*N)). With more
than one repeat, each run's seconds follow the table (and are in the JSON), so that a table
shows its own spread.
"""
import argparse
import json
import statistics


def label(translator, threads):
    if translator.startswith("nmt-w"):
        workers = int(translator[len("nmt-w"):])
        return f"nmt-translate {workers} worker{'s' if workers > 1 else ''} x {threads} thread(s)"
    quantization, total = translator[len("ct2-"):].rsplit("-t", 1)
    kind = "float32" if quantization == "none" else quantization
    return f"CTranslate2 {kind}, {total} thread(s)"


def total_threads(translator, threads):
    if translator.startswith("nmt-w"):
        return int(translator[len("nmt-w"):]) * threads
    return int(translator.rsplit("-t", 1)[1])


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--models", nargs="+", required=True)
    p.add_argument("--beams", nargs="+", type=int, required=True)
    p.add_argument("--translators", nargs="+", required=True)
    p.add_argument("--repeats", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--json")
    a = p.parse_args()

    rows = []
    print(f"median of {a.repeats} run(s); {a.threads} thread(s) per worker or translator")
    header = f"{'model':<22}{'beam':>5}  {'translator':<40}{'lines/s':>9}{'tokens/s':>10}" \
             f"{'tokens':>9}{'same':>7}{'vs ct2 f32':>12}"
    print(header)
    for model in a.models:
        for beam in a.beams:
            stem = f"{a.out}/{model}"
            stats = {}
            for t in a.translators:
                runs = [json.load(open(f"{stem}.{t}.b{beam}.{r}.json"))
                        for r in range(1, a.repeats + 1)]
                stats[t] = {
                    "lines_per_s": statistics.median(s["sentences_per_s"] for s in runs),
                    "tokens_per_s": statistics.median(s["output_tokens_per_s"] for s in runs),
                    "tokens": runs[0]["output_tokens"],
                    "seconds": [s["seconds"] for s in runs],
                }
            reference = read_lines(f"{stem}.{a.translators[0]}.b{beam}")
            for t in a.translators:
                lines = read_lines(f"{stem}.{t}.b{beam}")
                same = sum(x == y for x, y in zip(lines, reference)) / max(1, len(reference))
                base = f"ct2-none-t{total_threads(t, a.threads)}"
                ratio = (stats[t]["tokens_per_s"] / stats[base]["tokens_per_s"]
                         if base in stats and stats[base]["tokens_per_s"] > 0 else None)
                row = {"model": model, "beam": beam, "translator": label(t, a.threads),
                       "threads": total_threads(t, a.threads), **stats[t], "same_as_nmt": same,
                       "vs_ct2_float32": ratio}
                rows.append(row)
                print(f"{model:<22}{beam:>5}  {row['translator']:<40}{row['lines_per_s']:>9.1f}"
                      f"{row['tokens_per_s']:>10.0f}{row['tokens']:>9}{same:>7.3f}"
                      f"{'' if ratio is None else f'{ratio:.2f}x':>12}")
    if a.repeats > 1:
        print("seconds of each run, in the order they ran:")
        for row in rows:
            print(f"{row['model']:<22}{row['beam']:>5}  {row['translator']:<40}"
                  + " ".join(f"{x:8.2f}" for x in row["seconds"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"repeats": a.repeats, "threads": a.threads, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
