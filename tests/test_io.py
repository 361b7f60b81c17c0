"""nlpbench.io: outputs get the umask's mode."""

import os
import stat

import pytest

from nlpbench import io


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
