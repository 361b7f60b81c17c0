"""One trainer per training job.

`nlpbench train GROUP` holds an exclusive lock on logs/train/<group>.lock (lock_path: beside the job's clock and
Snakemake's benchmark file, in `nlpbench train --logs`) for as long as it trains. Snakemake never starts two of one
job, but a second `nlpbench train` of the same group, by hand or beside a pipeline, would train the same runs twice
and race on their checkpoints and clock: it stops at once instead, before it reads or writes anything of the job,
with one line naming the group and the pid (and machine) of the trainer that holds it.

The lock is fcntl.flock on the open file, which the kernel releases when the holder's process ends, however it
ends: a killed trainer leaves no lock behind, only the file, which the next trainer takes over. The file holds the
holder's pid and machine while it is held and is empty otherwise; it is never deleted (a trainer that deleted it
would let a third one lock a new file while a second still held the old one). On a file system that has no locks
(some cluster mounts) training goes on without the check, said in a warning.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import warnings
from pathlib import Path
from typing import Iterator

from nlpbench.runtime.io import OutputError


class GroupBeingTrained(Exception):
    """Another process holds the training group's lock (the message names the group and its pid)."""


def lock_path(logs: Path, job: str) -> Path:
    """The lock file of a training job: beside its clock and benchmark file."""
    return Path(logs) / f"{job}.lock"


@contextlib.contextmanager
def held(logs: Path, job: str) -> Iterator[Path]:
    """Hold `job`'s lock while the block runs; GroupBeingTrained at once where another process holds it."""
    path = lock_path(logs, job)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        raise OutputError(path, e) from e
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            locked = True
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").split()
            who = f"pid {holder[0]} on {holder[1]}" if len(holder) == 2 else "another process"
            raise GroupBeingTrained(f"training group {job} is being trained by {who} (it holds {path}); "
                                    "wait for it to end, or stop it") from None
        except OSError as e:        # a file system without locks (some cluster mounts): train as before
            warnings.warn(f"cannot lock {path} ({e.strerror}); training {job} without the check that no other "
                          "process trains it", stacklevel=3)
            locked = False
        if not locked:
            yield path
            return
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)            # releases the lock
