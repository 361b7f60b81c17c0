"""Before/after timing of a grouped training step: two commits side by side on this machine.

    python -m nlpbench.timing.commits OLD NEW [--rounds 3] [--steps 100] [--runs 20]

Each commit is checked out into its own git worktree (under the system's temp folder, kept for the next call)
and measured in a fresh process with that worktree's `src` first on the path and its own params.yaml (cpu
scale, Table 2's settings); the two alternate round by round, so load from other processes falls on both
alike. Per round and commit it prints ms per run and step for MemN2N and t-MEM-NN, a group of `--runs` en-1k
tasks (one seed each) and one run alone (tasks 1, 2, 3 and 14), gradient noise included as trained, and the
ratio t-MEM-NN / MemN2N; then the means over the rounds. Run on demand, never as a test. It uses only what
both commits have: GroupTrainer, memnet.experiments.model_configs and the benchmark's train_ms (in
nlpbench.timing.memnet, or nlpbench.memnet.bench in a commit from before the timing package).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MEASURE = r"""
import json, sys, torch
from pathlib import Path
torch.set_num_threads(1)
from nlpbench import config
try:
    from nlpbench.timing import memnet as bench
except ImportError:          # a commit from before the timing package
    from nlpbench.memnet import bench
from nlpbench.memnet.data import load_task_tensors
from nlpbench.memnet.experiments import model_configs
from nlpbench.memnet.train import GroupTrainer, Run
root, data, runs, steps = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
settings = bench._settings(config.load(root / "params.yaml", {"scale": "cpu"}), "2")
tasks = [load_task_tensors(data, "en", [t], settings["model"]["memory_size"], settings["data"]["n_val_1k"],
                           settings["data"]["split_seed"]) for t in range(1, 21)]
group = [tasks[i % 20] for i in range(runs)]
def trainer(model, datasets):
    m, t, b = model_configs(model, settings)
    return GroupTrainer([Run(f"{model}-{i}", i, i // 20) for i in range(len(datasets))], datasets, m, t, b,
                        "cpu", log=lambda _: None)
out = {}
for model in ("memn2n", "tmemnn"):
    out[f"{model} group"] = bench.train_ms(trainer(model, group), steps, gradient_noise=True) / runs
    out[f"{model} alone"] = sum(bench.train_ms(trainer(model, [tasks[i]]), steps, gradient_noise=True)
                                for i in (0, 1, 2, 13)) / 4
print(json.dumps(out))
"""


def worktree(rev: str, repo: Path) -> Path:
    """A checkout of `rev` of `repo`, made once and reused."""
    sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", rev], check=True, capture_output=True,
                         text=True).stdout.strip()
    path = Path(tempfile.gettempdir()) / f"nlpbench-bench-{sha}"
    if not path.exists():
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(path), sha], check=True,
                       capture_output=True)
    return path


def measure(path: Path, data: Path, runs: int, steps: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(path / "src")}
    done = subprocess.run([sys.executable, "-c", MEASURE, str(path), str(data), str(runs), str(steps)], env=env,
                          check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--data", type=Path, default=Path("data/babi"), help="the prepared bAbI folder")
    args = ap.parse_args(argv)
    repo = Path.cwd()
    trees = {rev: worktree(rev, repo) for rev in (args.old, args.new)}
    seen: dict[str, list[dict[str, float]]] = {rev: [] for rev in trees}
    print(f"load average at start (1 min): {os.getloadavg()[0]:.2f}; ms per run and step, gradient noise included")
    for r in range(args.rounds):
        for rev, path in trees.items():
            m = measure(path, args.data.resolve(), args.runs, args.steps)
            seen[rev].append(m)
            print(f"round {r + 1} {rev:>10}: " + "  ".join(f"{k} {v:.3f}" for k, v in m.items())
                  + f"  t-MEM-NN / MemN2N, group {m['tmemnn group'] / m['memn2n group']:.2f}")
    for rev, ms in seen.items():
        mean = {k: statistics.mean(m[k] for m in ms) for k in ms[0]}
        print(f"mean {rev:>10}: " + "  ".join(f"{k} {v:.3f}" for k, v in mean.items())
              + f"  t-MEM-NN / MemN2N, group {mean['tmemnn group'] / mean['memn2n group']:.2f}")


if __name__ == "__main__":
    main()
