"""nlpbench.runtime.io: outputs get the umask's mode, and a failed write names the output it could not write."""

import errno
import os
import stat
import tempfile
from pathlib import Path

import pytest

from nlpbench import cli
from nlpbench.runtime import io


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_outputs_respect_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        io.write_text(tmp_path / "a.txt", "x")
        io.write_json(tmp_path / "sub" / "b.json", {"k": 1})
    finally:
        os.umask(old)
    assert _mode(tmp_path / "a.txt") == 0o666 & ~umask
    assert _mode(tmp_path / "sub" / "b.json") == 0o666 & ~umask


def _unwritable(tmp_path, monkeypatch):
    """A directory whose files cannot be written: read-only, or (as root, where chmod does not stop writes)
    a full disk."""
    out = tmp_path / "results"
    out.mkdir()
    if os.geteuid() != 0:
        out.chmod(0o555)
        return out, "Permission denied"

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(tempfile, "mkstemp", full)
    return out, os.strerror(errno.ENOSPC)


def test_a_failed_write_names_the_output(tmp_path, monkeypatch):
    out, reason = _unwritable(tmp_path, monkeypatch)
    with pytest.raises(io.OutputError) as e:
        io.write_text(out / "index.csv", "x")
    assert str(e.value) == f"cannot write {out / 'index.csv'}: {reason}"
    assert not any(p.name.startswith(".index.csv.") for p in out.iterdir())


def test_a_full_disk_while_writing_names_the_output(tmp_path, monkeypatch):
    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(type(tmp_path), "write_text", full)
    with pytest.raises(io.OutputError, match=f"cannot write {tmp_path / 'm.json'}: No space left"):
        io.write_json(tmp_path / "m.json", {})
    assert list(tmp_path.iterdir()) == []


def test_the_cli_reports_an_unwritable_output_in_one_line(tmp_path, monkeypatch, capsys):
    out, reason = _unwritable(tmp_path, monkeypatch)
    assert cli.main(["--results", str(out), "index"]) == 2
    assert capsys.readouterr().err == f"nlpbench: cannot write {out / 'index.csv'}: {reason}\n"


def _killed_writer(out) -> None:
    """A process killed inside an atomic write of out/checkpoint.pt (its temp file half written)."""
    import subprocess
    import sys
    code = ("import os, signal, sys; from nlpbench.runtime import io\n"
            "with io.atomic_path(sys.argv[1]) as tmp:\n"
            "    tmp.write_bytes(b'half a checkpoint')\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(out / "checkpoint.pt")],
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == -9


def _temps(out) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp"))


def test_a_killed_writes_temp_file_is_removed_by_the_next_write_to_its_directory(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    _killed_writer(out)
    left = _temps(out)
    assert len(left) == 1 and left[0].startswith(".checkpoint.pt.") and not (out / "checkpoint.pt").exists()
    io.write_json(out / "metrics.json", {})                 # any output of that directory
    assert _temps(out) == []


def test_temp_files_of_writers_that_may_still_run_are_kept(tmp_path):
    """Only a writer known to be gone loses its temp file: one of this machine whose process runs is kept
    whatever its age; one of another machine, or of an older version, only while touched within STALE_AFTER."""
    import subprocess
    import sys
    import time
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        here = io._host_tag()
        names = {"live": f".model.pt.{here}-{live.pid}-abcd1234.tmp",
                 "this machine, no such process": f".model.pt.{here}-{10 ** 20}-abcd1234.tmp",
                 "other machine, fresh": ".model.pt.0badc0de-1-abcd1234.tmp",
                 "other machine, old": ".model.pt.0badc0de-2-abcd1234.tmp",
                 "older version, fresh": ".model.pt.abcd1234.tmp",
                 "older version, old": ".model.pt.wxyz_789.tmp",
                 "another file": ".notes.txt.tmp"}
        for name in names.values():
            (tmp_path / name).write_text("x")
        old = time.time() - io.STALE_AFTER - 60
        for key in ("live", "other machine, old", "older version, old", "another file"):
            os.utime(tmp_path / names[key], (old, old))
        io.write_text(tmp_path / "model.pt", "x")
        kept = {key for key, name in names.items() if (tmp_path / name).exists()}
        assert kept == {"live", "other machine, fresh", "older version, fresh", "another file"}
    finally:
        live.kill()
        live.wait()
    io.write_text(tmp_path / "model.pt", "y")                # its writer gone, its temp file goes too
    assert not (tmp_path / names["live"]).exists()


def test_inside_accepts_a_path_below_its_root_and_refuses_one_that_climbs_out(tmp_path):
    root = tmp_path / "results"
    (root / "src").mkdir(parents=True)
    assert io.inside(root, root / "src" / "2.md") == root / "src" / "2.md"
    for bad in (root / "src" / ".." / ".." / "x.md", tmp_path / "x.md", root.parent, Path("/etc/x.md"),
                root / "/etc/x.md"):
        with pytest.raises(io.OutputError, match=r"cannot write .*: it would lie outside .*results/ \("):
            io.inside(root, bad)
    # a '..' below the root is refused even where it comes back: after a link it would lead elsewhere
    with pytest.raises(io.OutputError, match=r"cannot write .*: it climbs with '\.\.' below .*results/"):
        io.inside(root, root / "src" / ".." / "src" / "2.md")


def test_inside_writes_through_the_links_a_user_made(tmp_path, monkeypatch):
    """A configuration cannot make a link: runs/ on a bigger disk, the root itself a link, or a link further
    down are the user's and are written through."""
    disk = tmp_path / "bigger-disk"
    (disk / "runs").mkdir(parents=True)
    project = tmp_path / "project"
    (project / "results").mkdir(parents=True)
    (project / "runs").symlink_to(disk / "runs")
    (project / "results" / "figures").symlink_to(disk)
    monkeypatch.chdir(project)
    for root, path in ((project, project / "runs" / "g" / "group.json"), (Path("."), Path("runs/g/run/m.json")),
                       (Path("runs"), Path("runs/g/x.json")),
                       (project / "results", project / "results" / "figures" / "f.png")):
        io.write_text(io.inside(root, path), "x")
    assert sorted(str(p.relative_to(disk)) for p in disk.rglob("*") if p.is_file()) == [
        "f.png", "runs/g/group.json", "runs/g/run/m.json", "runs/g/x.json"]


def _old_files(root):
    for name in ("a.csv", "a.md", "a.json"):
        (root / "src" / name).write_text(f"old {name}")


def test_a_staged_set_lands_whole(tmp_path):
    root = tmp_path / "results"
    (root / "src").mkdir(parents=True)
    _old_files(root)
    with io.staged(root) as stage:
        for name in ("a.csv", "a.md", "a.json", "fig.png"):
            io.write_text(stage / "src" / name, f"new {name}")
        assert (root / "src" / "a.csv").read_text() == "old a.csv"     # nothing lands before the block ends
    assert {p.name: p.read_text() for p in (root / "src").iterdir()} == {
        n: f"new {n}" for n in ("a.csv", "a.md", "a.json", "fig.png")}
    assert [p.name for p in root.iterdir()] == ["src"]


def test_a_failed_write_in_a_staged_set_leaves_every_old_file(tmp_path, monkeypatch):
    """A full disk at the second file of a table: the first, already written, does not land either."""
    root = tmp_path / "results"
    (root / "src").mkdir(parents=True)
    _old_files(root)
    real = type(tmp_path).write_text

    def full_at_md(self, text, *args, **kwargs):
        if self.name.startswith(".a.md."):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, text, *args, **kwargs)
    monkeypatch.setattr(type(tmp_path), "write_text", full_at_md)
    with pytest.raises(io.OutputError) as e:
        with io.staged(root) as stage:
            for name in ("a.csv", "a.md", "a.json"):
                io.write_text(stage / "src" / name, f"new {name}")
    # the file the user asked for, not the hidden staged copy
    assert str(e.value) == f"cannot write {root / 'src' / 'a.md'}: {os.strerror(errno.ENOSPC)}"
    assert e.value.path == root / "src" / "a.md" and e.value.errno == errno.ENOSPC
    assert {p.name: p.read_text() for p in (root / "src").iterdir()} == {
        n: f"old {n}" for n in ("a.csv", "a.md", "a.json")}
    assert [p.name for p in root.iterdir()] == ["src"]


def test_a_full_disk_while_building_a_table_names_the_table_in_one_line(tmp_path, monkeypatch, capsys):
    """`nlpbench table` on a full disk: one line naming results/<source>/<table>.md, and nothing written."""
    real = type(tmp_path).write_text

    def full_at_md(self, text, *args, **kwargs):
        if self.name.startswith(".2.md."):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, text, *args, **kwargs)
    monkeypatch.setattr(type(tmp_path), "write_text", full_at_md)
    results = tmp_path / "results"
    args = ["--params", str(Path(__file__).resolve().parents[1] / "params.yaml"),
            "--overrides", str(tmp_path / "none.yaml"), "--set", "scale=smoke",
            "--data", str(tmp_path / "data"), "--runs", str(tmp_path / "runs"), "--results", str(results)]
    assert cli.main(args + ["table", "tolias-thesis", "2", "--allow-empty"]) == 2
    assert capsys.readouterr().err == \
        f"nlpbench: cannot write {results / 'tolias-thesis' / '2.md'}: {os.strerror(errno.ENOSPC)}\n"
    assert list(results.iterdir()) == []


def test_a_staging_folder_left_by_a_killed_build_is_removed_by_the_next(tmp_path):
    root = tmp_path / "results"
    here = io._host_tag()
    dead = root / f"{io.STAGING_PREFIX}{here}-{10 ** 20}-abcd1234"       # above any pid_max: no such process
    alive = root / f"{io.STAGING_PREFIX}{here}-{os.getpid()}-abcd1234"
    for d in (dead, alive):
        (d / "src").mkdir(parents=True)
        (d / "src" / "a.csv").write_text("half")
    with io.staged(root) as stage:
        io.write_text(stage / "src" / "b.csv", "x")
    assert not dead.exists() and alive.exists()
