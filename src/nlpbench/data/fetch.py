"""Fetch the bAbI archive (mirror directory or official URL), verify every file, unpack atomically."""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import socket
import tarfile
import tempfile
import time
import warnings
import zlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import IO, Callable

from nlpbench.data.prepared import (CHUNK as _CHUNK, STATUS_FILE, FetchError, PreparedDataChanged,  # noqa: F401
                                    sha256_file, verify_prepared)
from nlpbench.data import tsv
from nlpbench.data.download import ChecksumError, DownloadError, download
from nlpbench.runtime.io import current_umask, read_json, write_json

MIRROR_ENV = "NLPBENCH_MIRROR"

BABI_URL = "https://dl.fbaipublicfiles.com/babi/tasks_1-20_v1-2.tar.gz"
BABI_TOP = "tasks_1-20_v1-2"
BABI_ARCHIVE_NAME = "tasks_1-20_v1-2.tar.gz"
# Official tarball: size 15,719,851 bytes; sha256 as recorded by Hugging Face `datasets`
# (datasets/babi_qa/dataset_infos.json) for the thespermwhale.com copy of the same file.
# Advisory only: every member is verified against babi_manifest.tsv anyway.
BABI_OFFICIAL_SHA256 = "0364ebde659f14d11bc21744516c5ec49d3d06cb692733f66680771244998898"
# Files inside a mirror directory.
BABI_MIRROR_PARTIAL = "babi/tasks_1-20_v1-2.partial.tar.gz"
BABI_MIRROR_PARTIAL_SHA256 = "f9bd227a2ecfb89fa9732659a407ec7bb3d42cb21e66cf493664c5067621c7ee"
BABI_MIRROR_FULL = "babi/tasks_1-20_v1-2.tar.gz"
# The only files the partial mirror archive is allowed to lack (each about 5 MB).
BABI_MIRROR_GAPS = frozenset(
    f"{variant}/qa3_three-supporting-facts_train.txt" for variant in ("en-10k", "hn-10k", "shuffled-10k")
)


class UnsafeArchiveError(FetchError):
    """An archive member would be written outside the target folder, or is not a plain file."""


class IncompleteArchiveError(FetchError):
    """An archive lacks files that every known source of the dataset has."""


@dataclass(frozen=True)
class ManifestEntry:
    """Expected checksums of one file; `sha256` is empty when only the git blob SHA-1 is known."""

    path: str
    sha256: str
    git_sha1: str


def resolve_mirror(explicit: str | os.PathLike | None = None) -> Path | None:
    """The mirror directory: `explicit`, else $NLPBENCH_MIRROR, else None."""
    if explicit is not None and str(explicit) != "":
        return Path(explicit)
    env = os.environ.get(MIRROR_ENV, "")
    return Path(env) if env else None


def _hash_stream(stream: IO[bytes], size: int, sinks: tuple[IO[bytes], ...] = ()) -> tuple[str, str]:
    """(sha256, git blob sha1) of `size` bytes read from `stream`, copying them to `sinks`."""
    sha256 = hashlib.sha256()
    sha1 = hashlib.sha1(b"blob %d\0" % size)
    while chunk := stream.read(_CHUNK):
        sha256.update(chunk)
        sha1.update(chunk)
        for sink in sinks:
            sink.write(chunk)
    return sha256.hexdigest(), sha1.hexdigest()


def git_blob_sha1(path: str | os.PathLike) -> str:
    """What `git hash-object FILE` prints: sha1 of b"blob <size>\\0" + the file's bytes."""
    with open(path, "rb") as f:
        return _hash_stream(f, os.fstat(f.fileno()).st_size)[1]


def load_babi_manifest(path: str | os.PathLike | None = None) -> dict[str, ManifestEntry]:
    """Read babi_manifest.tsv (package data unless `path` is given): relative path -> ManifestEntry."""
    if path is None:
        text = resources.files("nlpbench.data").joinpath("babi_manifest.tsv").read_text(encoding="utf-8")
        where = "nlpbench/data/babi_manifest.tsv"
    else:
        text = Path(path).read_text(encoding="utf-8")
        where = str(path)
    entries: dict[str, ManifestEntry] = {}
    for lineno, row in tsv.records(text, where, header=("path", "sha256", "git_sha1")):
        rel, sha256, sha1 = row["path"], row["sha256"], row["git_sha1"]
        if not _is_hex(sha256, 64, allow_empty=True) or not _is_hex(sha1, 40, allow_empty=True) or not sha256 + sha1:
            raise ValueError(f"{where}:{lineno}: bad checksum(s) for {rel!r} (need sha256 and/or git_sha1)")
        if rel in entries:
            raise ValueError(f"{where}:{lineno}: duplicate path {rel!r}")
        entries[rel] = ManifestEntry(rel, sha256.lower(), sha1.lower())
    if not entries:
        raise ValueError(f"{where}: no entries")
    return entries


def _is_hex(value: str, length: int, allow_empty: bool) -> bool:
    if value == "":
        return allow_empty
    return len(value) == length and all(c in "0123456789abcdefABCDEF" for c in value)


def _read_status(out_dir: Path) -> dict | None:
    """The STATUS.json of a complete preparation in `out_dir`, or None if `out_dir` does not exist."""
    if not out_dir.exists():
        return None
    if out_dir.is_dir() and not any(out_dir.iterdir()):
        out_dir.rmdir()  # an empty directory (e.g. made by a workflow engine for the output) is "absent"
        return None
    status_path = out_dir / STATUS_FILE
    if not status_path.is_file():
        raise FetchError(
            f"{out_dir} exists but has no {STATUS_FILE}, so it is not a finished bAbI preparation; "
            "remove it and run again"
        )
    status = read_json(status_path)
    if not isinstance(status, dict) or not {"source", "archive_sha256", "present", "missing"} <= status.keys():
        raise FetchError(f"{status_path}: not a bAbI status file (needs source, archive_sha256, present, missing)")
    verify_prepared(out_dir, "babi", status["present"], status=status)    # edited since? (sizes, sha256)
    return status


def _remedy(archive: Path, downloaded: bool) -> str:
    """What to do about a bad archive: a download can be deleted and fetched again; a mirror's file is not ours
    to delete."""
    if downloaded:
        return f"delete {archive} and run the data step again to download it anew"
    return (f"the mirror's copy is corrupt or not the official bAbI v1.2 archive: replace it with the official "
            f"file ({BABI_URL}), or use another mirror (--mirror or ${MIRROR_ENV})")


def _locate_archive(out_dir: Path, mirror: Path | None, url: str) -> tuple[Path, str, str | None]:
    """(archive path, source description, required sha256 or None); downloads when no mirror has it."""
    if mirror is not None:
        if not mirror.is_dir():
            raise FetchError(f"mirror directory {mirror} (argument or ${MIRROR_ENV}) does not exist")
        # A complete official copy beats the partial one.
        if (mirror / BABI_MIRROR_FULL).is_file():
            return mirror / BABI_MIRROR_FULL, str(mirror / BABI_MIRROR_FULL), None
        if (mirror / BABI_MIRROR_PARTIAL).is_file():
            path = mirror / BABI_MIRROR_PARTIAL
            return path, str(path), BABI_MIRROR_PARTIAL_SHA256
    dest = out_dir.parent / "downloads" / BABI_ARCHIVE_NAME
    if not dest.is_file():
        try:
            download(url, dest)
        except DownloadError as e:
            where = f"mirror {mirror} has neither {BABI_MIRROR_PARTIAL} nor {BABI_MIRROR_FULL}" if mirror else "no mirror"
            raise DownloadError(
                f"cannot get the bAbI archive: {where}, and downloading {url} failed ({e}). "
                f"Connect to the network, or set ${MIRROR_ENV} (or pass --mirror) to a directory "
                f"containing {BABI_MIRROR_PARTIAL}."
            ) from e
    return dest, url, None


_STALE_OTHER_HOST_S = 24 * 3600


def partial_dir(out_dir: Path) -> Path:
    """A new private folder beside `out_dir` for a preparation in progress, named after this host and process;
    `remove_stale_partials` removes it if this process dies (a killed fetch)."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.{socket.gethostname()}-{os.getpid()}.", suffix=".partial",
                                 dir=out_dir.parent))


def publish_partial(tmp: Path, out_dir: Path, status: dict, finished: Callable[[Path], dict | None]) -> dict:
    """Turn the filled partial folder `tmp` into `out_dir` in one rename, its mode following the umask (mkdtemp
    makes it private; its files already follow the umask). If another process finished first, keep theirs and
    return its status (`finished` reads it)."""
    tmp.chmod(0o777 & ~current_umask())
    try:
        os.rename(tmp, out_dir)
    except OSError:
        if out_dir.exists():
            shutil.rmtree(tmp, ignore_errors=True)
            return finished(out_dir) or status
        raise
    return status


def remove_stale_partials(out_dir: Path) -> list[Path]:
    """Remove the `.<name>.*.partial` folders beside `out_dir` that no live preparation owns: this host's whose
    process is gone, other hosts' older than a day, and unnamed ones (from before owners were recorded)."""
    removed = []
    if not out_dir.parent.is_dir():
        return removed
    host = socket.gethostname()
    owner = re.compile(rf"\.{re.escape(out_dir.name)}\.(?P<host>.+)-(?P<pid>\d+)\.\w+\.partial")
    for path in out_dir.parent.glob(f".{out_dir.name}.*.partial"):
        m = owner.fullmatch(path.name)
        if m is None:
            stale = True
        elif m["host"] == host:
            stale = not _process_alive(int(m["pid"]))
        else:
            stale = time.time() - path.stat().st_mtime > _STALE_OTHER_HOST_S
        if stale:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:     # alive, another user's
        return True
    return True


def _member_rel(name: str, archive: Path) -> str | None:
    """Path of a member relative to the archive's top folder; None if outside it; raise if unsafe."""
    posix = PurePosixPath(name)
    if posix.is_absolute() or ".." in posix.parts or "\\" in name or (name[1:2] == ":"):
        raise UnsafeArchiveError(f"{archive}: refusing unsafe member name {name!r} (absolute or '..')")
    parts = [p for p in posix.parts if p != "."]
    if len(parts) < 2 or parts[0] != BABI_TOP:
        return None
    return "/".join(parts[1:])


def _extract_verified(archive: Path, dest: Path, manifest: dict[str, ManifestEntry], remedy: str
                      ) -> dict[str, dict]:
    """Unpack the manifest's files from `archive` into `dest`, verifying each; return their file_records."""
    present: dict[str, dict] = {}
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                rel = _member_rel(member.name, archive)
                if rel is None or rel not in manifest:
                    continue  # README-like extras, en-valid*/, directories
                if not member.isfile():
                    raise UnsafeArchiveError(f"{archive}: member {member.name} should be a regular file")
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                assert source is not None  # regular files always have data
                with source, open(target, "wb") as out:
                    sha256, sha1 = _hash_stream(source, member.size, (out,))
                _verify_member(archive, member.name, manifest[rel], sha256, sha1, remedy)
                present[rel] = {"bytes": member.size, "sha256": sha256}
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise FetchError(f"{archive}: cannot read the archive ({e}); {remedy}") from e
    return dict(sorted(present.items()))


def _verify_member(archive: Path, name: str, entry: ManifestEntry, sha256: str, sha1: str, remedy: str) -> None:
    if entry.sha256:
        kind, expected, actual = "sha256", entry.sha256, sha256
    else:
        kind, expected, actual = "git blob sha1", entry.git_sha1, sha1
    if actual != expected:
        raise ChecksumError(
            f"{archive}: member {name} fails verification: expected {kind} {expected}, got {actual} "
            f"(from nlpbench/data/babi_manifest.tsv); {remedy}."
        )


def prepare_babi(out_dir: str | os.PathLike, mirror: str | os.PathLike | None = None, *, url: str = BABI_URL) -> dict:
    """Make `out_dir/<variant>/qaN_<name>_<split>.txt` from a mirror or the official URL; return STATUS.json.

    `out_dir` appears atomically and complete, or not at all. A finished `out_dir` is returned as is.
    """
    out_dir = Path(out_dir)
    status = _read_status(out_dir)
    if status is not None:
        return status
    remove_stale_partials(out_dir)
    manifest = load_babi_manifest()
    archive, source, required_sha = _locate_archive(out_dir, resolve_mirror(mirror), url)
    remedy = _remedy(archive, downloaded=source == url)
    archive_sha = sha256_file(archive)
    if required_sha is not None and archive_sha != required_sha:
        raise ChecksumError(
            f"{archive}: sha256 mismatch: expected {required_sha}, got {archive_sha}. "
            f"The mirror's copy is damaged or replaced; restore it, or use another mirror (--mirror or ${MIRROR_ENV})."
        )
    if required_sha is None and archive_sha != BABI_OFFICIAL_SHA256:
        warnings.warn(
            f"{archive}: sha256 {archive_sha} differs from the recorded official {BABI_OFFICIAL_SHA256}; "
            "relying on the per-file checksums of babi_manifest.tsv",
            stacklevel=2,
        )
    tmp = partial_dir(out_dir)
    try:
        files = _extract_verified(archive, tmp, manifest, remedy)
        present = list(files)
        missing = sorted(set(manifest) - set(present))
        unexpected = [rel for rel in missing if rel not in BABI_MIRROR_GAPS]
        if unexpected:
            raise IncompleteArchiveError(
                f"{archive}: lacks {len(unexpected)} bAbI file(s) that the official archive has, e.g. "
                f"{', '.join(unexpected[:5])}; use the official archive ({BABI_URL})"
            )
        status = {"source": source, "archive_sha256": archive_sha, "present": present, "missing": missing,
                  "files": files}
        write_json(tmp / STATUS_FILE, status)
        return publish_partial(tmp, out_dir, status, _read_status)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return status


# ------------------------------------------------------------------ any catalogued file (nlpbench.data.catalog)
LFS_OID = re.compile(r"^oid sha256:([0-9a-f]{64})$", re.M)
LFS_SIZE = re.compile(r"^size (\d+)$", re.M)


def lfs_pointer(url: str, timeout: float = 60.0) -> tuple[str, int | None]:
    """(sha256, size) from the git-LFS pointer a Hugging Face Hub `raw/` URL serves for a large file."""
    with tempfile.TemporaryDirectory() as folder:
        pointer = download(url, Path(folder) / "pointer", timeout=timeout, quiet=True)
        with open(pointer, "rb") as f:
            text = f.read(4096).decode("utf-8", "replace")
    oid, size = LFS_OID.search(text), LFS_SIZE.search(text)
    if oid is None:
        raise ChecksumError(f"{url} is not a git-LFS pointer (no 'oid sha256:' line), so the file cannot be verified")
    return oid.group(1), int(size.group(1)) if size else None


def _mirror_manifest_sha256(mirror: Path, rel: str) -> str:
    """The sha256 the mirror's MANIFEST.tsv (in `rel`'s top folder) lists for `rel`, or ""."""
    top, _, inner = rel.partition("/")
    manifest = mirror / top / "MANIFEST.tsv"
    if not manifest.is_file():
        return ""
    return tsv.mirror_checksums(manifest).get(inner, "")


def verify_remote(path: Path, entry, *, mirror: Path | None = None, remedy: str = "") -> str:
    """Check `path` against the catalogue entry `entry` (nlpbench.data.catalog.RemoteFile); return the checksum it
    passed as "<kind>:<hex>". A mismatch is a ChecksumError naming the file, the expected and the actual value."""
    if entry.sha256 or not entry.git_sha1:
        expected, kind = entry.sha256, "sha256"
        if not expected and mirror is not None and path.is_relative_to(mirror):
            expected, kind = _mirror_manifest_sha256(mirror, entry.mirror), f"sha256 (from {mirror}'s MANIFEST.tsv)"
        if not expected and entry.lfs_pointer:
            expected, kind = lfs_pointer(entry.lfs_pointer)[0], f"sha256 (from the git-LFS pointer {entry.lfs_pointer})"
        if not expected:
            raise ChecksumError(f"{path}: no checksum is recorded for {entry.name} (catalogue key {entry.key}), "
                                f"so it cannot be verified; {remedy}")
        actual = sha256_file(path)
    else:
        expected, kind, actual = entry.git_sha1, "git blob SHA-1", git_blob_sha1(path)
    if actual != expected.lower():
        raise ChecksumError(f"{path}: {kind} mismatch for {entry.name} ({entry.url}): expected {expected}, got "
                            f"{actual}; {remedy}")
    return f"{'git-sha1' if kind.startswith('git') else 'sha256'}:{actual}"


def fetch_remote(entry, downloads: str | os.PathLike, mirror: str | os.PathLike | None = None, *,
                 allow_download: bool = True, timeout: float = 300.0) -> tuple[Path, str, str]:
    """The verified file of the catalogue entry `entry`: the mirror's copy (`<mirror>/<entry.mirror>`), else a
    download (kept in `downloads/`, verified before it is kept). Returns (path, where it came from, checksum).
    A bad download is deleted; a bad mirror copy is reported, not deleted."""
    mirror = resolve_mirror(mirror)
    tried = []
    if mirror is not None and entry.mirror:
        candidate = mirror / entry.mirror
        tried.append(str(candidate))
        if candidate.is_file():
            remedy = (f"the mirror's copy is damaged or not the official file: replace it with {entry.url}, or use "
                      f"another mirror (${MIRROR_ENV})")
            return candidate, str(candidate), verify_remote(candidate, entry, mirror=mirror, remedy=remedy)
    dest = Path(downloads) / entry.name
    tried.append(str(dest))
    remedy = "the download was deleted; run the data step again to download it anew"
    if dest.is_file():          # an earlier, verified download (a failed one never stays)
        return dest, entry.url, verify_remote(dest, entry, remedy=f"delete {dest} and run the data step again")
    if not allow_download:
        raise FetchError(f"{entry.name} not found (looked at {'; '.join(tried)}) and downloads are disabled; "
                         f"set ${MIRROR_ENV} to a directory holding {entry.mirror}, or allow downloads")
    passed = []             # the checksum the complete download passed, before it is kept under its name
    try:
        download(entry.url, dest, timeout=timeout,
                 verify=lambda part: passed.append(verify_remote(part, entry, remedy=remedy)))
    except DownloadError as e:
        raise DownloadError(f"cannot get {entry.name}: not at {'; '.join(tried)}, and {e}. Connect to the network, "
                            f"or set ${MIRROR_ENV} to a directory holding {entry.mirror}") from e
    checksum = passed[0] if passed else verify_remote(dest, entry, remedy=f"delete {dest} and run the data step again")
    return dest, entry.url, checksum
