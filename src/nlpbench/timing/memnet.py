"""Timing benchmark of MemN2N and t-MEM-NN on the machine at hand (Tolias thesis §6.4.4, §6.5.2).

Run on demand (`nlpbench output tolias-thesis timing`, rule `output_tolias_thesis_timing`), never as a test. In one process
it measures training time per minibatch, inference time per answer (S = 1 and 10 samples, delta 20 and 50) and
the speed-up of vectorised group training over one run at a time, and writes results/tolias-thesis/timing.md
and .csv with the thesis's figures (Tesla K40, TensorFlow) beside the measured ones. Absolute times do not
carry across machines; the ratios are the comparable figures.
"""

from __future__ import annotations

import csv
import io as _io
import os
import statistics
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch
from torch.nn import functional as F

from nlpbench import config
from nlpbench.data import babi
from nlpbench.family import OutputPage
from nlpbench.memnet.data import gather, padded_split
from nlpbench.memnet.experiments import model_configs, task_tensors
from nlpbench.memnet.groups import declaration_groups, declared_tasks, memnet_settings
from nlpbench.memnet.model import MemN2N
from nlpbench.memnet.train import GroupTrainer, Run, train_step
from nlpbench.nn.kernels import compiler_works, resolve as resolve_kernels
from nlpbench.runtime import io
from nlpbench.runtime.provenance import code_commit, device_label
from nlpbench.timing import records
from nlpbench.timing.memnet_jobs import (CH6_TABLES, PROTOCOL_SEEDS, cpu_seeds_text, five_seed_projection,
                                         pipeline_job_minutes)
from nlpbench.timing.report import sectioned_markdown

WARMUP = 5              # untimed training steps before each timed stretch
INFERENCE_REPEATS = 10  # timed passes over each task's test set
SINGLE_QUESTIONS = 25   # test questions per task answered one at a time (batch 1)
DELTA_20, DELTA_50 = "2", "9"   # pipeline/tables/tolias-thesis/: Table 2 (delta 20), Table 9 (delta 50)
EN_10K = "13"           # Table 13 (en-10k): the 10k tables' groups, most of chapter 6's training time


def _table(params: dict, name: str) -> dict:
    return config.declaration(params, "tables", "tolias-thesis", name).decl


def _settings(params: dict, name: str) -> dict:
    d = config.declaration(params, "tables", "tolias-thesis", name)
    return memnet_settings(params, d.decl.get("overrides") or {}, d.at("overrides"))


def table_seeds(params: dict, name: str) -> tuple[int, ...]:
    """The seeds a table trains per cell (memnet.seeds unless the table names its own)."""
    d = config.declaration(params, "tables", "tolias-thesis", name)
    return next(iter(declaration_groups(params, d).values())).seeds


def table_datasets(params: dict, name: str, data_root: Path) -> tuple[list, list[int]]:
    """A table's tasks as its groups load them, and their numbers; a task without data is left out, as the table
    leaves it (its cells read "needs data")."""
    d = config.declaration(params, "tables", "tolias-thesis", name)
    datasets, tasks = [], []
    for task in declared_tasks(params, d):
        try:
            datasets.append(task_tensors(data_root, d.decl["variant"], [task], _settings(params, name)))
            tasks.append(task)
        except babi.MissingDataError:
            continue
    return datasets, tasks


def as_trained_ms(datasets: list, seeds: tuple[int, ...], settings: dict, steps: int, device: str) -> dict:
    """ms per run per grouped step of a table's group (every task x its seeds in one GroupTrainer), MemN2N and
    t-MEM-NN timed in turn twice (`steps` each, halved), gradient noise included: load drifting over the seconds
    of one stretch falls on both alike."""
    runs = [Run(f"{i}-{seed}", i, seed) for seed in seeds for i in range(len(datasets))]
    trainers = {}
    for model in ("memn2n", "tmemnn"):
        model_cfg, train_cfg, bayes_cfg = model_configs(model, settings)
        trainers[model] = GroupTrainer(runs, datasets, model_cfg, train_cfg, bayes_cfg, device, log=lambda _: None)
    return in_turn_ms(trainers, steps)


def in_turn_ms(trainers: dict[str, GroupTrainer], steps: int) -> dict[str, float]:
    """ms per run per grouped training step of each trainer, gradient noise included, the trainers timed in turn
    twice (`steps` each, halved): load drifting over the seconds of one stretch falls on all of them alike."""
    out = dict.fromkeys(trainers, 0.0)
    for _ in range(2):
        for key, tr in trainers.items():
            out[key] += train_ms(tr, max(1, steps // 2), gradient_noise=True) / len(tr.runs) / 2
    return out


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _mode(tr: GroupTrainer) -> str:
    return tr.bcfg.test_sampling if tr.model_cfg.bayesian else "mean"


def timed_ms(step: Callable[[int], object], steps: int, device: torch.device) -> float:
    """ms per call of step(i), i = 0, 1, ...: WARMUP untimed calls, then `steps` timed ones (wall clock)."""
    for i in range(WARMUP + steps):
        if i == WARMUP:
            _sync(device)
            t0 = time.perf_counter()
        step(i)
    _sync(device)
    return 1000 * (time.perf_counter() - t0) / steps


def train_ms(tr: GroupTrainer, steps: int, gradient_noise: bool = False) -> float:
    """ms per training step (every run of `tr` one minibatch): GroupTrainer.step, as train_epoch takes it, on
    the minibatches of an epoch in order (gradient_noise: with the settings' noise). Timed after WARMUP steps."""
    B = tr.tcfg.batch_size
    perms = torch.stack([torch.randperm(tr.n_train, generator=g) for g in tr.gens["data"]]).to(tr.device)

    def step(i: int) -> None:
        b = i % (tr.n_train // B)
        tr.step(gather(tr.split["train"], tr.data_of_run, perms[:, b * B:(b + 1) * B]), gradient_noise)

    return timed_ms(step, steps, tr.device)


def step_parts_ms(tr: GroupTrainer, steps: int) -> dict[str, float]:
    """ms per grouped training step of the parts that make t-MEM-NN's step dearer than MemN2N's, each timed
    alone on `tr`'s own parameters: "draw", the weights of one pass (t-MEM-NN: one escort draw of every matrix,
    its uniforms included; MemN2N: the masked matrices) forward and backward; "divergence", sum_Theta D_t
    forward and backward (t-MEM-NN only); "gradient noise", add_gradient_noise over every parameter element a run
    owns (t-MEM-NN has a mean and a scale per weight); "clip and step", per-run clipping and the optimiser step.
    Timed after WARMUP repetitions each."""
    model, bayes = tr.model, tr.model_cfg.bayesian
    mode = "escort" if bayes else "mean"

    def timed(f) -> float:
        return timed_ms(lambda i: f(), steps, tr.device)

    def draw() -> None:
        weights = list(model.draw(tr.gens["noise"], mode).values())
        torch.autograd.backward(weights, [torch.ones_like(w) for w in weights])

    parts = {"draw": timed(draw)}
    if bayes and model.posterior.sampler == "polar":     # the generators' share of the draw
        parts["uniforms"] = timed(lambda: model.posterior.polar_pairs(model._slot_generators(tr.gens["noise"])))
    if bayes:
        parts["divergence"] = timed(lambda: model.divergence(None).sum().backward())
    for p in tr.params:
        p.grad = torch.zeros_like(p)
    if tr.tcfg.grad_noise_std > 0:
        parts["gradient noise"] = timed(lambda: tr.add_gradient_noise(tr.tcfg.grad_noise_std))
    for p in tr.params:
        p.grad.zero_()                      # zero gradients: the timed optimiser steps leave the weights as they are
    parts["clip and step"] = timed(tr.clip_and_update)
    tr.opt.zero_grad(set_to_none=True)
    return parts


def plain_train_ms(data, bayesian: bool, settings: dict, steps: int) -> float:
    """ms per training step of the readable memnet.model: one run, one minibatch of padded word ids at a time
    (the loop a user would write), with the settings' model, optimiser, lr, clipping and divergence weight.
    Timed after WARMUP steps, as train_ms."""
    t = settings["train"]
    longest = max(int(split["n_facts"].max()) for split in data.splits.values())
    g = torch.Generator().manual_seed(0)
    model = MemN2N(model_configs("tmemnn" if bayesian else "memn2n", settings)[0], data.n_words, longest, g)
    opt = (torch.optim.SGD(model.parameters(), lr=t["lr"]) if t["optimizer"] == "sgd" else
           torch.optim.Adagrad(model.parameters(), lr=t["lr"], initial_accumulator_value=t["adagrad_initial_accumulator"]))
    split = padded_split(data, "train")
    B, n = t["batch_size"], len(split["answers"])
    order = torch.randperm(n, generator=g)
    weight = settings["bayes"]["divergence_weight"] if bayesian else 0.0

    def step(i: int) -> None:
        idx = order[(i % (n // B)) * B:(i % (n // B) + 1) * B]
        train_step(model, opt, {k: v[idx] for k, v in split.items()}, n, weight, t["clip_norm"])

    return timed_ms(step, steps, torch.device("cpu"))


@torch.no_grad()
def answer_ms(tr: GroupTrainer, S: int) -> float:
    """ms per answer, batched: the whole test set answered as the trainer evaluates it (S weight draws, each
    shared by all questions, in chunks of 250), divided by its number of questions. One run in `tr`."""
    n = int(tr.split["test"]["size"][0])
    tr.accuracy("test", [S], _mode(tr))                       # warm-up (builds the layout of S draws side by side)
    t0 = time.perf_counter()
    for _ in range(INFERENCE_REPEATS):
        tr.accuracy("test", [S], _mode(tr))                   # ends with .cpu(): synchronised
    return 1000 * (time.perf_counter() - t0) / (INFERENCE_REPEATS * n)


@torch.no_grad()
def single_ms(tr: GroupTrainer, S: int, reuse_draws: bool = False, own_sentences: bool = True) -> float:
    """ms per answer at batch 1: the first SINGLE_QUESTIONS test questions one at a time, each with its own
    S weight draws averaged as GroupTrainer.predictive averages them. reuse_draws: S weight draws made once and
    shared by every question (as the full-test-set evaluation shares them), so only the forward pass is timed.
    own_sentences: each pass embeds the question's own sentences (GroupTrainer.forward_draws); False: the task's
    whole table of distinct sentences, as a full-batch evaluation does."""
    data, mode = tr.split["test"], _mode(tr)
    batched = tr.bcfg is not None and tr.bcfg.test_draws == "batched"
    shared = tr.model.draws(tr.gens["eval"], mode, S, batched) if reuse_draws else None

    def answer(q: int) -> int:
        batch = gather(data, tr.data_of_run, torch.tensor([[q]], device=tr.device))
        weights = shared if reuse_draws else tr.model.draws(tr.gens["eval"], mode, S, batched)
        probs = F.softmax(tr.forward_draws(batch, weights, S, own_sentences), -1).sum(0)   # S draws, one pass
        return int(probs.argmax(-1))

    answer(0)                                                 # warm-up
    t0 = time.perf_counter()
    for q in range(SINGLE_QUESTIONS):
        answer(q)
    return 1000 * (time.perf_counter() - t0) / SINGLE_QUESTIONS


def other_kernels(setting: str) -> str:
    """The other way to run a kernels key's part of the step: "eager" for "compiled" and back."""
    return {"compiled": "eager", "eager": "compiled"}[setting]


def measure(params: dict, data_root: Path, steps: int, device: str) -> dict:
    """Every timing, in ms, each a mean over the tasks of Table 2 (one run per task unless grouped)."""
    exp = _table(params, DELTA_20)
    s20, s50 = _settings(params, DELTA_20), _settings(params, DELTA_50)
    datasets, tasks = table_datasets(params, DELTA_20, data_root)     # the scale's tasks, as Table 2 trains them
    if not datasets:
        raise FileNotFoundError(f"timing benchmark: no bAbI {exp['variant']} task files under {data_root} for the "
                                f"tasks of Table {DELTA_20} (rule data_babi prepares them)")

    def trainer(model: str, settings: dict, ds: list) -> GroupTrainer:
        model_cfg, train_cfg, bayes_cfg = model_configs(model, settings)
        return GroupTrainer([Run(f"{model}-{i}", i, 0) for i in range(len(ds))], ds, model_cfg, train_cfg,
                            bayes_cfg, device, log=lambda _: None)

    s20_batched = {**s20, "bayes": {**s20["bayes"], "test_draws": "batched"}}
    per_task = defaultdict(list)
    for d in datasets:        # one run at a time; the configurations interleaved task by task
        mem, tm, tm50 = trainer("memn2n", s20, [d]), trainer("tmemnn", s20, [d]), trainer("tmemnn", s50, [d])
        tm_b = trainer("tmemnn", s20_batched, [d])
        for name, tr, S in (("memn2n", mem, 1), ("tmemnn S1", tm, 1), ("tmemnn S10", tm, 10),
                            ("tmemnn d50 S1", tm50, 1), ("tmemnn S1 batched draws", tm_b, 1),
                            ("tmemnn S10 batched draws", tm_b, 10)):      # inference on the fresh initial weights
            per_task[f"batched {name}"].append(answer_ms(tr, S))
            per_task[f"single {name}"].append(single_ms(tr, S))
        for S in (1, 10):
            per_task[f"single tmemnn S{S} shared draws"].append(single_ms(tm_b, S, reuse_draws=True))
            per_task[f"single tmemnn S{S} shared draws whole table"].append(
                single_ms(tm_b, S, reuse_draws=True, own_sentences=False))
        per_task["alone memn2n"].append(train_ms(mem, steps))
        per_task["alone tmemnn"].append(train_ms(tm, steps))
        per_task["plain memn2n"].append(plain_train_ms(d, False, s20, steps))
        per_task["plain tmemnn"].append(plain_train_ms(d, True, s20, steps))
    out = {k: statistics.mean(v) for k, v in per_task.items()}
    s20_gamma = {**s20, "model": {**s20["model"], "t_sampler": "gamma"}}
    for name, model, settings in (("memn2n", "memn2n", s20), ("tmemnn", "tmemnn", s20),
                                  ("tmemnn gamma", "tmemnn", s20_gamma)):   # one group, the same number of steps
        out[f"group {name}"] = train_ms(trainer(model, settings, datasets), steps) / len(datasets)
    protocol = [Run(f"{i}-{seed}", i, seed) for seed in range(PROTOCOL_SEEDS) for i in range(len(datasets))]
    s20_gather = {**s20, "model": {**s20["model"], "memory_read": "gather"}}
    s20_eager = {**s20, "model": {**s20["model"], "posterior_kernels": "eager"}}
    hops_as_set = resolve_kernels(s20["model"].get("hop_kernels", "eager"), device, "memnet.model.hop_kernels")
    hops_other = other_kernels(hops_as_set)
    if hops_other == "compiled" and not compiler_works(torch.device(device).type):
        hops_other = None                    # compiled kernels need a C++ compiler on a CPU
    s20_hops = {**s20, "model": {**s20["model"], "hop_kernels": hops_other}}
    protocol_trainers = {}
    for model in ("memn2n", "tmemnn"):       # the five-seed group: every task x five seeds, as trained,
        variants = [(model, s20), (f"{model} gather", s20_gather)]             # with every slot gathered,
        if hops_other:
            variants.append((f"{model} hops other", s20_hops))                 # with the hops run the other way,
        if model == "tmemnn":
            variants.append((f"{model} eager", s20_eager))                     # and the posterior run op by op
        for key, settings in variants:
            model_cfg, train_cfg, bayes_cfg = model_configs(model, settings)
            protocol_trainers[key] = GroupTrainer(protocol, datasets, model_cfg, train_cfg, bayes_cfg, device,
                                                  log=lambda _: None)
    for key, ms in in_turn_ms(protocol_trainers, max(1, steps // PROTOCOL_SEEDS)).items():
        out[f"protocol {key}"] = ms
    for model in ("memn2n", "tmemnn"):       # where the step's time goes, on the same trainers
        tr = protocol_trainers[model]
        for part, ms in step_parts_ms(tr, max(1, steps // PROTOCOL_SEEDS)).items():
            out[f"protocol {model} {part}"] = ms
        out["hop kernels"] = tr.hop_kernels
        if model == "tmemnn":
            out["posterior kernels"] = tr.posterior_kernels
    del protocol_trainers
    out["as trained"] = {}                      # groups as the tables train them
    seeds = table_seeds(params, DELTA_20)
    if len(seeds) not in (1, PROTOCOL_SEEDS):   # Table 2's (ten seeds, reading A-10): not timed above
        out["as trained"][DELTA_20] = {**as_trained_ms(datasets, seeds, s20, steps // PROTOCOL_SEEDS, device),
                                       "tasks": len(datasets), "seeds": len(seeds), "variant": exp["variant"]}
    datasets_10k, tasks_10k = table_datasets(params, EN_10K, data_root)
    if datasets_10k:                            # Table 13's: en-10k, the 10k tables' shape
        seeds_10k, s10k = table_seeds(params, EN_10K), _settings(params, EN_10K)
        out["as trained"][EN_10K] = {**as_trained_ms(datasets_10k, seeds_10k, s10k, steps // PROTOCOL_SEEDS, device),
                                     "tasks": len(tasks_10k), "seeds": len(seeds_10k),
                                     "variant": _table(params, EN_10K)["variant"]}
    out["n_train"], out["tasks"], out["variant"] = mem.n_train, tasks, exp["variant"]
    out["pipeline"] = pipeline_job_minutes(Path("logs/train"))
    out["projection"] = five_seed_projection(Path("logs/train"))
    return out


def _rows(m: dict, params: dict) -> list[tuple]:
    """(section, quantity, measured, paper, unit, note) for the table; paper None where the thesis has none."""
    s20, s50 = _settings(params, DELTA_20), _settings(params, DELTA_50)
    d20, d50 = s20["model"]["embedding_dim"], s50["model"]["embedding_dim"]
    tr = "Training, one run alone, per minibatch"
    rows = [(tr, "MemN2N", m["alone memn2n"], 146.5, "ms", ""),
            (tr, "t-MEM-NN", m["alone tmemnn"], 149.8, "ms", ""),
            (tr, "t-MEM-NN / MemN2N", m["alone tmemnn"] / m["alone memn2n"], 1.02, "x", "149.8 / 146.5")]
    for how, title in (("batched", "full test set, per answer"), ("single", "one question at a time (batch 1)")):
        sec = f"Inference, {title}"
        s1, s10, mem = m[f"{how} tmemnn S1"], m[f"{how} tmemnn S10"], m[f"{how} memn2n"]
        a, b = s1, m[f"{how} tmemnn d50 S1"]
        rows += [(sec, "MemN2N", mem, None, "ms", ""),
                 (sec, "t-MEM-NN, S = 1", s1, None, "ms", ""),
                 (sec, "t-MEM-NN / MemN2N, S = 1", s1 / mem, None, "x", 'paper: "comparable", no number'),
                 (sec, "t-MEM-NN, S = 10", s10, None, "ms", ""),
                 (sec, "S = 10 - S = 1", s10 - s1, 0.1, "ms", '"an average increase of 0.1 msec"'),
                 (sec, "S = 10 / S = 1", s10 / s1, 1.03, "x", "implied: (3.55 + 0.1) / 3.55, about 1.0"),
                 (sec, "t-MEM-NN, S = 10, draws batched", m[f"{how} tmemnn S10 batched draws"], None, "ms",
                  "bayes.test_draws: batched"),
                 (sec, "S = 10 / S = 1, draws batched", m[f"{how} tmemnn S10 batched draws"]
                  / m[f"{how} tmemnn S1 batched draws"], 1.03, "x", "target: at most 1.5"),
                 (sec, f"t-MEM-NN, delta = {d20}, S = 1", a, 3.55, "ms", "implied: 2.2 / 0.62"),
                 (sec, f"t-MEM-NN, delta = {d50}, S = 1", b, 5.75, "ms", "implied: 3.55 + 2.2"),
                 (sec, f"delta {d50} - delta {d20}", b - a, 2.2, "ms", '"an extra 2.2 msec"'),
                 (sec, f"delta {d50} / delta {d20}", b / a, 1.62, "x", '"an average increase by 62%"')]
    sec = "Inference, one question at a time (batch 1)"
    s1, s10 = m["single tmemnn S1 shared draws"], m["single tmemnn S10 shared draws"]
    w1, w10 = m["single tmemnn S1 shared draws whole table"], m["single tmemnn S10 shared draws whole table"]
    rows += [(sec, "t-MEM-NN, S = 1, draws shared by the questions", s1, None, "ms", "forward pass only"),
             (sec, "t-MEM-NN, S = 10, draws shared by the questions", s10, None, "ms", "10 draws side by side"),
             (sec, "S = 10 / S = 1, draws shared by the questions", s10 / s1, 1.03, "x",
              "target: at most 1.5"),
             (sec, "t-MEM-NN, S = 1, shared draws, whole sentence table", w1, None, "ms",
              "each pass embeds the task's whole table of distinct sentences (the older route)"),
             (sec, "t-MEM-NN, S = 10, shared draws, whole sentence table", w10, None, "ms", ""),
             (sec, "S = 10 / S = 1, shared draws, whole sentence table", w10 / w1, 1.03, "x", "")]
    K = len(m["tasks"])
    sec = f"Training, {K} runs one at a time vs together in one GroupTrainer, per run per minibatch"
    for model, name in (("memn2n", "MemN2N"), ("tmemnn", "t-MEM-NN")):
        alone, group = m[f"alone {model}"], m[f"group {model}"]
        rows += [(sec, f"{name}, one run at a time", alone, None, "ms", f"{K} runs: {K * alone:.0f} ms per step"),
                 (sec, f"{name}, {K} runs together", group, None, "ms", f"{K} runs: {K * group:.0f} ms per step"),
                 (sec, f"{name}, speed-up of group training", alone / group, None, "x", "")]
    rows.append((sec, f"t-MEM-NN / MemN2N, {K} runs together", m["group tmemnn"] / m["group memn2n"], 1.02, "x",
                 "paper: one run alone; target: at most 1.3"))
    rows += [(sec, f"t-MEM-NN, t_sampler gamma, {K} runs together", m["group tmemnn gamma"], None, "ms",
              "z / sqrt(Gamma) with its implicit gradient (the older sampler): the same distribution"),
             (sec, f"t-MEM-NN (gamma) / MemN2N, {K} runs together", m["group tmemnn gamma"] / m["group memn2n"],
              1.02, "x", "")]
    sec = "Training, a plain one-run PyTorch loop (memnet.model) vs the group trainer, per run per minibatch"
    for model, name in (("memn2n", "MemN2N"), ("tmemnn", "t-MEM-NN")):
        plain, group = m[f"plain {model}"], m[f"group {model}"]
        rows += [(sec, f"{name}, plain loop, one run at a time", plain, None, "ms",
                  "padded word ids, embedding lookups"),
                 (sec, f"{name}, group trainer, {K} runs together", group, None, "ms", ""),
                 (sec, f"{name}, speed-up over the plain loop", plain / group, None, "x", "")]
    rows.append((sec, "t-MEM-NN / MemN2N, plain loop", m["plain tmemnn"] / m["plain memn2n"], 1.02, "x", ""))
    P = K * PROTOCOL_SEEDS
    sec = (f"Training, a group of the five-seed protocol ({K} tasks x {PROTOCOL_SEEDS} seeds = {P} runs), "
           "per run per minibatch")
    rows += [(sec, f"MemN2N, {P} runs together", m["protocol memn2n"], None, "ms",
              f"gradient noise included, as trained: {P * m['protocol memn2n']:.0f} ms per step"),
             (sec, f"t-MEM-NN, {P} runs together", m["protocol tmemnn"], None, "ms",
              f"gradient noise included, as trained: {P * m['protocol tmemnn']:.0f} ms per step"),
             (sec, f"t-MEM-NN / MemN2N, {P} runs together", m["protocol tmemnn"] / m["protocol memn2n"], 1.02, "x",
              f"target: at most 1.3; t-MEM-NN's posterior kernels: {m['posterior kernels']}")]
    read = s20["model"].get("memory_read", "gather")
    for model, name in (("memn2n", "MemN2N"), ("tmemnn", "t-MEM-NN")):
        gathered = m[f"protocol {model} gather"]
        rows += [(sec, f"{name}, {P} runs together, every slot gathered", gathered, None, "ms",
                  "model.memory_read: gather (the read before the whole-table one)"),
                 (sec, f"{name}, speed-up of memory_read {read} over gather", gathered / m[f"protocol {model}"], None,
                  "x", "the same model; float summation order differs")]
    used = m["posterior kernels"]
    rows += [(sec, f"t-MEM-NN, {P} runs together, posterior kernels eager", m["protocol tmemnn eager"], None, "ms",
              "model.posterior_kernels: eager (the draw and the t-divergence op by op, as before the fused kernels)"),
             (sec, f"t-MEM-NN, speed-up of posterior kernels {used} over eager",
              m["protocol tmemnn eager"] / m["protocol tmemnn"], None, "x",
              "the same formulas; compiled: fused by torch.compile (float rounding differs)" if used == "compiled"
              else "eager here: torch.compile cannot build kernels on this machine (no C++ compiler)"),
             (sec, f"t-MEM-NN (posterior kernels eager) / MemN2N, {P} runs together",
              m["protocol tmemnn eager"] / m["protocol memn2n"], 1.02, "x", "")]
    other = other_kernels(m["hop kernels"])
    if "protocol memn2n hops other" in m:       # the hops run the way the settings do not (compiled needs a compiler)
        ms = {(model, m["hop kernels"]): m[f"protocol {model}"] for model in ("memn2n", "tmemnn")}
        ms |= {(model, other): m[f"protocol {model} hops other"] for model in ("memn2n", "tmemnn")}
        for model, name in (("memn2n", "MemN2N"), ("tmemnn", "t-MEM-NN")):
            rows += [(sec, f"{name}, {P} runs together, memory hops {other}", ms[(model, other)], None, "ms",
                      f"model.hop_kernels: {other} (eqs. 33-35 " +
                      ("op by op)" if other == "eager" else "fused by torch.compile; float rounding differs)")),
                     (sec, f"{name}, speed-up of memory hops compiled over eager",
                      ms[(model, "eager")] / ms[(model, "compiled")], None, "x", "the same formulas")]
        rows.append((sec, f"t-MEM-NN / MemN2N, {P} runs together, memory hops {other}",
                     ms[("tmemnn", other)] / ms[("memn2n", other)], 1.02, "x", ""))
    sec = "Training, groups as the tables train them (every task x the table's seeds), per run per minibatch"
    for name, g in m["as trained"].items():
        P_g = g["tasks"] * g["seeds"]
        shape = f"Table {name}'s group ({g['variant']}, {g['tasks']} tasks x {g['seeds']} seeds = {P_g} runs)"
        rows += [(sec, f"{label}, {shape}", g[model], None, "ms",
                  f"gradient noise included: {P_g * g[model]:.0f} ms per step")
                 for model, label in (("memn2n", "MemN2N"), ("tmemnn", "t-MEM-NN"))]
        rows.append((sec, f"t-MEM-NN / MemN2N, {shape}", g["tmemnn"] / g["memn2n"], 1.02, "x",
                     "target: at most 1.3"))
    sec = (f"Where the difference goes: the {P}-run group's step, t-MEM-NN - MemN2N, each part timed alone on the "
           "same trainers (ms per step of the whole group)")
    step = {model: P * m[f"protocol {model}"] for model in ("memn2n", "tmemnn")}
    extra = step["tmemnn"] - step["memn2n"]
    labels = {"draw": "weights of one pass, forward and backward",
              "uniforms": "of which the draw's uniforms (the runs' generator calls)",
              "divergence": "t-divergence, forward and backward", "gradient noise": "gradient noise",
              "clip and step": "per-run clipping and the optimiser step",
              "rest": "the rest: memory hops, loss and their backward (the step minus the parts)"}
    parts = {model: {part: m.get(f"protocol {model} {part}", 0.0) for part in labels} for model in step}
    for model in step:                                   # the uniforms are part of the draw: not subtracted again
        parts[model]["rest"] = step[model] - sum(v for k, v in parts[model].items() if k not in ("uniforms", "rest"))
    rows.append((sec, "whole step", extra, None, "ms", f"MemN2N {step['memn2n']:.1f}, t-MEM-NN {step['tmemnn']:.1f}"))
    for part, label in labels.items():
        a, b = parts["memn2n"][part], parts["tmemnn"][part]
        rows.append((sec, label, b - a, None, "ms", f"MemN2N {a:.2f}, t-MEM-NN {b:.2f}; "
                     f"{(b - a) / extra:.0%} of the difference" if extra > 0 else f"MemN2N {a:.2f}, t-MEM-NN {b:.2f}"))
    proj = m.get("projection")
    if proj and proj["projected_groups"] == 0:
        sec = "Tables 2 and 6-15 at five seeds (the cpu scale trains every group at five): the pipeline's job times"
        rows += [(sec, "five seeds, measured job-minutes", proj["cpu_job_minutes"], None, "min",
                  f"{proj['groups']} groups, one thread each, every one measured"),
                 (sec, "five seeds, wall time on two cores", proj["cpu_job_minutes"] / 2, 60, "min",
                  "paper column: the target; job-minutes / 2, two jobs side by side with no idle core")]
    elif proj:
        sec = "Projection (not a measurement): Tables 2 and 6-15 at five seeds, from the pipeline's job times"
        rows += [(sec, "cpu scale, measured job-minutes", proj["cpu_job_minutes"], None, "min",
                  f"{proj['groups']} groups ({cpu_seeds_text()}), as in the section below"),
                 (sec, "five seeds, job-minutes", proj["job_minutes"], None, "min",
                  "each group's job time x (training steps at five seeds / at the cpu scale's seeds)"),
                 (sec, "five seeds, wall time on two cores", proj["job_minutes"] / 2, 60, "min",
                  "paper column: the target; an estimate from the cpu scale's jobs (notes)")]
    for name, record in (m.get("end to end") or {}).items():
        rows += records.rows(name, record)
    jobs = m.get("pipeline")
    if jobs:
        sec = "Chapter 6 at the cpu scale, from the pipeline's benchmark files or results/costs.tsv (job-minutes, one thread a job)"
        for name in CH6_TABLES:
            minutes, found, total = jobs[name]
            rows.append((sec, f"Table {name}", minutes, None, "min",
                         f"{found} of {total} groups timed" + ("" if found == total else " (the rest never timed here)")))
        minutes, found, total = jobs["all"]
        rows.append((sec, "Tables 2 and 6-15, each group once", minutes, None, "min",
                     f"{found} of {total} groups timed; two jobs side by side take about half of it in wall time"))
    return rows


def _task_list(tasks: list[int]) -> str:
    """"1-20" for a run of consecutive tasks, else "1, 20"."""
    if tasks == list(range(tasks[0], tasks[-1] + 1)) and len(tasks) > 1:
        return f"{tasks[0]}-{tasks[-1]}"
    return ", ".join(map(str, tasks))


def _fmt(v: float | None, unit: str) -> str:
    if v is None:
        return ""
    return f"{v:.2f}" if unit in ("x", "h") else f"{v:.4g}"


def render(rows: list[tuple], provenance: dict, notes: list[str]) -> tuple[str, str]:
    buf = _io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["section", "quantity", "measured", "paper", "unit", "note"])
    for sec, q, v, p, unit, note in rows:
        w.writerow([sec, q, "" if v is None else f"{v:.6g}", "" if p is None else p, unit, note])
    md = sectioned_markdown(
        ["# Timing benchmark: MemN2N and t-MEM-NN (Tolias thesis §6.4.4, §6.5.2)", "",
         "Measured in one run of `nlpbench output tolias-thesis timing` on the machine below. The paper column is the "
         "thesis's figure (Tesla K40, TensorFlow); absolute times do not carry across machines, the ratios do.", ""],
        provenance, ["quantity", "measured", "paper", "unit", "note"],
        [(sec, [q, _fmt(v, unit), "" if p is None else str(p), unit, note]) for sec, q, v, p, unit, note in rows],
        notes, numeric=2)
    return md, buf.getvalue()


def main(params: dict, data_root: Path, out_dir: Path, steps: int, device: str) -> OutputPage:
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    m = measure(params, data_root, steps, device)
    m["end to end"] = records.read_records(Path(out_dir).parent, Path(out_dir).name, "timing", records.load())
    rows = _rows(m, params)
    t = params["memnet"]["train"]
    provenance = {
        "device": device_label(device), "torch": torch.__version__, "threads": torch.get_num_threads(),
        "code commit": code_commit(), "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "benchmark wall time": f"{time.perf_counter() - t0:.0f} s",
        "load average at start (1 min)": f"{load:.2f} on {os.cpu_count()} cores (other processes share the machine)",
        "timed steps": f"{steps} per training measurement, after {WARMUP} warm-up steps",
        "t-MEM-NN's posterior kernels": f"{m['posterior kernels']} (`memnet.model.posterior_kernels`: "
                                        f"{params['memnet']['model'].get('posterior_kernels', 'eager')})",
        "memory hops": f"{m['hop kernels']} (`memnet.model.hop_kernels`: "
                       f"{params['memnet']['model'].get('hop_kernels', 'eager')})",
        "data": f"bAbI {m['variant']} tasks {_task_list(m['tasks'])}, {m['n_train']} training stories each",
    }
    notes = [
        f"Training: one step = one minibatch of {t['batch_size']} questions per run, taken as GroupTrainer.train_epoch "
        f"takes it (t-MEM-NN: one MC sample from the escort and the t-divergence term; per-run clipping at "
        f"{t['clip_norm']}; `{t['optimizer']}` lr {t['lr']}, all from params.yaml; gradient noise, "
        f"{t['grad_noise_std']} there, is left out). Wall clock (time.perf_counter) after {WARMUP} warm-up steps, "
        f"mean over the {len(m['tasks'])} tasks, each a single-run trainer; the configurations are timed task by "
        "task in turn, so load from other processes falls on all of them alike.",
        "Inference per answer, full test set: the time to answer a task's 1,000 test questions as "
        "GroupTrainer.accuracy does (S weight draws, each shared by all questions; chunks of 250), under "
        f"torch.no_grad, divided by the number of questions; {INFERENCE_REPEATS} passes per task after a warm-up "
        "pass, mean over the tasks, on freshly initialised weights (the cost does not depend on their values).",
        f"Inference, one question at a time: the first {SINGLE_QUESTIONS} test questions of each task, each with "
        "its own S weight draws. The thesis's \"time to generate one answer\" does not say whether questions were "
        "batched, so both are given. A single question's pass embeds only its own sentences (story and query: "
        "MemNet.own_sentences); the full test set's passes embed the task's whole table of distinct sentences "
        "once, which its questions share. The rows \"whole sentence table\" time single questions through the "
        "full-batch route, as this benchmark once did.",
        "The S weight draws go through the model side by side in one pass (draw s of run k is a pseudo-run "
        "beside the others, GroupTrainer.forward_draws), the parallelism the thesis credits for its +0.1 ms "
        "(\"completely parallelizable\", §6.4.4); the draws themselves are S generator calls per run and "
        "matrix, or one with `bayes.test_draws: batched` (the same distribution, other numbers; the tables use "
        "sequential draws). The delta rows use S = 1 (the thesis does not "
        "say which S); their paper values 3.55 and 5.75 ms are implied by \"an extra 2.2 msec ... 62%\" (§6.5.2).",
        f"Group training: the {len(m['tasks'])} tasks trained one run at a time (the single-run trainers above, "
        f"{steps} steps each) against one GroupTrainer holding the {len(m['tasks'])} runs ({steps} steps), in the "
        "same process on the same machine; per-run ms = group step time / runs. Setup and data loading are "
        "excluded from both.",
        "The plain loop (memnet.model, the readable model) is one run written as a user would write it without "
        "the group trainer: stories as padded word ids, embedding lookups weighted by the position encoding and "
        "summed, t-MEM-NN's Student-t noise drawn for the whole model at once and the elementwise t-divergence; "
        "the settings' reading (it computes the engine's function, tested); per-tensor clipping and the settings' "
        "optimiser; gradient noise left out as above. It is timed task by task beside the single-run trainers.",
        "The pipeline rows read the `benchmark:` file snakemake wrote for each training job of the cpu scale "
        "(logs/train/<group>.benchmark.tsv, seconds of wall time per job, one thread each), or for a group trained "
        "through `nlpbench train` its time in results/costs.tsv, for the groups each "
        "chapter 6 table reads; a table's groups are counted once per table, and the total counts each group once. "
        "They describe the last pipeline run on this machine, not this benchmark's process.",
        f"The five-seed group: the {len(m['tasks'])} tasks x {PROTOCOL_SEEDS} seeds in one GroupTrainer, "
        f"each of its configurations (MemN2N and t-MEM-NN as set, with every slot gathered, with the hops run the "
        f"other way, t-MEM-NN with its posterior eager) {max(1, steps // PROTOCOL_SEEDS // 2)} timed steps, all of "
        "them in turn, twice (the two stretches averaged: load drifting over the minutes of the section falls on "
        "all of them alike), with the settings' gradient noise (the other training rows leave it out); the group "
        "size a 1k table trains at five seeds (the 10k tables train five).",
        "The five-seed section: while every chapter 6 group of the cpu scale trains five seeds, "
        "it is the measured sum of their jobs; a group trained at other seeds is projected, its measured job time "
        "(its `benchmark:` file, evaluation and start-up included, or its time in results/costs.tsv) scaled by its "
        "training steps at five seeds over those at the cpu scale "
        f"({cpu_seeds_text()}; the 1k tables train ten, the protocol of the code the thesis names): "
        "an estimate, not a bound (10k groups trained at one seed, then at five, took 1.03 to 1.4 times their "
        "projection; halving a group overstates its saving a little, as per-run cost falls with group size).",
        "Groups as the tables train them: Table 2's (its tasks x memnet.seeds, ten under reading A-10; "
        "shown where that is neither one nor five seeds) and Table 13's (en-10k, its tasks with data x its five "
        "seeds: the 10k tables' groups take most of chapter 6's training time), each in one GroupTrainer, "
        f"MemN2N and t-MEM-NN {max(1, steps // PROTOCOL_SEEDS // 2)} timed steps each, twice in turn (the two "
        "stretches averaged), gradient noise included.",
        "Where the difference goes: on the five-seed group's two models, after their steps are timed, each "
        "part of a step is timed alone (timing.memnet.step_parts_ms): the weights of one pass (t-MEM-NN: the escort "
        "draw of every matrix with its uniforms; MemN2N: the masked matrices), forward and backward; the "
        "t-divergence, forward and backward; the gradient noise (t-MEM-NN owns a mean and a scale per weight, "
        "twice MemN2N's elements); clipping and the optimiser step. The rest, the step minus those parts, is the "
        "memory hops, the loss and their backward, the same model in both. Parts timed alone do not add up "
        "exactly to a step (caches, allocation), so the rest is an estimate.",
        records.note("tolias-thesis"),
        "This machine is shared and its speed varies between sessions (the same training step has measured up to "
        "twice as long hours apart), so compare figures measured together: the ratios above come from one process, "
        "and the pipeline rows from one pipeline run, dated in results/costs.tsv.",
    ]
    md, csv_text = render(rows, provenance, notes)
    paths = {"md": Path(out_dir) / "timing.md", "csv": Path(out_dir) / "timing.csv"}
    io.write_text(paths["md"], md)
    io.write_text(paths["csv"], csv_text)
    print("\n".join(f"{k}: {v}" for k, v in provenance.items()))
    width, section = max(len(q) for _, q, *_ in rows), None
    for sec, q, v, p, unit, _ in rows:
        if sec != section:
            print(f"\n{sec}")
            section = sec
        print(f"  {q:<{width}}  {_fmt(v, unit):>9} {unit:<2}" + (f"  (paper {p})" if p is not None else ""))
    print(f"wrote {paths['md']} and {paths['csv']}")
    return OutputPage("Timing benchmark (§6.4.4, §6.5.2): ratios measured on this machine beside the thesis's",
                      "benchmark", ("timing.md", "timing.csv"), f"measured on {provenance['device']}", scale="paper")
