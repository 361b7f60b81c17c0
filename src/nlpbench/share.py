"""Prepared data and trained runs shared through a DVC remote.

DVC's `share` stage (dvc.yaml) copies data/ and runs/ into share/, the one directory DVC caches and pushes; DVC then
links share/'s files to its cache (.dvc/config: reflinks, else hard links), so that the cache is the only second
copy on disk. data/ and runs/ themselves stay outputs DVC never caches, and never share a file with the cache (a
file written in place there cannot change a cached one), so no DVC command (`dvc exp run` checks out every cached
output first, deleting what it has no record of) touches what a user fetched or trained; DVC only ever rewrites
share/.

In a clone, `dvc pull` brings share/ back and `restore` copies its files into data/ and runs/, all with one
modification time, so that Snakemake sees every pulled run as up to date with the data it was trained on and only
builds the tables. Left out of a snapshot: runs/_tables/ (the markers saying that this clone built its tables: a
clone that pulls builds them from the runs) and the temporary files of writes still under way.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import tempfile
import time
from pathlib import Path

from nlpbench.io import STAGING_PREFIX

SNAPSHOT = Path("share")
# what a clone does not take over: the table markers of the clone that built them
NOT_SHARED = {"runs": ("_tables",)}


class ShareError(Exception):
    """A snapshot that cannot be made or restored; the message names the path and the remedy."""


def _shared_files(top: Path, skip: tuple[str, ...]) -> list[Path]:
    """The files under `top` a snapshot holds, relative to `top`."""
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        rel = Path(dirpath).relative_to(top)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(STAGING_PREFIX)
                             and not (rel == Path(".") and d in skip))
        found += [rel / f for f in sorted(filenames) if not f.endswith(".tmp")]
    return found


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst)


def pack(data: Path = Path("data"), runs: Path = Path("runs"), snapshot: Path = SNAPSHOT) -> dict[str, int]:
    """Replace `snapshot` by a copy of `data` and `runs` (as snapshot/data and snapshot/runs); returns the number of
    files of each. The snapshot is built beside and moved into place when complete."""
    snapshot = Path(snapshot)
    try:
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        build = Path(tempfile.mkdtemp(prefix=f".{snapshot.name}-", suffix=".tmp", dir=snapshot.parent))
    except OSError as e:
        raise ShareError(f"{snapshot}: cannot write the snapshot beside it ({e.strerror or e})") from e
    counts = {}
    try:
        for name, top in (("data", Path(data)), ("runs", Path(runs))):
            (build / name).mkdir()
            files = _shared_files(top, NOT_SHARED.get(name, ())) if top.is_dir() else []
            for rel in files:
                _copy(top / rel, build / name / rel)
            counts[name] = len(files)
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


def restore(data: Path = Path("data"), runs: Path = Path("runs"), snapshot: Path = SNAPSHOT) -> dict[str, list]:
    """Copy the files of `snapshot` (what `dvc pull` brought) into `data` and `runs`. A file already there with the same
    bytes is left as it is; one with other bytes is kept too (a restore never replaces your own data or runs) and
    listed. Every restored file and its directories get one modification time, so that Snakemake finds each pulled run
    up to date with its data. Returns the paths restored, already there, and kept although they differ."""
    snapshot = Path(snapshot)
    if not (snapshot / "runs").is_dir():
        raise ShareError(f"{snapshot}/: no pulled snapshot here; fetch it first with `dvc pull share` (the remote "
                         "it was pushed to set with `dvc remote add -d <name> <url>`)")
    done: dict[str, list] = {"restored": [], "same": [], "kept": []}
    stamp = time.time()
    touched: set[Path] = set()
    try:
        for name, top in (("data", Path(data)), ("runs", Path(runs))):
            source = snapshot / name
            for rel in _shared_files(source, ()) if source.is_dir() else []:
                dst = top / rel
                if dst.exists():
                    done["same" if filecmp.cmp(source / rel, dst, shallow=False) else "kept"].append(dst)
                    continue
                _copy(source / rel, dst)
                done["restored"].append(dst)
                touched.add(dst)
                touched.update(p for p in dst.parents if p != top.parent and top in (p, *p.parents))
        for path in sorted(touched, key=lambda p: len(p.parts), reverse=True):   # files, then their directories
            os.utime(path, (stamp, stamp))
    except OSError as e:
        raise ShareError(f"restoring {snapshot}/ into {data}/ and {runs}/ failed: {e}") from e
    return done
