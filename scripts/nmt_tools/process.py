"""Running the project's binaries and scripts from Python."""
import os
import subprocess
from collections.abc import Sequence
from typing import Any


class CommandFailed(RuntimeError):
    """A command that had to succeed exited non-zero; the message holds its output."""

    def __init__(self, cmd: Sequence[Any], result: subprocess.CompletedProcess):
        self.result = result
        super().__init__(f"{' '.join(os.fspath(c) for c in cmd)} failed ({result.returncode}):\n"
                         f"{result.stdout or ''}{result.stderr or ''}")


def run(cmd: Sequence[Any], **kwargs: Any) -> subprocess.CompletedProcess:
    """Runs `cmd` (strings or paths) capturing its output as text; raises CommandFailed when it
    exits non-zero."""
    result = subprocess.run([os.fspath(c) for c in cmd], capture_output=True, text=True,
                            **kwargs)
    if result.returncode != 0:
        raise CommandFailed(cmd, result)
    return result
