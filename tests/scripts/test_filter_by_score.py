"""scripts/filter-by-score.py on synthetic files (no binaries, a second): the best X% and a
threshold, forward only and by dual conditional cross-entropy (Junczys-Dowmunt 2018), blank
pairs dropped, ties at the threshold kept in input order up to the quota, files of unequal
lengths refused, and the report's counts.

    pytest tests/scripts/test_filter_by_score.py
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "filter-by-score.py"


def write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def score_lines(means: list[float]) -> list[str]:
    return [f"{m * 4:.6f}\t{m:.6f}\t4" for m in means]


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args, "--out", str(tmp_path / "kept"),
                           "--report", str(tmp_path / "report.json")],
                          capture_output=True, text=True)


@pytest.fixture
def corpus(tmp_path: Path) -> dict:
    src = [f"s{i}" for i in range(8)]
    tgt = [f"t{i}" for i in range(8)]
    src[5] = ""  # a blank side: always dropped
    fwd = [-1.0, -3.0, -0.5, -2.0, -2.0, -0.1, -4.0, -2.0]
    bwd = [-1.0, -0.5, -0.5, -2.5, -1.5, -0.1, -4.0, -2.0]
    return {"src": write(tmp_path / "c.src", src), "tgt": write(tmp_path / "c.tgt", tgt),
            "fwd": write(tmp_path / "fwd", score_lines(fwd)),
            "bwd": write(tmp_path / "bwd", score_lines(bwd)), "dir": tmp_path}


def kept(corpus: dict) -> tuple[list[str], dict]:
    d = corpus["dir"]
    return ((d / "kept.src").read_text().split(), json.loads((d / "report.json").read_text()))


def test_keep_best_forward(corpus):
    r = run(corpus["dir"], "--src", corpus["src"], "--tgt", corpus["tgt"],
            "--scores", corpus["fwd"], "--keep-best", "50")
    assert r.returncode == 0, r.stderr
    src, report = kept(corpus)
    # 7 usable pairs, ceil(3.5) = 4 kept: costs 0.5, 1, then two of the three at 2 (input order).
    assert src == ["s0", "s2", "s3", "s4"]
    assert (corpus["dir"] / "kept.tgt").read_text().split() == ["t0", "t2", "t3", "t4"]
    assert report["pairs"] == 8 and report["kept"] == 4 and report["dropped"] == 4
    assert report["dropped_unusable"] == 1
    assert report["cost_threshold"] == 2.0 and report["score_threshold"] == -2.0
    assert report["scoring"] == "forward" and report["mode"] == "keep_best"


def test_threshold_dual_conditional_cross_entropy(corpus):
    r = run(corpus["dir"], "--src", corpus["src"], "--tgt", corpus["tgt"], "--scores",
            corpus["fwd"], "--backward-scores", corpus["bwd"], "--threshold", "-2.3")
    assert r.returncode == 0, r.stderr
    src, report = kept(corpus)
    # cost = |Hf - Hb| + (Hf + Hb) / 2: s0 1.0, s1 4.25, s2 0.5, s3 2.75, s4 2.25, s6 4.0, s7 2.0
    assert src == ["s0", "s2", "s4", "s7"]
    assert report["scoring"] == "dual_conditional_cross_entropy"
    assert report["kept"] == 4 and report["score_threshold"] == -2.3


def test_unequal_files_are_refused(corpus):
    short = write(corpus["dir"] / "short", score_lines([-1.0] * 7))
    r = run(corpus["dir"], "--src", corpus["src"], "--tgt", corpus["tgt"], "--scores", short,
            "--threshold", "-1")
    assert r.returncode != 0
    assert "short ended at line 7" in r.stderr and "as many lines" in r.stderr
