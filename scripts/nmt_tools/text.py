"""Text files as the project writes them: UTF-8, one line per entry, `\n` endings."""
import gzip
import itertools
import json
import os
from pathlib import Path
from typing import Any, Iterable, Optional


def read_lines(path: Path, count: Optional[int] = None) -> list[str]:
    """The lines of `path` (gzip-compressed when it ends in .gz) without their newline, the
    first `count` of them when given. A final line without a newline counts as a line."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", newline="\n") as f:
        return [line[:-1] if line.endswith("\n") else line
                for line in itertools.islice(f, count)]


def write_lines(path: Path, lines: Iterable[str]) -> Path:
    """Writes each line followed by a newline; returns `path`."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(line + "\n" for line in lines)
    return Path(path)


def first_lines(source: Path, count: int, out: Path) -> Path:
    """Copies the first `count` lines of `source` (.gz read too) to `out`; returns `out`."""
    return write_lines(out, read_lines(source, count))


def write_json(path: Path, value: Any) -> None:
    """`value` as indented JSON, non-ASCII characters kept as they are."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=1)


def write_json_atomic(path: Path, value: Any) -> None:
    """`value` as indented JSON in `path`, which appears only complete: written to a temporary
    file beside it, flushed to disk, then renamed over it (a kill leaves the old file or none,
    never half of one; resumable scripts take the file's presence as "this step finished")."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
