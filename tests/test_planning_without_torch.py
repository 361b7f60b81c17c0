"""Planning needs no torch: `nlpbench plan` and the Snakefile's parse run in a process where torch cannot be
imported (a login node, a scheduler's environment), as the modules the plan reads import torch only to train."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import nlpbench

REPO = Path(__file__).resolve().parents[1]
SRC = Path(nlpbench.__file__).resolve().parents[1]         # the code under test

# imported first by every Python started with this folder on PYTHONPATH: any import of torch fails
BLOCK_TORCH = '''import sys
class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"torch is blocked in this process ({name})")
        return None
sys.meta_path.insert(0, _NoTorch())
'''


@pytest.fixture
def no_torch_env(tmp_path) -> dict:
    blocker = tmp_path / "no-torch"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCK_TORCH)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), str(SRC), *sys.path])}
    blocked = subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True, text=True)
    assert blocked.returncode != 0 and "torch is blocked" in blocked.stderr       # the block holds
    return env


def test_nlpbench_plan_runs_where_torch_cannot_be_imported(no_torch_env):
    done = subprocess.run([sys.executable, "-m", "nlpbench.cli", "--set", "scale=cpu", "plan"], cwd=REPO,
                          env=no_torch_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("scale cpu: ") and "training groups" in lines[0]
    assert "target\tmemnet\ttolias-thesis/2" in lines and "target\tsquad\tshen-thesis/4.2" in lines
    assert any(line.startswith("train\tdmn\t") for line in lines)


def test_the_snakefile_parses_where_torch_cannot_be_imported(no_torch_env, tmp_path):
    work = tmp_path / "project"
    work.mkdir()
    for item in ("Snakefile", "params.yaml", "overrides.yaml", "pipeline"):
        (shutil.copytree if (REPO / item).is_dir() else shutil.copy)(REPO / item, work / item)
    done = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--quiet", "rules", "--cores", "1",
                           "--config", "scale=smoke"], cwd=work, env=no_torch_env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "table_tolias_thesis_2" in done.stdout
