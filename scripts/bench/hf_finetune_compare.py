#!/usr/bin/env python3
"""nmt-train against transformers' Seq2SeqTrainer, fine-tuning one imported MarianMT (issue #35).

    hf_finetune_compare.py --bin BUILD_DIR --work DIR [--updates 10] [--max-tokens 1024]
                           [--threads N] [--lr 5e-5] [--warmup 4]

The work of scripts/bench/hf-finetune-compare.sh (which sets --bin and --work):
  1. a MarianMT of transformer-base shape (6+6 layers, d_model 512, 8 heads, ffn 2048, swish,
     seeded random weights) with a MarianTokenizer of unigram SentencePiece models trained on
     data/ddtp lines, saved with save_pretrained and imported with `nmt-ckpt import-hf`;
  2. the batches: `nmt-train --benchmark UPDATES --dump-batches` with the fine-tuning config
     writes the batches its loader yields (data.max_tokens padded tokens each, one per update);
     transformers trains on exactly these, in this order, so both sides see the same sentence
     pairs and target tokens per update;
  3. Seq2SeqTrainer on the model directory, the same updates, lr schedule (linear warm-up, then
     constant; update k at lr * k / warmup on both sides), Adam(0.9, 0.98, 1e-9) without weight
     decay or clipping, label smoothing 0.1, dropout 0.1, fp32, the same intra-op threads; time
     measured around trainer.train() only (model load and batch building excluded), tokens
     counted as ours are;
  4. nmt-train with train.init_from the imported checkpoint, UPDATES updates: tokens/s from
     summary.json (real source + target tokens over the time in updates), losses from
     metrics.jsonl; the run draws from the same loader with the same seed, which the script
     checks (its summary's token count equals the dump's); run after transformers, so that
     nmt-train's two runs (--benchmark and this) bracket it;
  5. validation loss: both final models loaded in transformers (ours exported with
     `nmt-ckpt export-hf --weights raw`), cross entropy per target token without label
     smoothing, on the first 200 pairs of data/ddtp.en-de.valid.*, computed by one function.
Prints a table; writes DIR/result.json. A benchmark, not a test: no figure is asserted.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from nmt_tools.hf_finetune import (DROPOUT, LABEL_SMOOTHING, SEED, make_model_dir,  # noqa: E402
                                   nmt_warmup, read_metrics, valid_loss)
from nmt_tools.paths import DATA  # noqa: E402
from nmt_tools.process import run  # noqa: E402

VALID_PAIRS = 200


def write_config(path, run_dir, summary, a, checkpoint):
    data = DATA
    lines = [f"run_dir: {run_dir}", summary["model_yaml"].rstrip("\n"), "data:",
             f"  train_src: {data}/ddtp.en-de.train.en.gz",
             f"  train_tgt: {data}/ddtp.en-de.train.de.gz",
             f"  joint_vocab: {str(summary['joint_vocab']).lower()}",
             f"  max_tokens: {a.max_tokens}", "  update_freq: 1",
             "train:", f"  seed: {SEED}", f"  init_from: {checkpoint}", f"  lr: {a.lr}",
             "  schedule: constant", f"  warmup_steps: {a.warmup}", "  optimizer: adam",
             "  adam_beta1: 0.9", "  adam_beta2: 0.98", "  adam_eps: 1e-9", "  weight_decay: 0",
             "  clip_norm: 0", f"  label_smoothing: {LABEL_SMOOTHING}", "  ema_decay: 0",
             f"  max_steps: {a.updates}", "  log_every: 1", "  valid_every: 0",
             f"  threads: {a.threads}",
             "amp:", "  mode: off", "dist:", "  nproc_per_node: 1",
             "checkpoint:", f"  every_steps: {a.updates}", "  keep_last: 1"]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def load_batches(dump):
    from safetensors import safe_open

    with safe_open(dump, framework="pt") as f:
        meta = f.metadata()
        count = int(meta["batches"])
        return [tuple(f.get_tensor(f"batch.{i}.{part}") for part in ("src", "tgt_in", "tgt_out"))
                for i in range(count)], int(meta["vocab.pad_id"])


def hf_train(model_dir, batches, pad, a, out_dir):
    """Seq2SeqTrainer on the dumped batches, in order; returns seconds, losses, the model."""
    import torch
    import transformers

    torch.set_num_threads(a.threads)
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(model_dir, dtype=torch.float32)
    items = []
    for src, tgt_in, tgt_out in batches:
        items.append({"input_ids": src.long(), "attention_mask": src.ne(pad).long(),
                      "decoder_input_ids": tgt_in.long(),
                      "labels": tgt_out.long().masked_fill(tgt_out.eq(pad), -100)})

    class Batches(torch.utils.data.Dataset):
        def __len__(self):
            return len(items)

        def __getitem__(self, i):
            return items[i]

    class InOrder(transformers.Seq2SeqTrainer):
        """The dumped order, as nmt-train trained on it (the default sampler shuffles)."""

        def _get_train_sampler(self, *args, **kwargs):
            return torch.utils.data.SequentialSampler(items)

        def create_scheduler(self, num_training_steps, optimizer=None):
            # nmt-train's warm-up (nmt_warmup), not transformers' constant_with_warmup.
            if self.lr_scheduler is None:
                self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
                    optimizer or self.optimizer, lambda s: nmt_warmup(s, a.warmup))
            return self.lr_scheduler

    args = transformers.Seq2SeqTrainingArguments(
        output_dir=out_dir, max_steps=a.updates, per_device_train_batch_size=1,
        gradient_accumulation_steps=1, learning_rate=a.lr,
        optim="adamw_torch",
        adam_beta1=0.9, adam_beta2=0.98, adam_epsilon=1e-9, weight_decay=0.0, max_grad_norm=0.0,
        label_smoothing_factor=LABEL_SMOOTHING, logging_steps=1, save_strategy="no",
        report_to="none", use_cpu=True, seed=SEED, dataloader_num_workers=0,
        remove_unused_columns=False, disable_tqdm=True, bf16=False, fp16=False)
    trainer = InOrder(model=model, args=args, train_dataset=Batches(),
                      data_collator=lambda features: features[0])
    trainer.remove_callback(transformers.PrinterCallback)  # its log lines would mix with the table
    ends = []  # perf_counter at the start of training and at the end of every update

    class UpdateTimes(transformers.TrainerCallback):
        def on_train_begin(self, *args, **kwargs):
            ends.append(time.perf_counter())

        def on_step_end(self, *args, **kwargs):
            ends.append(time.perf_counter())

    trainer.add_callback(UpdateTimes())
    begin = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - begin
    logged = [r for r in trainer.state.log_history if "loss" in r]
    update_s = [b - e for e, b in zip(ends, ends[1:])]
    return (seconds, update_s, [r["loss"] for r in logged], [r["learning_rate"] for r in logged],
            trainer.model)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", required=True, help="the build folder with nmt-train and nmt-ckpt")
    p.add_argument("--work", required=True)
    p.add_argument("--updates", type=int, default=10)
    p.add_argument("--max-tokens", type=int, default=1024,
                   help="nmt-train's data.max_tokens (padded tokens per batch and update)")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--warmup", type=int, default=4)
    a = p.parse_args()
    try:
        import sentencepiece  # noqa: F401
        import torch
        import transformers
    except ImportError as e:
        sys.exit(f"hf_finetune_compare.py: no {e.name} in {sys.executable}")
    os.makedirs(a.work, exist_ok=True)
    warnings.filterwarnings("ignore", message=".*sacremoses")
    train, ckpt = os.path.join(a.bin, "nmt-train"), os.path.join(a.bin, "nmt-ckpt")
    say = lambda text: print(f"[hf-compare] {text}", file=sys.stderr, flush=True)  # noqa: E731

    model_dir = os.path.join(a.work, "marian-base")
    say("building the tokenizer and a transformer-base MarianMT")
    vocab, params = make_model_dir(model_dir, a.work)
    checkpoint = os.path.join(a.work, "imported.safetensors")
    summary = json.loads(run([ckpt, "import-hf", model_dir, "-o", checkpoint,
                                        "--force"]).stdout)  # a rerun in the same --work
    run_dir = os.path.join(a.work, "run")
    config = os.path.join(a.work, "finetune.yaml")
    write_config(config, run_dir, summary, a, checkpoint)

    say(f"nmt-train --benchmark {a.updates} --dump-batches: the batches of both sides")
    dump = os.path.join(a.work, "batches.safetensors")
    run([train, "--config", config, "--set", f"run_dir={a.work}/dump-run",
                   "--benchmark", str(a.updates), "--benchmark-warmup", "0",
                   "--dump-batches", dump, "--log-level", "warn"])
    batches, pad = load_batches(dump)
    real = [(int(s.ne(pad).sum()), int(o.ne(pad).sum())) for s, _, o in batches]
    src_tokens, tgt_tokens = sum(r[0] for r in real), sum(r[1] for r in real)
    with open(os.path.join(a.work, "dump-run", "benchmark.json"), encoding="utf-8") as f:
        bench = json.load(f)

    # transformers between nmt-train's two runs: a load change on the machine shows as a gap
    # between nmt-train's two figures.
    say(f"transformers Seq2SeqTrainer: {a.updates} updates on the same batches")
    hf_seconds, hf_update_s, hf_losses, hf_lrs, hf_model = hf_train(model_dir, batches, pad, a,
                                               os.path.join(a.work, "hf-trainer"))

    say(f"nmt-train: {a.updates} updates from the imported checkpoint")
    run([train, "--config", config, "--resume", "none", "--log-level", "warn"])
    with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as f:
        ours = json.load(f)
    metrics = read_metrics(run_dir)
    same_batches = ours["tokens"] == src_tokens + tgt_tokens

    say("validation loss of both final models, in transformers")
    exported = os.path.join(a.work, "ours-hf")
    run([ckpt, "export-hf", run_dir, exported, "--weights", "raw", "--force"])
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    valid = os.path.join(DATA, "ddtp.en-de.valid")
    with open(valid + ".en", encoding="utf-8") as f:
        src_lines = f.read().split("\n")[:VALID_PAIRS]
    with open(valid + ".de", encoding="utf-8") as f:
        tgt_lines = f.read().split("\n")[:VALID_PAIRS]
    torch.set_num_threads(a.threads)
    initial = valid_loss(transformers.AutoModelForSeq2SeqLM.from_pretrained(model_dir), tok,
                         src_lines, tgt_lines)
    ours_valid = valid_loss(transformers.AutoModelForSeq2SeqLM.from_pretrained(exported), tok,
                            src_lines, tgt_lines)
    hf_valid = valid_loss(hf_model, tok, src_lines, tgt_lines)

    ours_tps = ours["tokens_per_s"]
    hf_tps = (src_tokens + tgt_tokens) / hf_seconds
    result = {
        "updates": a.updates, "max_tokens": a.max_tokens, "threads": a.threads, "lr": a.lr,
        "warmup": a.warmup, "vocab": vocab, "parameters": params,
        "transformers": transformers.__version__, "torch": torch.__version__,
        "tgt_tokens_per_update": {"nmt-train": tgt_tokens / a.updates if same_batches else None,
                                  "transformers": tgt_tokens / a.updates},
        "same_batches": same_batches,
        "tokens_per_s": {"nmt-train": ours_tps, "transformers": hf_tps,
                         "nmt-train --benchmark": bench["tokens_per_s"]},
        "train_s": {"nmt-train": ours["train_s"], "transformers": hf_seconds},
        "update_s": {"nmt-train": [m["interval_s"] for m in metrics], "transformers": hf_update_s,
                     "nmt-train --benchmark": bench["step_time_s"]},
        "train_loss": {"nmt-train": [m["loss"] for m in metrics], "transformers": hf_losses},
        "lr": {"nmt-train": [m["lr"] for m in metrics], "transformers": hf_lrs},
        "valid_loss": {"imported": initial, "nmt-train": ours_valid, "transformers": hf_valid},
    }
    with open(os.path.join(a.work, "result.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)

    print(f"MarianMT transformer-base (6+6, d 512, 8 heads, ffn 2048, swish), vocabulary {vocab}, "
          f"{params / 1e6:.1f}M parameters; fp32 on CPU, {a.threads} thread(s); "
          f"transformers {transformers.__version__}, torch {torch.__version__}")
    print(f"{a.updates} updates, one batch of data.max_tokens {a.max_tokens} padded tokens each; "
          f"lr {a.lr} after {a.warmup} warm-up steps, then constant; label smoothing "
          f"{LABEL_SMOOTHING}; dropout {DROPOUT}")
    print(f"batches: transformers trains on nmt-train's (--dump-batches); nmt-train's training "
          f"run drew the same ones: {'yes' if same_batches else 'NO'} "
          f"({ours['tokens']} vs {src_tokens + tgt_tokens} source + target tokens)\n")
    median = statistics.median
    rows = [("nmt-train", ours_tps, ours["train_s"], median(m["interval_s"] for m in metrics),
             f"{metrics[0]['loss']:.3f}", f"{metrics[-1]['loss']:.3f}", f"{ours_valid:.3f}"),
            ("transformers", hf_tps, hf_seconds, median(hf_update_s), f"{hf_losses[0]:.3f}",
             f"{hf_losses[-1]:.3f}", f"{hf_valid:.3f}"),
            ("nmt-train bench", bench["tokens_per_s"], bench["step_time_s"]["mean"] * a.updates,
             bench["step_time_s"]["median"], "-", "-", "-")]
    print(f"{'':<16}{'updates':>8}{'tgt tok/upd':>12}{'tok/s':>8}{'train s':>9}{'median s/upd':>13}"
          f"{'loss first':>11}{'loss last':>10}{'valid loss':>11}")
    for name, tps, secs, upd, first, last, val in rows:
        # The training run's own target tokens are known where it drew the dumped batches.
        per_update = f"{tgt_tokens / a.updates:.0f}" if same_batches or name != "nmt-train" else "?"
        print(f"{name:<16}{a.updates:>8}{per_update:>12}{tps:>8.0f}{secs:>9.1f}"
              f"{upd:>13.2f}{first:>11}{last:>10}{val:>11}")
    same_lr = all(abs(x - y) <= 1e-12 + 1e-6 * abs(x) for x, y in
                  zip(result["lr"]["nmt-train"], hf_lrs)) and len(hf_lrs) == len(metrics)
    print(f"\nratio nmt-train / transformers (tokens/s): {ours_tps / hf_tps:.2f}x")
    print(f"learning rate of every update equal on both sides: {'yes' if same_lr else 'NO'}")
    print(f"ratio of median update times (transformers / nmt-train): "
          f"{median(hf_update_s) / median(m['interval_s'] for m in metrics):.2f}x")
    print("tokens/s: real source + target tokens per second in updates; nmt-train's from "
          "summary.json, transformers' around trainer.train(); 'nmt-train bench' is the "
          "--benchmark run that dumped the batches (benchmark.json), before transformers' run "
          "as the training run is after it; s/upd: metrics.jsonl interval_s, the transformers "
          "run's time between update ends (a callback)")
    print(f"train loss: label-smoothed, per target token (metrics.jsonl; trainer log_history)")
    print(f"valid loss: cross entropy per target token, no smoothing, {len(src_lines)} pairs of "
          f"ddtp.en-de.valid, both models in transformers (imported, before training: "
          f"{initial:.3f})")


if __name__ == "__main__":
    main()
