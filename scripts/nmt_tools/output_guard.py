"""What a script that writes an output directory (and replaces it with --force) may touch: the
rules of src/util/output_guard.h, written again for the scripts, which run without our binaries.
Used by scripts/export-ctranslate2.py.

  path_within            `inner` is `outer` or lies inside it, by real path (links resolved)
  check_output_apart     the output is, holds or lies inside what the command reads: refused
  check_replaceable_dir  an existing output only with force, and only when it is an empty
                         directory or one that holds the writer's marker file (a link, a file
                         or any other directory is refused)
"""
import os
from typing import Union

PathLike = Union[str, os.PathLike]


class OutputError(Exception):
    """An output the command may not write; the message names it and says what to do."""


def path_within(inner: PathLike, outer: PathLike) -> bool:
    """True when `inner` is `outer` or lies inside it, by real path (links resolved)."""
    inner, outer = os.path.realpath(inner), os.path.realpath(outer)
    return inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep)


def check_output_apart(output: PathLike, path: PathLike, what: str) -> None:
    """Raises OutputError when `output` is `path`, holds it or lies inside it (real paths):
    writing the output would overwrite, and replacing it delete, what the command reads.
    `what` says what `path` is in the message ("the checkpoint")."""
    how = ("is" if os.path.realpath(output) == os.path.realpath(path) else
           "holds" if path_within(path, output) else
           "lies inside" if path_within(output, path) else None)
    if how:
        real = os.path.realpath(path)
        shown = path if real == os.path.abspath(path) else f"{path} ({real})"
        raise OutputError(f"{output}: the output {how} {what} {shown}, which the command reads; "
                          "give a folder apart from it")


def check_replaceable_dir(outdir: PathLike, marker: str, writer: str, force: bool) -> None:
    """Raises OutputError unless `outdir` may be written: it does not exist; or `force` is set
    and it is a directory (not a link) that is empty or holds the file `marker` at its top.
    `writer` names who writes the marker in the message."""
    if not os.path.lexists(outdir):
        return
    if not force:
        raise OutputError(f"{outdir} exists; use --force to replace it")
    if os.path.islink(outdir) or not os.path.isdir(outdir):
        kind = " (a symbolic link)" if os.path.islink(outdir) else ""
        raise OutputError(f"{outdir} exists and is not a directory{kind}: --force replaces only "
                          f"an empty directory or one that {writer} wrote; give another output "
                          "directory")
    marker_file = os.path.join(outdir, marker)
    if os.listdir(outdir) and not (os.path.isfile(marker_file)
                                   and not os.path.islink(marker_file)):
        raise OutputError(f"{outdir} is not empty and was not written by {writer} (no {marker} "
                          f"in it): --force replaces only an empty directory or one that {writer} "
                          "wrote; give another output directory, or remove this one yourself")
