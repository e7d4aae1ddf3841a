"""Our Transformer on imported transformers models equals transformers, run by CTest.

    pytest tests/scripts/test_hf_model.py::test_logits_and_greedy_match_transformers[marian]

Creates a tiny random model of VARIANT with transformers (seeded; no hub), saves it with
save_pretrained, and runs tests/hf/hf_probe.cpp on it (the directory read through
hf/hf_weights.h). On 50 sentence pairs of random ids with varied lengths and right
padding, fp32 on the CPU:
  - the teacher-forced logits are within 1e-4 of transformers' at every real target position;
  - the same positions fed one at a time through our decoder cache give the same logits;
  - our greedy search outputs the tokens of generate(do_sample=False, num_beams=1), both never
    generating pad and bos (our search's rule; suppress_tokens on their side).
Skipped without transformers.
"""
import os
import shutil
from pathlib import Path

import pytest
from nmt_tools.process import run

PAIRS = 50
MAX_LEN = 20
MAX_NEW_TOKENS = 16
TOLERANCE = 1e-4
VOCAB = 96

# Each variant covers settings of its type: activation, embedding scaling and sharing, widths.
VARIANTS = {
    # OPUS-MT's shape: swish, one shared table, scaled embeddings, a final logits bias.
    "marian": dict(type="marian", d_model=32, heads=4, activation_function="swish",
                   scale_embedding=True),
    # Separate encoder and decoder tables and an untied output matrix, gelu, unscaled, d 24.
    "marian_untied": dict(type="marian", d_model=24, heads=3, activation_function="gelu",
                          scale_embedding=False, share_encoder_decoder_embeddings=False,
                          tie_word_embeddings=False),
    # M2M100/NLLB's shape: pre-norm, relu, padding-aware positions from pad + 1.
    "m2m100": dict(type="m2m100", d_model=32, heads=4, activation_function="relu",
                   scale_embedding=True),
    "m2m100_gelu_unscaled": dict(type="m2m100", d_model=24, heads=2,
                                 activation_function="gelu", scale_embedding=False),
}


def make_model(variant, out_dir):
    """A seeded random transformers model of the variant, saved to out_dir; its config."""
    import torch
    import transformers

    spec = dict(VARIANTS[variant])
    kind = spec.pop("type")
    d_model, heads = spec.pop("d_model"), spec.pop("heads")
    common = dict(vocab_size=VOCAB, d_model=d_model, encoder_layers=2, decoder_layers=2,
                  encoder_attention_heads=heads, decoder_attention_heads=heads,
                  encoder_ffn_dim=2 * d_model, decoder_ffn_dim=2 * d_model,
                  max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
                  activation_dropout=0.0, **spec)
    torch.manual_seed(1234)
    if kind == "marian":
        config = transformers.MarianConfig(decoder_vocab_size=VOCAB, pad_token_id=VOCAB - 1,
                                           eos_token_id=0, decoder_start_token_id=VOCAB - 1,
                                           forced_eos_token_id=None, **common)
        model = transformers.MarianMTModel(config)
    else:
        config = transformers.M2M100Config(pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                           decoder_start_token_id=2, encoder_layerdrop=0.0,
                                           decoder_layerdrop=0.0, **common)
        model = transformers.M2M100ForConditionalGeneration(config)
    # Every weight random (norms and biases too, the logits bias included), so that a block
    # read into the wrong place shows; the fixed position tables stay as they are.
    with torch.no_grad():
        for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
            if "embed_positions" in name or not tensor.is_floating_point():
                continue
            tensor.normal_(0.0, 0.3)
        if kind == "marian":
            # Some greedy outputs then end with EOS before the length limit (mean length 10.6
            # of 16), the others at it.
            model.final_logits_bias[0, config.eos_token_id] = 0.78
    model.eval()
    model.save_pretrained(out_dir, safe_serialization=True)
    return model, config


def make_pairs(config, generator):
    """src [N, S] and tgt_in [N, T], right-padded, and each row's target length."""
    import torch

    pad, eos, start = config.pad_token_id, config.eos_token_id, config.decoder_start_token_id
    specials = {pad, eos, start, getattr(config, "bos_token_id", None) or 0, 3}
    words = torch.tensor([i for i in range(VOCAB) if i not in specials])
    src_len = torch.randint(1, MAX_LEN, (PAIRS,), generator=generator)
    tgt_len = torch.randint(1, MAX_LEN, (PAIRS,), generator=generator)
    src = torch.full((PAIRS, int(src_len.max()) + 1), pad, dtype=torch.long)
    tgt_in = torch.full((PAIRS, int(tgt_len.max())), pad, dtype=torch.long)
    for row in range(PAIRS):
        s, t = int(src_len[row]), int(tgt_len[row])
        src[row, :s] = words[torch.randint(len(words), (s,), generator=generator)]
        src[row, s] = eos
        tgt_in[row, 0] = start
        tgt_in[row, 1:t] = words[torch.randint(len(words), (t - 1,), generator=generator)]
    return src, tgt_in, tgt_len


def hf_greedy(model, config, src):
    """transformers' greedy outputs, first MAX_NEW_TOKENS tokens up to EOS, per row."""
    import torch

    pad, eos = config.pad_token_id, config.eos_token_id
    suppress = [pad]
    bos = getattr(config, "bos_token_id", None)
    if bos is not None and bos != eos:
        suppress.append(bos)
    with torch.no_grad():
        out = model.generate(input_ids=src, attention_mask=src.ne(pad), do_sample=False,
                             num_beams=1, max_new_tokens=MAX_NEW_TOKENS + 1,
                             suppress_tokens=suppress, min_length=0)
    rows = []
    for seq in out.tolist():
        tokens = []
        for token in seq[1:]:  # after the decoder start
            if token == eos:
                break
            tokens.append(token)
        rows.append(tokens[:MAX_NEW_TOKENS])
    return rows


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_logits_and_greedy_match_transformers(variant: str, binaries, work: Path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    load_file, save_file = safetensors_torch.load_file, safetensors_torch.save_file
    torch.set_num_threads(1)
    work = os.path.join(work, variant)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model_dir = os.path.join(work, "model")
    model, config = make_model(variant, model_dir)

    generator = torch.Generator().manual_seed(99)
    src, tgt_in, tgt_len = make_pairs(config, generator)
    save_file({"src": src, "tgt_in": tgt_in}, os.path.join(work, "input.safetensors"))
    out_file = os.path.join(work, "output.safetensors")
    run([binaries.hf_probe, model_dir, os.path.join(work, "input.safetensors"), out_file,
         str(MAX_NEW_TOKENS)])
    ours = load_file(out_file)

    with torch.no_grad():
        theirs = model(input_ids=src, attention_mask=src.ne(config.pad_token_id),
                       decoder_input_ids=tgt_in).logits
    real = torch.arange(tgt_in.size(1)).unsqueeze(0) < tgt_len.unsqueeze(1)
    failures = []
    for name in ("logits", "step_logits"):
        diff = (ours[name] - theirs).abs()[real].max().item()
        print(f"{variant}: {name}: largest difference from transformers {diff:.3g} over "
              f"{int(real.sum())} positions x {theirs.size(-1)} logits")
        if not diff <= TOLERANCE:
            failures.append(f"{name} differ by {diff:.3g} > {TOLERANCE}")

    expected = hf_greedy(model, config, src)
    got = [[t for t in row if t >= 0] for row in ours["greedy"].tolist()]
    different = [i for i in range(PAIRS) if got[i] != expected[i]]
    print(f"{variant}: greedy: {PAIRS - len(different)} of {PAIRS} outputs identical "
          f"(mean length {sum(map(len, expected)) / PAIRS:.1f})")
    for i in different[:3]:
        print(f"  row {i}: ours {got[i]}\n  row {i}: transformers {expected[i]}")
    if different:
        failures.append(f"{len(different)} greedy outputs differ")
    assert not failures, f"{variant}: " + "; ".join(failures)
