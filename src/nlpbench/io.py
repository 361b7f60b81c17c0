"""Atomic file output: a killed run never leaves a half-written file behind.

Files get the mode an ordinary `open(path, "w")` would give them (0666 less the umask), and a failure to write
one (read-only directory, full disk) raises OutputError naming the output, not the hidden temporary file.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
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


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; move it onto `path` only if the block succeeds."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
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
