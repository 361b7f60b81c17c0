"""A git repository of this checkout's files in a scratch directory, for the tests that clone a commit."""

import shutil
import subprocess
from pathlib import Path
from typing import Callable

import yaml

REPO = Path(__file__).resolve().parents[1]


def commit_all(path: Path, message: str = "x") -> None:
    for args in (["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message]):
        subprocess.run(["git", "-C", str(path), *args], check=True)


def project_repo(path: Path, edit: Callable[[dict], None]) -> Path:
    """A git repository of this checkout's files (tracked and new, as they are now), with params.yaml changed by
    `edit`, committed."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            check=True, capture_output=True, text=True).stdout.split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, path / name)
    params = yaml.safe_load((path / "params.yaml").read_text())
    edit(params)
    (path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    subprocess.run(["git", "-C", str(path), "init", "-q"], check=True)
    commit_all(path)
    return path
