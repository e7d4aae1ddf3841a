#!/usr/bin/env python3
"""scripts/check-source-shape.py can fail: on a tiny tree it writes with one offence of each
rule (an include up the floors, one between folders of a floor, a folder without a floor, two
headers that include each other, a function of 81 lines) it exits 1 naming each file:line and
nothing else; the same tree without them passes, and so does a function of exactly 80 lines.
The function-length case is skipped without lizard.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def function_of(name: str, lines: int) -> str:
    """A C++ function of exactly `lines` lines, first to last."""
    body = [f"  x += {i};" for i in range(lines - 3)]
    return "\n".join([f"int {name}(int x) {{", *body, "  return x;", "}"]) + "\n"


# The good tree: includes that point down, within a folder, and of libraries; short functions.
GOOD: dict[str, str] = {
    "src/util/log.h": "#pragma once\n#include <string>\n",
    "src/data/vocab.h": '#pragma once\n#include "util/log.h"\n#include "data/corpus.h"\n',
    "src/data/corpus.h": '#pragma once\n#include "util/log.h"\n',
    "src/model/layers.h":
        '#pragma once\n#include "checkpoint/tensor_layout.h"\n#include "CLI/CLI.hpp"\n',
    "src/checkpoint/tensor_layout.h": "#pragma once\n",
    "src/train/loop.cpp":
        '#include "train/loop.h"\n#include "model/layers.h"\n' + function_of("eighty", 80),
    "src/train/loop.h": '#pragma once\n#include "data/vocab.h"\n',
    "apps/main.cpp": '#include "train/loop.h"\n#include "util/log.h"\n',
}
# What each rule must report on the bad tree: (file:line, words of the message).
BAD: dict[str, str] = {
    "src/data/reader.h": '#pragma once\n#include "util/log.h"\n#include "train/loop.h"\n',
    "src/dist/env.h": '#pragma once\n\n#include "eval/bleu.h"\n',
    "src/eval/bleu.h": "#pragma once\n",
    "src/extra/thing.h": '#pragma once\n#include "util/log.h"\n',
    "src/decode/a.h": '#pragma once\n#include "decode/b.h"\n',
    "src/decode/b.h": '#pragma once\n#include "util/log.h"\n#include "decode/a.h"\n',
    "src/decode/search.cpp": "// a comment\n" + function_of("eighty_one", 81),
}
EXPECTED: dict[str, list[tuple[str, str]]] = {
    "no_include_points_up": [
        ("src/data/reader.h:3:", "train/ is above data/"),
        ("src/dist/env.h:3:", "eval/ is on dist/'s floor"),
        ("src/extra/thing.h:1:", "folder extra/ has no floor"),
    ],
    "no_include_circle": [
        ("src/decode/b.h:3:", "src/decode/a.h -> src/decode/b.h -> src/decode/a.h"),
    ],
    "no_function_over_80_lines": [("src/decode/search.cpp:2:", "eighty_one is 81 lines")],
}


def write_tree(root: pathlib.Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def run_check(check: pathlib.Path, root: pathlib.Path,
              rule: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(check), "--root", str(root), rule],
                          capture_output=True, text=True, check=False)


def offence_lines(output: str) -> list[str]:
    """The lines that report an offence (file:line: ...), not the rule's summary line."""
    return [line for line in output.splitlines() if line.startswith(("src/", "apps/"))]


def check_rule(check: pathlib.Path, good: pathlib.Path, bad: pathlib.Path, rule: str) -> list[str]:
    """The failures of one rule's cases, as sentences."""
    failures: list[str] = []
    passed = run_check(check, good, rule)
    if passed.returncode != 0:
        failures.append(f"{rule}: the good tree fails (exit {passed.returncode}):\n"
                        f"{passed.stdout}{passed.stderr}")
    failed = run_check(check, bad, rule)
    if failed.returncode != 1:
        failures.append(f"{rule}: the bad tree exits {failed.returncode}, not 1:\n"
                        f"{failed.stdout}{failed.stderr}")
    reported = offence_lines(failed.stdout)
    for where, words in EXPECTED[rule]:
        if not any(line.startswith(where) and words in line for line in reported):
            failures.append(f"{rule}: no offence '{where} ... {words}' in:\n{failed.stdout}")
    if len(reported) != len(EXPECTED[rule]):
        failures.append(f"{rule}: {len(reported)} offences reported, "
                        f"{len(EXPECTED[rule])} expected:\n{failed.stdout}")
    return failures


CHECK = ROOT / "scripts" / "check-source-shape.py"


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, pathlib.Path]:
    """The good tree and the bad one (the good one plus one offence of each rule)."""
    temp = tmp_path_factory.mktemp("source-shape")
    good, bad = temp / "good", temp / "bad"
    write_tree(good, GOOD)
    write_tree(bad, {**GOOD, **BAD})
    return good, bad


@pytest.mark.parametrize("rule", list(EXPECTED))
def test_a_tree_with_each_offence_fails(trees: tuple[pathlib.Path, pathlib.Path],
                                        rule: str) -> None:
    if rule == "no_function_over_80_lines":  # the include rules need the standard library alone
        pytest.importorskip("lizard", reason="lizard is not installed (scripts/setup.sh installs it)")
    good, bad = trees
    failures = check_rule(CHECK, good, bad, rule)
    assert not failures, "\n".join(failures)
