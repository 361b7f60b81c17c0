"""Shared fixtures: the offline data mirror, a bAbI folder prepared from it once per session, and a local HTTP
server for the download code."""

from __future__ import annotations

import http.server
import os
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
try:
    import nlpbench  # noqa: F401
except ImportError:  # not installed: run from the source tree
    sys.path.insert(0, str(REPO / "src"))

# The data mirror the README promises the tests find: $NLPBENCH_MIRROR, else ../shared/data beside the clone. Set
# for the whole session, so that every data step a test runs (in this process or in a `nlpbench` or `snakemake`
# child) reads the same mirror, not only the tests that ask for the `mirror_dir` fixture.
DEFAULT_MIRROR = REPO.parent / "shared" / "data"
if not os.environ.get("NLPBENCH_MIRROR") and DEFAULT_MIRROR.is_dir():
    os.environ["NLPBENCH_MIRROR"] = str(DEFAULT_MIRROR)


@pytest.fixture(scope="session")
def mirror_dir() -> Path:
    """The offline data mirror: $NLPBENCH_MIRROR, else <repo>/../shared/data; skip if absent."""
    path = Path(os.environ.get("NLPBENCH_MIRROR") or DEFAULT_MIRROR)
    if not path.is_dir():
        pytest.skip(f"no data mirror at {path} (set NLPBENCH_MIRROR)")
    return path


@pytest.fixture(scope="session")
def babi_root(mirror_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bAbI prepared from the mirror archive into a session temp folder (root/<variant>/qaN_*.txt)."""
    from nlpbench.data.fetch import BABI_MIRROR_FULL, BABI_MIRROR_PARTIAL, prepare_babi

    if not any((mirror_dir / name).is_file() for name in (BABI_MIRROR_PARTIAL, BABI_MIRROR_FULL)):
        pytest.skip(f"mirror {mirror_dir} has no bAbI archive")
    root = tmp_path_factory.mktemp("babi_session") / "babi"
    prepare_babi(root, mirror=mirror_dir)
    return root


@pytest.fixture
def served(tmp_path: Path):
    """(folder, base URL): a local HTTP server on 127.0.0.1 serving `folder` (404 for a file it lacks), stopped
    after the test."""
    root = tmp_path / "www"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
