"""Shared fixtures: the offline data mirror and a bAbI folder prepared from it once per session."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
try:
    import nlpbench  # noqa: F401
except ImportError:  # not installed: run from the source tree
    sys.path.insert(0, str(REPO / "src"))


@pytest.fixture(scope="session")
def mirror_dir() -> Path:
    """The offline data mirror: $NLPBENCH_MIRROR, else <repo>/../shared/data; skip if absent."""
    path = Path(os.environ.get("NLPBENCH_MIRROR") or REPO.parent / "shared" / "data")
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
