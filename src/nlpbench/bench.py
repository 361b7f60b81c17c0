"""Timing benchmark of MemN2N and t-MEM-NN on the machine at hand (run on demand; never a test).

Reports, from one process: training time per minibatch for each model trained alone, the same per run when K
runs train together in one vectorised pass (and the speed-up), and inference time per answer with S samples.
Ratios are the comparable figures: the thesis measured 146.5 ms (MemN2N) and 149.8 ms (t-MEM-NN) per minibatch
on a Tesla K40 (ratio 1.02) and "+0.1 ms" per answer from S = 1 to S = 10.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from .memnet_data import load_task_tensors
from .memnet_train import BayesConfig, GroupTrainer, Run, TrainConfig
from .models.memnet import MemNetConfig


def _time_steps(trainer: GroupTrainer, steps: int, warmup: int = 3) -> float:
    B = trainer.tcfg.batch_size
    from .memnet_data import gather
    perm = torch.stack([torch.randperm(trainer.n_train, generator=g) for g in trainer.gens["data"]])
    for i in range(warmup + steps):
        if i == warmup:
            t0 = time.perf_counter()
        b = i % (trainer.n_train // B)
        batch = gather(trainer.split["train"], trainer.data_of_run, perm[:, b * B:(b + 1) * B].to(trainer.device))
        loss, _ = trainer.loss(batch)
        trainer.opt.zero_grad(set_to_none=True)
        loss.sum().backward()
        trainer.opt.step()
    if trainer.device.type == "cuda":
        torch.cuda.synchronize()
    return 1000 * (time.perf_counter() - t0) / steps


def run(data_root: Path, variant: str = "en", tasks: tuple[int, ...] = tuple(range(1, 21)), steps: int = 30,
        device: str = "cpu") -> list[tuple[str, float]]:
    datasets = [load_task_tensors(data_root, variant, [t], 50, 100, 0) for t in tasks]
    rows = []
    for name, bayes in (("MemN2N", False), ("t-MEM-NN", True)):
        def make(runs, ds):
            return GroupTrainer(runs, ds, MemNetConfig(n_words=0, bayesian=bayes), TrainConfig(),
                                BayesConfig() if bayes else None, device, log=lambda s: None)
        alone = _time_steps(make([Run("a", 0, 0)], datasets[:1]), steps)
        K = len(datasets)
        group = _time_steps(make([Run(str(t), i, 0) for i, t in enumerate(tasks)], datasets), steps)
        rows += [(f"{name}: train ms per minibatch, one run alone (task {tasks[0]})", alone),
                 (f"{name}: train ms per minibatch per run, {K} runs together", group / K),
                 (f"{name}: speed-up of group training over one run at a time", alone / (group / K))]
        if bayes:
            t = make([Run("a", 0, 0)], datasets[:1])
            n = int(t.split["test"]["size"][0])
            for S in (1, 10):
                t0 = time.perf_counter()
                t.accuracy("test", [S], t.bcfg.test_sampling)
                rows.append((f"t-MEM-NN: inference ms per answer, S = {S}", 1000 * (time.perf_counter() - t0) / n))
    return rows


def main(data_root: Path, device: str = "cpu") -> None:
    rows = run(data_root, device=device)
    width = max(len(r[0]) for r in rows)
    print(f"device: {device}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    for label, value in rows:
        print(f"{label:<{width}}  {value:8.2f}")
