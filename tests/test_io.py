"""nlpbench.io: outputs get the umask's mode, and a failed write names the output it could not write."""

import errno
import os
import stat
import tempfile

import pytest

from nlpbench import cli, io


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


def test_inside_accepts_a_path_below_its_root_and_refuses_one_that_climbs_or_links_out(tmp_path):
    root = tmp_path / "results"
    (root / "src").mkdir(parents=True)
    assert io.inside(root, root / "src" / "2.md") == root / "src" / "2.md"
    for bad in (root / "src" / ".." / ".." / "x.md", tmp_path / "x.md", root.parent):
        with pytest.raises(io.OutputError, match=r"cannot write .*: it would lie outside"):
            io.inside(root, bad)
    (root / "link").symlink_to(tmp_path)
    with pytest.raises(io.OutputError, match="outside"):
        io.inside(root, root / "link" / "x.md")


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
    with pytest.raises(io.OutputError, match=r"cannot write .*a\.md: No space left"):
        with io.staged(root) as stage:
            for name in ("a.csv", "a.md", "a.json"):
                io.write_text(stage / "src" / name, f"new {name}")
    assert {p.name: p.read_text() for p in (root / "src").iterdir()} == {
        n: f"old {n}" for n in ("a.csv", "a.md", "a.json")}
    assert [p.name for p in root.iterdir()] == ["src"]


def test_a_staging_folder_left_by_a_killed_build_is_removed_by_the_next(tmp_path):
    root = tmp_path / "results"
    dead = root / f"{io.STAGING_PREFIX}99999999-abc"       # above any pid_max: no such process
    alive = root / f"{io.STAGING_PREFIX}{os.getpid()}-abc"
    for d in (dead, alive):
        (d / "src").mkdir(parents=True)
        (d / "src" / "a.csv").write_text("half")
    with io.staged(root) as stage:
        io.write_text(stage / "src" / "b.csv", "x")
    assert not dead.exists() and alive.exists()
