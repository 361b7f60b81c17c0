"""Prepared data: what a data step wrote is what its readers get.

A data step records every file it prepares, with its size and sha256, under `files` in the STATUS.json it writes
last into its folder (`file_records`); a step whose output is a single file records it in `<file>.STATUS.json`,
written just before the file appears (`prepared_output`). Readers and the data step itself check the files against
those records (`verify_prepared`, `prepared_file`): a file deleted, edited or never recorded (a folder prepared by
an older version of nlpbench) raises PreparedDataChanged naming the file, what changed and the command that
prepares it again. A file's sha256 is computed once per process while its size and modification time stay the same.
A data step that writes a file again with the bytes it already holds leaves it untouched (`prepared_output`), so
its modification time says when its content last changed (what Snakemake compares).
"""

from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from nlpbench.runtime.io import atomic_path, read_json, write_json

STATUS_FILE = "STATUS.json"
CHUNK = 1 << 20         # bytes read at a time when hashing a file


class FetchError(RuntimeError):
    """A dataset could not be obtained or is not what it should be (the base of nlpbench.data.fetch's errors)."""


class PreparedDataChanged(FetchError):
    """A prepared file was edited or deleted after its preparation, or was never recorded."""


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()

_SHA256: dict[tuple, str] = {}      # (path, device, inode, size, mtime_ns) -> sha256, for this process


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file, hashed again only when the file is replaced or its size or modification time change."""
    path = Path(path)
    st = path.stat()
    key = (str(path.absolute()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _SHA256:
        _SHA256[key] = sha256_file(path)
    return _SHA256[key]


def file_records(root: str | os.PathLike, rels: Iterable[str]) -> dict[str, dict]:
    """{relative path: {"bytes", "sha256"}} of prepared files: the `files` of a STATUS.json."""
    root = Path(root)
    return {rel: {"bytes": (root / rel).stat().st_size, "sha256": file_sha256(root / rel)} for rel in rels}


def remedy_for(root: str | os.PathLike, step: str) -> str:
    """What to do about a prepared folder that fails verification: prepare it again."""
    return f"delete {root} and run the data step again (nlpbench data {step})"


def read_status(root: str | os.PathLike, step: str, status_file: str = STATUS_FILE) -> dict:
    """The STATUS.json of a prepared folder; FetchError naming the data step when there is none, PreparedDataChanged
    when it is not a JSON object."""
    path = Path(root) / status_file
    if not path.is_file():
        raise FetchError(f"{path} not found, so {root} is not prepared: run the data step first (nlpbench data {step})")
    try:
        status = read_json(path)
    except (ValueError, UnicodeDecodeError) as e:
        status = e
    if not isinstance(status, dict):
        raise PreparedDataChanged(f"{path} is not the JSON object the data step wrote ({status}); "
                                  f"{remedy_for(root, step)}")
    return status


DATA_STEP = "the data step prepared it"     # who wrote a checked file, as check_file's messages say it


def check_file(path: Path, record: Mapping | None, remedy: str, status_path: Path, written: str = DATA_STEP
               ) -> None:
    """PreparedDataChanged unless `path` has the size (when recorded) and sha256 of `record`; `written`: who wrote
    it, in the message's words ("the data step prepared it", "its run wrote it")."""
    if not path.is_file():
        problem = f"was deleted after {written}"
    elif not isinstance(record, Mapping) or "sha256" not in record:
        problem = (f"has no recorded size and sha256 in {status_path} (it was written by an older version of "
                   "nlpbench), so it cannot be verified")
    elif "bytes" in record and (size := path.stat().st_size) != record["bytes"]:
        problem = f"was changed after {written} (now {size} bytes, {status_path.name} records {record['bytes']})"
    elif file_sha256(path) != record["sha256"]:
        problem = f"was changed after {written} (its sha256 differs from the one {status_path.name} records)"
    else:
        return
    raise PreparedDataChanged(f"{path} {problem}; {remedy}")


def verify_prepared(root: str | os.PathLike, step: str, files: Iterable[str] | None = None, *,
                    status: Mapping | None = None, status_file: str = STATUS_FILE, remedy: str | None = None,
                    written: str = DATA_STEP) -> dict:
    """Check `files` of the prepared folder `root` (default: every file its STATUS.json lists) against the sizes and
    sha256 recorded there; return the status. `status`: the STATUS.json already read; `remedy`: what to do about a
    failure (default: delete `root` and run the data step `step` again); `written`: who wrote the files
    (check_file). The one check of every recorded file: prepared data and a trained run's files
    (nlpbench.runtime.run_record) alike."""
    root = Path(root)
    if status is None:
        status = read_status(root, step, status_file)
    listed = status.get("files") or {}
    records = listed if isinstance(listed, Mapping) else {}
    for rel in (list(listed) if files is None else files):
        check_file(root / rel, records.get(rel), remedy or remedy_for(root, step), root / status_file, written)
    return dict(status)


def prepared_file(root: str | os.PathLike, rel: str, step: str, *, remedy: str | None = None,
                  hint: str = "") -> Path:
    """root/rel of a prepared folder after verify_prepared; FetchError naming the data step (and `hint`, e.g. the
    setting that supplies its data) when the folder is not prepared."""
    root = Path(root)
    path = root / rel
    if not (root / STATUS_FILE).is_file() and not path.is_file():
        raise FetchError(f"{path} not prepared (it and {root / STATUS_FILE} are missing): run the data step first "
                         f"(nlpbench data {step}{f'; {hint}' if hint else ''})")
    verify_prepared(root, step, [rel], remedy=remedy)
    return path


def output_status(path: str | os.PathLike) -> Path:
    """Where a single-file data step output records its size and sha256: `<file>.STATUS.json` beside it."""
    path = Path(path)
    return path.with_name(path.name + "." + STATUS_FILE)


@contextmanager
def prepared_output(path: str | os.PathLike, **status) -> Iterator[Path]:
    """Write a data step's single-file output atomically: yield a temporary path to fill; then record its size and
    sha256 (and `status`) in output_status(path), and only then move it into place, so the output never exists
    without its record. An output (or record) that already holds exactly these bytes is left untouched, its
    modification time too: a data step run again on the same inputs makes nothing downstream look out of date."""
    path = Path(path)
    with atomic_path(path, keep_identical=True) as tmp:
        yield tmp
        write_json(output_status(path), {**status, "files": {path.name: {"bytes": tmp.stat().st_size,
                                                                         "sha256": sha256_file(tmp)}}},
                   keep_identical=True)


def verified_output(path: str | os.PathLike, step: str, remedy: str | None = None) -> Path:
    """A single-file data step output written by prepared_output, checked against its record."""
    path = Path(path)
    status = output_status(path)
    remedy = remedy or remedy_for(path, step)
    if not status.is_file():
        if path.is_file():
            raise PreparedDataChanged(f"{path} has no record of its size and sha256 ({status.name} is missing: it was "
                                      f"prepared by an older version of nlpbench), so it cannot be verified; {remedy}")
        raise FetchError(f"{path} not found: run the data step first (nlpbench data {step})")
    verify_prepared(path.parent, step, [path.name], status_file=status.name, remedy=remedy)
    return path
