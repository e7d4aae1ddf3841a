"""SentencePiece models trained with the sentencepiece package, for tests and benchmarks that
build tokenizer directories of their own (no hub)."""
from pathlib import Path
from typing import Sequence

from .text import write_lines


def train_spm(lines: Sequence[str], prefix: Path, model_type: str, vocab_size: int) -> Path:
    """Trains `<prefix>.model` on the non-blank `lines` (written to `<prefix>.txt`) with
    SentencePiece's default specials, all characters covered, one thread; returns its path."""
    import sentencepiece

    text = write_lines(Path(f"{prefix}.txt"), [line for line in lines if line.strip()])
    sentencepiece.SentencePieceTrainer.train(input=str(text), model_prefix=str(prefix),
                                             vocab_size=vocab_size, model_type=model_type,
                                             character_coverage=1.0, num_threads=1,
                                             minloglevel=2)
    return Path(f"{prefix}.model")


def spm_pieces(model: Path) -> list[str]:
    """The ordinary pieces of a model (no unknown, no control symbols), in id order."""
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=str(model))
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size())
            if not (sp.is_unknown(i) or sp.is_control(i))]
