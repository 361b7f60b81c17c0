"""Atomic file output: a killed run never leaves a half-written file behind.

Files get the mode an ordinary `open(path, "w")` would give them (0666 less the umask), and a failure to write
one (read-only directory, full disk) raises OutputError naming the output, not the hidden temporary file.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


class OutputError(OSError):
    """An output file could not be written (the message names the file and the reason)."""

    def __init__(self, path: Path, cause: OSError | str):
        reason = cause if isinstance(cause, str) else cause.strerror or cause
        super().__init__(f"cannot write {path}: {reason}")
        self.path, self.errno = path, getattr(cause, "errno", None)


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


def inside(root: str | os.PathLike, path: str | os.PathLike) -> Path:
    """`path`, once it is known to stay inside `root` (the project, or the --results/--runs directory given) when
    '..' and symbolic links are resolved; else an OutputError. Every output path built from a name in a
    configuration passes through here before anything is written."""
    root, path = Path(root), Path(path)
    real_root, real = root.resolve(), path.resolve()
    if real != real_root and real_root not in real.parents:
        raise OutputError(path, f"it would lie outside {root}/ ({real}); a name in params.yaml must not lead "
                                "out of the directory it is written to")
    return path


STAGING_PREFIX = ".staged-"


@contextmanager
def staged(root: str | os.PathLike) -> Iterator[Path]:
    """A set of files that lands together: the block writes them into a fresh hidden directory inside `root`,
    under the paths they will have relative to `root`; once the block has written every one of them, each is
    moved onto its place, one rename after another. A failure while writing (a full disk, say) leaves every file
    of `root` as it was; the staging directory is removed either way.

    What this guarantees: no file of the set lands unless all of them were written. The renames are each atomic
    but not atomic together: a process killed between two of them (a few microseconds) leaves the earlier ones
    replaced. A staging directory left by a killed process is removed by the next staged write under `root`."""
    root = Path(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
        _remove_dead_staging(root)
        stage = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=root))
    except OSError as e:
        raise OutputError(root, e) from e
    try:
        yield stage
        # the files in the order they were written, the JSON files (summaries, sidecars that list the others) last
        files = sorted((p for p in stage.rglob("*") if p.is_file()),
                       key=lambda p: (p.suffix == ".json", p.stat().st_mtime_ns))
        for path in files:
            final = root / path.relative_to(stage)
            try:
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, final)
            except OSError as e:
                raise OutputError(final, e) from e
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _remove_dead_staging(root: Path) -> None:
    """Remove the staging directories under `root` whose process no longer runs (killed mid-build)."""
    for stage in root.glob(f"{STAGING_PREFIX}*"):
        pid = stage.name[len(STAGING_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(stage, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:                     # another user's process
        return True
    return True


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)
