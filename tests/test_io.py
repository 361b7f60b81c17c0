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
