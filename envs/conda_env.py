"""Write the pip section of a conda environment file from a lock file: every requirement of the lock inline, with
its hashes, so that the environment file names no other file. Snakemake copies the file into its conda prefix
before conda reads it, where a path relative to envs/ no longer resolves. `bash envs/run.sh lock` runs this.

    python envs/conda_env.py LOCK ENV_FILE [EXTRA_INDEX_URL]

Everything of ENV_FILE up to its `  - pip:` line is kept as written; what follows it is replaced.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path

PIP_LINE = "  - pip:"
REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==\S+( --hash=sha256:[0-9a-f]{64})+$")


class LockError(ValueError):
    pass


def lock_requirements(lock: Path) -> list[str]:
    """Each requirement of a pip lock file as one line, `name==version --hash=sha256:... ...`, in the file's order
    (the continuation lines joined, comments dropped); a requirement without a pin or a hash is refused."""
    requirements: list[str] = []
    logical, first = "", 0
    for number, line in enumerate(lock.read_text().splitlines(), 1):
        stripped = line.strip()
        if not logical and (not stripped or stripped.startswith("#")):
            continue
        first = first or number
        part = stripped.removesuffix("\\").strip()
        logical = f"{logical} {part}" if logical else part
        if stripped.endswith("\\"):
            continue
        if not REQUIREMENT.match(logical):
            raise LockError(f"{lock}, line {first}: not a requirement pinned with its hashes "
                            f"(name==version --hash=sha256:...): {logical[:120]!r}")
        requirements.append(logical)
        logical, first = "", 0
    if logical:
        raise LockError(f"{lock}, line {first}: the file ends inside a requirement")
    if not requirements:
        raise LockError(f"{lock}: no requirement")
    return requirements


def with_pip_section(env_text: str, env_file: Path, requirements: list[str], extra_index_url: str = "") -> str:
    """env_text with its pip section replaced: the extra index first where one is given, then the requirements."""
    lines = env_text.splitlines()
    if PIP_LINE not in lines:
        raise LockError(f"{env_file}: no {PIP_LINE.strip()!r} line under dependencies to write the lock under")
    head = lines[: lines.index(PIP_LINE) + 1]
    items = ([f"--extra-index-url {extra_index_url}"] if extra_index_url else []) + requirements
    return "\n".join(head + [f"      - {json.dumps(item)}" for item in items]) + "\n"


def write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    lock, env_file = Path(argv[0]), Path(argv[1])
    try:
        text = with_pip_section(env_file.read_text(), env_file, lock_requirements(lock), *argv[2:])
    except (LockError, OSError) as err:
        print(f"nlpbench: {err}", file=sys.stderr)
        return 1
    write_atomically(env_file, text)
    print(f"wrote {env_file} from {lock}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
