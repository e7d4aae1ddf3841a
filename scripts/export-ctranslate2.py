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
"""
import argparse
import json
import math
import os
import re
import shutil
import struct
import sys
import tempfile

import numpy as np

PROG = "export-ctranslate2"
CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d{1,18})\.safetensors$")
# Bias on the output logits of tokens nmt-translate never emits: far below any real logit,
# exactly 0 probability after the softmax, and representable in float16.
BANNED_TOKEN_BIAS = -1e4
# Layer norm epsilon of the model (torch::nn::LayerNorm's default).
LAYER_NORM_EPSILON = 1e-5
# How nmt-train names checkpoint tensors, as far as this exporter reads them: a group's prefix
# followed by a name within the group (src/checkpoint/tensor_layout.h; `nmt-ckpt layout` prints
# the whole layout, and tests/scripts/test_export_ctranslate2.py fails when the two disagree).
LAYOUT = {
    "groups": {"model": "model.", "ema": "ema.", "vocabulary": "vocab."},
    "vocabulary_files": {"source": "src_model", "target": "tgt_model"},
    # Module names of the attention projections: self-attention's fused [3d, d] q/k/v,
    # cross-attention's q [d, d] and fused [2d, d] k/v. Checkpoints written before the fusion
    # (nmt-train up to 7b6366d) hold separate q_proj/k_proj/v_proj; set_attention concatenates.
    "attention": {"self_attention": "self_attn", "cross_attention": "cross_attn",
                  "query_key_value": "qkv_proj", "query": "q_proj", "key_value": "kv_proj",
                  "output": "out_proj"},
}
MODEL_PREFIX = LAYOUT["groups"]["model"]
EMA_PREFIX = LAYOUT["groups"]["ema"]


def vocabulary_tensor(side):
    """The checkpoint name of the SentencePiece model of `side` ("source" or "target")."""
    return LAYOUT["groups"]["vocabulary"] + LAYOUT["vocabulary_files"][side]


class ExportError(Exception):
    """A problem with the input that the user can fix; reported as one line."""


# --- reading checkpoints -----------------------------------------------------------------

_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
    "BOOL": np.bool_,
}


class SafetensorsFile:
    """One safetensors file: header, metadata and tensors read on demand (memory-mapped).

    nmt-train's checksum (nmt.checksum) is not verified here; `nmt-ckpt info FILE` does."""

    def __init__(self, path):
        self.path = path
        try:
            with open(path, "rb") as f:
                head = f.read(8)
                if len(head) != 8:
                    raise ExportError(f"{path}: not a safetensors file (shorter than 8 bytes)")
                (length,) = struct.unpack("<Q", head)
                size = os.fstat(f.fileno()).st_size
                if length > size - 8:
                    raise ExportError(f"{path}: header length {length} exceeds the file")
                header = json.loads(f.read(length))
        except OSError as e:
            raise ExportError(f"{path}: cannot read: {e.strerror}") from e
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ExportError(f"{path}: malformed safetensors header: {e}") from e
        if not isinstance(header, dict):
            raise ExportError(f"{path}: malformed safetensors header: not a JSON object")
        self.metadata = header.pop("__metadata__", None) or {}
        self.entries = header
        self._data_offset = 8 + length
        self._data_size = size - self._data_offset
        self._map = None

    def names(self):
        return list(self.entries)

    def __contains__(self, name):
        return name in self.entries

    def tensor(self, name):
        """The tensor as a numpy array (BF16 widened to float32)."""
        entry = self.entries.get(name)
        if entry is None:
            raise ExportError(f"{self.path}: tensor {name} is missing")
        dtype = _DTYPES.get(entry.get("dtype"))
        if dtype is None:
            raise ExportError(f"{self.path}: tensor {name}: unsupported dtype {entry.get('dtype')}")
        begin, end = entry["data_offsets"]
        shape = tuple(entry["shape"])
        count = int(np.prod(shape)) if shape else 1
        nbytes = count * np.dtype(dtype).itemsize
        if not (0 <= begin <= end <= self._data_size) or end - begin != nbytes:
            raise ExportError(f"{self.path}: tensor {name}: offsets {begin}..{end} do not match "
                              f"its shape {list(shape)} and dtype {entry['dtype']}")
        if self._map is None:
            self._map = np.memmap(self.path, dtype=np.uint8, mode="r")
        raw = self._map[self._data_offset + begin:self._data_offset + end]
        array = raw.view(dtype).reshape(shape)
        if entry["dtype"] == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
        return np.array(array)  # a copy: the export outlives the mapping


def list_checkpoints(folder):
    """Checkpoint files of a folder, newest step first (as CheckpointDir::list)."""
    found = []
    for name in os.listdir(folder):
        match = CHECKPOINT_NAME.match(name)
        path = os.path.join(folder, name)
        if match and os.path.isfile(path):
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found, reverse=True)]


def selection_of(metadata):
    """The "selection" metadata as a finite number, else None (as run_metadata.cpp)."""
    try:
        value = float(metadata.get("selection", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def resolve_checkpoints(given, average):
    """The files to export, oldest first (the newest one's metadata and vocabulary are used):
    one file, or from a run directory the best by selection, else the newest, or with
    average > 1 the newest `average` (as nmt-translate's resolve_checkpoints)."""
    if os.path.isfile(given):
        if average > 1:
            raise ExportError(f"--average {average} needs a run directory (or its checkpoints/ "
                              f"folder), found the file {given}")
        return [given]
    if not os.path.isdir(given):
        raise ExportError(f"{given}: no such checkpoint file or run directory")
    folder = os.path.join(given, "checkpoints")
    if not os.path.isdir(folder):
        folder = given
    files = list_checkpoints(folder)
    if average > 1:
        if len(files) < average:
            raise ExportError(f"{folder}: --average {average} needs {average} checkpoints, "
                              f"found {len(files)}")
        return list(reversed(files[:average]))
    newest, best = None, None
    for path in files:  # newest first; `<=`: on a tie the earlier step wins
        try:
            metadata = SafetensorsFile(path).metadata
        except ExportError as e:
            print(f"{PROG}: warning: skipping {path}: {e}", file=sys.stderr)
            continue
        newest = newest or path
        value = selection_of(metadata)
        if value is not None and (best is None or value <= best[0]):
            best = (value, path)
    chosen = best[1] if best else newest
    if chosen is None:
        raise ExportError(f"{folder}: no checkpoint-*.safetensors files")
    return [chosen]


# --- the model's config ------------------------------------------------------------------

# Every model.* key of nmt-train's config, with the values this exporter can express in
# CTranslate2 (None: any value of the right type). A key or value that is not here is refused:
# a setting added to nmt-train later must be taught to this exporter before it exports.
_MODEL_KEYS = {
    "encoder_layers": None, "decoder_layers": None, "d_model": None, "heads": None,
    "ffn_dim": None, "max_positions": None,
    # Training-only: dropout is off when translating.
    "dropout": None, "attention_dropout": None, "activation_dropout": None,
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
_ADDED_KEY_DEFAULTS = {"output_bias": False, "decoder_start": "bos"}
_INTEGER_KEYS = ("encoder_layers", "decoder_layers", "d_model", "heads", "ffn_dim",
                 "max_positions")


def model_config(config_yaml, origin):
    """The `model` section of a checkpoint's config, checked: every key known, every value one
    that CTranslate2 can express; raises ExportError naming the setting otherwise."""
    import yaml

    try:
        config = yaml.safe_load(config_yaml)
    except yaml.YAMLError as e:
        raise ExportError(f"{origin}: metadata config: malformed YAML: {e}") from e
    model = config.get("model") if isinstance(config, dict) else None
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


# --- weights -----------------------------------------------------------------------------

def has_ema(file):
    return any(n.startswith(EMA_PREFIX) for n in file.names())


class Weights:
    """The model tensors to export: one checkpoint's, or the mean of several (float64 sums, as
    nmt-translate's average_checkpoints), raw or EMA."""

    def __init__(self, files, use_ema):
        self.files = files
        self.use_ema = use_ema

    def has(self, parameter):
        """Whether the first checkpoint has model parameter `parameter`."""
        return (EMA_PREFIX if self.use_ema else MODEL_PREFIX) + parameter in self.files[0]

    def get(self, parameter):
        """The tensor of model parameter `parameter` (its module path, "encoder_norm.weight")."""
        total = None
        key = (EMA_PREFIX if self.use_ema else MODEL_PREFIX) + parameter
        for file in self.files:
            if key not in file:
                what = f"other {EMA_PREFIX}* tensors" if self.use_ema else "no such parameter"
                raise ExportError(f"{file.path}: tensor {key} is missing ({what})")
            array = file.tensor(key)
            if not np.issubdtype(array.dtype, np.floating):
                raise ExportError(f"{file.path}: tensor {key} is {array.dtype}, expected floats")
            if total is not None and array.shape != total.shape:
                raise ExportError(f"{file.path}: tensor {key} has shape {list(array.shape)}, but "
                                  f"{list(total.shape)} in {self.files[0].path}")
            total = array.astype(np.float64) if total is None else total + array
        return (total / len(self.files)).astype(np.float32)


def sinusoidal_positions(positions, d_model):
    """The position table of model/embedding.cpp: [sin | cos] halves (not interleaved),
    wavelengths from 2*pi to 10000*2*pi, position 0 first, float32 arithmetic."""
    half = d_model // 2
    log_step = np.float32(math.log(10000.0) / max(half - 1, 1))
    inv_freq = np.exp(np.arange(half, dtype=np.float32) * -log_step)
    angles = np.arange(positions, dtype=np.float32)[:, None] * inv_freq[None, :]
    table = np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
    if d_model % 2:
        table = np.concatenate([table, np.zeros((positions, 1), np.float32)], axis=1)
    return table.astype(np.float32)


def marian_positions(positions, d_model):
    """model/embedding.cpp's marian_positions (MarianMT's table): sines then cosines, angle
    t / 10000^(2i / d_model), position 0 first, float64 arithmetic cast to float32."""
    sines = (d_model + 1) // 2
    denominator = np.power(10000.0, np.arange(sines, dtype=np.float64) * 2.0 / d_model)
    angles = np.arange(positions, dtype=np.float64)[:, None] / denominator[None, :]
    return np.concatenate([np.sin(angles), np.cos(angles[:, :d_model // 2])],
                          axis=1).astype(np.float32)


def position_table(kind, positions, d_model, pad_id):
    """The table CTranslate2 reads row t from for the token at position t. m2m100 (fairseq's,
    padding-aware) gives the t-th real token row t + pad_id + 1 of the sinusoidal table: equal
    for right-padded sources and a decoder that starts with a token other than pad (bos, the
    only start this exporter takes)."""
    if kind == "marian":
        return marian_positions(positions, d_model)
    if kind == "m2m100":
        return sinusoidal_positions(positions + pad_id + 1, d_model)[pad_id + 1:]
    return sinusoidal_positions(positions, d_model)


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


# The first line of a vocabulary imported from Hugging Face (data/token_table.h): then a line of
# JSON (the tokenizer's tokens by id and its special ids), then the SentencePiece model's bytes.
HF_VOCAB_MAGIC = b"nmt-hf-vocab 1\n"


def split_hf_vocab(model_bytes, origin):
    """(table, SentencePiece bytes) of an imported vocabulary; (None, model_bytes) of ours."""
    if not model_bytes.startswith(HF_VOCAB_MAGIC):
        return None, model_bytes
    end = model_bytes.find(b"\n", len(HF_VOCAB_MAGIC))
    try:
        table = json.loads(model_bytes[len(HF_VOCAB_MAGIC):end].decode("utf-8"))
        tokens = table["tokens"]
        for key in ("pad_id", "unk_id", "eos_id"):
            tokens[table[key]]
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise ExportError(f"{origin}: malformed Hugging Face vocabulary: {e}") from e
    return table, model_bytes[end + 1:]


def hf_vocabulary(table, origin):
    """Tokens (in id order) and special tokens of an imported vocabulary: its tokenizer's
    tokens, which its SentencePiece pieces are (a piece it lacks is <unk>, as CTranslate2 maps
    an unknown token); bos is <s>, or pad where there is none (Marian), as data/vocab.cpp has it."""
    tokens = [str(t) for t in table["tokens"]]
    if len(set(tokens)) != len(tokens):
        raise ExportError(f"{origin}: the vocabulary has duplicate tokens")
    ids = {"pad_id": table["pad_id"], "unk_id": table["unk_id"], "eos_id": table["eos_id"]}
    bos = tokens.index("<s>") if "<s>" in tokens else ids["pad_id"]
    ids["bos_id"] = bos if bos in table.get("special_ids", []) else ids["pad_id"]
    special = dict(ids, unk=tokens[ids["unk_id"]], bos=tokens[ids["bos_id"]],
                   eos=tokens[ids["eos_id"]], pad=tokens[ids["pad_id"]])
    return tokens, special


def vocabulary(model_bytes, origin):
    """Pieces (in id order) and special tokens of a serialized SentencePiece model, or of a
    vocabulary imported from Hugging Face."""
    import sentencepiece as spm

    table, _ = split_hf_vocab(model_bytes, origin)
    if table is not None:
        return hf_vocabulary(table, origin)

    processor = spm.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(model_bytes)
    except Exception as e:  # sentencepiece raises RuntimeError or OSError by version
        raise ExportError(f"{origin}: not a SentencePiece model: {e}") from e
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    ids = {"pad_id": processor.pad_id(), "unk_id": processor.unk_id(),
           "bos_id": processor.bos_id(), "eos_id": processor.eos_id()}
    for key, value in ids.items():
        if value < 0:
            raise ExportError(f"{origin}: the SentencePiece model has no {key[:3]} piece")
    if len(set(pieces)) != len(pieces):
        raise ExportError(f"{origin}: the SentencePiece model has duplicate pieces")
    special = dict(ids, unk=pieces[ids["unk_id"]], bos=pieces[ids["bos_id"]],
                   eos=pieces[ids["eos_id"]], pad=pieces[ids["pad_id"]])
    return pieces, special


def source_prefixes(metadata, pieces, origin, model_bytes=None):
    """A multilingual model's tags (metadata lang_tags: target, languages "de,en"): {language:
    its <2xx> piece}, which a CTranslate2 user puts first in the source tokens, as
    nmt-translate --tgt-lang does; for a vocabulary imported from Hugging Face, every language
    code it has, as it spells them ({"de": "__de__"}, {"deu": ">>deu<<"}, {"deu_Latn":
    "deu_Latn"}); {} for any other model."""
    if metadata.get("lang_tags") is None:
        return {}
    if metadata["lang_tags"] != "target":
        raise ExportError(f"{origin}: metadata lang_tags: expected target, "
                          f"found {metadata['lang_tags']!r}")
    languages = [code for code in metadata.get("languages", "").split(",") if code]
    if not languages:
        raise ExportError(f"{origin}: metadata lang_tags is target but languages is missing")
    table, _ = split_hf_vocab(model_bytes, origin) if model_bytes else (None, None)
    if table is not None:
        # The vocabulary's own codes: `__de__` (M2M100), `>>deu<<` (Marian), `deu_Latn` (NLLB).
        codes = {}
        for i in table.get("language_ids", []):
            token = table["tokens"][i]
            code = (token[2:-2] if table["tokenizer"] in ("m2m100", "marian") else token)
            codes[code] = token
        # Every code the vocabulary has, as it spells them (a fine-tuned run's metadata names
        # languages by ISO 639 codes, which need not be the vocabulary's spelling).
        return codes
    prefixes = {code: f"<2{code}>" for code in languages}
    known = set(pieces)
    for code, tag in prefixes.items():
        if tag not in known:
            raise ExportError(f"{origin}: the source vocabulary has no piece {tag} for "
                              f"language {code}")
    return prefixes


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


def export(args):
    paths = resolve_checkpoints(args.checkpoint, args.average)
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
    out = os.path.abspath(args.outdir)
    if os.path.exists(out) and not args.force:
        raise ExportError(f"{args.outdir} exists; use --force to replace it")
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
        if os.path.exists(out):
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
    parser.add_argument("--force", action="store_true", help="replace OUTDIR if it exists")
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
    except ExportError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
