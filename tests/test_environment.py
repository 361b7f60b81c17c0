"""The locked environments (envs/lock/, installed by envs/run.sh): the install picks the lock of its platform, the
CPU install takes no CUDA package, every lock pins every package with its hashes, the locks differ only in torch
and what it brings, and the test tools stay out of the runtime dependencies."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
LOCKS = REPO / "envs" / "lock"
# the lock of each platform and build envs/run.sh installs (its lock_name), then the test tools and the cluster extra
PLATFORM_LOCKS = ("cpu.txt", "cu13.txt", "linux-aarch64.txt", "macos-arm64.txt")
OTHER_LOCKS = ("test.txt", "cluster.txt")
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


def test_the_lock_files_are_the_ones_the_install_offers():
    """No lock lies in envs/lock/ that the install cannot pick (a stale or incomplete one), and none is missing."""
    assert sorted(p.name for p in LOCKS.glob("*.txt")) == sorted(PLATFORM_LOCKS + OTHER_LOCKS)


def test_every_lock_pins_every_package_with_hashes_and_satisfies_the_requirements():
    requirements = runtime_requirements()
    for name in PLATFORM_LOCKS + OTHER_LOCKS:
        pins = read_lock(LOCKS / name)
        assert pins, name
        for pkg, (version, hashes) in pins.items():
            assert hashes, f"{name}: {pkg}=={version} has no hash"
        if name in OTHER_LOCKS:
            continue
        for req in requirements:
            key = canonicalize_name(req.name)
            assert key in pins, f"{name} lacks {req}"
            assert req.specifier.contains(Version(pins[key][0]), prereleases=True), \
                f"{name}: {key}=={pins[key][0]} does not satisfy {req} of envs/requirements.txt"


def test_the_locks_differ_only_in_torch_and_what_it_brings():
    cpu = read_lock(LOCKS / "cpu.txt")
    for name in PLATFORM_LOCKS[1:]:
        other = read_lock(LOCKS / name)
        for pkg in set(cpu) & set(other) - {"torch"}:
            assert cpu[pkg][0] == other[pkg][0], f"{pkg}: {cpu[pkg][0]} (cpu) but {other[pkg][0]} ({name})"
        extra = sorted(set(other) - set(cpu))
        assert all(is_cuda_package(p) for p in extra), f"{name} adds more than CUDA packages: {extra}"
        v = Version(other["torch"][0])
        assert v.release == Version(cpu["torch"][0]).release and v.local is None, (name, v)   # PyPI's torch
    for name in ("cu13.txt", "linux-aarch64.txt"):     # PyPI's torch for Linux is its CUDA 13 build
        assert any(p.startswith("nvidia-") for p in read_lock(LOCKS / name)), f"{name} lacks the CUDA libraries"
    macos = read_lock(LOCKS / "macos-arm64.txt")
    assert not [p for p in macos if is_cuda_package(p)], "the macOS lock pulls CUDA packages"
    test = read_lock(LOCKS / "test.txt")
    for pkg in set(cpu) & set(test):
        assert cpu[pkg][0] == test[pkg][0], f"{pkg}: {cpu[pkg][0]} (cpu) but {test[pkg][0]} (test)"


def _stand_ins(tmp_path: Path, system: str, machine: str, nvidia_smi: str | None) -> dict:
    """A copy of envs/run.sh's inputs, a `uname` that answers system and machine, an `nvidia-smi` that reports
    that CUDA version (None: no driver), and a venv whose python records each call in calls.txt (the probe of PyTorch's index fails): what
    `bash envs/run.sh install` would run, with nothing installed."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "envs", repo / "envs")
    shutil.copy(REPO / "pyproject.toml", repo / "pyproject.toml")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    stubs = {"uname": f'case "$1" in -s) echo {system} ;; -m) echo {machine} ;; *) exit 1 ;; esac\n',
             "nvidia-smi": "exit 127\n" if nvidia_smi is None else
             f"echo '| NVIDIA-SMI 580.00   Driver Version: 580.00   CUDA Version: {nvidia_smi}  |'\n"}
    venv_python = tmp_path / "venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    for path, body in [(bindir / n, b) for n, b in stubs.items()] + [
            (venv_python, f'echo "$*" >> {tmp_path / "calls.txt"}; [ "$1" != -c ]\n')]:
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
    # the stand-ins first, then the directories of bash, sed and grep
    system_path = os.pathsep.join(d for d in ("/usr/bin", "/bin") if Path(d).is_dir())
    return {"cwd": repo, "env": {"PATH": f"{bindir}{os.pathsep}{system_path}", "HOME": str(tmp_path),
                                 "NLPBENCH_VENV": str(tmp_path / "venv"), "PYTHON": "/bin/false"}}


def _install(tmp_path, system, machine, *args, nvidia_smi=None, **env):
    where = _stand_ins(tmp_path, system, machine, nvidia_smi)
    done = subprocess.run(["bash", "envs/run.sh", "install", *args], cwd=where["cwd"], capture_output=True,
                          text=True, timeout=60, env={**where["env"], **env})
    calls = tmp_path / "calls.txt"
    return done, calls.read_text().splitlines() if calls.exists() else []


def _lock_installed(calls: list[str]) -> str:
    """The lock file of the pip install that calls hold: `-m pip install --quiet --require-hashes ... -r LOCK`."""
    (install,) = [c for c in calls if "--require-hashes" in c]
    return install.rsplit(" -r ", 1)[1]


@pytest.mark.parametrize("system, machine, args, lock", [
    ("Linux", "x86_64", ["--cuda", "13"], "envs/lock/cu13.txt"),
    ("Linux", "aarch64", ["--cpu"], "envs/lock/linux-aarch64.txt"),
    ("Linux", "aarch64", ["--cuda", "13"], "envs/lock/linux-aarch64.txt"),
    ("Linux", "arm64", [], "envs/lock/linux-aarch64.txt"),
    ("Darwin", "arm64", [], "envs/lock/macos-arm64.txt"),
    ("Darwin", "arm64", ["--cpu"], "envs/lock/macos-arm64.txt"),
])
def test_the_install_takes_the_lock_of_its_platform_and_build(tmp_path, system, machine, args, lock):
    done, calls = _install(tmp_path, system, machine, *args)
    assert done.returncode == 0, done.stderr
    assert _lock_installed(calls) == lock and (REPO / lock).is_file()
    assert not [c for c in calls if c.startswith("-c ")], "PyPI's torch needs no probe of PyTorch's index"
    assert calls[-1] == "-m pip install --quiet --no-deps -e ."


def test_the_cpu_install_on_linux_x86_64_runs_the_same_pip_commands(tmp_path):
    """The CPU lock, one probe of PyTorch's CPU index (out of reach here: pip's own configuration, its wheel
    directory, gives torch), the locked install, then nlpbench without dependencies."""
    done, calls = _install(tmp_path, "Linux", "x86_64", "--cpu")
    assert done.returncode == 0, done.stderr
    assert [c.split()[0] for c in calls] == ["-c", "-m", "-m"] and calls[0].endswith(" https://download.pytorch.org/whl/cpu")
    assert calls[1:] == ["-m pip install --quiet --require-hashes -r envs/lock/cpu.txt",
                         "-m pip install --quiet --no-deps -e ."]
    assert "https://download.pytorch.org/whl/cpu is out of reach" in done.stderr


@pytest.mark.parametrize("smi, lock", [("13.0", "envs/lock/cu13.txt"), ("12.4", "envs/lock/cpu.txt"),
                                       (None, "envs/lock/cpu.txt")])
def test_without_an_option_the_driver_chooses_cuda_13_or_the_cpu_build(tmp_path, smi, lock):
    done, calls = _install(tmp_path, "Linux", "x86_64", nvidia_smi=smi)
    assert done.returncode == 0, done.stderr
    assert _lock_installed(calls) == lock
    assert ("runs CUDA 12, not 13: installing the CPU build" in done.stderr) == (smi == "12.4")


@pytest.mark.parametrize("system, machine, args, message", [
    ("Darwin", "arm64", ["--cuda", "13"], "macOS has no CUDA build of torch"),
    ("Darwin", "x86_64", [], "no lock file for Darwin x86_64"),
    ("Linux", "riscv64", ["--cpu"], "no lock file for Linux riscv64"),
    ("Linux", "x86_64", ["--cuda", "12"], "no CUDA 12 build is locked"),
    ("Linux", "x86_64", ["--cuda", "11"], "unknown torch build 'cu11'"),
])
def test_a_platform_or_build_without_a_lock_is_refused_before_anything_is_made(tmp_path, system, machine, args,
                                                                               message):
    done, calls = _install(tmp_path, system, machine, *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert calls == [] and not (tmp_path / "venv" / ".nlpbench-installed").exists()


def test_cuda_12_is_refused_from_the_variable_too(tmp_path):
    done, calls = _install(tmp_path, "Linux", "x86_64", NLPBENCH_TORCH="cu12")
    assert done.returncode == 2 and "no CUDA 12 build is locked" in done.stderr and calls == []


def test_test_tools_are_an_extra_and_locked():
    runtime = {canonicalize_name(r.name) for r in runtime_requirements()}
    assert "pytest" not in runtime
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    test = read_lock(LOCKS / "test.txt")
    for spec in extra:
        req = Requirement(spec)
        assert canonicalize_name(req.name) in test, f"envs/lock/test.txt lacks {spec}"
        assert req.specifier.contains(Version(test[canonicalize_name(req.name)][0]))


def test_the_lock_step_resolves_each_lock_for_its_platform_and_the_test_extra_of_pyproject(tmp_path):
    """`bash envs/run.sh lock` hands uv the `test` extra as pyproject.toml declares it (one list of test tools),
    each lock's torch and platform, then writes the conda environments from the new locks: run on a copy of the
    repository's files with a stand-in for uv that writes its input back as the lock."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "envs", repo / "envs")
    shutil.copy(REPO / "pyproject.toml", repo / "pyproject.toml")
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('test = ["pytest>=8", "pytest-xdist>=3"]',
                                                      'test = ["pytest>=8", "pytest-xdist>=3", "hypothesis>=6"]'))
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/bash\n"
                      'if [ "$1 $2" = "-m uv" ]; then\n'
                      '  [ "$3" = --version ] && exit 0\n'
                      '  while [ "$1" != --python-platform ]; do shift; done\n'
                      '  { echo "# for $2 $MACOSX_DEPLOYMENT_TARGET"\n'
                      "    if [ -f test.in ]; then cat test.in; else echo \"$(cat torch.txt) --hash=sha256:$(printf '0%.0s' {1..64})\"; fi\n"
                      "  } > lock.txt; exit 0\n"
                      "fi\n"
                      f'exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    done = subprocess.run(["bash", "envs/run.sh", "lock"], cwd=repo, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "NLPBENCH_VENV": str(tmp_path / "venv")})
    assert done.returncode == 0, done.stderr
    locks = {p.name: p.read_text().splitlines() for p in (repo / "envs" / "lock").glob("*.txt")}
    assert [line for line in locks["test.txt"] if not line.startswith("#")] == ["pytest>=8", "pytest-xdist>=3",
                                                                                "hypothesis>=6"]
    for name, platform, torch in (("cpu.txt", "x86_64-manylinux_2_28", "torch==2.13.0+cpu"),
                                  ("cu13.txt", "x86_64-manylinux_2_28", "torch==2.13.0"),
                                  ("linux-aarch64.txt", "aarch64-manylinux_2_28", "torch==2.13.0"),
                                  ("macos-arm64.txt", "aarch64-apple-darwin", "torch==2.13.0")):
        assert f"# for {platform} 14.0" in locks[name] and locks[name][-1].startswith(f"{torch} --hash="), name
    for yaml_name, torch in (("nlpbench.yaml", "torch==2.13.0+cpu"), ("nlpbench-cuda.yaml", "torch==2.13.0")):
        pip = (repo / "envs" / yaml_name).read_text().split("  - pip:\n", 1)[1].splitlines()
        assert pip[-1].startswith(f'      - "{torch} --hash=sha256:0000'), (yaml_name, pip)
    assert pip == [pip[-1]]          # the CUDA one: PyPI only, no extra index


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
