"""nmt-train checkpoints read from Python with numpy alone (no torch, no nmt-train code): the
tensor names (LAYOUT), safetensors files, choosing a run's checkpoints as nmt-translate does,
the weights to use (raw or EMA, one file or the mean of several), and the stored vocabularies.
Used by scripts/export-ctranslate2.py and the tests of tests/scripts/.
"""
import json
import math
import os
import re
import struct
import sys
from pathlib import Path
from typing import Optional, Union

import numpy as np

PathLike = Union[str, os.PathLike]

# The file names of a run's checkpoints (checkpoint/checkpoint_dir.h).
CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d{1,18})\.safetensors$")
# How nmt-train names checkpoint tensors, as far as these readers read them: a group's prefix
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


def vocabulary_tensor(side: str) -> str:
    """The checkpoint name of the SentencePiece model of `side` ("source" or "target")."""
    return LAYOUT["groups"]["vocabulary"] + LAYOUT["vocabulary_files"][side]


class CheckpointError(Exception):
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

    def __init__(self, path: PathLike):
        self.path = path
        try:
            with open(path, "rb") as f:
                head = f.read(8)
                if len(head) != 8:
                    raise CheckpointError(f"{path}: not a safetensors file (shorter than 8 bytes)")
                (length,) = struct.unpack("<Q", head)
                size = os.fstat(f.fileno()).st_size
                if length > size - 8:
                    raise CheckpointError(f"{path}: header length {length} exceeds the file")
                header = json.loads(f.read(length))
        except OSError as e:
            raise CheckpointError(f"{path}: cannot read: {e.strerror}") from e
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CheckpointError(f"{path}: malformed safetensors header: {e}") from e
        if not isinstance(header, dict):
            raise CheckpointError(f"{path}: malformed safetensors header: not a JSON object")
        self.metadata = header.pop("__metadata__", None) or {}
        self.entries = header
        self._data_offset = 8 + length
        self._data_size = size - self._data_offset
        self._map = None

    def names(self) -> list[str]:
        return list(self.entries)

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    def tensor(self, name: str) -> np.ndarray:
        """The tensor as a numpy array (BF16 widened to float32)."""
        entry = self.entries.get(name)
        if entry is None:
            raise CheckpointError(f"{self.path}: tensor {name} is missing")
        dtype = _DTYPES.get(entry.get("dtype"))
        if dtype is None:
            raise CheckpointError(f"{self.path}: tensor {name}: unsupported dtype {entry.get('dtype')}")
        begin, end = entry["data_offsets"]
        shape = tuple(entry["shape"])
        count = int(np.prod(shape)) if shape else 1
        nbytes = count * np.dtype(dtype).itemsize
        if not (0 <= begin <= end <= self._data_size) or end - begin != nbytes:
            raise CheckpointError(f"{self.path}: tensor {name}: offsets {begin}..{end} do not match "
                              f"its shape {list(shape)} and dtype {entry['dtype']}")
        if self._map is None:
            self._map = np.memmap(self.path, dtype=np.uint8, mode="r")
        raw = self._map[self._data_offset + begin:self._data_offset + end]
        array = raw.view(dtype).reshape(shape)
        if entry["dtype"] == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
        return np.array(array)  # a copy: the export outlives the mapping


def list_checkpoints(folder: PathLike) -> list[str]:
    """Checkpoint files of a folder, newest step first (as CheckpointDir::list)."""
    found = []
    for name in os.listdir(folder):
        match = CHECKPOINT_NAME.match(name)
        path = os.path.join(folder, name)
        if match and os.path.isfile(path):
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found, reverse=True)]


def newest_checkpoint(run_dir: PathLike) -> Path:
    """The checkpoint of the highest step in a run directory's checkpoints/ folder (by step
    number, not by name); raises CheckpointError when it has none."""
    folder = Path(run_dir) / "checkpoints"
    files = list_checkpoints(folder) if folder.is_dir() else []
    if not files:
        raise CheckpointError(f"{folder}: no checkpoint-*.safetensors files")
    return Path(files[0])


def selection_of(metadata: dict) -> Optional[float]:
    """The "selection" metadata as a finite number, else None (as run_metadata.cpp)."""
    try:
        value = float(metadata.get("selection", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def resolve_checkpoints(given: PathLike, average: int, prog: str = "nmt_tools") -> list[str]:
    """The files to export, oldest first (the newest one's metadata and vocabulary are used):
    one file, or from a run directory the best by selection, else the newest, or with
    average > 1 the newest `average` (as nmt-translate's resolve_checkpoints)."""
    if os.path.isfile(given):
        if average > 1:
            raise CheckpointError(f"--average {average} needs a run directory (or its checkpoints/ "
                              f"folder), found the file {given}")
        return [given]
    if not os.path.isdir(given):
        raise CheckpointError(f"{given}: no such checkpoint file or run directory")
    folder = os.path.join(given, "checkpoints")
    if not os.path.isdir(folder):
        folder = given
    files = list_checkpoints(folder)
    if average > 1:
        if len(files) < average:
            raise CheckpointError(f"{folder}: --average {average} needs {average} checkpoints, "
                              f"found {len(files)}")
        return list(reversed(files[:average]))
    newest, best = None, None
    for path in files:  # newest first; `<=`: on a tie the earlier step wins
        try:
            metadata = SafetensorsFile(path).metadata
        except CheckpointError as e:
            print(f"{prog}: warning: skipping {path}: {e}", file=sys.stderr)
            continue
        newest = newest or path
        value = selection_of(metadata)
        if value is not None and (best is None or value <= best[0]):
            best = (value, path)
    chosen = best[1] if best else newest
    if chosen is None:
        raise CheckpointError(f"{folder}: no checkpoint-*.safetensors files")
    return [chosen]


# --- weights -----------------------------------------------------------------------------

def has_ema(file: "SafetensorsFile") -> bool:
    return any(n.startswith(EMA_PREFIX) for n in file.names())


class Weights:
    """The model tensors to export: one checkpoint's, or the mean of several (float64 sums, as
    nmt-translate's average_checkpoints), raw or EMA."""

    def __init__(self, files: list["SafetensorsFile"], use_ema: bool):
        self.files = files
        self.use_ema = use_ema

    def has(self, parameter: str) -> bool:
        """Whether the first checkpoint has model parameter `parameter`."""
        return (EMA_PREFIX if self.use_ema else MODEL_PREFIX) + parameter in self.files[0]

    def get(self, parameter: str) -> np.ndarray:
        """The tensor of model parameter `parameter` (its module path, "encoder_norm.weight")."""
        total = None
        key = (EMA_PREFIX if self.use_ema else MODEL_PREFIX) + parameter
        for file in self.files:
            if key not in file:
                what = f"other {EMA_PREFIX}* tensors" if self.use_ema else "no such parameter"
                raise CheckpointError(f"{file.path}: tensor {key} is missing ({what})")
            array = file.tensor(key)
            if not np.issubdtype(array.dtype, np.floating):
                raise CheckpointError(f"{file.path}: tensor {key} is {array.dtype}, expected floats")
            if total is not None and array.shape != total.shape:
                raise CheckpointError(f"{file.path}: tensor {key} has shape {list(array.shape)}, but "
                                  f"{list(total.shape)} in {self.files[0].path}")
            total = array.astype(np.float64) if total is None else total + array
        return (total / len(self.files)).astype(np.float32)


# --- vocabularies ------------------------------------------------------------------------

# The first line of a vocabulary imported from Hugging Face (data/token_table.h): then a line of
# JSON (the tokenizer's tokens by id and its special ids), then the SentencePiece model's bytes.
HF_VOCAB_MAGIC = b"nmt-hf-vocab 1\n"


def split_hf_vocab(model_bytes: bytes, origin: str) -> tuple[Optional[dict], bytes]:
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
        raise CheckpointError(f"{origin}: malformed Hugging Face vocabulary: {e}") from e
    return table, model_bytes[end + 1:]


def hf_vocabulary(table: dict, origin: str) -> tuple[list[str], dict]:
    """Tokens (in id order) and special tokens of an imported vocabulary: its tokenizer's
    tokens, which its SentencePiece pieces are (a piece it lacks is <unk>, as CTranslate2 maps
    an unknown token); bos is <s>, or pad where there is none (Marian), as data/vocab.cpp has it."""
    tokens = [str(t) for t in table["tokens"]]
    if len(set(tokens)) != len(tokens):
        raise CheckpointError(f"{origin}: the vocabulary has duplicate tokens")
    ids = {"pad_id": table["pad_id"], "unk_id": table["unk_id"], "eos_id": table["eos_id"]}
    bos = tokens.index("<s>") if "<s>" in tokens else ids["pad_id"]
    ids["bos_id"] = bos if bos in table.get("special_ids", []) else ids["pad_id"]
    special = dict(ids, unk=tokens[ids["unk_id"]], bos=tokens[ids["bos_id"]],
                   eos=tokens[ids["eos_id"]], pad=tokens[ids["pad_id"]])
    return tokens, special


def vocabulary(model_bytes: bytes, origin: str) -> tuple[list[str], dict]:
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
        raise CheckpointError(f"{origin}: not a SentencePiece model: {e}") from e
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    ids = {"pad_id": processor.pad_id(), "unk_id": processor.unk_id(),
           "bos_id": processor.bos_id(), "eos_id": processor.eos_id()}
    for key, value in ids.items():
        if value < 0:
            raise CheckpointError(f"{origin}: the SentencePiece model has no {key[:3]} piece")
    if len(set(pieces)) != len(pieces):
        raise CheckpointError(f"{origin}: the SentencePiece model has duplicate pieces")
    special = dict(ids, unk=pieces[ids["unk_id"]], bos=pieces[ids["bos_id"]],
                   eos=pieces[ids["eos_id"]], pad=pieces[ids["pad_id"]])
    return pieces, special


def source_prefixes(metadata: dict, pieces: list[str], origin: str,
                    model_bytes: Optional[bytes] = None) -> dict[str, str]:
    """A multilingual model's tags (metadata lang_tags: target, languages "de,en"): {language:
    its <2xx> piece}, which a CTranslate2 user puts first in the source tokens, as
    nmt-translate --tgt-lang does; for a vocabulary imported from Hugging Face, every language
    code it has, as it spells them ({"de": "__de__"}, {"deu": ">>deu<<"}, {"deu_Latn":
    "deu_Latn"}); {} for any other model."""
    if metadata.get("lang_tags") is None:
        return {}
    if metadata["lang_tags"] != "target":
        raise CheckpointError(f"{origin}: metadata lang_tags: expected target, "
                          f"found {metadata['lang_tags']!r}")
    languages = [code for code in metadata.get("languages", "").split(",") if code]
    if not languages:
        raise CheckpointError(f"{origin}: metadata lang_tags is target but languages is missing")
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
            raise CheckpointError(f"{origin}: the source vocabulary has no piece {tag} for "
                              f"language {code}")
    return prefixes
