"""Model directories as users get them, for tests/scripts/test_hf_import.py (issue #44): older
and stranger than what save_pretrained writes today.

Variants (each a directory made from one of test_hf_import.py's, then changed as below):
  marian_separate  separate source and target vocabularies of different sizes
                   (share_encoder_decoder_embeddings false, decoder_vocab_size != vocab_size,
                   target_vocab.json), built by transformers itself;
  marian_legacy    config.json as the 2020-2022 OPUS-MT conversions wrote it (keys today's
                   transformers no longer writes, add_bias_logits false beside a stored
                   final_logits_bias) and a tokenizer_config.json with only source_lang and
                   target_lang (no tokenizer_class: AutoTokenizer goes by model_type);
  m2m100_legacy    config.json as M2M100-418M's (layerdrop 0.05, generation keys), no
                   tokenizer_class;
  marian_fp16, marian_bf16   the weights stored in that dtype;
  marian_sharded   the weights in shards with model.safetensors.index.json.
Each is compared with transformers as it loads the directory (the weights in float32).
`dir_refusals` checks what must be refused before anything is read or waited on.
"""
import json
import os
import resource
import shutil
import subprocess

import pytest
from nmt_tools.spm import spm_pieces, train_spm
from nmt_tools.text import write_json

# The variant each is made from (test_hf_import.VARIANTS).
DIR_VARIANTS = {
    "marian_separate": "marian",
    "marian_legacy": "marian",
    "m2m100_legacy": "m2m100",
    "marian_fp16": "marian",
    "marian_bf16": "marian",
    "marian_sharded": "marian",
}
TIMEOUT = 60  # seconds an import may take here; a wait on a FIFO would never end
MEMORY = 6 << 30  # address space an import may use here (a refusal must not eat the machine)

# Keys of an OPUS-MT config.json of 2020-2022 that today's transformers no longer writes.
LEGACY_MARIAN = {
    "_num_labels": 3, "add_bias_logits": False, "add_final_layer_norm": False,
    "architectures": ["MarianMTModel"], "bad_words_ids": [[None]], "classif_dropout": 0.0,
    "classifier_dropout": 0.0, "extra_pos_embeddings": 0, "gradient_checkpointing": False,
    "id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"},
    "label2id": {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2}, "max_length": 512,
    "normalize_before": False, "normalize_embedding": False, "num_beams": 4,
    "num_hidden_layers": 2, "output_past": True, "static_position_embeddings": True,
    "transformers_version": "4.22.0.dev0", "use_cache": True,
}
LEGACY_M2M100 = {
    "architectures": ["M2M100ForConditionalGeneration"], "early_stopping": True,
    "encoder_layerdrop": 0.05, "decoder_layerdrop": 0.05, "gradient_checkpointing": False,
    "max_length": 200, "num_beams": 5, "num_hidden_layers": 2,
    "transformers_version": "4.4.0.dev0", "use_cache": True,
}


def build_marian_separate(transformers, work, en, de):
    """MarianTokenizer with separate_vocabs: each side its own vocabulary, of different sizes,
    <pad> at the same id in both (the model has one pad_token_id)."""
    import random

    src = str(train_spm(en, os.path.join(work, "source"), "unigram", 300))
    tgt = str(train_spm(de, os.path.join(work, "target"), "unigram", 260))
    paths = []
    for name, model in (("vocab.json", src), ("target_vocab.json", tgt)):
        pieces = spm_pieces(model)
        random.Random(len(name)).shuffle(pieces)
        path = os.path.join(work, name)
        write_json(path, {t: i for i, t in enumerate(["</s>", "<unk>", "<pad>"] + pieces)})
        paths.append(path)
    return transformers.MarianTokenizer(source_spm=src, target_spm=tgt, vocab=paths[0],
                                        target_vocab_file=paths[1], separate_vocabs=True)


def edit_json(path, change):
    with open(path, encoding="utf-8") as f:
        value = json.load(f)
    value = change(value)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2)


def make_dir_variant(variant, model_dir):
    """Changes the saved directory as the variant has it; returns (dtype of the weights)."""
    import torch
    import transformers

    if variant == "marian_legacy":
        def legacy(config):
            config.update(LEGACY_MARIAN)
            config["bad_words_ids"] = [[config["pad_token_id"]]]
            config["share_encoder_decoder_embeddings"] = True
            config["forced_eos_token_id"] = config["eos_token_id"]
            return config
        edit_json(os.path.join(model_dir, "config.json"), legacy)
        # OPUS-MT's tokenizer_config.json before tokenizer_class was written.
        edit_json(os.path.join(model_dir, "tokenizer_config.json"),
                  lambda _: {"source_lang": "en", "target_lang": "de"})
    elif variant == "m2m100_legacy":
        edit_json(os.path.join(model_dir, "config.json"),
                  lambda config: {**config, **LEGACY_M2M100})
        edit_json(os.path.join(model_dir, "tokenizer_config.json"),
                  lambda config: {k: v for k, v in config.items() if k != "tokenizer_class"})
    elif variant in ("marian_fp16", "marian_bf16", "marian_sharded"):
        dtype = {"marian_fp16": torch.float16, "marian_bf16": torch.bfloat16}.get(variant)
        model = transformers.AutoModelForSeq2SeqLM.from_pretrained(model_dir)
        if dtype is not None:
            model = model.to(dtype)
        os.remove(os.path.join(model_dir, "model.safetensors"))
        model.save_pretrained(model_dir, safe_serialization=True,
                              max_shard_size="40KB" if variant == "marian_sharded" else "50GB")
        if variant == "marian_sharded":
            index = os.path.join(model_dir, "model.safetensors.index.json")
            with open(index, encoding="utf-8") as f:
                shards = set(json.load(f)["weight_map"].values())
            assert len(shards) > 2, shards
            print(f"{len(shards)} shards")
    # What transformers computes with: the directory as it loads it, in float32.
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(model_dir,
                                                              dtype=torch.float32).eval()
    print(f"{variant}: AutoTokenizer gives {type(tok).__name__}")
    return tok, model, model.config


def check_summary(variant, summary, stderr):
    """What import-hf says about a variant: the dtype stored, the layerdrop warning."""
    want = {"marian_fp16": "F16", "marian_bf16": "BF16"}.get(variant, "F32")
    if summary["dtype"] != want or list(summary["dtypes"]) != [want]:
        pytest.fail(f"import-hf says dtype {summary['dtype']} {summary['dtypes']}, expected {want}")
    if ("parameters stored as " + want) not in stderr:
        pytest.fail(f"import-hf's log does not say the dtype {want}: {stderr}")
    warned = "encoder_layerdrop = 0.05 is ignored" in stderr
    if warned != (variant == "m2m100_legacy"):
        pytest.fail(f"layerdrop warning {'missing' if not warned else 'unexpected'}: {stderr}")
    if variant == "marian_separate" and (summary["joint_vocab"] or
                                         summary["src_vocab_size"] == summary["tgt_vocab_size"]):
        pytest.fail(f"expected two vocabularies of different sizes: {summary}")


def master_weights(binaries, config, checkpoint, work, run):
    """Fine-tuning an F16/BF16 import trains F32 parameters: one update at lr 0 stores every
    parameter as F32 with the imported values; three at lr 0.001 store values the imported
    dtype cannot hold (the updates are not rounded to it)."""
    import torch
    from safetensors.torch import load_file

    def train(name, steps, *settings):
        run_dir = os.path.join(work, name)
        run([binaries.train, "--config", config, "--set",
             f"run_dir={run_dir}", "--set", "train.valid_every=0", "--set",
             f"train.max_steps={steps}"] + [x for s in settings for x in ("--set", s)])
        return load_file(os.path.join(run_dir, "checkpoints",
                                      f"checkpoint-{steps:08d}.safetensors"))

    imported = {k: v for k, v in load_file(checkpoint).items() if k.startswith("model.")}
    stored = {v.dtype for v in imported.values()}
    zero = train("lr0", 1, "train.lr=0")
    for name, tensor in imported.items():
        got = zero[name]
        if got.dtype != torch.float32 or not torch.equal(got, tensor.float()):
            pytest.fail(f"{name}: {got.dtype} after an update at lr 0, imported {tensor.dtype}")
    moved = train("lr", 3)
    finer = sum(int((t != t.to(imported[n].dtype).float()).sum()) for n, t in moved.items()
                if n in imported)
    print(f"fine-tuned from {stored}: F32 parameters equal to the import at lr 0; after 3 "
          f"updates {finer} values finer than the imported dtype")
    if finer == 0:
        pytest.fail("after 3 updates every value is still one of the imported dtype")


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def import_hf(binaries, model_dir, out):
    """import-hf with a time and memory limit: (exit status, last stderr line); a timeout is
    status None."""
    try:
        r = subprocess.run([binaries.ckpt, "import-hf", model_dir, "-o", out],
                           capture_output=True, text=True, timeout=TIMEOUT,
                           preexec_fn=_limited)
    except subprocess.TimeoutExpired:
        return None, f"no answer in {TIMEOUT} s"
    lines = r.stderr.strip().splitlines()
    return r.returncode, lines[-1] if lines else ""


def split_shards(model_dir):
    """model.safetensors as two shards and an index; the shards' tensors by file."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(os.path.join(model_dir, "model.safetensors"))
    os.remove(os.path.join(model_dir, "model.safetensors"))
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[:len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    files = {}
    for shard, keys in shards.items():
        files[shard] = {k: tensors[k] for k in keys}
        save_file(files[shard], os.path.join(model_dir, shard), metadata={"format": "pt"})
    weight_map = {k: shard for shard, keys in shards.items() for k in keys}
    return files, weight_map


def dir_refusals(binaries, model_dir, work):
    """What must be refused naming the file and key, before the weights are read and without
    waiting on a file that is not a regular file."""
    from safetensors.torch import save_file

    def case(name, change, expected):
        bad = os.path.join(work, f"bad-{name}")
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(model_dir, bad)
        change(bad)
        out = bad + ".safetensors"
        status, message = import_hf(binaries, bad, out)
        print(f"{name}: exit {status}: {message}")
        if status != 1 or expected not in message or os.path.exists(out):
            pytest.fail(f"{name}: expected exit 1, a message with {expected!r}, and no {out}")

    def config(**edits):
        return lambda d: edit_json(os.path.join(d, "config.json"), lambda c: {**c, **edits})

    def fifo(name):
        def change(d):
            os.remove(os.path.join(d, name))
            os.mkfifo(os.path.join(d, name))
        return change

    # Sizes outside the schema's bounds: one error naming the key, before any name is built.
    case("d_model", config(d_model=0), "config.json: d_model = 0: expected an integer")
    case("layers", config(encoder_layers=2000000000),
         "config.json: encoder_layers = 2000000000: expected an integer")
    case("dropout", config(dropout=1.0), "config.json: dropout = 1: expected a number")
    case("positions", config(max_position_embeddings=4),
         "config.json: max_position_embeddings = 4: expected an integer")
    # Not regular files: refused, never waited on.
    case("fifo-vocab", fifo("vocab.json"), "vocab.json: not a regular file (a FIFO)")
    case("fifo-weights", fifo("model.safetensors"),
         "model.safetensors: not a regular file (a FIFO)")

    # The tokenizer before the weights: a foreign tokenizer is refused with the weights a FIFO.
    def foreign_tokenizer(d):
        fifo("model.safetensors")(d)
        edit_json(os.path.join(d, "tokenizer_config.json"),
                  lambda c: {**c, "tokenizer_class": "BertTokenizer"})
    case("tokenizer-first", foreign_tokenizer, "\"tokenizer_class\" is \"BertTokenizer\"")

    # Shards that disagree with their index.
    def shards(edit):
        def change(d):
            files, weight_map = split_shards(d)
            edit(d, files, weight_map)
            with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
                json.dump({"metadata": {}, "weight_map": weight_map}, f)
        return change

    def twice(d, files, weight_map):
        first, second = sorted(files)
        name = sorted(files[first])[0]
        save_file({**files[second], name: files[first][name]}, os.path.join(d, second))

    def unmapped_shard(d, files, weight_map):
        first, second = sorted(files)
        name = sorted(files[first])[0]
        save_file({k: v for k, v in files[first].items() if k != name}, os.path.join(d, first))
        save_file({**files[second], name: files[first][name]}, os.path.join(d, second))

    def missing(d, files, weight_map):
        weight_map["model.encoder.layers.0.fc1.extra"] = sorted(files)[0]

    case("shard-twice", shards(twice), "is in two shards")
    case("shard-elsewhere", shards(unmapped_shard), "which key \"weight_map\" puts in")
    case("shard-missing", shards(missing), "model.encoder.layers.0.fc1.extra in")
    # A sharded directory that agrees with its index imports.
    good = os.path.join(work, "sharded")
    shutil.rmtree(good, ignore_errors=True)
    shutil.copytree(model_dir, good)
    shards(lambda *_: None)(good)
    status, message = import_hf(binaries, good, good + ".safetensors")
    if status != 0:
        pytest.fail(f"a consistent sharded directory: exit {status}: {message}")
    print("sizes out of bounds, FIFOs, a foreign tokenizer over FIFO weights, and shards "
          "that disagree with their index are refused; agreeing shards import")
