"""The conda environments of `snakemake --sdm conda` (envs/nlpbench.yaml, envs/nlpbench-cuda.yaml) build where
Snakemake builds them: it copies each file (and its post-deploy script) into its conda prefix and runs
`conda env create --file <copy>` there, and conda runs pip on the file's pip section from the copy's directory.
Conda cannot run here, so a stand-in answers Snakemake's conda calls and does what conda's pip step does up to the
download: the pip section becomes a requirements file beside the copy, which pip's own parser reads."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parent.parent
ENVS = {"nlpbench.yaml": "cpu", "nlpbench-cuda.yaml": "cu13"}   # each conda file and the lock it carries

# Snakemake's conda calls (snakemake/deployment/conda.py): `conda info --json`, `conda --version`, `conda config
# --get channel_priority --json`, `conda env create ... --file F --prefix P`, `conda clean`, then the post-deploy
# script under `source <conda>/bin/activate P`. The environment's python records what it is asked to run.
STAND_IN_CONDA = r'''#!{python}
import json, os, sys, tempfile
import yaml
from packaging.requirements import Requirement
from pip._internal.network.session import PipSession
from pip._internal.req.req_file import parse_requirements

base = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
args = sys.argv[1:]
if args == ["info", "--json"]:
    print(json.dumps({{"conda_prefix": base, "platform": "linux-64"}}))
elif args == ["--version"]:
    print("conda 24.11.3")
elif args[:1] == ["clean"]:          # --conda-cleanup-pkgs (tarballs by default)
    pass
elif args[:2] == ["config", "--get"]:
    print(json.dumps({{"get": {{"channel_priority": "strict"}}}}))
elif args[:2] == ["env", "create"]:
    file, prefix = args[args.index("--file") + 1], args[args.index("--prefix") + 1]
    pip = next(d["pip"] for d in yaml.safe_load(open(file))["dependencies"] if isinstance(d, dict))
    # conda's pip installer: the section as a requirements file in the env file's directory, pip run from there
    workdir = os.path.dirname(os.path.abspath(file))
    with tempfile.NamedTemporaryFile("w", prefix="condaenv.", suffix=".requirements.txt", dir=workdir,
                                     delete=False) as requirements:
        requirements.write("\n".join(pip))
    os.chdir(workdir)
    pinned = []
    for parsed in parse_requirements(requirements.name, session=PipSession()):   # a missing -r file stops here
        req = Requirement(parsed.requirement)
        hashes = (parsed.options or {{}}).get("hashes", {{}}).get("sha256", [])
        if parsed.is_editable or [s.operator for s in req.specifier] != ["=="] or not hashes:
            sys.exit(f"pip would refuse {{parsed.requirement!r}} of {{file}}: not name==version with its hashes")
        pinned.append(f"{{req.name}}=={{next(iter(req.specifier)).version}} {{len(hashes)}}")
    os.remove(requirements.name)
    os.makedirs(os.path.join(prefix, "bin"))
    with open(os.path.join(prefix, "pinned.txt"), "w") as out:
        out.write("\n".join(pinned) + "\n")
    python = os.path.join(prefix, "bin", "python")
    with open(python, "w") as out:
        out.write('#!/bin/sh\necho "$PWD $*" >> "$(dirname "$0")/../ran.txt"\n')
    os.chmod(python, 0o755)
else:
    sys.exit(f"stand-in conda: unexpected call {{args}}")
'''


def _stand_in_conda(base: Path) -> Path:
    (base / "bin").mkdir(parents=True)
    conda = base / "bin" / "conda"
    conda.write_text(STAND_IN_CONDA.format(python=sys.executable))
    conda.chmod(0o755)
    (base / "bin" / "activate").write_text('export PATH="$1/bin:$PATH"\n')
    return base / "bin"


def test_snakemake_builds_both_conda_environments_from_its_copies_of_their_files(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for item in ("Snakefile", "params.yaml", "overrides.yaml", "pyproject.toml", "pipeline", "results", "envs"):
        (shutil.copytree if (REPO / item).is_dir() else shutil.copy)(REPO / item, project / item)
    conda_bin = _stand_in_conda(tmp_path / "conda")
    prefix = tmp_path / "envs-elsewhere"          # --conda-prefix: the copies lie away from envs/
    env = {**os.environ, "PATH": f"{conda_bin}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
                                 f"{os.environ.get('PATH', '')}"}
    done = subprocess.run([sys.executable, "-m", "snakemake", "--sdm", "conda", "--conda-create-envs-only",
                           "--conda-prefix", str(prefix), "--cores", "1", "--config", "scale=smoke", "device=cuda"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:] + done.stdout[-2000:]
    copies = {copy.read_bytes(): copy.with_suffix("") for copy in prefix.glob("*.yaml")}   # <prefix>/<hash>.yaml
    built = {name: copies[text] for name in ENVS if (text := (REPO / "envs" / name).read_bytes()) in copies}
    assert set(built) == set(ENVS) and len(copies) == len(ENVS), done.stderr[-3000:]
    for name, env_dir in built.items():
        lock = _lock_pins(REPO / "envs" / "lock" / f"{ENVS[name]}.txt")
        assert (env_dir / "pinned.txt").read_text().split("\n")[:-1] == lock, f"{name} does not carry its lock"
        # the post-deploy script, run from its copy, installs nlpbench from the project Snakemake runs in
        assert (env_dir / "ran.txt").read_text() == f"{project} -m pip install --quiet --no-deps -e {project}\n"


def _lock_pins(lock: Path) -> list[str]:
    """'name==version <number of hashes>' of every requirement of a lock file, in its order."""
    pins, lines = [], lock.read_text().replace("\\\n", " ").splitlines()
    for line in lines:
        if line.strip() and not line.lstrip().startswith("#"):
            spec, *hashes = line.split(" --hash=sha256:")
            req = Requirement(spec.strip())
            pins.append(f"{req.name}=={next(iter(req.specifier)).version} {len(hashes)}")
    return pins


def test_each_conda_environment_carries_its_lock_as_bash_envs_run_sh_lock_writes_it(tmp_path):
    """The committed files are envs/conda_env.py's output from the committed locks (a new lock without a new
    environment file fails here), with what pip cannot install: Java and Perl's XML::Parser."""
    for name, lock in ENVS.items():
        copy = tmp_path / name
        shutil.copy(REPO / "envs" / name, copy)
        index = ["https://download.pytorch.org/whl/cpu"] if lock == "cpu" else []
        done = subprocess.run([sys.executable, str(REPO / "envs" / "conda_env.py"),
                               str(REPO / "envs" / "lock" / f"{lock}.txt"), str(copy), *index],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert copy.read_bytes() == (REPO / "envs" / name).read_bytes(), f"envs/{name}: run bash envs/run.sh lock"
        deps = yaml.safe_load(copy.read_text())["dependencies"]
        assert {"python=3.11", "openjdk=17", "perl-xml-parser", "pip"} <= {d for d in deps if isinstance(d, str)}
        deploy = REPO / "envs" / name.replace(".yaml", ".post-deploy.sh")
        assert "--no-deps -e" in deploy.read_text() and os.access(deploy, os.X_OK)


def test_a_lock_requirement_without_its_hashes_is_refused_by_file_and_line(tmp_path):
    lock = tmp_path / "lock.txt"
    lock.write_text("# a lock\nnumpy==2.4.6 \\\n    --hash=sha256:" + "a" * 64 + "\n    # via pandas\npandas==3.1.1\n")
    env_file = tmp_path / "env.yaml"
    env_file.write_text("name: x\ndependencies:\n  - pip\n  - pip:\n      - \"old\"\n")
    before = env_file.read_bytes()
    done = subprocess.run([sys.executable, str(REPO / "envs" / "conda_env.py"), str(lock), str(env_file)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and f"{lock}, line 5: not a requirement pinned with its hashes" in done.stderr
    assert env_file.read_bytes() == before
    lock.write_text(lock.read_text().replace("pandas==3.1.1", "pandas==3.1.1 --hash=sha256:" + "b" * 64))
    done = subprocess.run([sys.executable, str(REPO / "envs" / "conda_env.py"), str(lock), str(env_file)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(env_file.read_text())["dependencies"][1]["pip"] == [
        "numpy==2.4.6 --hash=sha256:" + "a" * 64, "pandas==3.1.1 --hash=sha256:" + "b" * 64]
