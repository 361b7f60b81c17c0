"""`nlpbench share pull`: share/ from the DVC remote, checked before DVC writes a file of it.

DVC stores a directory as a manifest, a `.dir` object in its cache listing each file's md5 and path (`relpath`),
and `dvc pull` writes every file at the path the manifest gives, following `..`: a crafted or damaged remote (with
the dvc.lock that points at its manifest) makes it write beside the clone, and a truncated object lands unnoticed.
So the pull is made of three steps: `dvc fetch` of the share stage's output, which only stores objects in DVC's
cache, under their hashes; a check of the manifest whose hash dvc.lock records, and of every object it lists; then
`dvc checkout` of share/. The check refuses a manifest whose own md5 is not its name, a path that is absolute, holds
`..` or lies outside share/data, share/runs and share/MANIFEST.json, a path listed twice or as both a file and a
directory, an object that is not a plain file in the cache or whose md5 is not its name (removed from the cache then,
so that the next pull fetches it again), and a count or total size other than dvc.lock's.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import yaml

from nlpbench.share import RECORD, SNAPSHOT, ShareError, path_problem

STAGE = "share"
_MD5 = re.compile(r"[0-9a-f]{32}")


def _dvc(root: Path, *args: str) -> subprocess.CompletedProcess:
    dvc = shutil.which("dvc")
    if dvc is None:
        raise ShareError("dvc: not found on PATH; install it (pip install dvc) to pull shared runs")
    return subprocess.run([dvc, *args], cwd=root, capture_output=True, text=True)


def _last_line(done: subprocess.CompletedProcess) -> str:
    lines = [line.strip() for line in (done.stderr + "\n" + done.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {done.returncode}"


def _locked_output(root: Path, snapshot: Path) -> dict:
    """The share stage's output as dvc.lock records it: its manifest's md5 and, where recorded, size and nfiles."""
    lock = root / "dvc.lock"
    if not lock.is_file():
        raise ShareError(f"{lock}: missing; the commit that shared the runs carries it (check out that commit)")
    try:
        outs = yaml.safe_load(lock.read_text())["stages"][STAGE]["outs"]
        out = next(o for o in outs if isinstance(o, dict) and o.get("path") == snapshot.as_posix())
    except (OSError, yaml.YAMLError, KeyError, TypeError, StopIteration) as e:
        raise ShareError(f"{lock}: records no output {snapshot.as_posix()} of stage {STAGE} ({type(e).__name__}: "
                         f"{e}); the commit that shared the runs carries the right one") from e
    if out.get("hash") != "md5":
        raise ShareError(f"{lock}: stage {STAGE}'s {snapshot.as_posix()} was recorded by DVC 2 (no `hash: md5`); pack "
                         "and push it again with DVC 3")
    value = out.get("md5")
    if not (isinstance(value, str) and value.endswith(".dir") and _MD5.fullmatch(value[:-4])):
        raise ShareError(f"{lock}: stage {STAGE}'s {snapshot.as_posix()} has md5 {value!r}, not a directory's "
                         "(<32 hex digits>.dir)")
    return {"md5": value[:-4], "size": out.get("size"), "nfiles": out.get("nfiles")}


def _object_path(cache: Path, md5: str) -> Path:
    return cache / "files" / "md5" / md5[:2] / md5[2:]


def _md5_problem(path: Path, md5: str) -> str | None:
    """Why the object at `path` is not a plain file whose md5 is `md5`, or None. A file whose bytes are not its
    name is removed from the cache, so that the next fetch downloads it again."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing from DVC's cache (the remote lacks it, or `dvc fetch` failed)"
    if not stat.S_ISREG(mode):
        return "not a plain file in DVC's cache (a link or a directory)"
    with open(path, "rb") as f:
        size, found = os.fstat(f.fileno()).st_size, hashlib.file_digest(f, "md5").hexdigest()
    if found == md5:
        return None
    try:
        path.unlink()
        removed = "; removed from DVC's cache"
    except OSError:
        removed = ""
    return f"its {size} bytes have md5 {found}, not its name (truncated or damaged on the remote{removed})"


def check_manifest(cache: Path, locked: dict, snapshot: Path = SNAPSHOT) -> list[str]:
    """What is wrong with the manifest dvc.lock records for the snapshot, and with the objects it lists, as
    '<object> (<path>): <what>' lines; empty when it may be checked out."""
    name = f"{locked['md5']}.dir"
    manifest = _object_path(cache, name)
    problem = _md5_problem(manifest, locked["md5"])
    if problem:
        return [f"manifest {name} of {snapshot.as_posix()}/: {problem}"]
    try:
        entries = json.loads(manifest.read_bytes())
        if not isinstance(entries, list):
            raise ValueError("not a list")
    except (OSError, ValueError) as e:
        return [f"manifest {name} of {snapshot.as_posix()}/: not a DVC directory manifest ({e})"]
    problems, paths, total = [], set(), 0
    for i, entry in enumerate(entries):
        md5 = entry.get("md5") if isinstance(entry, dict) else None
        rel = entry.get("relpath") if isinstance(entry, dict) else None
        label = f"object {md5 if isinstance(md5, str) else '?'} ({snapshot.as_posix()}/{rel})"
        if not (isinstance(md5, str) and _MD5.fullmatch(md5)):
            problems.append(f"{label}: entry {i + 1} of manifest {name} names no file object (md5 {md5!r})")
            continue
        where = None if rel == RECORD else path_problem(rel)
        if where is None and rel in paths:
            where = "is listed twice"
        if where:
            problems.append(f"{label}: its path {rel!r} in manifest {name} {where}")
            continue
        paths.add(rel)
        problem = _md5_problem(_object_path(cache, md5), md5)
        if problem:
            problems.append(f"{label}: {problem}")
        else:
            total += os.stat(_object_path(cache, md5)).st_size
    for rel in sorted(paths):
        parents = {"/".join(rel.split("/")[:k]) for k in range(1, rel.count("/") + 1)}
        for clash in sorted(parents & paths):
            problems.append(f"object ({snapshot.as_posix()}/{clash}): manifest {name} lists it both as a file and "
                            f"as the directory of {rel}")
    if not problems:
        for key, value in (("nfiles", len(paths)), ("size", total)):
            if locked.get(key) is not None and locked[key] != value:
                problems.append(f"manifest {name} of {snapshot.as_posix()}/: its objects make {key} {value}, "
                                f"dvc.lock records {locked[key]}")
    return problems


def pull(root: Path = Path("."), snapshot: Path = SNAPSHOT, remote: str | None = None) -> int:
    """Fetch the snapshot dvc.lock records into DVC's cache, check it (check_manifest), and only then check out
    `snapshot`; returns its number of files. A bad manifest or object: ShareError naming it, and nothing written
    outside DVC's cache."""
    root, snapshot = Path(root), Path(snapshot)
    locked = _locked_output(root, snapshot)
    for path in (root / snapshot, *(root / snapshot).parents):
        if path == root:
            break
        if path.is_symlink():
            raise ShareError(f"{path}: a link (to {os.readlink(path)}); DVC would write the pulled snapshot through "
                             "it; remove it and pull again")
    fetched = _dvc(root, "fetch", *(("--remote", remote) if remote else ()), f"dvc.yaml:{STAGE}")
    cached = _dvc(root, "cache", "dir")
    if cached.returncode != 0:
        raise ShareError(f"dvc cache dir: {_last_line(cached)}")
    cache = root / cached.stdout.strip()
    problems = check_manifest(cache, locked, snapshot)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ShareError(f"{snapshot.as_posix()}/ from the remote refused, nothing checked out: {problems[0]}{more}")
    if fetched.returncode != 0:
        raise ShareError(f"dvc fetch: {_last_line(fetched)}")
    checkout = _dvc(root, "checkout", "--force", f"dvc.yaml:{STAGE}")
    if checkout.returncode != 0:
        raise ShareError(f"dvc checkout {snapshot.as_posix()}: {_last_line(checkout)}")
    return len(json.loads(_object_path(cache, f"{locked['md5']}.dir").read_bytes()))
