#!/usr/bin/env python3
"""A plain-PyTorch training loop: the Python baseline for `nmt-train --benchmark`.

    build/nmt-train ... --benchmark 20 --dump-batches DUMP.safetensors
    scripts/bench/reference_train.py DUMP.safetensors --out reference.json

The dump holds the C++ model's initial parameters, every batch the C++ benchmark trained on
(in order) and, as metadata, the run's effective config (the YAML that `nmt-train
--print-config` prints and checkpoints store), the vocabulary sizes and the benchmark settings. This script builds
the same Transformer in idiomatic PyTorch, loads those parameters, trains on the same batches
with the same loss, optimizer and learning-rate schedule, and writes a report with the same
keys as the C++ benchmark.json, so that the two can be set side by side.

It is meant to be a fair baseline, i.e. what a competent PyTorch user would write, not a
strawman: fused Adam/AdamW, F.scaled_dot_product_attention (flash kernels where eligible),
fused q/k/v projections, torch.autocast and GradScaler for mixed precision, batches already on
the device, and no host-device synchronization inside the timed loop except the
torch.cuda.synchronize() calls that split an update into phases (the C++ side makes the same
ones in benchmark mode). Dropout streams differ from the C++ ones; with --no-dropout the
per-token losses agree with the C++ first_loss/last_loss to rounding.
"""
import argparse
import json
import math
import os
import resource
import sys
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors import safe_open
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from nmt_tools import stored_config  # noqa: E402
# The dump names the parameters as checkpoints do: the model group of
# src/checkpoint/tensor_layout.h (checked against `nmt-ckpt layout` by ctest -R layout).
from nmt_tools.checkpoint import MODEL_PREFIX  # noqa: E402
from nmt_tools.positions import position_table  # noqa: E402

AMP_DTYPES = {"off": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


# --------------------------------------------------------------------------------------------
# Settings from the dump's metadata
# --------------------------------------------------------------------------------------------

def flatten_config(yaml_text):
    """The effective config YAML (the dump's "config" metadata) as {"section.key": value}."""
    return stored_config.flatten(stored_config.parse(yaml_text, "the dump's config"))


def _bool(value):
    """A YAML boolean of the config, or the dump's own "true"/"false" metadata text."""
    return value is True or value == "true"


@dataclass(frozen=True)
class ModelConfig:
    encoder_layers: int
    decoder_layers: int
    d_model: int
    heads: int
    ffn_dim: int
    dropout: float
    attention_dropout: float
    activation_dropout: float
    activation: str  # relu | gelu
    norm: str  # pre | post
    positions: str  # sinusoidal | learned | marian | m2m100
    max_positions: int
    tie_embeddings: str  # all | decoder | none
    scale_embeddings: bool
    src_vocab: int
    tgt_vocab: int
    pad_id: int

    @staticmethod
    def from_metadata(meta, no_dropout=False):
        def dropout(key):
            return 0.0 if no_dropout else float(meta[key])

        return ModelConfig(
            encoder_layers=int(meta["model.encoder_layers"]),
            decoder_layers=int(meta["model.decoder_layers"]),
            d_model=int(meta["model.d_model"]),
            heads=int(meta["model.heads"]),
            ffn_dim=int(meta["model.ffn_dim"]),
            dropout=dropout("model.dropout"),
            attention_dropout=dropout("model.attention_dropout"),
            activation_dropout=dropout("model.activation_dropout"),
            activation=meta["model.activation"],
            norm=meta["model.norm"],
            positions=meta["model.positions"],
            max_positions=int(meta["model.max_positions"]),
            tie_embeddings=meta["model.tie_embeddings"],
            scale_embeddings=_bool(meta["model.scale_embeddings"]),
            src_vocab=int(meta["vocab.src_size"]),
            tgt_vocab=int(meta["vocab.tgt_size"]),
            pad_id=int(meta["vocab.pad_id"]),
        )


@dataclass(frozen=True)
class TrainConfig:
    optimizer: str  # adam | adamw
    lr: float
    schedule: str  # inverse_sqrt | constant | cosine
    warmup_steps: int
    max_steps: int
    betas: tuple
    eps: float
    weight_decay: float
    clip_norm: float
    label_smoothing: float
    seed: int
    amp: str  # off | fp16 | bf16

    @staticmethod
    def from_metadata(meta):
        return TrainConfig(
            optimizer=meta["train.optimizer"],
            lr=float(meta["train.lr"]),
            schedule=meta["train.schedule"],
            warmup_steps=int(meta["train.warmup_steps"]),
            # Only the cosine schedule reads it; dumps of early builds lack it (0: no known end).
            max_steps=int(meta.get("train.max_steps", "0")),
            betas=(float(meta["train.adam_beta1"]), float(meta["train.adam_beta2"])),
            eps=float(meta["train.adam_eps"]),
            weight_decay=float(meta["train.weight_decay"]),
            clip_norm=float(meta["train.clip_norm"]),
            label_smoothing=float(meta["train.label_smoothing"]),
            seed=int(meta["train.seed"]),
            amp=meta["amp.mode"],
        )


@dataclass(frozen=True)
class BenchConfig:
    warmup: int
    steps: int
    phase_steps: int  # updates of the synced phase pass after the timed ones; 0: none
    update_freq: int
    synthetic: bool
    threads: int
    batch_tokens: list  # global target tokens per batch
    batch_flops: list  # the C++ model FLOPs per batch on real tokens (forward + backward)
    batch_kernel_flops: list  # the C++ FLOPs of each padded batch, every attention score
    batch0_weight_flops: float  # batch 0's products with weights only (no scores, context)
    hardware_peak_tflops: float  # the device's peak by nmt-train's table; 0: unknown
    hardware_peak_source: str

    @staticmethod
    def from_metadata(meta):
        return BenchConfig(
            warmup=int(meta["benchmark.warmup"]),
            steps=int(meta["benchmark.steps"]),
            phase_steps=int(meta.get("benchmark.phase_steps", "0")),  # older dumps: none
            update_freq=int(meta["benchmark.update_freq"]),
            synthetic=_bool(meta["benchmark.synthetic"]),
            threads=int(meta["benchmark.threads"]),
            batch_tokens=[int(x) for x in meta["batch_global_tgt_tokens"].split(",")],
            batch_flops=[float(x) for x in meta["batch_training_flops"].split(",")],
            batch_kernel_flops=[float(x) for x in meta["batch_kernel_flops"].split(",")],
            batch0_weight_flops=float(meta["batch0_weight_flops"]),
            hardware_peak_tflops=float(meta["hardware_peak_tflops"]),
            hardware_peak_source=meta["hardware_peak_source"],
        )


# --------------------------------------------------------------------------------------------
# The model: the same Transformer as src/model/*.cpp
# --------------------------------------------------------------------------------------------


def make_token_table(vocab, d_model, pad_id):
    table = nn.Embedding(vocab, d_model, padding_idx=pad_id)
    nn.init.normal_(table.weight, 0.0, d_model**-0.5)
    with torch.no_grad():
        table.weight[pad_id].zero_()
    return table


def init_projection(linear, blocks=1):
    """Xavier-uniform weight, zero bias. A fused projection is `blocks` [d, d] projections
    stacked; each block gets the bounds of a separate [d, d] layer, as in the C++ model."""
    for block in linear.weight.data.chunk(blocks, dim=0):
        nn.init.xavier_uniform_(block)
    if linear.bias is not None:
        nn.init.zeros_(linear.bias)


class InputEmbedding(nn.Module):
    """Token embedding (optionally scaled by sqrt(d)) plus positions, then dropout."""

    def __init__(self, cfg, tokens):
        super().__init__()
        self.tokens = tokens  # may be shared with another InputEmbedding (tie_embeddings)
        self.scale = math.sqrt(cfg.d_model) if cfg.scale_embeddings else 1.0
        self.dropout = cfg.dropout
        self.learned_positions = cfg.positions == "learned"
        if self.learned_positions:
            self.positions = nn.Embedding(cfg.max_positions, cfg.d_model)
            nn.init.normal_(self.positions.weight, 0.0, cfg.d_model**-0.5)
        else:
            # Not persistent: a pure function of the config, not a parameter of the dump.
            self.register_buffer(
                "sinusoid",
                torch.from_numpy(position_table(cfg.positions, cfg.max_positions, cfg.d_model,
                                                cfg.pad_id)),
                persistent=False,
            )

    def forward(self, ids):
        length = ids.size(1)
        x = self.tokens(ids)
        if self.scale != 1.0:
            x = x * self.scale
        if self.learned_positions:
            x = x + self.positions.weight[:length]
        else:
            x = x + self.sinusoid[:length]
        return F.dropout(x, self.dropout, self.training)


class MultiheadAttention(nn.Module):
    """Multi-head attention over F.scaled_dot_product_attention.

    Self-attention projects q, k and v in one [3d, d] matmul; cross-attention projects q from
    the decoder and k, v from the encoder output in one [2d, d] matmul.
    """

    def __init__(self, cfg, self_attention):
        super().__init__()
        d = cfg.d_model
        self.heads = cfg.heads
        self.dropout = cfg.attention_dropout
        if self_attention:
            self.qkv_proj = nn.Linear(d, 3 * d)
            init_projection(self.qkv_proj, blocks=3)
        else:
            self.q_proj = nn.Linear(d, d)
            self.kv_proj = nn.Linear(d, 2 * d)
            init_projection(self.q_proj)
            init_projection(self.kv_proj, blocks=2)
        self.out_proj = nn.Linear(d, d)
        init_projection(self.out_proj)

    def _split_heads(self, x):  # [B, L, d] -> [B, heads, L, d / heads]
        return x.view(x.size(0), x.size(1), self.heads, -1).transpose(1, 2)

    def forward(self, x, memory=None, mask=None, is_causal=False):
        if memory is None:
            q, k, v = self.qkv_proj(x).chunk(3, dim=-1)
        else:
            q = self.q_proj(x)
            k, v = self.kv_proj(memory).chunk(2, dim=-1)
        context = F.scaled_dot_product_attention(
            self._split_heads(q),
            self._split_heads(k),
            self._split_heads(v),
            attn_mask=mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=is_causal,
        )
        batch, length = x.shape[:2]
        return self.out_proj(context.transpose(1, 2).reshape(batch, length, -1))


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.fc1 = nn.Linear(cfg.d_model, cfg.ffn_dim)
        self.fc2 = nn.Linear(cfg.ffn_dim, cfg.d_model)
        init_projection(self.fc1)
        init_projection(self.fc2)
        self.activation = F.gelu if cfg.activation == "gelu" else F.relu
        self.dropout = cfg.activation_dropout

    def forward(self, x):
        return self.fc2(F.dropout(self.activation(self.fc1(x)), self.dropout, self.training))


class Layer(nn.Module):
    """Common to encoder and decoder layers: the residual wrapper around each sublayer."""

    def __init__(self, cfg):
        super().__init__()
        self.pre_norm = cfg.norm == "pre"
        self.dropout = cfg.dropout

    def residual(self, x, norm, sublayer):
        if self.pre_norm:
            return x + F.dropout(sublayer(norm(x)), self.dropout, self.training)
        return norm(x + F.dropout(sublayer(x), self.dropout, self.training))


class EncoderLayer(Layer):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.self_attn = MultiheadAttention(cfg, self_attention=True)
        self.self_attn_norm = nn.LayerNorm(cfg.d_model)
        self.ffn = FeedForward(cfg)
        self.ffn_norm = nn.LayerNorm(cfg.d_model)

    def forward(self, x, src_mask):
        x = self.residual(x, self.self_attn_norm, lambda y: self.self_attn(y, mask=src_mask))
        return self.residual(x, self.ffn_norm, self.ffn)


class DecoderLayer(Layer):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.self_attn = MultiheadAttention(cfg, self_attention=True)
        self.self_attn_norm = nn.LayerNorm(cfg.d_model)
        self.cross_attn = MultiheadAttention(cfg, self_attention=False)
        self.cross_attn_norm = nn.LayerNorm(cfg.d_model)
        self.ffn = FeedForward(cfg)
        self.ffn_norm = nn.LayerNorm(cfg.d_model)

    def forward(self, x, memory, src_mask):
        # Causal only, no target padding mask: batches are right-padded, so real tokens never
        # see pads, and is_causal keeps the flash kernel eligible (as in the C++ model).
        x = self.residual(x, self.self_attn_norm, lambda y: self.self_attn(y, is_causal=True))
        x = self.residual(
            x, self.cross_attn_norm, lambda y: self.cross_attn(y, memory=memory, mask=src_mask)
        )
        return self.residual(x, self.ffn_norm, self.ffn)


class Transformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        if cfg.tie_embeddings == "all" and cfg.src_vocab != cfg.tgt_vocab:
            raise ValueError("tie_embeddings all needs equal source and target vocabularies")
        self.pad_id = cfg.pad_id
        src_table = make_token_table(cfg.src_vocab, cfg.d_model, cfg.pad_id)
        self.encoder_embed = InputEmbedding(cfg, src_table)
        tgt_table = (
            src_table
            if cfg.tie_embeddings == "all"
            else make_token_table(cfg.tgt_vocab, cfg.d_model, cfg.pad_id)
        )
        self.decoder_embed = InputEmbedding(cfg, tgt_table)
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        # Pre-norm leaves the residual stream unnormalized: normalize where a stack ends.
        pre = cfg.norm == "pre"
        self.encoder_norm = nn.LayerNorm(cfg.d_model) if pre else nn.Identity()
        self.decoder_norm = nn.LayerNorm(cfg.d_model) if pre else nn.Identity()
        if cfg.tie_embeddings == "none":
            self.output_projection = nn.Linear(cfg.d_model, cfg.tgt_vocab, bias=False)
            nn.init.normal_(self.output_projection.weight, 0.0, cfg.d_model**-0.5)
        else:
            self.output_projection = None

    def source_mask(self, src):
        """[B, 1, 1, S], True = attend: real tokens; an all-pad row attends everywhere (a row
        with nothing to attend to would give NaN)."""
        pad = src.eq(self.pad_id)
        return (~pad | pad.all(dim=1, keepdim=True))[:, None, None, :]

    def forward(self, src, tgt_in):
        mask = self.source_mask(src)
        x = self.encoder_embed(src)
        for layer in self.encoder_layers:
            x = layer(x, mask)
        memory = self.encoder_norm(x)
        y = self.decoder_embed(tgt_in)
        for layer in self.decoder_layers:
            y = layer(y, memory, mask)
        y = self.decoder_norm(y)
        if self.output_projection is not None:
            return self.output_projection(y)
        return F.linear(y, self.decoder_embed.tokens.weight)


def state_dict_from_dump(model, dumped):
    """Maps the C++ parameter names (MODEL_PREFIX*) onto this model's state dict: drops the prefix,
    concatenates separate q/k/v projections into the fused ones (dumps written before nmt-train
    fused them; current dumps hold qkv_proj and kv_proj, the names used here), and aliases a
    shared table under every name it has here. Unused or missing tensors are left for load_state_dict's
    strict check to report."""
    state = {name[len(MODEL_PREFIX):]: t for name, t in dumped.items()}

    def fuse(prefix, parts, fused):
        for kind in ("weight", "bias"):
            names = [f"{prefix}.{p}.{kind}" for p in parts]
            if all(n in state for n in names):
                state[f"{prefix}.{fused}.{kind}"] = torch.cat([state.pop(n) for n in names])

    for name, module in model.named_modules():
        if isinstance(module, MultiheadAttention):
            if hasattr(module, "qkv_proj"):
                fuse(name, ["q_proj", "k_proj", "v_proj"], "qkv_proj")
            else:
                fuse(name, ["k_proj", "v_proj"], "kv_proj")
    if model.decoder_embed.tokens is model.encoder_embed.tokens:
        state["decoder_embed.tokens.weight"] = state.get("encoder_embed.tokens.weight")
    return state


# --------------------------------------------------------------------------------------------
# Training pieces: schedule, optimizer, peak, statistics
# --------------------------------------------------------------------------------------------


def learning_rate(cfg, update):
    """The learning rate used in update number `update` (1-based), as src/train/lr_schedule.cpp."""
    warmup = max(cfg.warmup_steps, 0)
    if update <= warmup:
        return cfg.lr * update / warmup
    if cfg.schedule == "inverse_sqrt":
        return cfg.lr * math.sqrt(max(warmup, 1) / update)
    if cfg.schedule == "cosine" and cfg.max_steps > warmup:
        progress = min(1.0, (update - warmup) / (cfg.max_steps - warmup))
        return cfg.lr * 0.5 * (1.0 + math.cos(math.pi * progress))
    return cfg.lr  # constant, or cosine without a known end


def make_optimizer(params, cfg):
    if cfg.optimizer == "sgd":  # plain SGD: checks that the gradients have the right scale
        kind = torch.optim.SGD
        kwargs = dict(lr=cfg.lr, momentum=0.0, weight_decay=cfg.weight_decay)
    else:
        kind = torch.optim.AdamW if cfg.optimizer == "adamw" else torch.optim.Adam
        kwargs = dict(lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay)
    try:
        return kind(params, fused=True, **kwargs)
    except (RuntimeError, ValueError) as e:
        print(f"note: fused {kind.__name__} unavailable ({e}); using foreach=True", file=sys.stderr)
        return kind(params, foreach=True, **kwargs)


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_peak_tflops(device, dtype, seconds=1.0):
    """Best single square matmul, as measure_peak_tflops in src/train/benchmark.cpp: the
    size grows from 256 while one product takes under seconds / 8, up to 2048 on CPU and
    8192 on a GPU (a dtype with only a slow kernel still measures in about `seconds`)."""
    largest = 8192 if device.type == "cuda" else 2048

    def time_one(a, b, c):
        t0 = time.perf_counter()
        torch.mm(a, b, out=c)
        synchronize(device)
        return time.perf_counter() - t0

    n = 256
    while True:
        a = torch.randn(n, n, dtype=dtype, device=device)
        b = torch.randn(n, n, dtype=dtype, device=device)
        c = torch.empty(n, n, dtype=dtype, device=device)
        torch.mm(a, b, out=c)  # first call: allocation, kernel selection
        synchronize(device)
        if n >= largest or time_one(a, b, c) >= seconds / 8:
            break
        n *= 2
    best, runs, start = math.inf, 0, time.perf_counter()
    while runs < 3 or time.perf_counter() - start < seconds:
        best = min(best, time_one(a, b, c))
        runs += 1
    where = str(device) + (
        "" if device.type == "cuda" else f" with {torch.get_num_threads()} thread(s)"
    )
    method = f"best of {runs} {str(dtype).removeprefix('torch.')} {n}x{n} matmuls on {where}"
    return 2.0 * n**3 / best / 1e12, method


def summarize(samples):
    """Median, mean, extremes and p10/p90 with numpy's default (linear) quantiles."""
    s = sorted(samples)

    def quantile(q):
        pos = q * (len(s) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    return {
        "median": quantile(0.5),
        "mean": sum(s) / len(s),
        "min": s[0],
        "max": s[-1],
        "p10": quantile(0.1),
        "p90": quantile(0.9),
    }


class PhaseClock:
    """Accumulates wall time per phase; with `synced` it waits for the device at each boundary
    so that a phase's time is its own work (as the C++ benchmark's phase pass does). Unsynced
    (the headline pass, as training runs) it only records host time."""

    PHASES = ("data_wait", "forward", "backward", "grad_sync", "optimizer")

    def __init__(self, device, synced=True):
        self.device = device
        self.synced = synced
        self.totals = dict.fromkeys(self.PHASES, 0.0)
        self.last = time.perf_counter()

    def start(self):
        if self.synced:
            synchronize(self.device)
        self.last = time.perf_counter()

    def lap(self, phase):
        if self.synced:
            synchronize(self.device)
        now = time.perf_counter()
        self.totals[phase] += now - self.last
        self.last = now


# --------------------------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------------------------


@dataclass
class Batch:
    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    src_tokens: int  # real (non-pad) counts, computed before timing
    tgt_tokens: int


def load_dump(path):
    with safe_open(path, framework="pt") as f:
        meta = f.metadata()
        # The config's keys ("model.d_model", ...) next to the dump's own ("vocab.*", ...).
        meta = {**flatten_config(meta["config"]), **meta}
        params = {k: f.get_tensor(k) for k in f.keys() if k.startswith(MODEL_PREFIX)}
        count = int(meta["batches"])
        batches = [
            tuple(f.get_tensor(f"batch.{i}.{part}") for part in ("src", "tgt_in", "tgt_out"))
            for i in range(count)
        ]
    return meta, params, batches


def prepare_batches(raw, pad_id, device):
    out = []
    for src, tgt_in, tgt_out in raw:
        out.append(
            Batch(
                src.to(device),
                tgt_in.to(device),
                tgt_out.to(device),
                src_tokens=int(src.ne(pad_id).sum()),
                tgt_tokens=int(tgt_out.ne(pad_id).sum()),
            )
        )
    synchronize(device)
    return out


class Trainer:
    def __init__(self, model, mcfg, tcfg, device):
        self.model = model
        self.vocab = mcfg.tgt_vocab
        self.pad_id = mcfg.pad_id
        self.tcfg = tcfg
        self.device = device
        self.params = list(model.parameters())
        self.optimizer = make_optimizer(self.params, tcfg)
        self.amp_dtype = AMP_DTYPES[tcfg.amp]
        # Dynamic loss scaling for fp16 only; disabled, its calls pass straight through.
        self.scaler = torch.amp.GradScaler(
            device.type, init_scale=65536.0, growth_interval=2000, enabled=tcfg.amp == "fp16"
        )
        self.updates = 0

    def autocast(self):
        return torch.autocast(
            self.device.type, dtype=self.amp_dtype, enabled=self.tcfg.amp != "off"
        )

    def loss_sum(self, batch):
        """Label-smoothed cross-entropy summed over the non-pad targets, in float32."""
        with self.autocast():
            logits = self.model(batch.src, batch.tgt_in)
            return F.cross_entropy(
                logits.float().reshape(-1, self.vocab),
                batch.tgt_out.reshape(-1),
                ignore_index=self.pad_id,
                label_smoothing=self.tcfg.label_smoothing,
                reduction="sum",
            )

    def update(self, batches, global_tgt_tokens, clock):
        """One optimizer update over the micro-batches. Returns the summed loss (a device
        tensor: reading it would synchronize)."""
        self.optimizer.zero_grad(set_to_none=True)
        # The gradient is of the loss per target token of the whole update, however it is split
        # into micro-batches. Dividing before backward also keeps fp16 gradients in range:
        # GradScaler's init_scale of 2^16 is sized for a mean loss, not a sum over tokens.
        divisor = float(max(global_tgt_tokens, 1))
        total = None
        for batch in batches:
            clock.start()
            # Batches are on the device already: the C++ side prefetches on a thread.
            clock.lap("data_wait")
            loss = self.loss_sum(batch)
            clock.lap("forward")
            self.scaler.scale(loss / divisor).backward()
            clock.lap("backward")
            total = loss.detach() if total is None else total + loss.detach()
        # One process: no gradient all-reduce (grad_sync stays 0).
        if self.tcfg.clip_norm > 0:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.params, self.tcfg.clip_norm, foreach=True)
        self.updates += 1
        lr = learning_rate(self.tcfg, self.updates)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.scaler.step(self.optimizer)
        self.scaler.update()
        clock.lap("optimizer")
        return total

    def count_flops(self, batch):
        """FlopCounterMode's total for one forward + backward of `batch` (grads discarded)."""
        self.optimizer.zero_grad(set_to_none=True)
        with FlopCounterMode(display=False) as counter:
            (self.loss_sum(batch) / max(batch.tgt_tokens, 1)).backward()
        self.optimizer.zero_grad(set_to_none=True)
        return counter.get_total_flops()


def run_benchmark(trainer, batches, bench):
    """Warm-up, the timed headline pass (no device sync inside it, as in training), then the
    phase pass (a device sync at every phase boundary) when the dump has one: the passes of
    the C++ benchmark, on the same batches. Returns the raw measurements."""
    freq = bench.update_freq
    updates = bench.warmup + bench.steps + bench.phase_steps
    if len(batches) != updates * freq:
        raise ValueError(f"dump: expected {updates * freq} batches, found {len(batches)}")
    trainer.model.train()
    separate = bench.phase_steps > 0
    step_seconds, first, last = [], None, None
    # Without a phase pass the headline pass's own phase times serve: exact on a CPU (its
    # work is synchronous), host time only on a GPU.
    warmup_clock = PhaseClock(trainer.device, synced=False)
    timed_clock = PhaseClock(trainer.device, synced=False)
    phase_clock = PhaseClock(trainer.device, synced=True) if separate else timed_clock
    seconds = phase_seconds = None
    u = 0

    def run(count, clock, per_step):
        nonlocal u, first, last
        for _ in range(count):
            group = batches[u * freq : (u + 1) * freq]
            tokens = sum(bench.batch_tokens[u * freq : (u + 1) * freq])
            t0 = time.perf_counter()
            loss = trainer.update(group, tokens, clock)
            if per_step:
                if clock.synced:
                    synchronize(trainer.device)
                step_seconds.append(time.perf_counter() - t0)
            real = max(1, sum(b.tgt_tokens for b in group))
            if u == 0:
                first = (loss, real)  # read after the timing: .item() synchronizes
            last = (loss, real)
            u += 1

    run(bench.warmup, warmup_clock, per_step=False)
    synchronize(trainer.device)
    start = time.perf_counter()
    run(bench.steps, timed_clock, per_step=not separate)
    synchronize(trainer.device)
    seconds = phase_seconds = time.perf_counter() - start
    if separate:
        start = time.perf_counter()
        run(bench.phase_steps, phase_clock, per_step=True)
        phase_seconds = time.perf_counter() - start
    return (step_seconds, seconds, phase_seconds, phase_clock.totals,
            first[0].item() / first[1], last[0].item() / last[1])


def peak_memory_mb(device):
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def build_report(device, tcfg, bench, model, batches, measured, peak, method, memory_mb):
    step_seconds, seconds, phase_seconds, phases, first_loss, last_loss = measured
    freq = bench.update_freq
    timed = batches[bench.warmup * freq : (bench.warmup + bench.steps) * freq]
    phase_batches = batches[(bench.warmup + bench.steps) * freq :] if bench.phase_steps else timed
    phase_steps = bench.phase_steps or bench.steps
    n = bench.steps
    real = sum(b.src_tokens + b.tgt_tokens for b in timed)
    target = sum(b.tgt_tokens for b in timed)
    padded = sum(b.src.numel() + b.tgt_out.numel() for b in timed)
    # Model FLOPs on real tokens, by the C++ formula: a definition both sides share (the
    # formula's matrix products are checked against FlopCounterMode, flopcounter_batch0).
    headline = slice(bench.warmup * freq, (bench.warmup + bench.steps) * freq)
    flops_per_step = sum(bench.batch_flops[headline]) / n
    kernel_flops_per_step = sum(bench.batch_kernel_flops[headline]) / n
    achieved = flops_per_step * n / seconds / 1e12
    hardware = bench.hardware_peak_tflops
    return {
        "ranks": 1,
        "threads_per_rank": torch.get_num_threads(),
        "device": str(device),
        "amp": tcfg.amp,
        "synthetic": bench.synthetic,
        "warmup_steps": bench.warmup,
        "steps": n,
        "update_freq": bench.update_freq,
        "parameters": sum(p.numel() for p in model.parameters()),  # a shared table once
        "seconds": seconds,
        "tokens_per_s": real / seconds,
        "target_tokens_per_s": target / seconds,
        "padded_tokens_per_s": padded / seconds,
        "step_time_s": summarize(step_seconds),
        "time_split_s": {phase: total / phase_steps for phase, total in phases.items()},
        "phase_timing": {
            "pass": "separate" if bench.phase_steps else "headline",
            "device_synced": bool(bench.phase_steps) or device.type != "cuda",
            "steps": phase_steps,
            "seconds": phase_seconds,
            "tokens_per_s": sum(b.src_tokens + b.tgt_tokens for b in phase_batches) / phase_seconds,
        },
        "peak_memory_mb": [memory_mb],
        "model_flops_per_step": flops_per_step,
        "kernel_flops_per_step": kernel_flops_per_step,
        "achieved_tflops": achieved,
        "hardware_peak_tflops": hardware if hardware > 0 else None,
        "hardware_peak_source": bench.hardware_peak_source,
        "mfu": achieved / hardware if hardware > 0 else None,
        "peak_tflops": peak,
        "peak_method": method,
        "matmul_ceiling_fraction": achieved / peak if peak > 0 else None,
        "first_loss": first_loss,
        "last_loss": last_loss,
    }


def json_safe(value):
    """NaN and infinities as null (as the C++ report writes them): JSON has no such numbers."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def print_summary(r):
    split = r["time_split_s"]
    st = r["step_time_s"]
    print(
        f"reference: {r['steps']} timed update(s) after {r['warmup_steps']} warm-up, "
        f"{r['threads_per_rank']} thread(s) on {r['device']}, amp {r['amp']}\n"
        f"  tokens/s          {r['tokens_per_s']:.0f} real, {r['padded_tokens_per_s']:.0f} padded"
        " (source + target)\n"
        f"  step time         median {st['median']:.4f} s (p10 {st['p10']:.4f}, "
        f"p90 {st['p90']:.4f})\n"
        f"  split per step    data {split['data_wait']:.4f} | forward {split['forward']:.4f} | "
        f"backward {split['backward']:.4f} | sync {split['grad_sync']:.4f} | "
        f"optimizer {split['optimizer']:.4f} s\n"
        f"  model FLOPs       {r['model_flops_per_step']:.3g} per step on real tokens, "
        f"{r['achieved_tflops']:.3f} TFLOP/s\n"
        f"  MFU               "
        f"{'unknown' if r['mfu'] is None else format(100 * r['mfu'], '.1f') + '%'} of the "
        f"hardware peak ({r['hardware_peak_source']})\n"
        f"  matmul ceiling    {100 * r['matmul_ceiling_fraction']:.1f}% of "
        f"{r['peak_tflops']:.3f} TFLOP/s measured\n"
        f"  batch 0 FLOPs     {r['flopcounter_batch0']:.6g} by FlopCounterMode; the C++ formula: "
        f"{r['ours_batch0']:.6g} with every attention score, {r['ours_batch0_weights']:.6g} "
        f"with weight products only\n"
        f"  loss              first {r['first_loss']:.6f}, last {r['last_loss']:.6f}\n"
        f"  peak memory (MiB) {r['peak_memory_mb'][0]:.0f}"
    )


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Plain-PyTorch reference training loop on the batches and initial "
        "parameters that `nmt-train --benchmark N --dump-batches DUMP` wrote; writes a report "
        "with the keys of the C++ benchmark.json, plus flopcounter_batch0 (FlopCounterMode's "
        "count for one forward + backward of batch 0), ours_batch0 and ours_batch0_weights (the "
        "C++ formula's, with every attention score and with weight products only) and "
        "implementation.",
    )
    p.add_argument("dump", help="the safetensors file written by --dump-batches")
    p.add_argument("--out", required=True, help="where to write the JSON report")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="intra-op threads (torch.set_num_threads); default: the C++ run's, from the dump",
    )
    p.add_argument(
        "--device", choices=["cpu", "cuda"], default="cpu", help="cpu (default) or cuda (cuda:0)"
    )
    p.add_argument(
        "--no-dropout",
        action="store_true",
        help="set every dropout to 0, so that losses can be compared with a C++ run made "
        "with model.dropout=0 (and no attention/activation dropout)",
    )
    p.add_argument(
        "--fresh-init",
        action="store_true",
        help="ignore the dumped parameters and initialize as the C++ model does (random: the "
        "losses then differ from the C++ run's)",
    )
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    meta, dumped, raw_batches = load_dump(args.dump)
    mcfg = ModelConfig.from_metadata(meta, no_dropout=args.no_dropout)
    tcfg = TrainConfig.from_metadata(meta)
    bench = BenchConfig.from_metadata(meta)
    torch.set_num_threads(args.threads or bench.threads)
    device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")

    peak, method = measure_peak_tflops(device, AMP_DTYPES[tcfg.amp])
    torch.manual_seed(tcfg.seed)
    model = Transformer(mcfg)
    if not args.fresh_init:
        # strict: every dumped tensor must find a parameter and every parameter a tensor.
        model.load_state_dict(state_dict_from_dump(model, dumped), strict=True)
    model.to(device)
    batches = prepare_batches(raw_batches, mcfg.pad_id, device)
    if sum(b.tgt_tokens for b in batches) != sum(bench.batch_tokens):
        # A multi-rank dump holds rank 0's batches; the divisor stays the global count.
        print("note: the dump's global target tokens differ from its batches' (a multi-rank "
              "run?); gradients are divided by the global counts", file=sys.stderr)

    trainer = Trainer(model, mcfg, tcfg, device)
    measured = run_benchmark(trainer, batches, bench)
    memory_mb = peak_memory_mb(device)  # before the FLOP count's extra forward + backward
    report = build_report(device, tcfg, bench, model, batches, measured, peak, method, memory_mb)
    report["flopcounter_batch0"] = trainer.count_flops(batches[0])
    report["ours_batch0"] = bench.batch_kernel_flops[0]
    report["ours_batch0_weights"] = bench.batch0_weight_flops
    report["implementation"] = "pytorch-reference"
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(json_safe(report), f, indent=2, allow_nan=False)
        f.write("\n")
    print_summary(report)


if __name__ == "__main__":
    main()
