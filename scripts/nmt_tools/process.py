"""Running the project's binaries and scripts from Python."""
import os
import signal
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


class Interrupted(RuntimeError):
    """A signal (SIGINT, SIGTERM) stopped a command of run_forwarding_signals."""

    def __init__(self, signal_number: int):
        self.signal_number = signal_number
        super().__init__(f"stopped by {signal.Signals(signal_number).name}")


def run_forwarding_signals(cmd: Sequence[Any], **kwargs: Any) -> int:
    """Runs `cmd` with this process's output streams and returns its exit status; a SIGINT or
    SIGTERM that reaches this process is passed on to it, it is waited for, and Interrupted is
    raised then.

    Why wait: nmt-train answers a signal by finishing its update and writing a checkpoint, and
    nmt-translate by keeping its finished shards, which is what a resumed pipeline needs;
    subprocess.run would kill the child 0.25 s after Ctrl-C, in the middle of that."""
    received = []
    process = subprocess.Popen([os.fspath(c) for c in cmd], **kwargs)

    def forward(signal_number, _frame):
        received.append(signal_number)
        if process.poll() is None:
            process.send_signal(signal_number)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        status = process.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if received:
        raise Interrupted(received[0])
    return status
