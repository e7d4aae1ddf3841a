"""The checkout's folders, found from this file (scripts/nmt_tools/paths.py)."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
DATA = ROOT / "data"
CONFIGS = ROOT / "configs"
