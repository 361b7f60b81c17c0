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


def inline_declarations(root: Path) -> dict:
    """params.yaml of the project at `root` with every home under root/pipeline/{tables,outputs} put inline (its
    `by_scale:` keys as dotted keys of params.yaml's scales) and the homes' YAML files removed: the one-file form
    of the same configuration, which config.load reads alike and a test can edit as one mapping."""
    params = yaml.safe_load((root / "params.yaml").read_text())
    for section in ("tables", "outputs"):
        folder = root / "pipeline" / section
        for file in sorted(folder.glob("*/*.yaml")) if folder.is_dir() else []:
            decl = yaml.safe_load(file.read_text())
            for scale, keys in (decl.pop("by_scale", None) or {}).items():
                for key, value in keys.items():
                    if key in decl or "." in key:
                        params["scales"][scale][f"{section}.{file.parent.name}.{file.stem}.{key}"] = value
                    else:       # a key only that scale sets stays the declaration's own by_scale
                        decl.setdefault("by_scale", {}).setdefault(scale, {})[key] = value
            params.setdefault(section, {}).setdefault(file.parent.name, {})[file.stem] = decl
            file.unlink()
    return params


def edit_params(path: Path, edit: Callable[[dict], None]) -> None:
    """Change the configuration of the project whose params.yaml is `path` (homes included) by `edit`."""
    params = inline_declarations(path.parent)
    edit(params)
    path.write_text(yaml.safe_dump(params, sort_keys=False))


def project_repo(path: Path, edit: Callable[[dict], None]) -> Path:
    """A git repository of this checkout's files (tracked and new, as they are now), with params.yaml changed by
    `edit`, committed."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            check=True, capture_output=True, text=True).stdout.split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, path / name)
    edit_params(path / "params.yaml", edit)
    subprocess.run(["git", "-C", str(path), "init", "-q"], check=True)
    commit_all(path)
    return path
