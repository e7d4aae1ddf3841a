"""Starting a script again with the Python that scripts/setup.sh made (the venv with PyYAML,
ctranslate2, sacrebleu, ...), for scripts that users may start with another python."""
import os
import sys
from pathlib import Path


def build_python(build_dir: Path) -> str | None:
    """NMT_PYTHON of the build's CMake cache (the venv's python), or None."""
    cache = Path(build_dir) / "CMakeCache.txt"
    if not cache.exists():
        return None
    for line in open(cache, encoding="utf-8"):
        if line.startswith("NMT_PYTHON:"):
            return line.split("=", 1)[1].strip() or None
    return None


def reexec_with_venv(build_dir: Path, prog: str, needs: str) -> None:
    """Runs the calling script again with the build's NMT_PYTHON, which has what this python
    lacks (`needs`, named in the error); exits with an error when there is none or it is this
    python already."""
    python = build_python(build_dir)
    if not python or os.path.realpath(python) == os.path.realpath(sys.executable):
        sys.exit(f"{prog}: error: needs {needs}; run scripts/setup.sh first "
                 f"(no NMT_PYTHON with it in {Path(build_dir) / 'CMakeCache.txt'})")
    script = os.path.abspath(sys.argv[0])
    os.execv(python, [python, script] + sys.argv[1:])
