#!/usr/bin/env python3
"""nmt-train against transformers as a user of each fine-tunes: one epoch, then one validation
with BLEU (issue #49).

    hf_finetune_race.py --bin BUILD_DIR --work DIR [--pairs 600] [--batch-sizes 16,32]
                        [--valid-pairs 500] [--threads N] [--lr 3e-4] [--precision fp32|bf16]

The work of scripts/bench/hf-finetune-race.sh (which sets --bin and --work):
  1. the MarianMT of transformer-base shape that scripts/bench/hf_finetune_compare.py builds
     (nmt_tools.hf_finetune.make_model_dir), imported with `nmt-ckpt import-hf`; the first
     PAIRS pairs of data/ddtp.en-de.train and the first VALID_PAIRS of ddtp.en-de.valid,
     written once and read by both sides;
  2. transformers as its translation example and course set it up: the pairs tokenized
     beforehand (truncation at the model's 512 positions), Seq2SeqTrainer with
     DataCollatorForSeq2Seq (each batch padded to its longest sentence, labels with -100),
     per_device_train_batch_size B sentences for each B of --batch-sizes, group_by_length off
     and on, one epoch; then trainer.evaluate with predict_with_generate (greedy,
     generation_max_length 128 as the example's val_max_target_length) and sacrebleu's BLEU;
  3. nmt-train with its fine-tuning defaults (token-bucketed batches, valid_translate: true,
     greedy), one epoch (train.max_epochs 1), validating once at its end; data.max_tokens
     chosen per B by bisection over `nmt-train --dry-run`'s epoch plan so that its updates
     (hence real tokens per update: both sides train on the same tokens) are closest to
     transformers' ceil(PAIRS / B) (nmt_tools.hf_finetune.pair_max_tokens);
  4. both sides: Adam(0.9, 0.98, 1e-9), no weight decay or clipping, lr after nmt-train's
     linear warm-up (a tenth of the updates, the pair's own count) then constant, label
     smoothing 0.1, dropout 0.1, the same precision and intra-op threads;
  5. order: for each B, transformers (group_by_length off), nmt-train, transformers
     (group_by_length on), so that nmt-train sits between the two it is compared with;
  6. per run: training time (transformers: around trainer.train(); nmt-train: summary.json's
     train_s, the time in updates), real tokens/s, padded / real tokens (transformers: counted
     in its collator's batches; nmt-train: the dry run's plan, which the run draws: the script
     checks the run's token count against it), updates, the validation pass's time and BLEU
     (transformers: around trainer.evaluate(); nmt-train: metrics.jsonl's valid record), and
     the validation loss of the final model (both in transformers, by
     nmt_tools.hf_finetune.valid_loss, on the same VALID_PAIRS pairs).
Prints a table and the ratios; writes DIR/result.json. A benchmark, not a test: no figure is
asserted.
"""
import argparse
import json
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from nmt_tools.hf_finetune import (DROPOUT, LABEL_SMOOTHING, MODEL_SHAPE, SEED,  # noqa: E402
                                   make_model_dir, nmt_warmup, padding_ratio, pair_max_tokens,
                                   read_metrics, sentence_batches, valid_loss)
from nmt_tools.paths import DATA  # noqa: E402
from nmt_tools.process import run  # noqa: E402
from nmt_tools.text import first_lines, read_lines  # noqa: E402

GENERATION_MAX_LENGTH = 128  # transformers' translation example: val_max_target_length
MAX_LEN = 512  # the model's positions: transformers truncates there, nmt-train keeps up to it
WARMUP_FRACTION = 0.1  # of a run's updates


START = time.perf_counter()


def say(text):
    print(f"[hf-race {time.perf_counter() - START:.0f} s] {text}", file=sys.stderr, flush=True)


def warmup_of(updates):
    return max(1, round(WARMUP_FRACTION * updates))


def write_config(path, run_dir, summary, a, files, checkpoint, max_tokens, warmup, valid_every):
    lines = [f"run_dir: {run_dir}", summary["model_yaml"].rstrip("\n"), "data:",
             f"  train_src: {files['train.en']}", f"  train_tgt: {files['train.de']}",
             f"  valid_src: {files['valid.en']}", f"  valid_tgt: {files['valid.de']}",
             f"  joint_vocab: {str(summary['joint_vocab']).lower()}",
             f"  max_tokens: {max_tokens}",
             # transformers filters no pair; neither may we. The longest sentence, not the
             # model's 512: a budget must hold max_len + 2 tokens.
             f"  max_len: {a.max_len}", "  max_len_ratio: 1000",
             "train:", f"  seed: {SEED}", f"  init_from: {checkpoint}", f"  lr: {a.lr}",
             "  schedule: constant", f"  warmup_steps: {warmup}", "  optimizer: adam",
             "  adam_beta1: 0.9", "  adam_beta2: 0.98", "  adam_eps: 1e-9", "  weight_decay: 0",
             "  clip_norm: 0", f"  label_smoothing: {LABEL_SMOOTHING}", "  ema_decay: 0",
             "  max_steps: 0", "  max_epochs: 1", "  log_every: 10",
             f"  valid_every: {valid_every}", "  valid_translate: true", "  valid_beam: 1",
             f"  threads: {a.threads}",
             "amp:", f"  mode: {'bf16' if a.precision == 'bf16' else 'off'}",
             "dist:", "  nproc_per_node: 1",
             "checkpoint:", f"  every_steps: {valid_every}", "  keep_last: 1"]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


class Ours:
    """nmt-train's runs for one batch-size pairing: its config, dry-run plan, training run."""

    def __init__(self, a, bins, summary, files, checkpoint):
        self.a, self.bins, self.summary = a, bins, summary
        self.files, self.checkpoint = files, checkpoint

    def plan(self, max_tokens):
        """batch_stats.json of `nmt-train --dry-run` at this budget (epoch 1, one rank)."""
        folder = os.path.join(self.a.work, "dry", str(max_tokens))
        stats = os.path.join(folder, "batch_stats.json")
        if not os.path.exists(stats):
            config = os.path.join(self.a.work, "dry", f"{max_tokens}.yaml")
            os.makedirs(folder, exist_ok=True)
            write_config(config, folder, self.summary, self.a, self.files, self.checkpoint,
                         max_tokens, 1, 1)
            run([self.bins["train"], "--config", config, "--dry-run", "--log-level", "warn"])
        with open(stats, encoding="utf-8") as f:
            return json.load(f)

    def train(self, name, max_tokens, updates):
        run_dir = os.path.join(self.a.work, name)
        config = os.path.join(self.a.work, f"{name}.yaml")
        write_config(config, run_dir, self.summary, self.a, self.files, self.checkpoint,
                     max_tokens, warmup_of(updates), updates)
        run([self.bins["train"], "--config", config, "--resume", "none", "--log-level", "warn"])
        with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as f:
            summary = json.load(f)
        valid = read_metrics(run_dir, "valid")
        exported = os.path.join(self.a.work, f"{name}-hf")
        run([self.bins["ckpt"], "export-hf", run_dir, exported, "--weights", "raw", "--force"])
        return summary, valid, exported


def hf_items(tok, src_lines, tgt_lines):
    """The pairs tokenized as the translation example's preprocess_function does."""
    encoded = tok(src_lines, text_target=tgt_lines, max_length=MAX_LEN, truncation=True)
    return [{"input_ids": encoded["input_ids"][i], "attention_mask": encoded["attention_mask"][i],
             "labels": encoded["labels"][i]} for i in range(len(src_lines))]


def hf_run(model_dir, tok, train_items, valid_items, batch_size, group, a, out_dir):
    """One Seq2SeqTrainer epoch and one validation pass; returns the figures and the model."""
    import sacrebleu
    import torch
    import transformers

    torch.set_num_threads(a.threads)
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(model_dir, dtype=torch.float32)
    collator = transformers.DataCollatorForSeq2Seq(tok, model=model, label_pad_token_id=-100)
    counts = {"real": 0, "padded": 0, "batches": 0, "on": True}

    def counting(features):
        batch = collator(features)
        if counts["on"]:  # the training batches only, not the evaluation's
            labels = batch["labels"]
            counts["real"] += int(batch["attention_mask"].sum()) + int(labels.ne(-100).sum())
            counts["padded"] += batch["input_ids"].numel() + labels.numel()
            counts["batches"] += 1
        return batch

    updates = sentence_batches(len(train_items), batch_size)
    warmup = warmup_of(updates)

    class Trainer(transformers.Seq2SeqTrainer):
        def create_scheduler(self, num_training_steps, optimizer=None):
            if self.lr_scheduler is None:  # nmt-train's warm-up, then constant
                self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
                    optimizer or self.optimizer, lambda s: nmt_warmup(s, warmup))
            return self.lr_scheduler

    def bleu(prediction):
        preds = prediction.predictions
        preds = [[t for t in row if t >= 0] for row in preds]  # -100 pads the batches' ends
        hyps = tok.batch_decode(preds, skip_special_tokens=True)
        refs = tok.batch_decode([[t for t in row if t >= 0] for row in prediction.label_ids],
                                skip_special_tokens=True)
        return {"bleu": sacrebleu.corpus_bleu(hyps, [refs]).score}

    args = transformers.Seq2SeqTrainingArguments(
        output_dir=out_dir, num_train_epochs=1, per_device_train_batch_size=batch_size,
        per_device_eval_batch_size=batch_size, # group_by_length (transformers 4) is this strategy in transformers 5
        train_sampling_strategy="group_by_length" if group else "random", learning_rate=a.lr,
        optim="adamw_torch", adam_beta1=0.9, adam_beta2=0.98, adam_epsilon=1e-9,
        weight_decay=0.0, max_grad_norm=0.0, label_smoothing_factor=LABEL_SMOOTHING,
        predict_with_generate=True, generation_max_length=GENERATION_MAX_LENGTH,
        generation_num_beams=1, eval_strategy="no", save_strategy="no", logging_steps=10,
        report_to="none", use_cpu=True, seed=SEED, disable_tqdm=True,
        bf16=a.precision == "bf16", fp16=False)
    trainer = Trainer(model=model, args=args, train_dataset=train_items, data_collator=counting,
                      processing_class=tok, compute_metrics=bleu)
    trainer.remove_callback(transformers.PrinterCallback)  # its log lines would mix with the table
    begin = time.perf_counter()
    trainer.train()
    train_s = time.perf_counter() - begin
    counts["on"] = False
    begin = time.perf_counter()
    metrics = trainer.evaluate(eval_dataset=valid_items)
    valid_s = time.perf_counter() - begin
    assert counts["batches"] == updates == trainer.state.global_step, (counts, updates)
    return {"train_s": train_s, "updates": updates, "warmup": warmup, "real_tokens": counts["real"],
            "padded_tokens": counts["padded"], "valid_s": valid_s,
            "bleu": metrics["eval_bleu"]}, trainer.model


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", required=True, help="the build folder with nmt-train and nmt-ckpt")
    p.add_argument("--work", required=True)
    p.add_argument("--pairs", type=int, default=600)
    p.add_argument("--batch-sizes", default="16,32", help="transformers' sentences per batch")
    p.add_argument("--valid-pairs", type=int, default=500)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    a = p.parse_args()
    try:
        import sacrebleu  # noqa: F401
        import sentencepiece  # noqa: F401
        import torch
        import transformers
    except ImportError as e:
        sys.exit(f"hf_finetune_race.py: no {e.name} in {sys.executable}")
    os.makedirs(a.work, exist_ok=True)
    warnings.filterwarnings("ignore", message=".*sacremoses")
    bins = {"train": os.path.join(a.bin, "nmt-train"), "ckpt": os.path.join(a.bin, "nmt-ckpt")}
    sizes = [int(b) for b in a.batch_sizes.split(",")]

    model_dir = os.path.join(a.work, "marian-base")
    say("building the tokenizer and a transformer-base MarianMT")
    vocab, params = make_model_dir(model_dir, a.work)
    checkpoint = os.path.join(a.work, "imported.safetensors")
    summary = json.loads(run([bins["ckpt"], "import-hf", model_dir, "-o", checkpoint,
                              "--force"]).stdout)
    files = {}
    for split, source, count in [("train", "ddtp.en-de.train.{}.gz", a.pairs),
                                 ("valid", "ddtp.en-de.valid.{}", a.valid_pairs)]:
        for lang in ("en", "de"):
            files[f"{split}.{lang}"] = str(first_lines(DATA / source.format(lang), count,
                                                       os.path.join(a.work, f"{split}.{lang}")))
    lines = {k: read_lines(v) for k, v in files.items()}
    assert len(lines["train.en"]) == a.pairs and len(lines["valid.en"]) == a.valid_pairs

    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    train_items = hf_items(tok, lines["train.en"], lines["train.de"])
    valid_items = hf_items(tok, lines["valid.en"], lines["valid.de"])
    torch.set_num_threads(a.threads)
    initial = valid_loss(transformers.AutoModelForSeq2SeqLM.from_pretrained(model_dir), tok,
                         lines["valid.en"], lines["valid.de"])

    a.max_len = max(len(x[k]) for x in train_items for k in ("input_ids", "labels"))
    ours = Ours(a, bins, summary, files, checkpoint)
    pairing = {}
    for b in sizes:
        target = sentence_batches(a.pairs, b)
        max_tokens = pair_max_tokens(target, lambda mt: ours.plan(mt)["steps"],
                                     a.max_len + 2, 65536)
        pairing[b] = (max_tokens, ours.plan(max_tokens))
        say(f"batch size {b}: {target} updates; nmt-train's data.max_tokens {max_tokens}: "
            f"{pairing[b][1]['steps']} updates")

    rows = []
    for b in sizes:
        for side in ("hf", "ours", "hf-grouped"):
            if side == "ours":
                max_tokens, plan = pairing[b]
                name = f"nmt-train max_tokens {max_tokens}"
                say(f"{name}: one epoch")
                s, valid, exported = ours.train(f"ours-{b}", max_tokens, plan["steps"])
                planned = plan["src_tokens"] + plan["tgt_tokens"]
                row = {"name": name, "side": "nmt-train", "paired_with": b,
                       "max_tokens": max_tokens, "train_s": s["train_s"],
                       "updates": s["final_step"], "warmup": warmup_of(plan["steps"]),
                       "real_tokens": s["tokens"], "padded_tokens": plan["padded_tokens"],
                       "same_plan": s["tokens"] == planned and s["final_step"] == plan["steps"],
                       "valid_s": valid[-1]["seconds"] if valid else None,
                       "bleu": valid[-1].get("bleu") if valid else None,
                       "wall_s": s["wall_s"], "checkpoint_s": s["checkpoint_s"]}
                model = transformers.AutoModelForSeq2SeqLM.from_pretrained(exported)
            else:
                group = side == "hf-grouped"
                name = f"transformers bs {b}" + (" grouped" if group else "")
                say(f"{name}: one epoch")
                row, model = hf_run(model_dir, tok, train_items, valid_items, b, group, a,
                                    os.path.join(a.work, f"hf-{b}-{side}"))
                row.update({"name": name, "side": "transformers", "batch_size": b,
                            "group_by_length": group})
            torch.set_num_threads(a.threads)
            row["valid_loss"] = valid_loss(model, tok, lines["valid.en"], lines["valid.de"])
            row["tokens_per_s"] = row["real_tokens"] / row["train_s"]
            row["padding"] = padding_ratio(row["padded_tokens"], row["real_tokens"])
            row["total_s"] = row["train_s"] + row["valid_s"]
            rows.append(row)
            say(f"{name}: {row['train_s']:.1f} s, valid loss {row['valid_loss']:.3f}")
            del model

    result = {"pairs": a.pairs, "valid_pairs": a.valid_pairs, "threads": a.threads, "lr": a.lr,
              "precision": a.precision, "vocab": vocab, "parameters": params,
              "transformers": transformers.__version__, "torch": torch.__version__,
              "valid_loss_imported": initial, "runs": rows}
    with open(os.path.join(a.work, "result.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    report(result)


def report(r):
    rows = r["runs"]
    print(f"{MODEL_SHAPE}, vocabulary {r['vocab']}, {r['parameters'] / 1e6:.1f}M parameters; "
          f"{r['precision']} on CPU, {r['threads']} thread(s); transformers {r['transformers']}, "
          f"torch {r['torch']}")
    print(f"one epoch of {r['pairs']} ddtp en-de pairs; Adam(0.9, 0.98, 1e-9), lr {r['lr']} after "
          f"a warm-up of a tenth of the updates, then constant; label smoothing "
          f"{LABEL_SMOOTHING}; dropout {DROPOUT}; validation: {r['valid_pairs']} pairs, greedy "
          f"(valid loss before training {r['valid_loss_imported']:.3f})\n")
    print(f"{'run':<32}{'updates':>8}{'real tok/upd':>13}{'train s':>9}{'tok/s':>7}"
          f"{'pad/real':>9}{'valid s':>8}{'BLEU':>6}{'total s':>8}{'valid loss':>11}")
    for x in rows:
        print(f"{x['name']:<32}{x['updates']:>8}{x['real_tokens'] / x['updates']:>13.0f}"
              f"{x['train_s']:>9.1f}{x['tokens_per_s']:>7.0f}{x['padding']:>9.2f}"
              f"{x['valid_s']:>8.1f}{x['bleu']:>6.1f}{x['total_s']:>8.1f}{x['valid_loss']:>11.3f}")
    hf = [x for x in rows if x["side"] == "transformers"]
    ours = [x for x in rows if x["side"] == "nmt-train"]
    best = min(hf, key=lambda x: x["total_s"])
    print(f"\nbest transformers run (least total s): {best['name']}")
    for x in ours:
        same = [h for h in hf if h["batch_size"] == x["paired_with"]]
        quick = min(same, key=lambda h: h["total_s"])
        print(f"{x['name']} (paired with batch size {x['paired_with']}; drew the planned "
              f"batches: {'yes' if x['same_plan'] else 'NO'}):")
        print(f"  total time: {best['total_s'] / x['total_s']:.2f}x faster than the best "
              f"transformers run, {quick['total_s'] / x['total_s']:.2f}x than its pair's best "
              f"({quick['name']}); valid loss {x['valid_loss']:.3f} against "
              f"{best['valid_loss']:.3f} / {quick['valid_loss']:.3f}")
        print(f"  training: {quick['train_s'] / x['train_s']:.2f}x; tokens/s "
              f"{x['tokens_per_s'] / quick['tokens_per_s']:.2f}x; padded tokens/s "
              f"{x['tokens_per_s'] * x['padding'] / (quick['tokens_per_s'] * quick['padding']):.2f}x;"
              f" padding {quick['padding'] / x['padding']:.2f}x less; validation "
              f"{quick['valid_s'] / x['valid_s']:.2f}x")
    print("train s: transformers around trainer.train(), nmt-train summary.json train_s (time in "
          "updates); tok/s: real source + target tokens per train s; pad/real: padded over real "
          "tokens (source + target) of the epoch's batches; valid s: one validation pass, loss "
          "and greedy translation with BLEU (trainer.evaluate with predict_with_generate; "
          "nmt-train's valid_translate, metrics.jsonl); total s: train s + valid s; valid loss: "
          "cross entropy per target token, no smoothing, both final models in transformers")


if __name__ == "__main__":
    main()
