"""Downloads that survive a flaky network: retries, resume, a progress bar, and nothing unverified kept.

A download goes to `<file>.part` beside its final path, is checked (its sha256, or the caller's own check) once
complete, and only then renamed onto the final path: a file under its final name is always whole and verified.

- Retries: a refused or dropped connection, a timeout, and the answers 429, 500, 502, 503 and 504 are retried
  (`retries` times, waiting 0, then `backoff` * 2, 4, 8, ... seconds; a server's Retry-After is honoured).
- Resume: a connection lost mid-file, or a `.part` left by a killed run, continues where it stopped with an HTTP
  Range request; a server that answers with the whole file (200, not 206) is read again from its first byte.
- Progress: a bar on stderr when stderr is a terminal and `quiet` is false.
- A checksum mismatch deletes the `.part` and raises ChecksumError naming the URL, the file and both digests; a
  failed download raises DownloadError naming the URL and the file, and keeps its `.part` for the next run.

One process downloads a file at a time: a second waits for the first (a lock on the `.part`), then finds the file
(on a file system without locks, each goes on unlocked).
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Callable, Iterator
from urllib.parse import urlsplit

import requests
import tqdm
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from nlpbench.data.prepared import CHUNK, FetchError, sha256_file
from nlpbench.runtime.io import OutputError

RETRIES = 5                 # attempts after the first, per request and per stalled transfer
BACKOFF_S = 1.0             # waits of 0, 2, 4, 8, 16 s between the attempts (urllib3's backoff_factor)
RETRY_STATUSES = (429, 500, 502, 503, 504)
PART_SUFFIX = ".part"


class ChecksumError(FetchError):
    """A file's checksum differs from the recorded one."""


class DownloadError(FetchError):
    """A download failed (no network, bad URL, server error)."""


class _Interrupted(Exception):
    """The body of a response stopped before its end; the transfer can go on from the bytes received."""


def part_path(dest: str | os.PathLike) -> Path:
    """Where the download of `dest` collects its bytes until it is complete and verified."""
    dest = Path(dest)
    return dest.with_name(dest.name + PART_SUFFIX)


def download(url: str, dest: str | os.PathLike, sha256: str | None = None, *,
             verify: Callable[[Path], object] | None = None, timeout: float = 60.0, retries: int | None = None,
             backoff: float | None = None, quiet: bool = False) -> Path:
    """Download `url` to `dest` and return `dest`. The complete file is checked against `sha256` and by `verify`
    (called with the path of the complete download; it raises ChecksumError to refuse it) before it is renamed onto
    `dest`. `timeout`: seconds a connection may stay silent; `retries`, `backoff`: RETRIES and BACKOFF_S unless
    given."""
    dest = Path(dest)
    if urlsplit(url).scheme not in ("http", "https"):
        raise DownloadError(f"could not download {url} to {dest}: only http and https URLs are downloaded (a local "
                            "copy belongs in a mirror directory, $NLPBENCH_MIRROR)")
    retries = RETRIES if retries is None else retries
    backoff = BACKOFF_S if backoff is None else backoff
    made = [p for p in dest.parents if not p.exists()]
    part_file = part_path(dest)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with _locked_part(dest) as part:
            if part is None:                 # another process downloaded it meanwhile
                return dest
            with _session(retries, backoff) as session:
                _transfer(session, url, dest, part, timeout, retries, backoff, quiet)
            _verify(url, dest, part_file, sha256, verify)
            try:
                os.replace(part_file, dest)
            except OSError as e:
                raise OutputError(dest, e) from e
    except BaseException:
        for folder in made:             # no empty downloads/ folder stays behind a failed download
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        raise
    return dest


@contextmanager
def _locked_part(dest: Path) -> Iterator[IO[bytes] | None]:
    """The `.part` file of `dest`, open for reading and writing and locked for this process (an empty one is
    removed afterwards); None if `dest` appeared while another process held the lock."""
    path = part_path(dest)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as e:
            raise OutputError(dest, e) from e
        try:
            _lock(fd, dest)
        except BaseException:
            os.close(fd)
            raise
        if _same_file(fd, path):
            break
        os.close(fd)                     # the holder renamed or deleted the file it locked
        if dest.is_file():
            yield None
            return
    with open(fd, "r+b") as part:        # closing it releases the lock
        try:
            yield part
        finally:
            if _same_file(fd, path) and _size(part) == 0:
                path.unlink()            # nothing received: no .part to resume from


def _lock(fd: int, dest: Path) -> None:
    """Lock `fd` for this process, waiting for the process that holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"nlpbench: another process is downloading {dest}; waiting for it", file=sys.stderr)
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError as e:
        if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP):
            raise


def _same_file(fd: int, path: Path) -> bool:
    try:
        here = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (here.st_dev, here.st_ino)


def _session(retries: int, backoff: float) -> requests.Session:
    """A session that retries refused connections, timeouts and the RETRY_STATUSES answers of a request."""
    policy = Retry(total=retries, connect=retries, read=retries, status=retries, backoff_factor=backoff,
                   status_forcelist=RETRY_STATUSES, allowed_methods=frozenset({"GET"}), raise_on_status=False)
    session = requests.Session()
    adapter = HTTPAdapter(max_retries=policy)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def _transfer(session: requests.Session, url: str, dest: Path, part: IO[bytes], timeout: float, retries: int,
              backoff: float, quiet: bool) -> None:
    """Fill `part` with the whole body of `url`, resuming after a lost connection; up to `retries` attempts in a row
    that bring no new byte, `backoff` * 2**n seconds apart."""
    stalls = 0
    with tqdm.tqdm(desc=dest.name, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr,
                   disable=quiet or not sys.stderr.isatty()) as progress:
        while True:
            before = _size(part)
            try:
                _request(session, url, dest, part, timeout, progress)
                return
            except _Interrupted as e:
                stalls = 0 if _size(part) > before else stalls + 1
                if stalls > retries:
                    raise DownloadError(f"could not download {url} to {dest}: {e}; {retries} attempts in a row "
                                        f"brought no new byte (the {_size(part)} bytes received are kept in "
                                        f"{part_path(dest)} for the next run)") from e
                time.sleep(backoff * 2 ** stalls)


def _size(part: IO[bytes]) -> int:
    part.flush()
    return os.fstat(part.fileno()).st_size


def _request(session: requests.Session, url: str, dest: Path, part: IO[bytes], timeout: float,
             progress: tqdm.tqdm) -> None:
    """One GET of `url` from the end of what `part` holds (a Range request), or from the first byte when the
    server sends the whole file; raise _Interrupted if the body stops short."""
    offset = _size(part)
    headers = {"Accept-Encoding": "identity"}         # the file's bytes as stored: Range counts those
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        response = session.get(url, headers=headers, stream=True, timeout=timeout)
    except requests.RequestException as e:
        raise DownloadError(f"could not download {url} to {dest}: {e}") from e
    with response:
        if offset and response.status_code == 416:        # nothing after `offset`: complete, or another file now
            if _content_range(response, "total") == offset:
                return
            part.truncate(0)
            raise _Interrupted(f"the server has no byte {offset} of it; starting again")
        if response.status_code >= 400:
            raise DownloadError(f"could not download {url} to {dest}: HTTP {response.status_code} "
                                f"{response.reason}")
        if response.status_code == 206:
            start = _content_range(response, "start")
            if start != offset:
                part.truncate(0)
                raise _Interrupted(f"the server sent bytes from {start}, not {offset}; starting again")
        else:
            start = 0                                     # the whole file: written again from its first byte
        part.seek(start)
        part.truncate(start)
        length = response.headers.get("Content-Length", "")
        total = start + int(length) if length.isdigit() else None
        progress.reset(total=total)
        progress.update(start)
        try:
            for chunk in response.raw.stream(CHUNK, decode_content=False):
                _write(part, chunk, dest)
                progress.update(len(chunk))
        except (urllib3.exceptions.HTTPError, requests.RequestException) as e:
            raise _Interrupted(f"the connection broke after {_size(part)} bytes ({e})") from e
        if total is not None and _size(part) < total:
            raise _Interrupted(f"the connection broke after {_size(part)} of {total} bytes")


def _write(part: IO[bytes], chunk: bytes, dest: Path) -> None:
    try:
        part.write(chunk)
    except OSError as e:                                  # a full disk, say: not the network's doing
        raise OutputError(dest, e) from e


_CONTENT_RANGE = re.compile(r"bytes\s+(?P<start>\d+)-\d+/(?:\d+|\*)|bytes\s+\*/(?P<total>\d+)")


def _content_range(response: requests.Response, field: str) -> int | None:
    """The first byte (`field` "start") a 206 answer carries, or the file's size (`field` "total") a 416 names."""
    m = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
    return int(m[field]) if m and m[field] else None


def _verify(url: str, dest: Path, part: Path, sha256: str | None, verify: Callable[[Path], object] | None) -> None:
    """Check the complete download `part`; on a mismatch delete it and raise ChecksumError naming `url` and
    `dest`."""
    try:
        if sha256 is not None:
            actual = sha256_file(part)
            if actual != sha256.lower():
                raise ChecksumError(
                    f"{dest}: sha256 mismatch for the download of {url}: expected {sha256}, got {actual}. "
                    "The download was deleted; retry, or put a verified copy in a mirror directory "
                    "($NLPBENCH_MIRROR).")
        if verify is not None:
            try:
                verify(part)
            except ChecksumError as e:
                message = str(e).replace(str(part), str(dest))
                raise ChecksumError(message if url in message else f"{message} (downloaded from {url})") from e
    except ChecksumError:
        part.unlink()
        raise
