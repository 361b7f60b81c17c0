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
import filecmp
import functools
import hashlib
import json
import os
import re
import socket
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


class OutputError(OSError):
    """An output file could not be written (the message names the file and the reason)."""

    def __init__(self, path: Path, cause: OSError | str):
        reason = cause if isinstance(cause, str) else cause.strerror or cause
        super().__init__(f"cannot write {path}: {reason}")
        self.path, self.cause, self.errno = path, cause, getattr(cause, "errno", None)

    def naming(self, path: Path) -> OutputError:
        """The same failure, naming `path` instead (the output a staged file was to become)."""
        return OutputError(path, self.cause)


class InputError(ValueError):
    """An input file (a run's metrics, a table's sidecar) is not what nlpbench wrote: the message names the file,
    and the line or key where that helps."""


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


def _writer_gone(host: str | None, pid: int | None, entry: os.DirEntry, now: float) -> bool:
    """Whether the writer of a temporary file or folder is known to be gone: a process of this machine that no
    longer runs, or (another machine's, or unnamed) one whose file was left untouched for STALE_AFTER."""
    if host == _host_tag() and pid is not None:
        return not _running(pid)
    return now - entry.stat(follow_symlinks=False).st_mtime > STALE_AFTER


def remove_stale_temp_files(directory: Path, name: str) -> None:
    """Remove the temporary files of killed writes from `directory` (see the module's text); `name`: the output
    being written, whose temporary files from an older nlpbench are removed too."""
    legacy = re.compile(rf"\.{re.escape(name)}\.[a-z0-9_]{{8}}\.tmp")
    now = time.time()
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
            if _writer_gone(ours and ours["host"], ours and int(ours["pid"]), entry, now):
                os.unlink(entry.path)
        except OSError:            # removed meanwhile by another writer, or not ours to remove
            continue


@contextmanager
def atomic_path(path: str | os.PathLike, keep_identical: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside `path`; move it onto `path` only if the block succeeds. `keep_identical`:
    where `path` already holds exactly the bytes written, leave it untouched (its modification time too, so that
    nothing downstream of it looks out of date) and discard the temporary file."""
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
        if keep_identical and same_bytes(tmp_path, path):
            return
        try:
            os.replace(tmp_path, path)
        except OSError as e:
            raise OutputError(path, e) from e
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def same_bytes(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether the files `a` and `b` both exist and hold the same bytes."""
    try:
        return Path(b).is_file() and filecmp.cmp(a, b, shallow=False)
    except OSError:
        return False


def inside(root: str | os.PathLike, path: str | os.PathLike) -> Path:
    """`path`, once it is known to stay inside `root` (the project, or the --results/--runs directory given) as
    written: below `root`, and without a '..' below it; else an OutputError. Every output path built from a name
    in a configuration passes through here before anything is written.

    The check reads the path's letters and follows no symbolic link: a configuration can write names but cannot
    make a link, so every link in the tree is the user's own (runs/ or data/ on a bigger disk, a run folder
    linked from elsewhere) and is written through, wherever it leads. What a name can do, climb with '..' or
    start afresh with '/', is refused; a '..' below the root is refused even where it would come back inside,
    since after a link it leads elsewhere."""
    root, path = Path(root), Path(path)
    below = _parts_below(root, path)
    rule = "a name in params.yaml must not lead out of the directory it is written to"
    if below is None or _parts_below(root, Path(os.path.normpath(path.absolute()))) is None:
        raise OutputError(path, f"it would lie outside {root}/ ({os.path.normpath(path.absolute())}); {rule}")
    if ".." in below:
        raise OutputError(path, f"it climbs with '..' below {root}/; {rule}")
    return path


def _parts_below(root: Path, path: Path) -> tuple[str, ...] | None:
    """The parts of `path` below `root`, both taken as absolute paths and compared as written (a root spelled
    with a '..' of its own, `--results ../elsewhere/results`, matches as spelled or once normalized; the path is
    never normalized); None when `path` is not below `root`."""
    full = path.absolute().parts
    for base in (root.absolute().parts, Path(os.path.normpath(root.absolute())).parts):
        if full[:len(base)] == base:
            return full[len(base):]
    return None


STAGING_PREFIX = ".staged-"
# .staged-<host tag>-<pid>-<mkdtemp's 8 random characters>
_STAGING_NAME = re.compile(rf"{re.escape(STAGING_PREFIX)}(?P<host>[0-9a-f]{{8}})-(?P<pid>[0-9]+)-[a-z0-9_]{{8}}")


@contextmanager
def staged(root: str | os.PathLike) -> Iterator[Path]:
    """A set of files that lands together: the block writes them into a fresh hidden directory inside `root`,
    under the paths they will have relative to `root`; once the block has written every one of them, each is
    moved onto its place, one rename after another. A failure while writing (a full disk, say) leaves every file
    of `root` as it was; the staging directory is removed either way.

    What this guarantees: no file of the set lands unless all of them were written. The renames are each atomic
    but not atomic together: a process killed between two of them (a few microseconds) leaves the earlier ones
    replaced. A staging directory left by a killed process is removed by the next staged write under `root`. A
    write that fails in the block raises its OutputError naming the final path (root / its relative path)."""
    root = Path(root)
    stage = staging_dir(root)
    try:
        try:
            yield stage
        except OutputError as e:        # name the file the user asked for, not its hidden staged copy
            if not Path(e.path).is_relative_to(stage):
                raise
            raise e.naming(root / Path(e.path).relative_to(stage)) from e.__cause__
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


def staging_dir(root: str | os.PathLike, legacy: re.Pattern | None = None) -> Path:
    """A fresh hidden staging directory inside `root` (created if need be), named after this process, once the
    staging directories of writers that are gone have been removed from `root` (see `staged`). `legacy`: the names
    of an older nlpbench's staging directories there, which name no writer; one is removed once untouched for
    STALE_AFTER."""
    root = Path(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
        remove_dead_staging(root, legacy)
        return Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{_host_tag()}-{os.getpid()}-", dir=root))
    except OSError as e:
        raise OutputError(root, e) from e


def remove_dead_staging(root: Path, legacy: re.Pattern | None = None) -> None:
    """Remove the staging directories under `root` whose writer is gone (a build killed midway)."""
    now = time.time()
    for entry in os.scandir(root):
        ours = _STAGING_NAME.fullmatch(entry.name)
        if ours is None and (legacy is None or legacy.fullmatch(entry.name) is None):
            continue
        try:
            if entry.is_dir(follow_symlinks=False) and _writer_gone(ours and ours["host"],
                                                                    ours and int(ours["pid"]), entry, now):
                shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:
            continue


def write_text(path: str | os.PathLike, text: str, keep_identical: bool = False) -> None:
    with atomic_path(path, keep_identical) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj: Any, keep_identical: bool = False, allow_nan: bool = True) -> None:
    """`obj` as indented JSON; allow_nan=False refuses (ValueError) infinities and NaN, which strict JSON lacks,
    before anything is written; keep_identical leaves a file that already holds these bytes untouched."""
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=allow_nan) + "\n",
               keep_identical)


def read_json(path: str | os.PathLike) -> Any:
    """The JSON document in `path`; InputError naming the file (and the line and column) when it is not valid
    JSON in UTF-8 (a truncated or hand-edited file), OSError when it cannot be opened."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start}); not the JSON nlpbench wrote") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}); truncated or edited "
                         "by hand?") from None
