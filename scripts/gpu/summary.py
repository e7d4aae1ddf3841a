#!/usr/bin/env python3
"""Writes summary.md of a scripts/gpu/check.sh run from what its steps left in OUT.

    scripts/gpu/summary.py OUT > OUT/summary.md

Reads OUT/machine.txt, OUT/results.json and each run's metrics.jsonl and summary.json (what
the binary writes, never its log lines). A diverged run is the case this report exists for:
a NaN loss is JSON null in metrics.jsonl, and every figure here may be missing or null, so
each is printed as "NaN" or "?" rather than raised on; and a section that still fails says so
in one line and the others follow.
"""
import json
import os
import re
import sys
import traceback


def number(value, spec=".0f"):
    """A figure that may be null (NaN, infinite) or absent: "NaN" or "?" instead of raising."""
    if value is None:
        return "NaN"
    try:
        return format(value, spec)
    except (TypeError, ValueError):
        return "?"


def load_json(path):
    with open(path) as f:
        return json.load(f)


def metrics(out, name):
    """The records of a run's metrics.jsonl; a line cut short by a killed run is left out."""
    path = os.path.join(out, name, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    rows = []
    with open(path) as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    return rows


def summary(out, name):
    """What a run wrote at its end (summary.json), or None when it did not get there."""
    path = os.path.join(out, name, "summary.json")
    return load_json(path) if os.path.exists(path) else None


def machine(out):
    print("```\n" + open(os.path.join(out, "machine.txt")).read().strip() + "\n```\n")


def steps(out):
    names = {125: "skipped: the budget was spent", 124: "stopped at the budget"}
    for r in load_json(os.path.join(out, "results.json")):
        why = names.get(r.get("exit"))
        print(f"- {r['step']}: exit {r['exit']} in {r['seconds']} s{' (' + why + ')' if why else ''}")
    # A failed step's last lines, so that the device tool's output tail says why (the whole
    # log is in logs.tar.gz); the [cuda] cases and the benchmark have sections of their own.
    for r in load_json(os.path.join(out, "results.json")):
        path = os.path.join(out, f"{r['step']}.log")
        if r.get("exit") in (0, 125) or r["step"] in ("test-cuda", "bench") or not os.path.exists(path):
            continue
        tail = open(path, errors="replace").read().strip().splitlines()[-20:]
        print(f"\n{r['step']} failed; the end of {r['step']}.log:\n```\n" + "\n".join(tail) + "\n```")


def training(out):
    for amp in ("bf16", "fp16"):
        rows = [r for r in metrics(out, f"train-{amp}") if r.get("type") == "train"]
        if not rows:
            continue
        losses = [r.get("loss") for r in rows]
        scales = sorted({r.get("loss_scale") for r in rows}, key=lambda s: (s is None, s or 0))
        nan_at = [r.get("step") for r in rows if r.get("loss") is None]
        last = rows[-1]
        print(f"\n{amp}: loss {number(losses[0], '.3f')} -> {number(losses[-1], '.3f')} over "
              f"{last.get('step')} steps; NaN: {bool(nan_at)}"
              f"{' (first at step ' + str(nan_at[0]) + ')' if nan_at else ''}; loss scales seen "
              f"{[number(s, 'g') for s in scales]}; skipped updates {last.get('skipped_updates')}; "
              f"{number(last.get('tokens_per_s'))} tok/s; peak {number(last.get('peak_memory_mb'))} MiB")


def distributed(out):
    for name in ("nccl-world1", "gloo-2ranks", "gloo-2ranks-naive", "gloo-2ranks-sharded",
                 "nccl-world1-recompute", "nccl-world1-oom"):
        s = summary(out, name)
        if not s:
            continue
        peaks = s.get("peak_memory_mb") or []
        known = all(p is not None for p in peaks) and peaks and min(peaks) > 0
        spread = (max(peaks) / min(peaks) - 1) * 100 if known else None
        print(f"\n{name}: step {s.get('final_step')} ({s.get('stop_reason')}); parameter hashes "
              f"{sorted(set(s.get('parameter_hashes') or []))}; peak MiB per rank "
              f"{[number(p) for p in peaks]} (spread {number(spread, '.1f')}%); "
              f"{number(s.get('tokens_per_s'))} tok/s; out-of-memory skips "
              f"{s.get('oom_skipped_updates')}")


def cuda_cases(out):
    path = os.path.join(out, "test-cuda.log")
    if not os.path.exists(path):
        return
    wanted = r"(Passed|Failed|All tests|No tests|missing|SKIPPED|\[check\]|.*warning: )"
    lines = [l.strip() for l in open(path, errors="replace") if re.match(wanted, l.strip())]
    print("\n[cuda] test cases:\n" + "\n".join(f"    {l}" for l in lines))


def auto_fit(out):
    s = summary(out, "auto-base")
    if not s:
        return
    fit = s.get("max_tokens_fit") or {}
    probes = [(p.get("sentences"), p.get("tokens"), p.get("peak_mb")) for p in fit.get("probes", [])]
    print(f"\nauto-base: max_tokens {s.get('max_tokens')} ({fit.get('sentences')} sentences of "
          f"{fit.get('length')} tokens, peak {fit.get('peak_mb')} MiB of {fit.get('limit_mb')} MiB "
          f"allowed{'; fallback: ' + fit['fallback'] if fit.get('fallback') else ''}); probes "
          f"(sentences, tokens, peak MiB) {probes}; training peak {s.get('peak_memory_mb')} MiB")


def corpus(out):
    one = os.path.join(out, "corpus", "one.json")
    resumed = os.path.join(out, "corpus", "resumed.json")
    if not os.path.exists(resumed):
        return
    r, o = load_json(resumed), load_json(one)
    ranks = ", ".join(f"rank {k.get('rank')} {k.get('sentences')} lines in {number(k.get('seconds'), '.1f')} s"
                      for k in r.get("ranks", []))
    print(f"\ncorpus: {r.get('lines')} lines in {r.get('shards')} shards; one process "
          f"{number(o.get('sentences_per_s'), '.1f')} lines/s, "
          f"{number(o.get('output_tokens_per_s'), '.1f')} output tokens/s; 2 ranks resumed "
          f"{r.get('shards_decoded')} shards ({r.get('shards_resumed')} kept from the killed run) "
          f"in {number(r.get('seconds'), '.1f')} s ({ranks})")


def ensemble(out):
    one = os.path.join(out, "ensemble", "one.json")
    two = os.path.join(out, "ensemble", "two.json")
    if not os.path.exists(two):
        return
    o, t = load_json(one), load_json(two)
    ratio = (t.get("sentences_per_s") or 0) / (o.get("sentences_per_s") or float("nan"))
    print(f"\nensemble: {t.get('sentences')} lines, beam 4; one model "
          f"{number(o.get('sentences_per_s'), '.1f')} lines/s, 2 models (bf16 + fp16 runs) "
          f"{number(t.get('sentences_per_s'), '.1f')} lines/s ({number(ratio, '.2f')}x); "
          f"output tokens/s {number(o.get('output_tokens_per_s'), '.1f')} and "
          f"{number(t.get('output_tokens_per_s'), '.1f')}")


def log_tail(out, name, title):
    path = os.path.join(out, f"{name}.log")
    if os.path.exists(path):
        print(f"\n{title}:\n```\n" + open(path, errors="replace").read().strip() + "\n```")


def main():
    out = sys.argv[1]
    print("# GPU check\n")
    sections = [machine, steps, training, distributed, cuda_cases, auto_fit, corpus, ensemble,
                lambda o: log_tail(o, "bench", "bench")]
    for section in sections:
        try:
            section(out)
        except Exception:  # one broken section must not hide the others
            error = traceback.format_exc(limit=1).strip().splitlines()[-1]
            print(f"\n(summary: the {getattr(section, '__name__', 'bench')} section failed: {error})")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
