#!/usr/bin/env python3
"""Exports an nmt-train checkpoint as a CTranslate2 model directory, for serving.

    scripts/export-ctranslate2.py CHECKPOINT OUTDIR [--quantization int8|int8_float16|float16|none]
                                  [--average K] [--weights ema|raw] [--force]

CHECKPOINT is a checkpoint file or a run directory, picked as nmt-translate picks: the run's
checkpoints/ folder (or the folder itself), the checkpoint with the lowest "selection"
metadata (best by train.best_metric), else the newest; --average K averages the newest K.
--weights: the exponential moving average that training kept (ema.* tensors, train.ema_decay)
or the trained weights themselves (raw); default ema when the checkpoint has it, else raw.

The checkpoint is read as a plain safetensors file (no nmt-train code), the model is described
with CTranslate2's own specification API (ctranslate2.specs.TransformerSpec) from the config
stored in it, and OUTDIR receives model.bin, config.json and the vocabularies as CTranslate2
writes them, plus source.model and target.model (the SentencePiece models; the same file
twice for a joint vocabulary), export.json (what was exported, and the settings that decode
as nmt-translate does) and README.txt (how to load and run it).

Decoding as nmt-translate does: the source is its SentencePiece pieces, to which the model
appends </s> itself (config add_source_eos); the decoder starts from <s>; the output never
contains <pad> or <s> (nmt-translate bans them; the export gives them a -1e4 output bias).
Differences that remain are in the search, not the model: CTranslate2's length penalty
divides by length^alpha where nmt-translate divides by ((5 + length) / 6)^alpha, its
maximum output length is one number per call where nmt-translate's is a * source + b per
sentence, and by default it never gives an empty output (min_decoding_length=1).
scripts/bench/ct2-translate.py decodes a file with the settings that match.

A multilingual model (trained with data.lang_tags: target) takes its target language as the
first source token, `<2de>` for German: CTranslate2's translate_batch takes source tokens, so
the caller puts the tag before the pieces (["<2de>", "▁Hello", ...]); export.json's
"source_prefix" maps each language to its tag, and ct2-translate.py --tgt-lang does it.

A model setting that CTranslate2 cannot express, or that this exporter does not know, is
refused with a message naming it (exit code 1); nothing is written then.

OUTDIR gets a marker file, .nmt-export-ctranslate2. An existing OUTDIR is refused; with --force
it is replaced when it is an empty folder or holds that marker (an earlier export), and refused
otherwise (a symbolic link included). An OUTDIR that is or holds a checkpoint file read, or is,
holds or lies inside the checkpoints/ folder read from a run directory, is refused even with
--force, compared by real path (symbolic links resolved); a folder of its own in the run
directory (runs/demo/ct2) is fine. nmt-ckpt export-hf decides the same way
(scripts/nmt_tools/output_guard.py, src/util/output_guard.h).
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# Reading the checkpoint: scripts/nmt_tools (numpy and PyYAML only).
from nmt_tools import stored_config  # noqa: E402
from nmt_tools.checkpoint import (EMA_PREFIX, LAYOUT, SafetensorsFile, Weights,  # noqa: E402
                                  has_ema, resolve_checkpoints, source_prefixes, split_hf_vocab,
                                  vocabulary, vocabulary_tensor)
from nmt_tools.checkpoint import CheckpointError as ExportError  # noqa: E402
from nmt_tools.output_guard import (OutputError, check_output_apart,  # noqa: E402
                                    check_replaceable_dir)
from nmt_tools.positions import position_table  # noqa: E402

PROG = "export-ctranslate2"
# Bias on the output logits of tokens nmt-translate never emits: far below any real logit,
# exactly 0 probability after the softmax, and representable in float16.
BANNED_TOKEN_BIAS = -1e4
# Layer norm epsilon of the model (torch::nn::LayerNorm's default).
LAYER_NORM_EPSILON = 1e-5
# The file every export puts into OUTDIR: --force replaces only a folder that holds it (or an
# empty one).
EXPORT_MARKER = ".nmt-export-ctranslate2"


# --- the model's config ------------------------------------------------------------------

# Every model.* key of nmt-train's config, with the values this exporter can express in
# CTranslate2 (None: any value of the right type). A key or value that is not here is refused:
# a setting added to nmt-train later must be taught to this exporter before it exports.
_MODEL_KEYS = {
    "encoder_layers": None, "decoder_layers": None, "d_model": None, "heads": None,
    "ffn_dim": None, "max_positions": None,
    # Training-only: dropout is off when translating, and a frozen bias is a bias.
    "dropout": None, "attention_dropout": None, "activation_dropout": None,
    "freeze_output_bias": {True, False},
    "activation": {"relu", "gelu", "silu"},
    "norm": {"pre", "post"},
    "positions": {"sinusoidal", "learned", "marian", "m2m100"},
    "tie_embeddings": {"none", "decoder", "all"},
    "scale_embeddings": {True, False},
    # Imported transformers models' settings (nmt-ckpt import-hf): the logits bias is the
    # output projection's bias, the decoder start CTranslate2's decoder_start_token.
    "output_bias": {True, False},
    "decoder_start": {"bos", "eos", "pad"},
}
_ADDED_KEY_DEFAULTS = {"output_bias": False, "decoder_start": "bos", "freeze_output_bias": False}
_INTEGER_KEYS = ("encoder_layers", "decoder_layers", "d_model", "heads", "ffn_dim",
                 "max_positions")


def model_config(config_yaml, origin):
    """The `model` section of a checkpoint's config, checked: every key known, every value one
    that CTranslate2 can express; raises ExportError naming the setting otherwise."""
    try:
        config = stored_config.parse(config_yaml, origin)
    except stored_config.StoredConfigError as e:
        raise ExportError(str(e)) from e
    model = config.get("model")
    if not isinstance(model, dict):
        raise ExportError(f"{origin}: metadata config has no model section")
    for key, value in model.items():
        if key not in _MODEL_KEYS:
            raise ExportError(f"{origin}: model.{key} = {value!r}: unknown to this exporter, so it "
                              f"cannot tell whether CTranslate2 expresses it; not exported")
        allowed = _MODEL_KEYS[key]
        if allowed is not None and value not in allowed:
            raise ExportError(f"{origin}: model.{key} = {value!r} cannot be exported to "
                              f"CTranslate2's TransformerSpec (supported: "
                              f"{', '.join(sorted(str(v).lower() for v in allowed))})")
    # Keys added since some checkpoints were written read as their defaults (as nmt-train does).
    for key, default in _ADDED_KEY_DEFAULTS.items():
        model.setdefault(key, default)
    missing = [k for k in _MODEL_KEYS if k not in model]
    if missing:
        raise ExportError(f"{origin}: metadata config lacks model.{missing[0]}")
    for key in _INTEGER_KEYS:
        if not isinstance(model[key], int) or isinstance(model[key], bool) or model[key] < 1:
            raise ExportError(f"{origin}: model.{key}: expected an integer >= 1, found "
                              f"{model[key]!r}")
    if model["d_model"] % model["heads"]:
        raise ExportError(f"{origin}: model.heads = {model['heads']} does not divide "
                          f"model.d_model = {model['d_model']}")
    return model


# --- the CTranslate2 specification -------------------------------------------------------

def set_linear(spec, weights, scope, bias=True):
    spec.weight = weights.get(scope + ".weight")
    if bias:
        spec.bias = weights.get(scope + ".bias")


def set_norm(spec, weights, scope):
    spec.gamma = weights.get(scope + ".weight")
    spec.beta = weights.get(scope + ".bias")


def set_attention(spec, weights, scope, self_attention):
    """Attention projections -> CTranslate2's fused layout: self-attention [qkv, out],
    cross-attention [q, kv, out] (rows of the fused weight in that order), which is
    nmt-train's own; an older checkpoint's separate q/k/v projections are concatenated."""
    names = LAYOUT["attention"]

    def fused(name, parts):
        if weights.has(f"{scope}.{name}.weight"):
            return weights.get(f"{scope}.{name}.weight"), weights.get(f"{scope}.{name}.bias")
        w = np.concatenate([weights.get(f"{scope}.{p}_proj.weight") for p in parts], axis=0)
        b = np.concatenate([weights.get(f"{scope}.{p}_proj.bias") for p in parts], axis=0)
        return w, b

    if self_attention:
        spec.linear[0].weight, spec.linear[0].bias = fused(names["query_key_value"], "qkv")
    else:
        set_linear(spec.linear[0], weights, f"{scope}.{names['query']}")
        spec.linear[1].weight, spec.linear[1].bias = fused(names["key_value"], "kv")
    set_linear(spec.linear[-1], weights, f"{scope}.{names['output']}")


def set_ffn(spec, weights, scope):
    set_linear(spec.linear_0, weights, scope + ".fc1")
    set_linear(spec.linear_1, weights, scope + ".fc2")


def build_spec(model, weights, src_pieces, tgt_pieces, special):
    """A TransformerSpec with the checkpoint's weights."""
    from ctranslate2.specs import common_spec, transformer_spec

    pre_norm = model["norm"] == "pre"
    activation = {"relu": common_spec.Activation.RELU,
                  # at::gelu without approximation: the erf form, CTranslate2's GELU.
                  "gelu": common_spec.Activation.GELU,
                  # at::silu, x * sigmoid(x): CTranslate2's SWISH (MarianMT's "swish").
                  "silu": common_spec.Activation.SWISH}[model["activation"]]
    spec = transformer_spec.TransformerSpec.from_config(
        (model["encoder_layers"], model["decoder_layers"]), model["heads"],
        pre_norm=pre_norm, activation=activation)
    d_model, max_positions = model["d_model"], model["max_positions"]
    tie = model["tie_embeddings"]

    encoder_tokens = weights.get("encoder_embed.tokens.weight")
    decoder_tokens = (encoder_tokens if tie == "all"
                      else weights.get("decoder_embed.tokens.weight"))
    output = (decoder_tokens if tie != "none"
              else weights.get("output_projection.weight"))
    for name, table, vocab in (("source", encoder_tokens, src_pieces),
                               ("target", decoder_tokens, tgt_pieces)):
        if table.shape != (len(vocab), d_model):
            raise ExportError(f"{name} embedding is {list(table.shape)}, but the {name} "
                              f"vocabulary has {len(vocab)} pieces and d_model is {d_model}")

    for side, stack in (("encoder", spec.encoder), ("decoder", spec.decoder)):
        stack.scale_embeddings = bool(model["scale_embeddings"])
        if model["positions"] == "learned":
            table = weights.get(f"{side}_embed.positions.weight")
        else:
            # Written out, so CTranslate2 uses exactly this table, not its own formula.
            table = position_table(model["positions"], max_positions, d_model,
                                   special["pad_id"])
        stack.position_encodings.encodings = table
    spec.encoder.embeddings[0].weight = encoder_tokens
    spec.decoder.embeddings.weight = decoder_tokens
    spec.decoder.projection.weight = output
    bias = (weights.get("output_bias") if model["output_bias"]
            else np.zeros(len(tgt_pieces), np.float32))
    bias[[special["pad_id"], special["bos_id"]]] = BANNED_TOKEN_BIAS
    spec.decoder.projection.bias = bias

    for i, layer in enumerate(spec.encoder.layer):
        scope = f"encoder_layers.{i}"
        set_attention(layer.self_attention, weights,
                      f"{scope}.{LAYOUT['attention']['self_attention']}", True)
        set_norm(layer.self_attention.layer_norm, weights, scope + ".self_attn_norm")
        set_ffn(layer.ffn, weights, scope + ".ffn")
        set_norm(layer.ffn.layer_norm, weights, scope + ".ffn_norm")
    for i, layer in enumerate(spec.decoder.layer):
        scope = f"decoder_layers.{i}"
        set_attention(layer.self_attention, weights,
                      f"{scope}.{LAYOUT['attention']['self_attention']}", True)
        set_norm(layer.self_attention.layer_norm, weights, scope + ".self_attn_norm")
        set_attention(layer.attention, weights,
                      f"{scope}.{LAYOUT['attention']['cross_attention']}", False)
        set_norm(layer.attention.layer_norm, weights, scope + ".cross_attn_norm")
        set_ffn(layer.ffn, weights, scope + ".ffn")
        set_norm(layer.ffn.layer_norm, weights, scope + ".ffn_norm")
    if pre_norm:
        set_norm(spec.encoder.layer_norm, weights, "encoder_norm")
        set_norm(spec.decoder.layer_norm, weights, "decoder_norm")

    config = spec.config
    config.layer_norm_epsilon = LAYER_NORM_EPSILON
    config.unk_token = special["unk"]
    config.bos_token = special["bos"]
    config.eos_token = special["eos"]
    config.decoder_start_token = special[model["decoder_start"]]
    config.add_source_bos = False
    config.add_source_eos = True  # nmt-translate encodes a sentence as its pieces + </s>
    spec.register_source_vocabulary(src_pieces)
    spec.register_target_vocabulary(tgt_pieces)
    return spec


# --- the export --------------------------------------------------------------------------

README = """\
CTranslate2 model exported by nmt-train (scripts/export-ctranslate2.py) from
{checkpoints}
Weights {weights}, quantization {quantization}. Load it and translate (pip install ctranslate2 sentencepiece):

import ctranslate2, sentencepiece as spm; d = "{outdir}"; translator = ctranslate2.Translator(d); src = spm.SentencePieceProcessor(model_file=d + "/source.model"); tgt = spm.SentencePieceProcessor(model_file=d + "/target.model")
print(tgt.decode(translator.translate_batch([src.encode("Hello world.", out_type=str)], beam_size=4, max_input_length={max_positions}, max_decoding_length=256)[0].hypotheses[0]))

The source is the SentencePiece pieces only: the model appends </s> itself. The model accepts
at most {max_positions} source tokens (max_input_length), like nmt-translate. nmt-translate's
output length limit is 1.2 x source tokens + 10 per sentence (--max-len-a/b) and its length
penalty ((5 + length) / 6)^alpha; CTranslate2 takes one max_decoding_length per call and
divides by length^length_penalty. scripts/bench/ct2-translate.py in nmt-train translates
a file the way nmt-translate does.
"""


MULTILINGUAL_README = """
A multilingual model (languages {languages}): the first source token names the target
language, as nmt-translate --tgt-lang does, e.g. ["{example}"] + src.encode(text, out_type=str);
export.json's "source_prefix" maps each language to its token.
"""


SOURCE_AND_TARGET_README = """
A multilingual model imported from M2M100 or NLLB (languages {languages}, ...): the first
source token is the source language's code and the output starts with the target language's,
as nmt-translate --src-lang/--tgt-lang do: ["{example}"] + src.encode(text, out_type=str), and
translate_batch(..., target_prefix=[[code of the target language]]); export.json's
"source_prefix" and "target_prefix" map each language to its code.
"""


# --- where the export goes ----------------------------------------------------------------

def check_output(outdir, force, given, paths):
    """Raises OutputError unless `outdir` may be written (nmt_tools/output_guard.py): never what
    the export reads (the checkpoint files `paths`, and the folder they were listed from when
    `given` is a directory), and an existing folder only with --force and only when it is
    empty or an earlier export."""
    for path in paths:
        check_output_apart(outdir, path, "the checkpoint")
    if os.path.isdir(given):
        check_output_apart(outdir, os.path.dirname(os.path.abspath(paths[-1])),
                           "the checkpoint folder")
    check_replaceable_dir(outdir, EXPORT_MARKER, "export-ctranslate2", force)


def export(args):
    paths = resolve_checkpoints(args.checkpoint, args.average, PROG)
    # Said before minutes of conversion.
    check_output(args.outdir, args.force, args.checkpoint, paths)
    files = [SafetensorsFile(p) for p in paths]
    newest = files[-1]
    origin = newest.path
    if "config" not in newest.metadata:
        raise ExportError(f"{origin}: no metadata key \"config\" (not an nmt-train checkpoint?)")
    model = model_config(newest.metadata["config"], origin)
    for other in files[:-1]:
        if model_config(other.metadata.get("config", ""), other.path) != model:
            raise ExportError(f"{other.path}: its model config differs from {origin}'s; "
                              "only checkpoints of one model can be averaged")

    with_ema = [has_ema(f) for f in files]
    if args.weights == "ema":
        missing = [f.path for f, e in zip(files, with_ema) if not e]
        if missing:
            raise ExportError(f"{missing[0]}: --weights ema, but the checkpoint holds no "
                              f"{EMA_PREFIX}* tensors (trained without train.ema_decay)")
        use_ema = True
    elif args.weights == "raw":
        use_ema = False
    else:
        use_ema = all(with_ema)
        if any(with_ema) and not use_ema:
            print(f"{PROG}: warning: only some of the checkpoints hold {EMA_PREFIX}* tensors; "
                  "exporting the raw weights", file=sys.stderr)
    weights = Weights(files, use_ema)

    joint = newest.metadata.get("vocab_joint", "true")
    if joint not in ("true", "false"):
        raise ExportError(f"{origin}: metadata vocab_joint: expected true or false, "
                          f"found {joint!r}")
    src_name = vocabulary_tensor("source")
    tgt_name = src_name if joint == "true" else vocabulary_tensor("target")
    src_bytes = newest.tensor(src_name).tobytes()
    tgt_bytes = newest.tensor(tgt_name).tobytes()
    src_pieces, src_special = vocabulary(src_bytes, f"{origin} ({src_name})")
    tgt_pieces, special = vocabulary(tgt_bytes, f"{origin} ({tgt_name})")
    if src_special["eos"] != special["eos"]:
        raise ExportError(f"{origin}: the source and target vocabularies name </s> differently "
                          f"({src_special['eos']!r}, {special['eos']!r}); CTranslate2 has one "
                          "eos_token")

    prefixes = source_prefixes(newest.metadata, src_pieces, origin, src_bytes)
    src_table, src_spm = split_hf_vocab(src_bytes, origin)
    _, tgt_spm = split_hf_vocab(tgt_bytes, origin)
    # M2M100 and NLLB: the source starts with its own language's code, the output with the
    # target's (CTranslate2's target_prefix); Marian and ours: the target's tag leads the source.
    both = (src_table or {}).get("language_placement") == "source_and_target"
    spec = build_spec(model, weights, src_pieces, tgt_pieces, special)
    spec.validate()
    quantization = None if args.quantization == "none" else args.quantization
    spec.optimize(quantization=quantization)

    # Written next to OUTDIR and renamed into place, so a failed export leaves no half model.
    out = os.path.normpath(os.path.abspath(args.outdir))
    check_output(args.outdir, args.force, args.checkpoint, paths)  # again, after the conversion
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".export-", dir=parent)
    try:
        spec.save(staging)
        with open(os.path.join(staging, "source.model"), "wb") as f:
            f.write(src_spm)
        with open(os.path.join(staging, "target.model"), "wb") as f:
            f.write(tgt_spm)
        info = {
            "checkpoints": [os.path.abspath(f.path) for f in files],
            "step": int(newest.metadata.get("step", "0") or 0),
            "weights": "ema" if use_ema else "raw",
            "quantization": args.quantization,
            "vocab_joint": joint == "true",
            "max_positions": model["max_positions"],
            "model": model,
            "banned_output_tokens": [special["pad_id"], special["bos_id"]],
        }
        if prefixes and both:
            # The source starts with its language's code, the output with the target's.
            info["source_prefix"] = prefixes
            info["target_prefix"] = prefixes
        elif prefixes:
            # A multilingual model: the source tokens start with the target language's tag.
            info["source_prefix"] = prefixes
        with open(os.path.join(staging, EXPORT_MARKER), "w", encoding="utf-8") as f:
            f.write("written by scripts/export-ctranslate2.py, whose --force replaces only a "
                    "directory that holds this file\n")
        with open(os.path.join(staging, "export.json"), "w", encoding="utf-8") as f:
            json.dump(info, f, indent=2)
            f.write("\n")
        with open(os.path.join(staging, "README.txt"), "w", encoding="utf-8") as f:
            f.write(README.format(checkpoints="\n".join(info["checkpoints"]), outdir=out,
                                  weights=info["weights"], quantization=args.quantization,
                                  max_positions=model["max_positions"]))
            if prefixes and both:
                f.write(SOURCE_AND_TARGET_README.format(
                    languages=", ".join(list(prefixes)[:10]), example=next(iter(prefixes.values()))))
            elif prefixes:
                f.write(MULTILINGUAL_README.format(
                    languages=", ".join(prefixes), example=next(iter(prefixes.values()))))
        if os.path.lexists(out):
            # Checked again just before the delete: what sits at OUTDIR after minutes of export
            # may not be what was checked at the start.
            check_replaceable_dir(out, EXPORT_MARKER, "export-ctranslate2", True)
            shutil.rmtree(out)
        os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    print(f"{PROG}: wrote {args.outdir} ({len(files)} checkpoint(s), step {info['step']}, "
          f"{info['weights']} weights, quantization {args.quantization})")


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="export-ctranslate2.py",
        description="Export an nmt-train checkpoint as a CTranslate2 model directory.")
    parser.add_argument("checkpoint", metavar="CHECKPOINT",
                        help="checkpoint file, or run directory (best by selection, else newest)")
    parser.add_argument("outdir", metavar="OUTDIR", help="model directory to write")
    parser.add_argument("--quantization", default="none",
                        choices=["none", "int8", "int8_float16", "float16"],
                        help="weight type of the exported model (default: none, float32)")
    parser.add_argument("--average", type=int, default=0, metavar="K",
                        help="average the newest K checkpoints of the run directory")
    parser.add_argument("--weights", choices=["ema", "raw"], default=None,
                        help="EMA or trained weights (default: ema when present, else raw)")
    parser.add_argument("--force", action="store_true",
                        help="replace OUTDIR when it is empty or an earlier export (it holds "
                             f"{EXPORT_MARKER}); never the checkpoints read")
    args = parser.parse_args(argv)
    if args.average < 0:
        parser.error(f"--average: expected an integer >= 0, found {args.average}")
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        print(f"{PROG}: error: the ctranslate2 package is not installed (pip install "
              "ctranslate2; scripts/setup.sh puts it in the venv)", file=sys.stderr)
        return 1
    try:
        export(args)
    except (ExportError, OutputError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
