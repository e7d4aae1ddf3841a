"""What the Python tests that train tiny models share (as tests/e2e/train_support.h for the
C++ ones): the shipped corpus sliced into plain files."""
from pathlib import Path

from nmt_tools.paths import DATA
from nmt_tools.text import first_lines


def train_slice(work: Path, pairs: int) -> list[str]:
    """Writes the first `pairs` shipped training pairs (data/ddtp.en-de.train.*.gz) into
    work/train-slice.{en,de}; returns the --set flags that train on them."""
    flags = []
    for side, key in (("en", "src"), ("de", "tgt")):
        out = first_lines(DATA / f"ddtp.en-de.train.{side}.gz", pairs,
                          Path(work) / f"train-slice.{side}")
        flags += ["--set", f"data.train_{key}={out}"]
    return flags
