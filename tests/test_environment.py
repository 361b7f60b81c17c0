"""The locked environments (envs/lock/, installed by envs/run.sh): the CPU install takes no CUDA package, every
lock pins every package with its hashes, the builds differ only in torch and what it brings, and the test tools
stay out of the runtime dependencies."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
LOCKS = REPO / "envs" / "lock"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)(?:\s*;[^\\]*)?\s*\\?$")


def is_cuda_package(name: str) -> bool:
    """A CUDA runtime library or binding (nvidia-cublas, nvidia-cudnn-cu12, cuda-toolkit, cuda-bindings, ...);
    triton is the GPU compiler torch's CUDA builds bring."""
    name = canonicalize_name(name)
    return name.startswith("nvidia-") or "cuda" in name or name == "triton"


def read_lock(path: Path) -> dict[str, tuple[str, list[str]]]:
    """{name: (version, [sha256, ...])} of a pip requirements file with hashes, as uv pip compile writes it."""
    pins: dict[str, tuple[str, list[str]]] = {}
    current = None
    for line in path.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = PIN.match(line)
        if m:
            current = canonicalize_name(m.group(1))
            assert current not in pins, f"{path.name}: {current} pinned twice"
            pins[current] = (m.group(2), [])
            continue
        h = re.match(r"^\s+--hash=sha256:([0-9a-f]{64})\s*\\?$", line)
        assert h and current, f"{path.name}: unexpected line {line!r} (every requirement must be name==version)"
        pins[current][1].append(h.group(1))
    return pins


def runtime_requirements() -> list[Requirement]:
    lines = (REPO / "envs" / "requirements.txt").read_text().splitlines()
    return [Requirement(ln) for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def test_cpu_lock_holds_no_cuda_package_and_the_cpu_build_of_torch():
    pins = read_lock(LOCKS / "cpu.txt")
    cuda = sorted(n for n in pins if is_cuda_package(n))
    assert not cuda, f"envs/lock/cpu.txt pulls CUDA packages: {cuda}"
    assert Version(pins["torch"][0]).local == "cpu", pins["torch"]


def test_installed_cpu_environment_holds_no_cuda_package():
    """In the venv the CPU lock installed (CI's .venv): what is actually installed, not only what the lock says."""
    try:
        torch_version = Version(importlib.metadata.version("torch"))
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("torch is not installed in this interpreter")
    if torch_version.local != "cpu":
        pytest.skip(f"this interpreter holds torch {torch_version}, not the CPU build")
    names = {canonicalize_name(d.metadata["Name"]) for d in importlib.metadata.distributions()}
    cuda = sorted(n for n in names if is_cuda_package(n))
    assert not cuda, f"the CPU install holds CUDA packages: {cuda}"


def test_every_lock_pins_every_package_with_hashes_and_satisfies_the_requirements():
    requirements = runtime_requirements()
    for name in ("cpu.txt", "cu12.txt", "cu13.txt", "test.txt"):
        pins = read_lock(LOCKS / name)
        assert pins, name
        for pkg, (version, hashes) in pins.items():
            assert hashes, f"{name}: {pkg}=={version} has no hash"
        if name == "test.txt":
            continue
        for req in requirements:
            key = canonicalize_name(req.name)
            if key == "torch" and name == "cu12.txt" and key not in pins:
                continue          # written where the CUDA 12 index was out of reach: see the next test
            assert key in pins, f"{name} lacks {req}"
            assert req.specifier.contains(Version(pins[key][0]), prereleases=True), \
                f"{name}: {key}=={pins[key][0]} does not satisfy {req} of envs/requirements.txt"


def test_the_builds_differ_only_in_torch_and_what_it_brings():
    cpu = read_lock(LOCKS / "cpu.txt")
    for name, local in (("cu12.txt", "cu12"), ("cu13.txt", None)):
        other = read_lock(LOCKS / name)
        for pkg in set(cpu) & set(other) - {"torch"}:
            assert cpu[pkg][0] == other[pkg][0], f"{pkg}: {cpu[pkg][0]} (cpu) but {other[pkg][0]} ({name})"
        extra = sorted(set(other) - set(cpu))
        assert all(is_cuda_package(p) for p in extra), f"{name} adds more than CUDA packages: {extra}"
        if "torch" in other:
            v = Version(other["torch"][0])
            assert v.release == Version(cpu["torch"][0]).release
            assert (v.local or "").startswith(local) if local else v.local is None, (name, v)
    cu13 = read_lock(LOCKS / "cu13.txt")
    assert any(p.startswith("nvidia-") for p in cu13), "the CUDA 13 lock should bring the CUDA libraries"
    test = read_lock(LOCKS / "test.txt")
    for pkg in set(cpu) & set(test):
        assert cpu[pkg][0] == test[pkg][0], f"{pkg}: {cpu[pkg][0]} (cpu) but {test[pkg][0]} (test)"


def test_an_incomplete_cuda12_lock_stops_the_install_with_the_command_that_completes_it(tmp_path):
    if "torch" in read_lock(LOCKS / "cu12.txt"):
        pytest.skip("envs/lock/cu12.txt is complete")
    done = subprocess.run(["bash", "envs/run.sh", "install", "--cuda", "12"], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "NLPBENCH_VENV": str(tmp_path / "venv")})
    assert done.returncode == 2
    assert "envs/lock/cu12.txt holds no torch" in done.stderr and "bash envs/run.sh lock --cuda 12" in done.stderr
    assert not (tmp_path / "venv").exists()       # stopped before making anything


def test_an_unknown_build_is_refused():
    done = subprocess.run(["bash", "envs/run.sh", "install", "--cuda", "11"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "unknown torch build 'cu11'" in done.stderr


def test_test_tools_are_an_extra_and_locked():
    runtime = {canonicalize_name(r.name) for r in runtime_requirements()}
    assert "pytest" not in runtime
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    test = read_lock(LOCKS / "test.txt")
    for spec in extra:
        req = Requirement(spec)
        assert canonicalize_name(req.name) in test, f"envs/lock/test.txt lacks {spec}"
        assert req.specifier.contains(Version(test[canonicalize_name(req.name)][0]))


def test_the_lock_step_resolves_the_test_extra_of_pyproject(tmp_path):
    """`bash envs/run.sh lock` hands uv the `test` extra as pyproject.toml declares it (one list of test tools):
    run on a copy of the repository's files with a stand-in for uv that writes its input back as the lock."""
    import shutil
    import sys
    repo = tmp_path / "repo"
    for name in ("envs/run.sh", "envs/requirements.txt", "envs/nlpbench.yaml", "envs/nlpbench-cuda.yaml",
                 "envs/lock/cpu.txt", "pyproject.toml"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, repo / name)
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('test = ["pytest>=8", "pytest-xdist>=3"]',
                                                      'test = ["pytest>=8", "pytest-xdist>=3", "hypothesis>=6"]'))
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/bash\n"
                      'if [ "$1 $2" = "-m uv" ]; then\n'
                      '  [ "$3" = --version ] && exit 0\n'
                      "  if [ -f test.in ]; then cat test.in; else echo 'torch==2.13.0'; fi > lock.txt; exit 0\n"
                      "fi\n"
                      f'exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    done = subprocess.run(["bash", "envs/run.sh", "lock"], cwd=repo, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "NLPBENCH_VENV": str(tmp_path / "venv")})
    assert done.returncode == 0, done.stderr
    locked = [line for line in (repo / "envs/lock/test.txt").read_text().splitlines() if not line.startswith("#")]
    assert locked == ["pytest>=8", "pytest-xdist>=3", "hypothesis>=6"]


def test_conda_environments_install_their_lock_and_name_its_digest():
    """`snakemake --sdm conda` rebuilds an environment only when its file (or post-deploy script) changes: each file
    names the sha256 of the lock it installs, so a new lock makes a new environment."""
    import hashlib

    import yaml

    for name, build in (("nlpbench", "cpu"), ("nlpbench-cuda", "cu13")):
        path = REPO / "envs" / f"{name}.yaml"
        text = path.read_text()
        lock = LOCKS / f"{build}.txt"
        digest = re.search(rf"^# envs/lock/{build}\.txt sha256: ([0-9a-f]{{64}})$", text, re.M)
        assert digest and digest.group(1) == hashlib.sha256(lock.read_bytes()).hexdigest(), \
            f"{path.name} names another digest of {lock.name}: run bash envs/run.sh lock"
        deps = yaml.safe_load(text)["dependencies"]
        pip = next(d["pip"] for d in deps if isinstance(d, dict))
        assert f"-r lock/{build}.txt" in pip and not any("-e" in p.split() for p in pip)   # hashes forbid -e
        assert {"openjdk=17", "perl-xml-parser"} <= set(d for d in deps if isinstance(d, str))
        deploy = REPO / "envs" / f"{name}.post-deploy.sh"
        assert "--no-deps -e" in deploy.read_text() and os.access(deploy, os.X_OK)


# What the repository's top level holds: the layout DESIGN and docs/layout.md describe, the project's metadata and
# dot-files. A stray file (a lock written to `-` by a mistyped `-o -`, a scratch note) fails here.
EXPECTED_TOP_LEVEL = {
    "Snakefile", "dvc.yaml", "params.yaml", "overrides.yaml", "pyproject.toml",
    "README.md", "CHANGELOG.md", "LICENSE", "CITATION.cff",
    "pipeline", "src", "results", "tests", "envs", "docs", "profiles",
    ".ci", ".dvc", ".dvcignore", ".gitignore",
}


def test_repository_top_level_holds_only_expected_files():
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True, check=True)
    if tracked.returncode != 0 or not tracked.stdout:
        pytest.skip("not a git checkout")
    top = {line.split("/", 1)[0] for line in tracked.stdout.splitlines()}
    assert top - EXPECTED_TOP_LEVEL == set(), f"unexpected files at the repository root: {sorted(top - EXPECTED_TOP_LEVEL)}"


def test_the_test_session_reads_the_mirror_beside_the_clone_without_a_variable():
    """The README's test command needs no variable: with ../shared/data beside the clone, every data step of the
    suite (children included) reads it, as a newcomer's `bash envs/run.sh test` would."""
    beside = REPO.parent / "shared" / "data"
    if not beside.is_dir():
        pytest.skip(f"no mirror at {beside}")
    env = {k: v for k, v in os.environ.items() if k != "NLPBENCH_MIRROR"}
    probe = ("import os, conftest, nlpbench.data.fetch as f; "
             "print(os.environ.get('NLPBENCH_MIRROR')); print(f.resolve_mirror())")
    out = subprocess.run([os.sys.executable, "-c", probe], cwd=REPO / "tests", env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == [str(beside), str(beside)]
