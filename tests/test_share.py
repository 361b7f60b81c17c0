"""Trained runs shared through a DVC remote: the share stage's snapshot, `dvc push`, and in a fresh clone `nlpbench
share pull`, `nlpbench share restore` and Snakemake building the tables without training (the README's "Sharing
runs"); a crafted or damaged remote or snapshot is refused by name before anything is written outside DVC's cache."""

import hashlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from nlpbench import share, share_pull
from nlpbench.runtime import io
from project_repo import commit_all, project_repo

BINDIR = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]


def _run(cmd, cwd, env, timeout=600):
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_pack_snapshots_data_and_runs_without_this_clones_table_markers(tmp_path):
    _write(tmp_path / "data/babi/en/qa1_train.txt", "1 Mary moved.\n")
    run = _write(tmp_path / "runs/memnet-smoke/run-1/model.pt", "weights")
    _write(tmp_path / "runs/_tables/smoke/tolias-thesis-2.done", "built here\n")
    _write(tmp_path / "runs/memnet-smoke/.model.pt.abc-1-x.tmp", "half written")
    _write(tmp_path / "runs/.staged-0a0b0c0d-1-abcdefgh/x.csv", "half staged")
    counts = share.pack(tmp_path / "data", tmp_path / "runs", tmp_path / "share")
    files = sorted(str(p.relative_to(tmp_path / "share")) for p in (tmp_path / "share").rglob("*") if p.is_file())
    assert files == ["MANIFEST.json", "data/babi/en/qa1_train.txt", "runs/memnet-smoke/run-1/model.pt"]
    assert counts == {"data": 1, "runs": 1}
    record = json.loads((tmp_path / "share/MANIFEST.json").read_text())["files"]
    assert record == [{"path": "data/babi/en/qa1_train.txt", "size": 14,
                       "sha256": hashlib.sha256(b"1 Mary moved.\n").hexdigest()},
                      {"path": "runs/memnet-smoke/run-1/model.pt", "size": 7,
                       "sha256": hashlib.sha256(b"weights").hexdigest()}]
    with run.open("r+") as f:            # a file rewritten in place in runs/ leaves the snapshot as it was
        f.write("WEIGHTS")
    assert (tmp_path / "share/runs/memnet-smoke/run-1/model.pt").read_text() == "weights"
    # a second pack replaces the snapshot: a run removed since is gone from it
    run.unlink()
    share.pack(tmp_path / "data", tmp_path / "runs", tmp_path / "share")
    assert not (tmp_path / "share/runs/memnet-smoke/run-1/model.pt").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def _packed(tmp_path: Path, files: dict[str, str]) -> Path:
    """share/ packed from a trained clone's data/ and runs/ holding `files` (path under the clone -> text)."""
    trained = tmp_path / "trained"
    for rel, text in files.items():
        _write(trained / rel, text)
    share.pack(trained / "data", trained / "runs", tmp_path / "share")
    return tmp_path / "share"


def test_restore_keeps_your_files_and_gives_the_pulled_ones_one_mtime(tmp_path):
    snapshot = _packed(tmp_path, {"data/babi/qa1.txt": "pulled data\n", "runs/g/done": "pulled\n",
                                  "runs/g/r1/model.pt": "pulled weights", "runs/g/r2/model.pt": "pulled weights 2"})
    mine = _write(tmp_path / "runs/g/r2/model.pt", "my own weights")
    _write(tmp_path / "runs/g/done", "pulled\n")
    old = time.time() - 3600
    for p in snapshot.rglob("*"):
        os.utime(p, (old, old))
    done = share.restore(tmp_path / "data", tmp_path / "runs", snapshot)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in done["restored"]) == [
        "data/babi/qa1.txt", "runs/g/r1/model.pt"]
    assert done["kept"] == [mine] and mine.read_text() == "my own weights"
    assert [p.relative_to(tmp_path).as_posix() for p in done["same"]] == ["runs/g/done"]
    stamps = {(tmp_path / p).stat().st_mtime for p in ("data/babi/qa1.txt", "data/babi", "data", "runs/g/r1/model.pt",
                                                       "runs/g/r1")}
    assert len(stamps) == 1 and stamps.pop() > old + 1800
    assert (snapshot / "runs/g/r1/model.pt").stat().st_mtime == pytest.approx(old)   # copies, not links
    assert not (tmp_path / "MANIFEST.json").exists() and not (tmp_path / "runs/MANIFEST.json").exists()


def test_a_snapshot_of_runs_without_data_leaves_an_empty_data_directory_on_both_sides(tmp_path):
    """A clone whose tables needed no data step has no data/: the pack and the restore each leave an empty one,
    which DVC's share stage depends on (it stops at a missing dependency before it runs)."""
    _write(tmp_path / "a/runs/memnet-game/run-1/model.pt", "weights")
    assert share.pack(tmp_path / "a/data", tmp_path / "a/runs", tmp_path / "share") == {"data": 0, "runs": 1}
    assert (tmp_path / "a/data").is_dir() and (tmp_path / "share/data").is_dir()
    done = share.restore(tmp_path / "b/data", tmp_path / "b/runs", tmp_path / "share")
    assert done["restored"] == [tmp_path / "b/runs/memnet-game/run-1/model.pt"]
    assert (tmp_path / "b/data").is_dir() and not any((tmp_path / "b/data").iterdir())


def test_restored_files_get_the_mode_of_a_new_file_not_the_caches_read_only_one(tmp_path):
    snapshot = _packed(tmp_path, {"runs/g/r1/model.pt": "pulled weights"})
    for p in snapshot.rglob("*"):
        if p.is_file():
            p.chmod(0o444)                  # as DVC's cache files, which a checkout links share/ to
    share.restore(tmp_path / "data", tmp_path / "runs", snapshot)
    restored = tmp_path / "runs/g/r1/model.pt"
    assert stat.S_IMODE(restored.stat().st_mode) == 0o666 & ~io.current_umask()
    restored.write_text("retrained")        # a user's later run overwrites it


def _nothing_restored(tmp_path: Path) -> None:
    assert not (tmp_path / "data").exists() and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("target", ["/etc/hostname", "missing-file"])
def test_restore_refuses_a_link_in_the_snapshot_before_copying_anything(tmp_path, target):
    snapshot = _packed(tmp_path, {"data/babi/qa1.txt": "pulled data\n", "runs/g/r1/model.pt": "pulled weights"})
    (snapshot / "runs/g/r1/model.pt").unlink()
    (snapshot / "runs/g/r1/model.pt").symlink_to(target)
    with pytest.raises(share.ShareError, match=re.escape(f"{snapshot}/runs/g/r1/model.pt: a link (to {target})")):
        share.restore(tmp_path / "data", tmp_path / "runs", snapshot)
    _nothing_restored(tmp_path)


def test_restore_refuses_a_file_that_does_not_match_the_snapshots_record(tmp_path):
    snapshot = _packed(tmp_path, {"data/babi/qa1.txt": "pulled data\n", "runs/g/r1/model.pt": "pulled weights"})
    with open(snapshot / "runs/g/r1/model.pt", "r+b") as f:     # truncated on the remote
        f.truncate(6)
    message = (f"{snapshot}/runs/g/r1/model.pt: 6 bytes with sha256 {hashlib.sha256(b'pulled').hexdigest()}, where "
               f"{snapshot}/MANIFEST.json records 14 bytes with sha256 "
               f"{hashlib.sha256(b'pulled weights').hexdigest()}")
    with pytest.raises(share.ShareError, match=re.escape(message)):
        share.restore(tmp_path / "data", tmp_path / "runs", snapshot)
    _nothing_restored(tmp_path)


def test_restore_refuses_a_file_the_snapshots_record_does_not_list(tmp_path):
    snapshot = _packed(tmp_path, {"runs/g/r1/model.pt": "pulled weights"})
    _write(snapshot / "runs/g/r1/extra.pt", "slipped in")
    with pytest.raises(share.ShareError, match=re.escape(f"{snapshot}/runs/g/r1/extra.pt: not listed in {snapshot}/"
                                                         "MANIFEST.json")):
        share.restore(tmp_path / "data", tmp_path / "runs", snapshot)
    _nothing_restored(tmp_path)


def test_restore_refuses_a_record_that_leads_out_of_the_snapshot(tmp_path):
    snapshot = _packed(tmp_path, {"runs/g/r1/model.pt": "pulled weights"})
    record = json.loads((snapshot / "MANIFEST.json").read_text())
    record["files"][0]["path"] = "runs/../../escaped.pt"
    (snapshot / "MANIFEST.json").write_text(json.dumps(record))
    leads_out = "entry 1 ('runs/../../escaped.pt') leads out of the snapshot"
    with pytest.raises(share.ShareError, match=re.escape(leads_out)):
        share.restore(tmp_path / "data", tmp_path / "runs", snapshot)
    _nothing_restored(tmp_path)


def test_a_snapshot_packed_without_a_record_is_refused_with_the_remedy(tmp_path, monkeypatch, capsys):
    from nlpbench import cli

    _write(tmp_path / "share/runs/g/r1/model.pt", "pulled weights")      # an older nlpbench's pack
    monkeypatch.chdir(tmp_path)
    assert cli.main(["share", "restore"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "share/MANIFEST.json: missing" in err and "pack it again" in err
    _nothing_restored(tmp_path)


def test_a_restore_that_fails_midway_keeps_nothing_of_it(tmp_path, monkeypatch):
    snapshot = _packed(tmp_path, {"data/babi/qa1.txt": "pulled data\n", "runs/g/r1/model.pt": "pulled weights",
                                  "runs/g/r2/model.pt": "pulled weights 2", "runs/h/r1/model.pt": "pulled 3"})
    mine = _write(tmp_path / "runs/g/notes.txt", "my notes")
    copy, calls = share._copy_hashing, []

    def disk_full_at_the_third_file(src, dst):
        calls.append(src)
        if len(calls) == 3:
            raise OSError(28, "No space left on device", str(dst))
        return copy(src, dst)

    monkeypatch.setattr(share, "_copy_hashing", disk_full_at_the_third_file)
    with pytest.raises(share.ShareError, match="No space left on device.*nothing restored"):
        share.restore(tmp_path / "data", tmp_path / "runs", snapshot)
    assert len(calls) == 3
    assert not (tmp_path / "data").exists()
    assert sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "runs").rglob("*")) == [
        "runs/g", "runs/g/notes.txt"]
    assert mine.read_text() == "my notes"
    monkeypatch.setattr(share, "_copy_hashing", copy)          # the disk has room again: the restore completes
    assert len(share.restore(tmp_path / "data", tmp_path / "runs", snapshot)["restored"]) == 4


def _killed_pack(root: Path) -> None:
    """A `nlpbench share pack` in `root` killed while it copies its first file."""
    code = ("import os, signal; from nlpbench import share\n"
            "def killed(src, dst):\n"
            "    dst.parent.mkdir(parents=True, exist_ok=True); dst.write_bytes(b'half')\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\n"
            "share._copy_hashing = killed\n"
            "share.pack()\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=root,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == -signal.SIGKILL


def _leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith((".staged-", ".share-")))


@pytest.mark.parametrize("then", ["pack", "restore"])
def test_what_a_killed_pack_left_is_removed_by_the_next_pack_or_restore(tmp_path, then):
    _write(tmp_path / "data/babi/qa1.txt", "data\n")
    _write(tmp_path / "runs/g/r1/model.pt", "weights")
    share.pack(tmp_path / "data", tmp_path / "runs", tmp_path / "share")
    _killed_pack(tmp_path)
    older = tmp_path / ".share-abcd1234.tmp"             # an older nlpbench's killed pack, untouched for two hours
    _write(older / "runs/g/r1/model.pt", "half")
    os.utime(older, (time.time() - 7200,) * 2)
    recent = tmp_path / ".share-efgh5678.tmp"            # one whose writer may still run
    recent.mkdir()
    assert len(_leftovers(tmp_path)) == 3
    getattr(share, then)(tmp_path / "data", tmp_path / "runs", tmp_path / "share")
    assert _leftovers(tmp_path) == [recent.name]
    assert (tmp_path / "share/MANIFEST.json").is_file()


def test_restore_without_a_pulled_snapshot_says_what_to_run(tmp_path, monkeypatch):
    from nlpbench import cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(["share", "restore"]) == 2


def _store(cache: Path, data: bytes, suffix: str = "") -> str:
    """`data` stored in a DVC cache (or remote) directory under its md5, as DVC 3 stores it; its md5."""
    md5 = hashlib.md5(data).hexdigest()
    _write(cache / "files/md5" / md5[:2] / (md5[2:] + suffix), "").write_bytes(data)
    return md5


def _cached_share(cache: Path, files: dict[str, bytes], extra: list[dict] = ()) -> dict:
    """A share/ manifest and its objects in `cache`, with `extra` entries added to the manifest; what dvc.lock
    records of it."""
    entries = [{"md5": _store(cache, data), "relpath": rel} for rel, data in files.items()] + list(extra)
    md5 = _store(cache, json.dumps(entries).encode(), ".dir")
    return {"md5": md5, "size": sum(map(len, files.values())), "nfiles": len(files)}


SHARED_FILES = {"MANIFEST.json": b"{}", "data/babi/qa1.txt": b"pulled data\n", "runs/g/r1/model.pt": b"weights"}


def test_an_honest_manifest_passes_the_check(tmp_path):
    assert share_pull.check_manifest(tmp_path, _cached_share(tmp_path, SHARED_FILES)) == []


@pytest.mark.parametrize("relpath, what", [
    ("../../ESCAPE.txt", "leads out of the snapshot ('..')"),
    ("runs/../../ESCAPE.txt", "leads out of the snapshot ('..')"),
    ("/tmp/ESCAPE.txt", "is an absolute path"),
    ("elsewhere.txt", "lies outside data/ and runs/"),
    ("runs//g.pt", "is not a plain path"),
    ("runs/g/r1/model.pt", "is listed twice"),
])
def test_the_check_refuses_a_manifest_path_that_leads_elsewhere(tmp_path, relpath, what):
    md5 = _store(tmp_path, b"x")
    locked = _cached_share(tmp_path, SHARED_FILES, [{"md5": md5, "relpath": relpath}])
    problems = share_pull.check_manifest(tmp_path, locked)
    assert len(problems) == 1 and problems[0].startswith(f"object {md5} (share/{relpath}): its path {relpath!r} in "
                                                         f"manifest {locked['md5']}.dir {what}")


def test_the_check_refuses_an_entry_that_is_a_file_and_a_directory(tmp_path):
    locked = _cached_share(tmp_path, {**SHARED_FILES, "runs/g": b"a file"})
    problems = share_pull.check_manifest(tmp_path, locked)
    assert problems == [f"object (share/runs/g): manifest {locked['md5']}.dir lists it both as a file and as the "
                        "directory of runs/g/r1/model.pt"]


def test_the_check_refuses_a_truncated_object_and_drops_it_from_the_cache(tmp_path):
    locked = _cached_share(tmp_path, SHARED_FILES)
    md5 = hashlib.md5(b"weights").hexdigest()
    obj = tmp_path / "files/md5" / md5[:2] / md5[2:]
    obj.write_bytes(b"wei")
    assert share_pull.check_manifest(tmp_path, locked) == [
        f"object {md5} (share/runs/g/r1/model.pt): its 3 bytes have md5 {hashlib.md5(b'wei').hexdigest()}, not its "
        "name (truncated or damaged on the remote; removed from DVC's cache)"]
    assert not obj.exists()                     # the next `nlpbench share pull` fetches it again


def test_the_check_refuses_a_missing_or_linked_object_and_a_damaged_manifest(tmp_path):
    locked = _cached_share(tmp_path, SHARED_FILES)
    data_md5, run_md5 = (hashlib.md5(SHARED_FILES[k]).hexdigest() for k in ("data/babi/qa1.txt", "runs/g/r1/model.pt"))
    (tmp_path / "files/md5" / data_md5[:2] / data_md5[2:]).unlink()
    run = tmp_path / "files/md5" / run_md5[:2] / run_md5[2:]
    run.unlink()
    run.symlink_to(tmp_path / "elsewhere")
    problems = share_pull.check_manifest(tmp_path, locked)
    assert problems == [f"object {data_md5} (share/data/babi/qa1.txt): missing from DVC's cache (the remote lacks it, "
                        "or `dvc fetch` failed)",
                        f"object {run_md5} (share/runs/g/r1/model.pt): not a plain file in DVC's cache (a link or a "
                        "directory)"]
    manifest = tmp_path / "files/md5" / locked["md5"][:2] / (locked["md5"][2:] + ".dir")
    manifest.write_text("[]")
    assert share_pull.check_manifest(tmp_path, locked)[0].startswith(
        f"manifest {locked['md5']}.dir of share/: its 2 bytes have md5 ")


def test_the_check_refuses_a_manifest_whose_size_is_not_dvc_locks(tmp_path):
    locked = {**_cached_share(tmp_path, SHARED_FILES), "size": 1}
    assert share_pull.check_manifest(tmp_path, locked) == [
        f"manifest {locked['md5']}.dir of share/: its objects make size 21, dvc.lock records 1"]


def _shared_on_a_remote(tmp_path: Path, env: dict) -> tuple[Path, Path]:
    """A git repository with dvc.yaml's share stage, whose data/ and runs/ were packed (`dvc repro --single-item
    share`) and pushed to a local-directory remote, dvc.lock committed: the README's commands where runs were
    trained. Returns the repository and the remote."""
    repo, remote = tmp_path / "trained", tmp_path / "lab-remote"
    stage = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["share"]
    stage["deps"] = [d for d in stage["deps"] if d in ("data", "runs")]       # the code it depends on is not here
    _write(repo / "dvc.yaml", yaml.safe_dump({"stages": {"share": stage}}))
    _write(repo / ".gitignore", "/data/\n/runs/\n/share/\n")
    _write(repo / "data/babi/en/qa1_train.txt", "1 Mary moved.\n")
    _write(repo / "runs/memnet-smoke/run-1/model.pt", "weights")
    _run(["git", "init", "-q"], repo, env)
    for cmd in (["dvc", "init", "-q"], ["dvc", "repro", "-q", "--single-item", "share"],
                ["dvc", "remote", "add", "-d", "lab", str(remote)], ["dvc", "push", "-q"]):
        _run(cmd, repo, env)
    commit_all(repo, "runs shared on the lab remote")
    return repo, remote


def _clone(repo: Path, name: str, env: dict) -> Path:
    _run(["git", "clone", "-q", str(repo), str(repo.parent / name)], repo.parent, env)
    return repo.parent / name


def _share_pull_fails(clone: Path, env: dict) -> str:
    done = subprocess.run(["nlpbench", "share", "pull"], cwd=clone, env=env, capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1, done
    assert not (clone / "share").exists() and not (clone / "data").exists() and not (clone / "runs").exists()
    return done.stderr


def test_share_pull_refuses_a_crafted_or_damaged_remote_before_dvc_writes_a_file(tmp_path):
    env = {**os.environ, "PATH": f"{BINDIR}{os.pathsep}{os.environ['PATH']}"}
    repo, remote = _shared_on_a_remote(tmp_path, env)
    locked = yaml.safe_load((repo / "dvc.lock").read_text())["stages"]["share"]["outs"][0]["md5"]

    honest = _clone(repo, "honest", env)
    _run(["nlpbench", "share", "pull"], honest, env)
    _run(["nlpbench", "share", "restore"], honest, env)
    assert (honest / "runs/memnet-smoke/run-1/model.pt").read_text() == "weights"
    assert (honest / "data/babi/en/qa1_train.txt").read_text() == "1 Mary moved.\n"

    # a manifest that leads `dvc pull` out of the clone: DVC would write tmp_path/ESCAPE.txt
    manifest = json.loads((remote / "files/md5" / locked[:2] / locked[2:]).read_text())
    escape = {"md5": hashlib.md5(b"weights").hexdigest(), "relpath": "../../ESCAPE.txt"}     # the model's bytes
    crafted = _store(remote, json.dumps(manifest + [escape]).encode(), ".dir")
    clone = _clone(repo, "crafted", env)
    lock = yaml.safe_load((clone / "dvc.lock").read_text())       # pointed at it, its count and size made to match
    out = lock["stages"]["share"]["outs"][0]
    out.update(md5=f"{crafted}.dir", nfiles=out["nfiles"] + 1, size=out["size"] + len(b"weights"))
    (clone / "dvc.lock").write_text(yaml.safe_dump(lock))
    err = _share_pull_fails(clone, env)
    assert f"object {escape['md5']} (share/../../ESCAPE.txt): its path '../../ESCAPE.txt' in manifest " in err
    assert "leads out of the snapshot ('..')" in err
    assert not (tmp_path / "ESCAPE.txt").exists()

    # an object truncated on the remote
    model = hashlib.md5(b"weights").hexdigest()
    obj = remote / "files/md5" / model[:2] / model[2:]
    obj.chmod(0o644)
    obj.write_bytes(b"wei")
    err = _share_pull_fails(_clone(repo, "truncated", env), env)
    assert (f"object {model} (share/runs/memnet-smoke/run-1/model.pt): its 3 bytes have md5 "
            f"{hashlib.md5(b'wei').hexdigest()}, not its name (truncated or damaged on the remote") in err


def test_share_pull_refuses_a_share_directory_that_is_a_link(tmp_path):
    """A clone whose share/ is a committed link: DVC would check the snapshot out through it."""
    _write(tmp_path / "dvc.lock", yaml.safe_dump({"stages": {"share": {"outs": [
        {"path": "share", "hash": "md5", "md5": "0" * 32 + ".dir", "size": 1, "nfiles": 1}]}}}))
    (tmp_path / "share").symlink_to(tmp_path / "outside")
    with pytest.raises(share.ShareError, match=re.escape(f"{tmp_path}/share: a link (to {tmp_path}/outside)")):
        share_pull.pull(tmp_path)
    assert not (tmp_path / "outside").exists()


def _one_table(table: str):
    """A configuration with one cheap table at the smoke scale, `table` of the thesis (2: bAbI task 1, one epoch;
    16: the guess-the-number game, no data step) and no other table or output; the scale is committed in
    overrides.yaml, so that Snakemake and DVC both read it."""
    def edit(params: dict) -> None:
        params["scales"]["smoke"]["memnet.train.epochs"] = 1
        params["scales"]["smoke"]["task_subset"] = [1]
        params["tables"] = {"tolias-thesis": {table: params["tables"]["tolias-thesis"][table]}}
        params["outputs"] = {}
        for scale in params["scales"].values():    # a scale's keys for the declarations left out would name nothing
            for key in [k for k in scale if k.startswith(("tables.", "outputs."))
                        and not k.startswith(f"tables.tolias-thesis.{table}.")]:
                del scale[key]
    return edit


def _jobs_to_run(work: Path, env: dict) -> set[str]:
    """The rules Snakemake would run (its dry run's job counts)."""
    out = _run(["snakemake", "--cores", "1", "--dry-run", "--quiet", "rules"], work, env).stdout
    return {m[1] for m in re.finditer(r"^(\S+)\s+\d+$", out, re.M)} - {"total"}


def _trained_clone(path: Path, table: str, env: dict) -> Path:
    """A git repository of the project that builds `table` alone (_one_table), with no committed tables."""
    path.mkdir()
    project_repo(path, _one_table(table))
    (path / "overrides.yaml").write_text("scale: smoke\n")
    _run(["git", "rm", "-rqf", "results"], path, env)      # no committed tables: a clone has only what it builds
    commit_all(path, f"table {table} at the smoke scale")
    return path


def _share(a: Path, remote: Path, env: dict) -> None:
    """The commands of docs/sharing.md where the runs were trained: the snapshot pushed, dvc.lock committed."""
    _run(["dvc", "remote", "add", "-d", "lab", str(remote)], a, env)
    _run(["dvc", "repro", "--single-item", "share"], a, env)
    _run(["dvc", "push"], a, env)
    assert any(remote.rglob("*")), "dvc push sent nothing to the remote"
    _run(["git", "add", "dvc.lock", ".dvc/config"], a, env)
    _run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "runs pushed to the lab remote"], a, env)


def _pull_and_restore(a: Path, b: Path, env: dict) -> None:
    """docs/sharing.md in a fresh clone: the snapshot pulled and restored into data/ and runs/."""
    _run(["git", "clone", "-q", str(a), str(b)], a.parent, env)
    assert not (b / "runs").exists() and not (b / "data").exists()
    _run(["nlpbench", "share", "pull"], b, env)
    _run(["nlpbench", "share", "restore"], b, env)


def _up_to_date(work: Path, env: dict, *stages: str) -> bool:
    return "up to date" in _run(["dvc", "status", *stages], work, env).stdout


def test_pulled_runs_rebuild_the_table_in_a_fresh_clone_without_training(tmp_path, mirror_dir):
    """Clone A runs the DAG through DVC (`dvc repro`: data, training, one table, the snapshot of data/ and runs/)
    and pushes the snapshot to a local-directory remote; a fresh `git clone` B pulls it, restores it and runs
    Snakemake, which trains nothing and builds the same table; B's `dvc status` then finds every stage as A left
    it (its own table markers under runs/ are none of DVC's business)."""
    env = {**os.environ, "PATH": f"{BINDIR}{os.pathsep}{os.environ['PATH']}", "NLPBENCH_MIRROR": str(mirror_dir)}
    a = _trained_clone(tmp_path / "a", "2", env)
    _run(["dvc", "repro"], a, env)
    table = Path("results/smoke/tolias-thesis/2.csv")   # a trial scale: results/<scale>/
    assert (a / table).is_file() and any((a / "logs" / "train").glob("*.log"))
    remote = tmp_path / "lab-remote"
    _share(a, remote, env)
    # DVC links share/ to its cache; runs/ shares no file with either (a file rewritten there cannot alter a pushed one)
    assert all(p.stat().st_nlink == 1 for p in (a / "runs").rglob("*") if p.is_file())
    assert _up_to_date(a, env)

    b = tmp_path / "b"
    _pull_and_restore(a, b, env)
    assert not (b / table).exists()
    assert _jobs_to_run(b, env) == {"table_tolias_thesis_2", "index", "all"}    # no training, no data step
    _run(["snakemake", "--cores", "1"], b, env)
    assert not (b / "logs" / "train").exists() and not (b / "logs" / "data").exists()   # no training, no fetching
    assert (b / table).read_bytes() == (a / table).read_bytes()
    assert all(p.stat().st_nlink == 1 for p in (b / "runs").rglob("*") if p.is_file())
    assert yaml.safe_load((b / "dvc.lock").read_text())["stages"]["share"]
    assert (b / "runs" / "_tables").is_dir()
    assert _up_to_date(b, env), _run(["dvc", "status"], b, env).stdout


def test_runs_that_needed_no_data_step_are_shared_and_restored(tmp_path):
    """A clone whose one table needs no data step (the guess-the-number game) has no data/ to share: its
    snapshot still goes through DVC's share stage, which depends on data/, and a fresh clone restores it,
    builds the table and finds the stage up to date."""
    env = {**os.environ, "PATH": f"{BINDIR}{os.pathsep}{os.environ['PATH']}"}
    a = _trained_clone(tmp_path / "a", "16", env)
    _run(["snakemake", "--cores", "2"], a, env)
    assert not [p for p in (a / "data").rglob("*")]           # an empty data/: no data step ran
    _share(a, tmp_path / "lab-remote", env)
    assert _up_to_date(a, env, "share")

    b = tmp_path / "b"
    _pull_and_restore(a, b, env)
    assert (b / "data").is_dir() and _up_to_date(b, env, "share")
    _run(["snakemake", "--cores", "1"], b, env)
    assert not (b / "logs" / "train").exists() and (b / "results" / "smoke" / "tolias-thesis" / "16.md").is_file()
    assert _up_to_date(b, env, "share"), _run(["dvc", "status", "share"], b, env).stdout


def test_dvc_does_not_see_what_a_snapshot_leaves_out(tmp_path):
    """The project's .dvcignore hides from DVC exactly the files of data/ and runs/ that `nlpbench share pack`
    leaves out (this clone's table markers, the temporary files of writes under way), so that DVC's hashes of data/
    and runs/ are those of what the snapshot holds."""
    env = {**os.environ, "PATH": f"{BINDIR}{os.pathsep}{os.environ['PATH']}"}
    files = ["data/babi/en/qa1_train.txt", "data/babi/.qa2.txt.abc-1-x.tmp", "data/.staged-0a0b0c0d-1-abcdefgh/x",
             "runs/memnet-smoke/run-1/model.pt", "runs/memnet-smoke/run-1/.model.pt.abc-1-x.tmp",
             "runs/_tables/smoke/tolias-thesis/2.done", "runs/_tables/smoke/tolias-thesis/2.md",
             "runs/memnet-smoke/.staged-0a0b0c0d-1-abcdefgh/x.csv", "runs/memnet-smoke/_tables/kept.json"]
    for rel in files:
        _write(tmp_path / rel, rel)
    (tmp_path / ".dvcignore").write_bytes((REPO / ".dvcignore").read_bytes())
    _run(["git", "init", "-q"], tmp_path, env)
    _run(["dvc", "init", "-q"], tmp_path, env)
    share.pack(tmp_path / "data", tmp_path / "runs", tmp_path / "share")
    snapshot = {e["path"] for e in json.loads((tmp_path / "share" / share.RECORD).read_text())["files"]}
    done = subprocess.run(["dvc", "check-ignore", *files], cwd=tmp_path, env=env, capture_output=True, text=True)
    ignored = set(done.stdout.split())
    assert snapshot and ignored, (done.stdout, done.stderr)
    assert set(files) - ignored == snapshot
