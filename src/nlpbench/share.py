"""Prepared data and trained runs shared through a DVC remote.

DVC's `share` stage (dvc.yaml) copies data/ and runs/ into share/, the one directory DVC caches and pushes; DVC then
links share/'s files to its cache (.dvc/config: reflinks, else hard links), so that the cache is the only second
copy on disk. data/ and runs/ themselves stay outputs DVC never caches, and never share a file with the cache (a
file written in place there cannot change a cached one), so no DVC command (`dvc exp run` checks out every cached
output first, deleting what it has no record of) touches what a user fetched or trained; DVC only ever rewrites
share/.

A snapshot carries its own record, share/MANIFEST.json: the path, size and sha256 of every file, written last. In a
clone, `nlpbench share pull` (share_pull.py) brings share/ back from the remote, and `restore` copies its files into
data/ and runs/, all with one modification time, so that Snakemake sees every pulled run as up to date with the data
it was trained on and only builds the tables. A restore checks the whole snapshot against its record before it
copies anything (a link, a file the record does not list, a file of another size or hash: refused by name), and
keeps nothing of a restore that fails midway. Left out of a snapshot: runs/_tables/ (the markers saying that this
clone built its tables: a clone that pulls builds them from the runs) and the temporary files of writes still under
way; .dvcignore leaves the same out of DVC's view of data/ and runs/, so that `dvc status` stays clean in a clone
that restored a snapshot and built its tables.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import time
from contextlib import ExitStack
from pathlib import Path

from nlpbench.data.prepared import sha256_file
from nlpbench.runtime.io import (STAGING_PREFIX, current_umask, read_json, remove_dead_staging, same_bytes, staged,
                         staging_dir, write_json)

SNAPSHOT = Path("share")
RECORD = "MANIFEST.json"          # inside the snapshot: what it holds, written last
SHARED = ("data", "runs")         # the snapshot's two directories, and what they are restored into
# what a clone does not take over: the table markers of the clone that built them
NOT_SHARED = {"runs": ("_tables",)}
_SHA256 = re.compile(r"[0-9a-f]{64}")


class ShareError(Exception):
    """A snapshot that cannot be made or restored; the message names the path and the remedy."""


def path_problem(rel: object) -> str | None:
    """What makes `rel` no path of a file of a snapshot (relative, '/'-separated, under data/ or runs/, no '..'),
    or None."""
    if not isinstance(rel, str) or not rel:
        return "is not a path"
    if "\0" in rel or "\\" in rel:
        return "holds a NUL or a backslash"
    if rel.startswith("/"):
        return "is an absolute path"
    parts = rel.split("/")
    if ".." in parts:
        return "leads out of the snapshot ('..')"
    if "" in parts or "." in parts:
        return "is not a plain path (an empty or '.' component)"
    if len(parts) < 2 or parts[0] not in SHARED:
        return f"lies outside {' and '.join(f'{name}/' for name in SHARED)}"
    return None


def ensure_shared_dirs(data: Path = Path("data"), runs: Path = Path("runs")) -> None:
    """Create `data` and `runs` empty where they do not exist (a clone whose tables need no data step has no data/):
    DVC's share stage depends on both, and DVC hashes a stage's dependencies before it runs it, stopping at a
    missing one. Snakemake's runs (the Snakefile), a pack and a restore call it."""
    for top in (Path(data), Path(runs)):
        try:
            top.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ShareError(f"{top}/: cannot be created ({e.strerror or e}); the share stage depends on it") from e


def _copy_hashing(src: Path, dst: Path) -> tuple[int, str]:
    """Copy the bytes of `src` into a new file `dst` (mode 0666 less the umask); their size and sha256."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while chunk := fin.read(1 << 20):
            digest.update(chunk)
            fout.write(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def _shared_files(top: Path, skip: tuple[str, ...]) -> list[Path]:
    """The files under `top` a snapshot holds, relative to `top`."""
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        rel = Path(dirpath).relative_to(top)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(STAGING_PREFIX)
                             and not (rel == Path(".") and d in skip))
        found += [rel / f for f in sorted(filenames) if not f.endswith(".tmp")]
    return found


def _builds_of_older_packs(snapshot: Path) -> re.Pattern:
    """The names of the half-built snapshots an older nlpbench's killed pack left beside `snapshot`
    (`.<name>-<random>.tmp/`): they name no writer, and are removed once untouched for an hour (io.STALE_AFTER)."""
    return re.compile(rf"\.{re.escape(snapshot.name)}-[a-z0-9_]{{8}}\.tmp")


def pack(data: Path = Path("data"), runs: Path = Path("runs"), snapshot: Path = SNAPSHOT) -> dict[str, int]:
    """Replace `snapshot` by a copy of `data` and `runs` (as snapshot/data and snapshot/runs) and its record
    (snapshot/MANIFEST.json, written last); returns the number of files of each. The snapshot is built in a staging
    directory beside it and moved into place when complete; the next pack removes one a killed pack left. A `data`
    or `runs` that does not exist is created empty (ensure_shared_dirs)."""
    snapshot = Path(snapshot)
    ensure_shared_dirs(data, runs)
    try:
        build = staging_dir(snapshot.parent, _builds_of_older_packs(snapshot))
        os.chmod(build, 0o777 & ~current_umask())        # the snapshot's own mode once moved into place
    except OSError as e:
        raise ShareError(f"{snapshot}: cannot write the snapshot beside it ({e.strerror or e})") from e
    counts, record = {}, []
    try:
        for name, top in zip(SHARED, (Path(data), Path(runs))):
            (build / name).mkdir()
            files = _shared_files(top, NOT_SHARED.get(name, ()))
            for rel in files:
                size, sha256 = _copy_hashing(top / rel, build / name / rel)
                shutil.copystat(top / rel, build / name / rel)
                record.append({"path": f"{name}/{rel.as_posix()}", "size": size, "sha256": sha256})
            counts[name] = len(files)
        write_json(build / RECORD, {"files": record})
        if snapshot.is_symlink() or snapshot.is_file():
            snapshot.unlink()
        elif snapshot.exists():
            shutil.rmtree(snapshot)
        os.replace(build, snapshot)
    except OSError as e:
        raise ShareError(f"{snapshot}: snapshot of {data}/ and {runs}/ failed: {e}") from e
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return counts


def _read_record(snapshot: Path) -> dict[str, tuple[int, str]]:
    """The snapshot's record: its path -> (size, sha256) of every file."""
    where = snapshot / RECORD
    if not os.path.lexists(where):
        raise ShareError(f"{where}: missing: this snapshot was packed by an older nlpbench, which recorded no size "
                         "and hash to check its files by; pack it again where the runs were trained (`dvc repro "
                         "--single-item share`, `dvc push`, commit dvc.lock)")
    if where.is_symlink() or not where.is_file():
        raise ShareError(f"{where}: not a plain file (a link or a directory); refused")
    try:
        files = read_json(where)["files"]
        if not isinstance(files, list):
            raise TypeError("files is not a list")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ShareError(f"{where}: not a snapshot record nlpbench wrote ({e}); pack the snapshot again") from e
    record = {}
    for i, entry in enumerate(files):
        rel = entry.get("path") if isinstance(entry, dict) else None
        problem = path_problem(rel)
        if problem is None and rel in record:
            problem = "is listed twice"
        if problem is None and not (isinstance(entry.get("size"), int) and entry["size"] >= 0
                                    and isinstance(entry.get("sha256"), str) and _SHA256.fullmatch(entry["sha256"])):
            problem = "has no size and sha256"
        if problem:
            raise ShareError(f"{where}: entry {i + 1} ({rel!r}) {problem}; refused, nothing restored")
        record[rel] = (entry["size"], entry["sha256"])
    return record


def _snapshot_files(snapshot: Path) -> set[str]:
    """The paths of the plain files under `snapshot` other than its record, relative to it; a link or anything but
    a file or directory is refused."""
    found, todo = set(), [snapshot]
    while todo:
        directory = todo.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                path = Path(entry.path)
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISLNK(mode):
                    raise ShareError(f"{path}: a link (to {os.readlink(path)}), not a file of the snapshot; refused, "
                                     "nothing restored")
                if stat.S_ISDIR(mode):
                    todo.append(path)
                elif stat.S_ISREG(mode):
                    found.add(path.relative_to(snapshot).as_posix())
                else:
                    raise ShareError(f"{path}: neither a file nor a directory; refused, nothing restored")
    found.discard(RECORD)
    return found


def _check_against_record(snapshot: Path, record: dict[str, tuple[int, str]]) -> None:
    """Every file of the snapshot is one its record lists, with the size and sha256 it lists, and none is missing."""
    found = _snapshot_files(snapshot)
    for rel in sorted(found - record.keys()):
        raise ShareError(f"{snapshot / rel}: not listed in {snapshot / RECORD}; refused, nothing restored")
    for rel in sorted(record.keys() - found):
        raise ShareError(f"{snapshot / rel}: listed in {snapshot / RECORD} but missing; refused, nothing restored")
    for rel in sorted(record):
        expected, seen = record[rel], ((snapshot / rel).stat().st_size, sha256_file(snapshot / rel))
        if seen != expected:
            raise ShareError(f"{snapshot / rel}: {seen[0]} bytes with sha256 {seen[1]}, where {snapshot / RECORD} "
                             f"records {expected[0]} bytes with sha256 {expected[1]} (truncated or damaged on the "
                             "remote?); refused, nothing restored")


def restore(data: Path = Path("data"), runs: Path = Path("runs"), snapshot: Path = SNAPSHOT) -> dict[str, list]:
    """Copy the files of `snapshot` (what `nlpbench share pull` brought) into `data` and `runs`, once the whole
    snapshot matches its record. A file already there with the same bytes is left as it is; one with other bytes is
    kept too (a restore never replaces your own data or runs) and listed. The restored files get the mode of any new
    file (0666 less the umask) and, with their directories, one modification time, so that Snakemake finds each
    pulled run up to date with its data. All or nothing: a restore that fails midway removes what it added. Returns
    the paths restored, already there, and kept although they differ."""
    snapshot = Path(snapshot)
    if snapshot.is_symlink() or not snapshot.is_dir():
        raise ShareError(f"{snapshot}/: no pulled snapshot here; fetch it first with `nlpbench share pull` (the "
                         "remote it was pushed to set with `dvc remote add -d <name> <url>`)")
    remove_dead_staging(snapshot.parent, _builds_of_older_packs(snapshot))     # a killed pack's half-built snapshot
    tops = dict(zip(SHARED, (Path(data), Path(runs))))
    try:
        record = _read_record(snapshot)
        _check_against_record(snapshot, record)
        done, new, created = _plan(snapshot, record, tops)
    except OSError as e:
        raise ShareError(f"{snapshot}/: cannot be read ({e}); nothing restored") from e
    try:
        with ExitStack() as stack:
            stages = {}
            for rel, dst in new.items():
                name = _top(rel)
                if name not in stages:
                    stages[name] = stack.enter_context(staged(tops[name]))
                if _copy_hashing(snapshot / rel, stages[name] / dst.relative_to(tops[name])) != record[rel]:
                    raise ShareError(f"{snapshot / rel}: changed while it was restored; nothing restored")
        stamp = time.time()
        touched = set(new.values()) | {p for rel, dst in new.items() for p in _dirs_between(tops[_top(rel)], dst)}
        for path in sorted(touched, key=lambda p: len(p.parts), reverse=True):   # files, then their directories
            os.utime(path, (stamp, stamp))
    except BaseException as e:
        _remove_added(new.values(), created)
        if isinstance(e, OSError):
            raise ShareError(f"restoring {snapshot}/ into {data}/ and {runs}/ failed ({e}); nothing restored") from e
        raise
    ensure_shared_dirs(data, runs)          # a snapshot without data files still leaves a data/ for DVC
    done["restored"] = sorted(new.values())
    return done


def _top(rel: str) -> str:
    """The snapshot's directory (data or runs) a path of its record lies in."""
    return rel.split("/", 1)[0]


def _dirs_between(top: Path, dst: Path) -> list[Path]:
    """The directories from dst's own up to `top` (data/ or runs/), which holds it."""
    return [p for p in dst.parents if p == top or top in p.parents]


def _plan(snapshot: Path, record: dict, tops: dict[str, Path]) -> tuple[dict[str, list], dict[str, Path], set[Path]]:
    """What a restore does, decided before it copies anything: the files already there (same bytes, or kept
    although they differ), the new ones (record path -> destination) and the directories it creates. A file where
    the snapshot has a directory, or the other way round, is refused."""
    done: dict[str, list] = {"restored": [], "same": [], "kept": []}
    new, created = {}, set()
    for rel in sorted(record):
        top = tops[_top(rel)]
        dst = top / rel.split("/", 1)[1]
        for directory in reversed(_dirs_between(top, dst)):
            if not directory.exists():
                created.add(directory)
            elif not directory.is_dir():
                raise ShareError(f"{directory}: a file where the snapshot has a directory ({snapshot / rel}); move "
                                 "it away and restore again; nothing restored")
        if os.path.lexists(dst):
            if not dst.is_file():
                raise ShareError(f"{dst}: not a file where the snapshot has one ({snapshot / rel}); move it away and "
                                 "restore again; nothing restored")
            done["same" if same_bytes(snapshot / rel, dst) else "kept"].append(dst)
        else:
            new[rel] = dst
    return done, new, created


def _remove_added(files, directories: set[Path]) -> None:
    """Undo a restore that failed midway: remove the files it added and the directories it created."""
    for path in files:
        try:
            if os.path.lexists(path):
                path.unlink()
        except OSError:
            pass
    for directory in sorted(directories, key=lambda p: len(p.parts), reverse=True):
        try:
            directory.rmdir()
        except OSError:
            pass
