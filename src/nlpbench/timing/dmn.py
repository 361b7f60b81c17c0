"""Timing benchmark of the DMN family (Shen thesis §6.3.2).

Run on demand (`nlpbench output shen-thesis dmn-timing`, rule `output_shen_thesis_dmn_timing`), never as a test.
In one process it times training steps of DMN+ and ff-DMN on every en-10k task present, with the family's
model (DMN.forward: only the real facts are computed) beside the plain padded forward pass a user would write
(nlpbench.timing.plain_dmn: the same logits), and reads what the pipeline's last run of the DMN tables cost: each
group's job time from its `benchmark:` file and the epochs each run trained before early stopping. The last
whole-pipeline measurement of the DMN tables (`nlpbench end-to-end dmn-thesis-epochs`, its record under
results/shen-thesis/) is shown beside them.
"""

from __future__ import annotations

import csv
import io as _io
import math
import os
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

import torch
from torch.nn import functional as F

from nlpbench.data import babi
from nlpbench.dmn import groups as dg
from nlpbench.dmn.experiments import model_config
from nlpbench.dmn.train import DMNTrainConfig, DMNTrainer, batch_of, build_data
from nlpbench.family import OutputPage, Paths
from nlpbench.runtime import io, rundirs
from nlpbench.runtime.provenance import code_commit, device_label, resolve_device
from nlpbench.status import job_seconds
from nlpbench.timing import records
from nlpbench.timing.plain_dmn import plain_logits
from nlpbench.timing.report import sectioned_markdown

WARMUP = 2                     # untimed steps before each timed stretch
MODELS = ("dmn+", "ff-dmn")    # the task tables' two trained models (MoDMN+ trains on the patterns only)


def step_ms(trainer: DMNTrainer, plain: bool, steps: int) -> float:
    """ms per training step (forward, eq. 6.6 loss with the L2 term, backward, Adam), minibatches taken in a
    fixed order from the training split; `plain` swaps DMN.forward for timing.plain_dmn.plain_logits."""
    split, B = trainer.data.splits["train"], trainer.tcfg.batch_size
    order = torch.randperm(trainer.data.size("train"), generator=torch.Generator().manual_seed(0))
    n_batches = trainer.data.size("train") // B
    model = trainer.model.train()
    for i in range(WARMUP + steps):
        if i == WARMUP:
            t0 = time.perf_counter()
        b = batch_of(split, order[(i % n_batches) * B:(i % n_batches + 1) * B])
        args = (b["stories"], b["n_facts"], b["queries"])
        logits = (plain_logits(model, *args, trainer.gens["dropout"]) if plain
                  else model(*args, generator=trainer.gens["dropout"]))
        loss = F.cross_entropy(logits, b["answers"]) + trainer.tcfg.l2 * trainer.l2_term()
        trainer.opt.zero_grad(set_to_none=True)
        loss.backward()
        trainer.opt.step()
    return 1000 * (time.perf_counter() - t0) / steps


def measure_steps(params: dict, data_root: Path, steps: int) -> list[dict]:
    """Per task present and model: ms per step of both forward passes (each on a fresh trainer of seed 0),
    the two interleaved task by task so that load from other processes falls on both alike."""
    rows = []
    for task in range(1, 21):
        for model in MODELS:
            s = dg.resolved_settings(params, "tasks", model)
            try:
                train, test = babi.load_task(data_root, s["data"]["variant"], task)
            except babi.MissingDataError:
                break
            tr, va = babi.train_val_split(train, s["data"]["n_val"], s["data"]["split_seed"])
            data = build_data({"train": tr, "val": va, "test": test}, memory_size=s["data"]["memory_size"])
            trainers = {plain: DMNTrainer(model_config(model, s),
                                          DMNTrainConfig(**s["train"]), data, 0, log=lambda _: None)
                        for plain in (False, True)}
            ms = {plain: step_ms(t, plain, steps) for plain, t in trainers.items()}
            rows.append({"task": task, "model": model, "ours": ms[False], "plain": ms[True],
                         "batches": math.ceil(data.size("train") / s["train"]["batch_size"]),
                         "longest": int(data.splits["train"]["n_facts"].max()),
                         "mean_facts": float(data.splits["train"]["n_facts"].float().mean())})
    return rows


TOGETHER_MODELS = ("dmn+", "modmn+", "ff-dmn")
TOGETHER_TASK = 1              # the task whose five seeds share a pass
TOGETHER_SEEDS = (0, 1, 2, 3, 4)


def _task_data(params: dict, data_root: Path, model: str, task: int):
    s = dg.resolved_settings(params, "tasks", model)
    train, test = babi.load_task(data_root, s["data"]["variant"], task)
    tr, va = babi.train_val_split(train, s["data"]["n_val"], s["data"]["split_seed"])
    return s, build_data({"train": tr, "val": va, "test": test}, memory_size=s["data"]["memory_size"])


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _alone_and_together_ms(trainers: list[DMNTrainer], steps: int) -> tuple[float, float]:
    """ms per run and training step: each run stepped alone (DMNTrainer's model and Adam), then the same runs in
    one pass (dmn.group_train.train_step), each on its own minibatches in a fixed order; alone and together
    alternate step by step so that load from other processes falls on both alike."""
    from nlpbench.dmn.group_train import stack_trainers, train_step
    B, l2 = trainers[0].tcfg.batch_size, trainers[0].tcfg.l2
    orders = [torch.randperm(t.data.size("train"), generator=torch.Generator().manual_seed(r))
              for r, t in enumerate(trainers)]
    n_batches = [t.data.size("train") // B for t in trainers]
    engine, adam = stack_trainers(trainers)
    gens = [t.gens["dropout"] for t in trainers]

    def batches(i):
        return [batch_of(t.data.splits["train"], o[(i % n) * B:(i % n + 1) * B])
                for t, o, n in zip(trainers, orders, n_batches)]

    def alone(i):
        for t, b in zip(trainers, batches(i)):
            model = t.model.train()
            loss = F.cross_entropy(model(b["stories"], b["n_facts"], b["queries"], generator=t.gens["dropout"]),
                                   b["answers"]) + l2 * t.l2_term()
            t.opt.zero_grad(set_to_none=True)
            loss.backward()
            t.opt.step()

    def together(i):
        train_step(engine, adam, batches(i), gens, l2)

    spent = {alone: 0.0, together: 0.0}
    device = trainers[0].device
    for i in range(WARMUP + steps):
        for f in (alone, together):
            _sync(device)
            t0 = time.perf_counter()
            f(i)
            _sync(device)
            if i >= WARMUP:
                spent[f] += time.perf_counter() - t0
    R = len(trainers)
    return 1000 * spent[alone] / steps / R, 1000 * spent[together] / steps / R


def measure_together(params: dict, data_root: Path, steps: int, device: str = "cpu") -> list[dict]:
    """Per run and training step on `device`, alone vs in one pass (nlpbench.dmn.grouped): the five seeds of one
    task for each model, and the tasks present of one seed for the task tables' two models. [] without bAbI."""
    rows = []
    try:
        for model in TOGETHER_MODELS:
            s, data = _task_data(params, data_root, model, TOGETHER_TASK)
            trainers = [DMNTrainer(model_config(model, s), DMNTrainConfig(**s["train"]), data, seed,
                                   log=lambda _: None, device=device) for seed in TOGETHER_SEEDS]
            ms = _alone_and_together_ms(trainers, steps)
            rows.append({"model": model, "what": f"the {len(TOGETHER_SEEDS)} seeds of task {TOGETHER_TASK}",
                         "runs": len(trainers), "alone": ms[0], "together": ms[1]})
        for model in MODELS:
            trainers = []
            for task in range(1, 21):
                try:
                    s, data = _task_data(params, data_root, model, task)
                except babi.MissingDataError:
                    continue
                trainers.append(DMNTrainer(model_config(model, s), DMNTrainConfig(**s["train"]), data, 0,
                                           log=lambda _: None, device=device))
            ms = _alone_and_together_ms(trainers, max(steps // 2, 1))
            rows.append({"model": model, "what": f"the {len(trainers)} tasks present, seed 0", "runs": len(trainers),
                         "alone": ms[0], "together": ms[1]})
    except babi.MissingDataError:
        return []
    return rows


def pipeline_costs(params: dict, logs: Path, runs_root: Path) -> list[dict]:
    """Per DMN group of the chosen scale: the seconds of its item jobs (the `benchmark:` files snakemake wrote;
    None where none is there), the longest of them, and, from the runs' metrics, epochs trained and the selected
    epoch (sorted)."""
    out = []
    for gid, g in sorted(dg.groups_by_id(params).items(), key=lambda kv: (kv[1].kind, kv[1].model)):
        seconds = [s for s in (job_seconds(logs, dg.job_id(g, item)) for item in g.items) if s is not None]
        ok = [m for m in (io.read_json(p) for p in rundirs.run_dir(runs_root, gid).glob("*/metrics.json")) if m["status"] == "ok"]
        out.append({"group": gid, "model": g.model, "kind": g.kind, "runs": len(g.items) * len(g.seeds),
                    "trained": len(ok), "seconds": sum(seconds) if seconds else None, "jobs": len(g.items),
                    "jobs_timed": len(seconds), "longest": max(seconds, default=None),
                    "epochs": sorted(m["epochs"] for m in ok), "best": sorted(m["best_epoch"] for m in ok)})
    return out


def _spread(values: list[int]) -> str:
    return f"{values[0]} / {statistics.median(values):g} / {values[-1]}" if values else ""


def render(steps: list[dict], costs: list[dict], provenance: dict, notes: list[str],
           measured: dict[str, dict | None] | None = None, together: list[dict] | None = None) -> tuple[str, str]:
    """Markdown and CSV (section, quantity, measured, unit, note) of the benchmark; `measured`: the end-to-end
    measurements this benchmark shows, each with its last record (records.read_records)."""
    table = []                                                         # (section, quantity, value, unit, note)
    sec = "Training step: the family's model (real facts only) vs the plain padded forward pass"
    for model in MODELS:
        mine = [r for r in steps if r["model"] == model]
        for r in mine:
            table.append((sec, f"{model} task {r['task']}: ours / plain", r["ours"], "ms",
                          f"plain {r['plain']:.1f} ms, x{r['plain'] / r['ours']:.2f}; longest story "
                          f"{r['longest']} facts, mean {r['mean_facts']:.1f}"))
        if mine:
            ours = sum(r["ours"] * r["batches"] for r in mine) / 1000
            plain = sum(r["plain"] * r["batches"] for r in mine) / 1000
            table.append((sec, f"{model}: one epoch of training steps over the {len(mine)} tasks, ours", ours, "s",
                          f"plain {plain:.1f} s: x{plain / ours:.2f}"))
    sec = "Runs trained together: per run and training step, alone vs in one pass (nlpbench.dmn.grouped)"
    ratio = {}
    for r in together or []:
        x = r["alone"] / r["together"]
        ratio.setdefault(r["model"], x)          # the seeds of one task: what a pipeline job would share
        table.append((sec, f"{r['model']}, {r['what']}: alone / together", r["together"], "ms",
                      f"alone {r['alone']:.1f} ms: x{x:.2f} per run ({r['runs']} runs in the pass)"))
    sec = "The pipeline's last run of the DMN tables at this scale (benchmark files; one thread a job)"
    timed = [c for c in costs if c["seconds"] is not None]
    for c in costs:
        table.append((sec, f"{c['model']} on {c['kind']} ({c['trained']} of {c['runs']} runs)",
                      None if c["seconds"] is None else c["seconds"] / 60, "min",
                      f"{c['jobs_timed']} of {c['jobs']} item jobs timed; epochs trained min / median / max "
                      f"{_spread(c['epochs'])}; selected epoch {_spread(c['best'])}; {c['group']}"))
    if timed:
        total, longest = sum(c["seconds"] for c in timed) / 60, max(c["longest"] for c in timed) / 60
        table.append((sec, f"the {sum(c['jobs_timed'] for c in timed)} timed jobs, job-minutes", total, "min", ""))
        table.append((sec, "wall time on two cores, at least", max(longest, total / 2), "min",
                      "the longest job, or half the job-minutes if that is more (two jobs side by side)"))
        if ratio and all(c["model"] in ratio for c in timed):
            projected = sum(c["seconds"] / ratio[c["model"]] for c in timed) / 60
            table.append((sec, "the same jobs with each item's seeds in one pass, projected", projected, "min",
                          "each group's job-minutes over its model's measured ratio (the seeds of one task); the "
                          "cpu scale trains the DMN tables at the thesis's settings, so this is also the paper "
                          "scale's CPU projection"))
    for name, record in (measured or {}).items():
        table += [(sec, q, v, unit, note) for sec, q, v, _, unit, note in records.rows(name, record, False)]
    buf = _io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["section", "quantity", "measured", "unit", "note"])
    for s, q, v, unit, note in table:
        w.writerow([s, q, "" if v is None else f"{v:.6g}", unit, note])
    md = sectioned_markdown(
        ["# Timing benchmark: the DMN family (Shen thesis ch. 6)", "",
         "Measured in one run of `nlpbench output shen-thesis dmn-timing` on the machine below.", ""],
        provenance, ["quantity", "measured", "unit", "note"],
        [(s, [q, "not timed" if v is None else f"{v:.4g}", unit, note]) for s, q, v, unit, note in table], notes)
    return md, buf.getvalue()


def benchmark(params: dict, decl: dict, source: str, name: str, paths: Paths) -> OutputPage:
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    steps = measure_steps(params, paths.data / "babi", decl.get("steps", 10))
    pass_device = resolve_device(params["device"])
    together = measure_together(params, paths.data / "babi", decl.get("steps", 10), pass_device)
    costs = pipeline_costs(params, Path("logs/train"), paths.runs)
    t = params["dmn"]["train"]
    provenance = {
        "device": device_label("cpu"), "torch": torch.__version__, "threads": torch.get_num_threads(),
        "code commit": code_commit(), "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "scale": params["scale"], "benchmark wall time": f"{time.perf_counter() - t0:.0f} s",
        "load average at start (1 min)": f"{load:.2f} on {os.cpu_count()} cores (other processes share the machine)",
        "timed steps": f"{decl.get('steps', 10)} per task and forward pass, after {WARMUP} warm-up steps",
        "runs trained together timed on": device_label(pass_device),
    }
    notes = [
        f"A step is one minibatch of {t['batch_size']} questions: forward pass, the batch-mean cross-entropy "
        f"(eq. 6.6) plus L2 {t['l2']} on every weight matrix, backward pass and Adam, on the task's training split "
        "(the variant and validation split of the task tables' settings), each batch cut to its longest story and "
        "sentence as training cuts it. Both forward passes share the weights' shapes and the dropout stream "
        "(timing.plain_dmn equals DMN.forward, tested); ours computes the position encoding and the attention gate on the "
        "real facts only and steps the AttnGRU through the stories that still have facts, where the plain pass "
        "spends the same work on every fact slot of the batch's longest story.",
        "One epoch of training steps = the per-step time x the task's minibatches, summed over the tasks; "
        "per-epoch validation and checkpoints are left out.",
        "The pipeline rows describe the last run of the DMN tables on this machine (logs/train/<group>.benchmark.tsv "
        "and runs/<group>/*/metrics.json), not this benchmark's process: the pipeline trains each group as one "
        "job per item (a task, a pattern; all its seeds), each run until early stopping.",
    ]
    measured = records.read_records(paths.results, source, name, records.load())
    if measured:
        notes.append(records.note(source))
    notes.append(
        "Runs trained together: the runs step alone (each its DMNTrainer's model and Adam) and in one pass "
        "(nlpbench.dmn.grouped: the weights stacked along a run axis, Adam per run; each member equals the readable "
        "model, tested), each run on its own minibatches, the two alternating step by step; the time is per run and "
        "step, on params.yaml's `device` (the line above names it; the rest of this page times the CPU). The tasks' pass pads every run to the pass's longest story and sentence, so it shows what a pass "
        "across tasks would cost; the pipeline's jobs share a pass between the seeds of one item (dmn.execution).")
    md, csv_text = render(steps, costs, provenance, notes, measured, together)
    out = paths.results / source
    io.write_text(out / f"{name}.md", md)
    io.write_text(out / f"{name}.csv", csv_text)
    print(md)
    return OutputPage("Timing benchmark of the DMN family: the model's training step beside a plain padded one, and "
                      "the cost of the DMN tables", "benchmark", (f"{name}.md", f"{name}.csv"),
                      f"measured on {provenance['device']}")
