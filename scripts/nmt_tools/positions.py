"""The position tables of src/model/embedding.cpp, in numpy (float32 results): what
scripts/export-ctranslate2.py writes into a CTranslate2 model and scripts/bench/
reference_train.py adds to its embeddings (torch.from_numpy). numpy's float32 exp may round
the last bit of a frequency otherwise than LibTorch's, so a far position of the sinusoidal
table can differ from the C++ one by about 2e-5 (the marian table, float64, is the same)."""
import math

import numpy as np


def sinusoidal_positions(positions: int, d_model: int) -> np.ndarray:
    """[positions, d_model]: [sin | cos] halves (not interleaved), wavelengths from 2*pi to
    10000*2*pi, position 0 first, float32 arithmetic; an odd d_model gets a zero column."""
    half = d_model // 2
    log_step = np.float32(math.log(10000.0) / max(half - 1, 1))
    inv_freq = np.exp(np.arange(half, dtype=np.float32) * -log_step)
    angles = np.arange(positions, dtype=np.float32)[:, None] * inv_freq[None, :]
    table = np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
    if d_model % 2:
        table = np.concatenate([table, np.zeros((positions, 1), np.float32)], axis=1)
    return table.astype(np.float32)


def marian_positions(positions: int, d_model: int) -> np.ndarray:
    """MarianMT's table (embedding.cpp's marian_positions): sines then cosines, angle
    t / 10000^(2i / d_model), position 0 first, float64 arithmetic cast to float32."""
    sines = (d_model + 1) // 2
    denominator = np.power(10000.0, np.arange(sines, dtype=np.float64) * 2.0 / d_model)
    angles = np.arange(positions, dtype=np.float64)[:, None] / denominator[None, :]
    return np.concatenate([np.sin(angles), np.cos(angles[:, :d_model // 2])],
                          axis=1).astype(np.float32)


def position_table(kind: str, positions: int, d_model: int, pad_id: int) -> np.ndarray:
    """The table whose row t the token at position t gets, for model.positions `kind`
    (sinusoidal, marian or m2m100; learned positions are weights, not a table). m2m100
    (fairseq's, padding-aware) gives the t-th real token row t + pad_id + 1 of the sinusoidal
    table: the same for right-padded batches and a decoder that starts with a token other than
    pad."""
    if kind == "marian":
        return marian_positions(positions, d_model)
    if kind == "m2m100":
        return sinusoidal_positions(positions + pad_id + 1, d_model)[pad_id + 1:]
    return sinusoidal_positions(positions, d_model)
