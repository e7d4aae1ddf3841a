#!/usr/bin/env bash
# Figures of two real-job features on the demo setup, side by side in one run:
# - the moving average (train.ema_decay): the demo trains for DEMO_MINUTES with EMA on, and
#   its last checkpoint translates the test set with the trained weights (--weights raw: what
#   a run without EMA would have, as EMA does not change training) and with the average;
# - fine-tuning (train.init_from): that model continues for FT_MINUTES on a second data set,
#   the German UI messages of the installed software (scripts/bench/ui-messages-corpus.py),
#   and is scored on its test split before and after (and on the DDTP test set after).
#
#   scripts/bench/real-jobs.sh            # needs a build (scripts/setup.sh)
#
# Environment: OUT (runs/real-jobs), DEMO_MINUTES (10), FT_MINUTES (5), WORKERS (2),
# EMA_DECAY (0.999), BEAM (4). Prints a table and writes $OUT/real-jobs.json.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
out=${OUT:-runs/real-jobs}
demo_minutes=${DEMO_MINUTES:-10}
ft_minutes=${FT_MINUTES:-5}
workers=${WORKERS:-2}
decay=${EMA_DECAY:-0.999}
beam=${BEAM:-4}
python=$(sed -n 's/^NMT_PYTHON:FILEPATH=//p' "${NMT_BUILD_DIR:-build}/CMakeCache.txt")
mkdir -p "$out"

json_field() { "$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
# BLEU of a checkpoint on a test set: translate (beam $beam) and score with nmt-score --json.
bleu() {  # bleu CHECKPOINT WEIGHTS SRC REF NAME
  build/nmt-translate --checkpoint "$1" --weights "$2" --beam "$beam" -i "$3" -o "$out/$5.hyp" \
    --log-level warn
  build/nmt-score -r "$4" -i "$out/$5.hyp" -m bleu --json > "$out/$5.bleu.json"
  json_field "$out/$5.bleu.json" score
}

echo "[real-jobs 1/4] demo config with train.ema_decay=$decay for $demo_minutes minutes"
build/nmt-train --config configs/demo.yaml --nproc-per-node "$workers" --resume none \
  --set run_dir="$out/demo" --set train.ema_decay="$decay" --set train.max_minutes="$demo_minutes"
demo_ckpt=$(json_field "$out/demo/summary.json" last_checkpoint)
demo_steps=$(json_field "$out/demo/summary.json" final_step)

echo "[real-jobs 2/4] DDTP test set: trained weights and moving average of $demo_ckpt"
raw=$(bleu "$demo_ckpt" raw data/ddtp.en-de.test.en data/ddtp.en-de.test.de ddtp.raw)
ema=$(bleu "$demo_ckpt" ema data/ddtp.en-de.test.en data/ddtp.en-de.test.de ddtp.ema)

echo "[real-jobs 3/4] second data set: UI messages; fine-tune for $ft_minutes minutes"
"$python" scripts/bench/ui-messages-corpus.py "$out/ui" > /dev/null
ui_before=$(bleu "$demo_ckpt" ema "$out/ui/ui.en-de.test.en" "$out/ui/ui.en-de.test.de" ui.before)
build/nmt-train --config configs/demo.yaml --nproc-per-node "$workers" --resume none \
  --init-from "$demo_ckpt" --set run_dir="$out/finetune" --set train.ema_decay="$decay" \
  --set data.train_src="$out/ui/ui.en-de.train.en" --set data.train_tgt="$out/ui/ui.en-de.train.de" \
  --set train.valid_every=0 --set train.max_minutes="$ft_minutes" --set train.lr=0.001 \
  --set train.warmup_steps=100
ft_ckpt=$(json_field "$out/finetune/summary.json" last_checkpoint)
ft_steps=$(json_field "$out/finetune/summary.json" final_step)

echo "[real-jobs 4/4] fine-tuned model on both test sets"
ui_after=$(bleu "$ft_ckpt" ema "$out/ui/ui.en-de.test.en" "$out/ui/ui.en-de.test.de" ui.after)
ddtp_after=$(bleu "$ft_ckpt" ema data/ddtp.en-de.test.en data/ddtp.en-de.test.de ddtp.after)

"$python" - "$out" <<PY
import json, sys
out = sys.argv[1]
r = {"demo_minutes": $demo_minutes, "demo_updates": $demo_steps, "ema_decay": $decay, "beam": $beam,
     "ddtp_test_bleu_raw": $raw, "ddtp_test_bleu_ema": $ema,
     "ui_pairs": json.load(open(f"{out}/ui/ui.stats.json")),
     "finetune_minutes": $ft_minutes, "finetune_updates": $ft_steps,
     "ui_test_bleu_before": $ui_before, "ui_test_bleu_after": $ui_after,
     "ddtp_test_bleu_after_finetune": $ddtp_after}
json.dump(r, open(f"{out}/real-jobs.json", "w"), indent=2)
print()
print(f"demo, {r['demo_updates']} updates in {r['demo_minutes']} min, DDTP test BLEU (beam {r['beam']}):")
print(f"  trained weights (as without EMA)   {r['ddtp_test_bleu_raw']:6.2f}")
print(f"  moving average, decay {r['ema_decay']:<10} {r['ddtp_test_bleu_ema']:6.2f}")
print(f"fine-tuning on UI messages ({r['ui_pairs']['train']} train pairs), {r['finetune_updates']} updates in {r['finetune_minutes']} min:")
print(f"  UI test BLEU before / after         {r['ui_test_bleu_before']:6.2f} / {r['ui_test_bleu_after']:.2f}")
print(f"  DDTP test BLEU after                {r['ddtp_test_bleu_after_finetune']:6.2f}")
print(f"wrote {out}/real-jobs.json")
PY
