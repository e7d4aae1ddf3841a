#!/usr/bin/env python3
"""Checks the shape of the C++ sources in src/ and apps/, one rule at a time.

Rules (each a CTest test, source-shape.<rule>):

  no_include_points_up       every #include "folder/..." in src/FOLDER/ and apps/ names a
                             folder on a lower floor than the including one (FLOORS, the order
                             of docs/development.md). Two folders of one floor include neither
                             of each other: that is how a circle between folders starts.
  no_include_circle          no header reaches itself through its includes (within a folder,
                             where the floors allow includes both ways).
  no_function_over_80_lines  no function is longer than 80 lines (lizard's `length`, from its
                             first line to its last), except the declarative tables of
                             LONG_TABLES, each with its reason.

  scripts/check-source-shape.py [--root DIR] RULE...

Exit 0 when every rule holds; 1 with one line per offence, each naming file:line; 77 (CTest's
skip) when no_function_over_80_lines is asked for and lizard is not installed (scripts/
requirements.txt pins it, scripts/setup.sh installs it into the venv). The include rules need
the standard library only.
"""
from __future__ import annotations

import argparse
import dataclasses
import pathlib
import re
import sys
from typing import Callable, Iterable, Iterator

# The folders, bottom up; a folder includes only folders of lower floors.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("util",),
    ("data", "dist", "eval", "checkpoint"),
    ("model", "amp"),
    ("decode",),
    ("train",),
    ("config",),
    ("hf",),
    ("job",),
    ("apps",),
)
FLOOR_OF: dict[str, int] = {
    folder: floor for floor, folders in enumerate(FLOORS) for folder in folders
}
ORDER_TEXT = " < ".join(
    folders[0] if len(folders) == 1 else "{" + ", ".join(folders) + "}" for folders in FLOORS
)

MAX_FUNCTION_LINES = 80
# Functions longer than MAX_FUNCTION_LINES that are tables of declarations, not logic:
# (path, lizard's qualified name) -> why. Their length is the number of rows they declare.
LONG_TABLES: dict[tuple[str, str], str] = {
    ("src/config/run_config.cpp", "nmt::config::bind"):
        "the schema binding table: one line per config key, the one list of keys",
}

SOURCE_SUFFIXES = (".h", ".cpp")
NO_FLOOR = "has no floor: add it to FLOORS here and to docs/development.md's order"
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SKIP = 77


@dataclasses.dataclass(frozen=True)
class Offence:
    path: str  # relative to the root
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


@dataclasses.dataclass(frozen=True)
class Include:
    path: str  # the including file, relative to the root
    line: int
    target: str  # as written: "data/vocab.h"


def source_files(root: pathlib.Path) -> list[pathlib.Path]:
    """Every .h and .cpp of src/ and apps/, sorted."""
    found: list[pathlib.Path] = []
    for top in ("src", "apps"):
        if (root / top).is_dir():
            found += [p for p in (root / top).rglob("*")
                      if p.suffix in SOURCE_SUFFIXES and p.is_file()]
    return sorted(found)


def folder_of(root: pathlib.Path, file: pathlib.Path) -> str | None:
    """apps, or the folder of src/ a file lives in; None for a file directly in src/."""
    parts = file.relative_to(root).parts
    if parts[0] == "apps":
        return "apps"
    return parts[1] if len(parts) > 2 else None


def includes_of(root: pathlib.Path, file: pathlib.Path) -> Iterator[Include]:
    """The quoted includes of a file, with their line numbers."""
    relative = file.relative_to(root).as_posix()
    text = file.read_text(encoding="utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), 1):
        match = INCLUDE.match(line)
        if match:
            yield Include(relative, number, match.group(1))


def src_folders(root: pathlib.Path) -> set[str]:
    """The folders of src/ (an include of one of them is ours, not a library's)."""
    src = root / "src"
    return {p.name for p in src.iterdir() if p.is_dir()} if src.is_dir() else set()


def check_includes_point_down(root: pathlib.Path) -> list[Offence]:
    offences: list[Offence] = []
    ours = src_folders(root) | set(FLOOR_OF)
    unplaced: set[str] = set()
    for file in source_files(root):
        folder = folder_of(root, file)
        if folder is None:
            continue
        relative = file.relative_to(root).as_posix()
        if folder not in FLOOR_OF:
            if folder not in unplaced:
                unplaced.add(folder)
                offences.append(Offence(relative, 1, f"folder {folder}/ {NO_FLOOR}"))
            continue
        for include in includes_of(root, file):
            target = include.target.split("/")[0] if "/" in include.target else None
            if target is None or target == folder or target not in ours:
                continue
            offences += include_offence(include, folder, target)
    return offences


def include_offence(include: Include, folder: str, target: str) -> list[Offence]:
    """Why `folder` may not include `target` (nothing when it points down)."""
    if target not in FLOOR_OF:
        return [Offence(include.path, include.line,
                        f"includes {include.target}: folder {target}/ {NO_FLOOR}")]
    mine, theirs = FLOOR_OF[folder], FLOOR_OF[target]
    if theirs < mine:
        return []
    if theirs == mine:
        return [Offence(include.path, include.line,
                        f"includes {include.target}: {target}/ is on {folder}/'s floor, and "
                        f"folders of one floor include neither of each other ({ORDER_TEXT})")]
    return [Offence(include.path, include.line,
                    f"includes {include.target}: {target}/ is above {folder}/; includes point "
                    f"down the floors: {ORDER_TEXT}")]


def check_no_include_circle(root: pathlib.Path) -> list[Offence]:
    """Each circle of includes between our files, once, at the include that closes it."""
    files = {f.relative_to(root).as_posix(): f for f in source_files(root)}
    edges: dict[str, list[Include]] = {}
    for relative, file in files.items():
        resolved = []
        for include in includes_of(root, file):
            target = f"src/{include.target}"
            if target not in files:  # a header beside the file, written without its folder
                target = (pathlib.PurePosixPath(relative).parent / include.target).as_posix()
            if target in files:
                resolved.append(dataclasses.replace(include, target=target))
        edges[relative] = resolved
    offences: list[Offence] = []
    seen_circles: set[frozenset[str]] = set()
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        path.append(node)
        for include in edges[node]:
            if include.target in path:
                circle = path[path.index(include.target):]
                if frozenset(circle) not in seen_circles:
                    seen_circles.add(frozenset(circle))
                    chain = " -> ".join(circle + [include.target])
                    offences.append(Offence(include.path, include.line, f"include circle: {chain}"))
            elif include.target not in done:
                visit(include.target, path)
        path.pop()
        done.add(node)

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(files) + 100))
    for node in edges:
        if node not in done:
            visit(node, [])
    return offences


def check_function_lengths(root: pathlib.Path) -> list[Offence]:
    import lizard  # imported here: the include rules run without it

    offences: list[Offence] = []
    long_tables_seen: set[tuple[str, str]] = set()
    for file in source_files(root):
        relative = file.relative_to(root).as_posix()
        for function in lizard.analyze_file(str(file)).function_list:
            if function.length <= MAX_FUNCTION_LINES:
                continue
            key = (relative, function.name)
            if key in LONG_TABLES:
                long_tables_seen.add(key)
                continue
            offences.append(Offence(relative, function.start_line,
                                    f"{function.name} is {function.length} lines (at most "
                                    f"{MAX_FUNCTION_LINES}): split it into named steps, or, if it "
                                    f"is a table of declarations, add it to LONG_TABLES with why"))
    # An entry whose function shrank or moved away is removed, so the list stays the exceptions.
    for (relative, name) in sorted(set(LONG_TABLES) - long_tables_seen):
        if (root / relative).is_file():
            offences.append(Offence(relative, 1,
                                    f"LONG_TABLES lists {name}, which is not here or not over "
                                    f"{MAX_FUNCTION_LINES} lines: remove the entry"))
    return offences


RULES: dict[str, Callable[[pathlib.Path], list[Offence]]] = {
    "no_include_points_up": check_includes_point_down,
    "no_include_circle": check_no_include_circle,
    "no_function_over_80_lines": check_function_lengths,
}


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=pathlib.Path,
                        default=pathlib.Path(__file__).resolve().parent.parent,
                        help="the checkout to check (default: this script's)")
    parser.add_argument("rules", nargs="+", choices=sorted(RULES), metavar="RULE",
                        help=f"one or more of: {', '.join(RULES)}")
    args = parser.parse_args(None if argv is None else list(argv))
    root: pathlib.Path = args.root.resolve()
    if not (root / "src").is_dir():
        print(f"check-source-shape: error: {root} has no src/ folder", file=sys.stderr)
        return 1
    if "no_function_over_80_lines" in args.rules:
        try:
            import lizard  # noqa: F401
        except ImportError:
            print(f"SKIPPED: lizard is not installed for {sys.executable} "
                  f"(scripts/requirements.txt pins it; scripts/setup.sh installs it)")
            return SKIP
    failed = False
    files = len(source_files(root))
    for rule in args.rules:
        offences = RULES[rule](root)
        for offence in offences:
            print(offence)
        verdict = f"{len(offences)} offence(s)" if offences else "holds"
        print(f"{rule}: {verdict} ({files} files)")
        failed = failed or bool(offences)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
