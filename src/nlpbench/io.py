"""Atomic file output: a killed run never leaves a half-written file behind.

Files get the mode an ordinary `open(path, "w")` would give them (0666 less the umask), and a failure to write
one (read-only directory, full disk) raises OutputError naming the output, not the hidden temporary file.

A write goes to a hidden temporary file beside its output, `.<name>.<host>-<pid>-<random>.tmp` (host: a short tag
of the machine's name; pid: the writing process), renamed onto the output when complete. A process killed in the
middle cannot remove its temporary file, so each write first removes the stale ones in its directory: those of
this machine whose process no longer runs, and those of another machine (a directory shared over the network)
or of an older nlpbench (`.<name>.<random>.tmp`, same output only) untouched for STALE_AFTER seconds. A
temporary file that another process is still writing is never one of them: on this machine its process runs,
and each write of nlpbench's fills its temporary file as it goes, in far less than STALE_AFTER.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import os
import re
import socket
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


class OutputError(OSError):
    """An output file could not be written (the message names the file and the reason)."""

    def __init__(self, path: Path, cause: OSError):
        super().__init__(f"cannot write {path}: {cause.strerror or cause}")
        self.path, self.errno = path, cause.errno


# errors of writing itself, whatever file object raised them
_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


STALE_AFTER = 3600      # seconds untouched after which a temporary file whose writer cannot be checked is stale

# .<output name>.<host tag>-<pid>-<mkstemp's 8 random characters>.tmp
_TEMP_NAME = re.compile(r"\..+\.(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]+)-[a-z0-9_]{8}\.tmp")


@functools.cache
def _host_tag() -> str:
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def _running(pid: int) -> bool:
    """Whether process `pid` runs on this machine."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):      # no such process (OverflowError: no such pid at all)
        return False
    except PermissionError:        # another user's process
        return True
    return True


def remove_stale_temp_files(directory: Path, name: str) -> None:
    """Remove the temporary files of killed writes from `directory` (see the module's text); `name`: the output
    being written, whose temporary files from an older nlpbench are removed too."""
    legacy = re.compile(rf"\.{re.escape(name)}\.[a-z0-9_]{{8}}\.tmp")
    host, now = _host_tag(), time.time()
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        ours = _TEMP_NAME.fullmatch(entry.name)
        if ours is None and legacy.fullmatch(entry.name) is None:
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            if ours is not None and ours["host"] == host:
                stale = not _running(int(ours["pid"]))
            else:
                stale = now - entry.stat(follow_symlinks=False).st_mtime > STALE_AFTER
            if stale:
                os.unlink(entry.path)
        except OSError:            # removed meanwhile by another writer, or not ours to remove
            continue


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; move it onto `path` only if the block succeeds."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temp_files(path.parent, path.name)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{_host_tag()}-{os.getpid()}-", suffix=".tmp",
                                   dir=path.parent)
        try:
            os.fchmod(fd, 0o666 & ~current_umask())       # mkstemp makes it 0600
        finally:
            os.close(fd)
    except OSError as e:
        raise OutputError(path, e) from e
    tmp_path = Path(tmp)
    try:
        try:
            yield tmp_path
        except OSError as e:
            if not isinstance(e, OutputError) and (
                    e.errno in _WRITE_ERRNOS or (e.filename is not None and Path(e.filename) == tmp_path)):
                raise OutputError(path, e) from e
            raise
        try:
            os.replace(tmp_path, path)
        except OSError as e:
            raise OutputError(path, e) from e
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)
