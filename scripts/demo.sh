#!/usr/bin/env bash
# The README's first command: sets everything up, trains a small Transformer on the shipped
# English-German corpus with 2 CPU worker processes (the built-in launcher), translates the
# test set with the best checkpoint, and scores it with BLEU and chrF next to a
# copy-the-source baseline, and draws the run's curves (scripts/plot-run.py). Rerunning
# resumes training from the last checkpoint.
#
#   scripts/demo.sh [extra nmt-train flags, e.g. --set train.max_steps=400]
#
# Environment: DEMO_CONFIG (default configs/demo.yaml: 10 minutes of training; each rerun
# resumes and trains another train.max_minutes), DEMO_WORKERS (default 2), DEMO_BEAM (4).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
config=${DEMO_CONFIG:-configs/demo.yaml}
workers=${DEMO_WORKERS:-2}
beam=${DEMO_BEAM:-4}

# The demo installs and builds only what it runs; scripts/test.sh installs and builds the rest.
NMT_SETUP=demo NMT_TARGETS="nmt-train nmt-translate nmt-score" bash scripts/setup.sh

run_dir=$(build/nmt-train --config "$config" "$@" --print-config | sed -n 's/^run_dir: \([^ #]*\).*/\1/p')
printf '\n[demo 1/3] train %s with %s worker(s) into %s\n' "$config" "$workers" "$run_dir"
build/nmt-train --config "$config" --nproc-per-node "$workers" "$@"

printf '\n[demo 2/3] translate data/ddtp.en-de.test.en (beam %s)\n' "$beam"
build/nmt-translate --checkpoint "$run_dir" --beam "$beam" \
  -i data/ddtp.en-de.test.en -o "$run_dir/test.hyp.de"

printf '\n[demo 3/3] score against data/ddtp.en-de.test.de\n'
echo "model:"
build/nmt-score -r data/ddtp.en-de.test.de -i "$run_dir/test.hyp.de" -m bleu chrf
build/nmt-score -r data/ddtp.en-de.test.de -i "$run_dir/test.hyp.de" -m bleu chrf --json \
  > "$run_dir/test.scores.json"
echo "copy-the-source baseline:"
build/nmt-score -r data/ddtp.en-de.test.de -i data/ddtp.en-de.test.en -m bleu chrf

printf '\nplots of the run (scripts/plot-run.py):\n'
python=$(sed -n 's/^NMT_PYTHON:FILEPATH=//p' "${NMT_BUILD_DIR:-build}/CMakeCache.txt")
"$python" scripts/plot-run.py "$run_dir"

printf '\nexamples (source / reference / model):\n'
for n in 3 17 42; do
  printf '  %s\n  %s\n  %s\n\n' "$(sed -n "${n}p" data/ddtp.en-de.test.en)" \
    "$(sed -n "${n}p" data/ddtp.en-de.test.de)" "$(sed -n "${n}p" "$run_dir/test.hyp.de")"
done

# This run's figures next to docs/performance.md's, from the JSON the binaries wrote (summary.json,
# test.scores.json), with the CPU they came from: those were measured on a CPU with
# AVX-512 and with AVX2 emulated, and a CPU without AVX-512 trains fewer updates in 10 minutes.
"$python" - "$run_dir" <<'PY'
import json, os, re, sys
run = sys.argv[1]
summary = json.load(open(os.path.join(run, "summary.json")))
scores = {s["name"]: float(s["score"]) for s in json.load(open(os.path.join(run, "test.scores.json")))}
flags = open("/proc/cpuinfo").read()
model = re.search(r"^model name\s*:\s*(.*)$", flags, re.M)
vector = "AVX-512" if " avx512f" in flags else "AVX2 (no AVX-512)" if " avx2" in flags else "no AVX2"
# Two Xeons of one model name ran the demo 1.4x apart (docs/performance.md): say which bf16 units it has.
if " avx512f" in flags:
    vector += " with " + ("AVX512-BF16" if " avx512_bf16" in flags else "no AVX512-BF16") + \
        (" and AMX" if " amx_bf16" in flags else ", no AMX")
resumed = (summary.get("resumed_from") or {}).get("step", 0)
print(f"this run: {model.group(1).strip() if model else 'unknown CPU'}, {vector}, {os.cpu_count()} cores")
print(f"  {summary['final_step']:,} updates ({summary['final_step'] - resumed:,} in this call, "
      f"{summary['train_s'] / 60:.1f} min training + {summary['validation_s'] / 60:.1f} min "
      f"validation), {summary['tokens_per_s']:,.0f} tokens/s (validation excluded), test BLEU "
      f"{scores['BLEU']:.1f} / chrF {scores['chrF2']:.1f}")
print("measured (docs/performance.md, demo.yaml before positions: m2m100):\n"
      "          Intel Xeon, AVX-512, AVX512-BF16, no AMX, 2 cores: 2,000 updates, 12,448 tokens/s, test BLEU 20.0 / chrF 49.2\n"
      "          Intel Xeon, AVX-512, AVX512-BF16 and AMX, 2 cores: 1,450 updates, 8,880 tokens/s, test BLEU 17.4 / chrF 47.1\n"
      "          the AMX Xeon, AVX2 emulated: 975 updates, 5,980 tokens/s, test BLEU 12.5 / chrF 38.8")
PY
