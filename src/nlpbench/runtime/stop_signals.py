"""The signals that end a command, as an exception, for the commands that must clean up on the way out.

`nlpbench verify`, `nlpbench end-to-end` and the GPU check (nlpbench.timing.gpu_check) run snakemake in a session of its own inside a scratch clone
(nlpbench.clone). A signal's default action ends the process at once, skipping every `finally`: snakemake and its
training jobs would go on in a clone that is never deleted. Inside `raised()`, the first SIGINT (Ctrl-C), SIGTERM
(kill, a scheduler) or SIGHUP (the terminal closed) raises Stopped instead, so that on the way out snakemake's
process group is stopped and the clone removed. Later ones are ignored until the block is left, so that a second
Ctrl-C, or the SIGTERM that follows a SIGHUP, cannot break that cleanup off midway (it is bounded: snakemake gets
nlpbench.clone.STOP_GRACE seconds, then SIGKILL). A signal the command was started ignoring (`nohup` ignores
SIGHUP) stays ignored. The command then says so in one line (report) and exits with 128 + the signal's number
(130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP), as a shell reports a process that a signal ended.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from typing import Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(BaseException):
    """A stop signal arrived (a BaseException, as KeyboardInterrupt is, so that no `except Exception` keeps it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


@contextlib.contextmanager
def raised() -> Iterator[None]:
    """Within the block (in the main thread), the first stop signal raises Stopped and later ones are ignored."""
    received: list[int] = []

    def stop(signum, frame) -> None:
        if not received:
            received.append(signum)
            raise Stopped(signum)

    previous = {}
    try:
        for sig in STOP_SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                previous[sig] = signal.signal(sig, stop)
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def report(command: str, stopped: Stopped) -> int:
    """Say on stderr, in one line, that `command` was stopped and what it cleaned up; its exit status."""
    with contextlib.suppress(OSError):        # SIGHUP: the terminal may be gone
        print(f"{command}: stopped by {stopped}; snakemake and its jobs were stopped and the scratch clone deleted",
              file=sys.stderr)
    return stopped.exit_status
