"""From groups to trained memory-network runs, and from runs to table cells (seed 000 ch. 6).

`train_group` trains every run of a memnet.groups.Group that is not already complete, in one vectorised pass,
and writes each run's checkpoint, metrics.json, config and training log, then the group's summary (last, so its
presence means the group is complete). A task whose data file is missing gets metrics with status
"needs_data" instead of stopping the group. `table_parts` turns the runs into the cells of a table.
"""

from __future__ import annotations

import statistics
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch

from nlpbench.config import Declared
from nlpbench.data import babi
from nlpbench.family import TableParts
from nlpbench.memnet.data import load_task_tensors
from nlpbench.memnet.groups import MODELS, Group, column_key, declaration_groups, dof_by_role
from nlpbench.memnet.model import MemNetConfig
from nlpbench.memnet.train import BayesConfig, GroupTrainer, Run, TrainConfig
from nlpbench.results import tables
from nlpbench.runtime import checkpoints, io, rundirs
from nlpbench.runtime.provenance import code_commit, device_label


def _n_val(settings: dict, variant: str) -> int:
    """Validation questions held out of the training file: a tenth of `data.train_questions` when set (bAbI's
    own 90/10 at both sizes), else the variant's n_val."""
    if settings["data"].get("train_questions"):
        return settings["data"]["train_questions"] // 10
    return settings["data"]["n_val_10k" if variant.endswith("10k") else "n_val_1k"]


def training_questions(settings: dict, variant: str) -> int:
    """Questions a run trains on per task, counted without reading the files: bAbI's training file holds 1,000
    questions a task (10,000 on the 10k variants), of which `data.train_questions` are used when set, less the
    validation questions held out of them (`_n_val`), as `task_tensors` splits them."""
    held = settings["data"].get("train_questions") or (10_000 if variant.endswith("10k") else 1_000)
    return held - _n_val(settings, variant)


def task_tensors(data_root: Path, variant: str, tasks: list[int], settings: dict):
    """The tensors of bAbI `tasks` (one task; a joint model's all) as a group with these settings trains on them;
    babi.MissingDataError where a file is missing."""
    return load_task_tensors(data_root, variant, tasks, settings["model"]["memory_size"], _n_val(settings, variant),
                             settings["data"]["split_seed"], settings["data"].get("train_questions"),
                             settings["data"].get("answer_forms"))


def save_run(trainer: GroupTrainer, k: int, run_dir: Path, data, metrics: dict, run_config: dict) -> None:
    """Run k's own checkpoint, config, training log and metrics (metrics.json last: it marks the run done)."""
    checkpoints.save({"state": trainer.run_state(k), "vocab": data.vocab.to_dict(),
                      "model_config": trainer.model_cfg.__dict__, "vocab_size": data.n_words}, run_dir / "model.pt")
    io.write_json(run_dir / "config.json", run_config)
    io.write_json(run_dir / "history.json", trainer.run_history(k))
    io.write_json(run_dir / "metrics.json", metrics)


def model_configs(model: str, settings: dict) -> tuple[MemNetConfig, TrainConfig, BayesConfig | None]:
    """The dataclass configs of one model name (groups.MODELS) under `settings` (the memnet section)."""
    model_cfg = MemNetConfig(n_words=0, **MODELS[model], **settings["model"])
    bayes_cfg = None
    if model_cfg.bayesian:
        b = dict(settings["bayes"])
        b["test_samples"] = tuple(b["test_samples"])
        bayes_cfg = BayesConfig(**b)
    return model_cfg, TrainConfig(**settings["train"]), bayes_cfg


def checkpointed_runs(checkpoint: Path) -> set[str]:
    """The runs an interrupted pass's checkpoint holds (it is kept until every run of the pass is saved). They
    are trained or evaluated again from it, complete or not, so that the pass resumes with the runs it had."""
    if not checkpoint.exists():
        return set()
    return set(checkpoints.load(checkpoint, map_location="cpu").get("run_ids", ()))


def train_together(group_id: str, model: str, settings: dict, runs: list[Run], datasets: list, checkpoint: Path,
                   device: str, log: Callable[[str], None]) -> tuple[GroupTrainer, list[dict], float]:
    """Train `runs` in one vectorised pass (resuming from `checkpoint`), then evaluate them; returns the
    trainer, each run's metrics and the wall time."""
    model_cfg, train_cfg, bayes_cfg = model_configs(model, settings)
    trainer = GroupTrainer(runs, datasets, model_cfg, train_cfg, bayes_cfg, device, log)
    log(f"{group_id}: training {len(runs)} runs together on {device}")
    t0 = time.perf_counter()
    trainer.fit(checkpoint)
    metrics = trainer.evaluate()
    return trainer, metrics, time.perf_counter() - t0


def execution_record(trainer: GroupTrainer, k: int) -> dict:
    """How run k of `trainer` was computed, for its metrics.json: the execution-only keys (the same model and
    formulas whatever they say, up to float summation order and rounding)."""
    return ({"memory_read": trainer.memory_reads[k], "hop_kernels": trainer.hop_kernels}
            | ({"posterior_kernels": trainer.posterior_kernels} if trainer.posterior_kernels else {}))


def execution_provenance(reads: set[str], hop_kernels: set[str], kernels: set[str]) -> dict[str, str]:
    """A table's provenance lines for the execution-only keys its runs recorded (execution_record)."""
    return {
        "memory read": (", ".join(sorted(reads)) + " (`memnet.model.memory_read`: how the runs were computed, the "
                        "same model up to float summation order)") if reads else "none (nothing trained)",
        "hop kernels": (", ".join(sorted(hop_kernels)) + " (`memnet.model.hop_kernels`: how the memory hops ran, the "
                        "same formulas up to float rounding)") if hop_kernels else "none (nothing trained)",
        **({"posterior kernels": ", ".join(sorted(kernels)) + " (`memnet.model.posterior_kernels`: how the Student-t "
                                 "draw and divergence ran, the same formulas up to float rounding)"} if kernels else {}),
    }


def train_group(group: Group, data_root: Path, runs_root: Path, device: str = "cpu",
                log: Callable[[str], None] = print, again: bool = False) -> dict:
    """Train the group's incomplete runs together; returns (and writes) the group summary. again: every run,
    finished ones included (a killed retrain resumes from its checkpoint when asked again); the summary's wall
    time is then this training's alone."""
    s = group.settings
    group_dir = rundirs.run_dir(runs_root, group.group_id)
    summary_path = group_dir / "group.json"
    checkpoint = group_dir / "_checkpoint.pt"
    resumed = checkpointed_runs(checkpoint)
    datasets, runs, pending, records = [], [], [], {}
    for task in (["joint"] if group.joint else group.tasks):
        try:
            data = task_tensors(data_root, group.variant, list(group.tasks) if group.joint else [task], s)
        except babi.MissingDataError as e:
            for seed in group.seeds:
                run_dir = group.run_dir(runs_root, task, seed)
                metrics = {"run_id": f"{group.group_id}/{group.run_name(task, seed)}", "status": "needs_data",
                           "task": task, "seed": seed, "detail": str(e)}
                io.write_json(run_dir / "metrics.json", metrics)
                records[(task, seed)] = metrics
            log(f"task {task}: needs data ({e})")
            continue
        datasets.append(data)
        for seed in group.seeds:
            run_dir = group.run_dir(runs_root, task, seed)
            run_id = f"{group.group_id}/{group.run_name(task, seed)}"
            done = run_dir / "metrics.json"
            if not again and run_id not in resumed and done.exists() and io.read_json(done).get("status") == "ok":
                records[(task, seed)] = io.read_json(done)
                continue
            runs.append(Run(run_id, len(datasets) - 1, seed))
            pending.append((task, seed, run_dir, data))
    wall = 0.0
    if runs:
        trainer, metrics, wall = train_together(group.group_id, group.model, s, runs, datasets, checkpoint, device,
                                                log)
        ms_per_batch = statistics.mean(h["ms_per_batch"] for h in trainer.history) if trainer.history else None
        for k, ((task, seed, run_dir, data), m) in enumerate(zip(pending, metrics)):
            m.update({"task": task, "variant": group.variant, "model": group.model, "device": device_label(device),
                      "group_size": len(runs), "group_wall_time_s": wall, "group_ms_per_batch": ms_per_batch}
                     | execution_record(trainer, k))
            save_run(trainer, k, run_dir, data, m, {"group": group.group_id, "model": group.model,
                                                    "variant": group.variant, "task": task, "seed": seed,
                                                    "settings": s})
            records[(task, seed)] = m
        checkpoint.unlink(missing_ok=True)
    previous = io.read_json(summary_path) if summary_path.exists() and not again else {}
    summary = {"group": group.group_id, "model": group.model, "variant": group.variant,
               "tasks": list(group.tasks), "seeds": list(group.seeds), "device": device_label(device),
               "wall_time_s": wall + previous.get("wall_time_s", 0.0), "trained_now": len(runs),
               "code_commit": code_commit() if runs else previous.get("code_commit", "unknown"),
               "runs": {f"{t}-{sd}": records[(t, sd)]["status"] for (t, sd) in sorted(records)}}
    io.write_json(summary_path, summary)
    return summary


# -- tables ---------------------------------------------------------------------------------------------

TIE_BREAKS = ("lowest_seed", "val_nll")


def select_run(metrics: list[dict], metric: str, tie_break: str = "lowest_seed") -> dict:
    """The run the validation set picks (reading A-10): best validation accuracy on the column's metric; among
    runs tied at it, the lowest seed, or (tie_break "val_nll") the lowest validation negative log-likelihood,
    then the lowest seed. Test accuracy never enters the choice. The NLL is needed only where runs tie, so a
    one-seed cell or an untied one reads runs trained before it was recorded."""
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"memnet.tie_break: unknown value {tie_break!r} (expected one of {', '.join(TIE_BREAKS)})")
    best = max(m["val_acc"][metric] for m in metrics)
    tied = [m for m in metrics if m["val_acc"][metric] == best]
    by_nll = tie_break == "val_nll" and len(tied) > 1
    if by_nll and (old := [m["run_id"] for m in tied if "val_nll" not in m]):
        raise ValueError(f"memnet.tie_break val_nll: {', '.join(old)} tie at the best validation accuracy and "
                         "recorded no validation NLL (trained before it was recorded); retrain them with "
                         "`nlpbench train GROUP --again` or set memnet.tie_break: lowest_seed")
    return min(tied, key=lambda m: (m["val_nll"][metric] if by_nll else 0.0, m["seed"]))


def _reading_notes(params: dict, settings: dict, seeds: tuple[int, ...]) -> list[str]:
    m, t, b = settings["model"], settings["train"], settings["bayes"]
    return [
        f"Scale `{params['scale']}`: {t['epochs']} epochs, {len(seeds)} seed(s) per cell "
        f"({', '.join(map(str, seeds))}); each cell reports the seed with the best "
        "validation accuracy for that column (A-10), seeds tied at it going to "
        + ("the lowest validation NLL" if params["memnet"]["tie_break"] == "val_nll" else "the lowest seed")
        + f" (`memnet.tie_break: {params['memnet']['tie_break']}`), and the note column of the CSV gives the mean "
        "and spread over seeds. The thesis names no repeats; the README of the code its footnote 5 names reports "
        "each task's best of ten trials by validation accuracy, and Table 2's MemN2N column matches that README "
        "within a point (its joint model too: ten trials, one model picked by validation), so the 1k tables run "
        "ten seeds; the 10k tables run five (no published protocol for them; this machine's budget).",
        f"A-3 weight tying: `{m['tying']}`" + (
            " (A^{k+1} = C^k, B = A^1, W^T = C^K: the MemN2N code the thesis names in its footnote 5, whose README "
            "numbers Table 2's MemN2N column matches; t-MEM-NN puts a Student-t posterior on every E_k)"
            if m["tying"] == "adjacent" else " (A, B, C shared by every hop, and W: the thesis's text)") +
        f"; position encoding {m['position_encoding']} in the `{m['position_form']}` form"
        + {"code": " (an earlier reading of the code's: twice the paper's l_kj, with J the data's padded sentence "
                   "length)",
           "code_published": " (the footnoted code's formula as published: 1 + 4 (k - (d+1)/2)(j - (J+1)/2) / (d J), "
                             "J the padded sentence length plus the time-word slot)",
           }.get(m["position_form"], " (l_kj of ch. 3 over the sentence's own length)") +
        f"; temporal encoding {m['temporal_encoding']} (time rows); memory of "
        + ("min(50, the task's longest story) slots, as the code sizes it"
           if m["memory_slots"] == "longest_story" else f"{m['memory_size']} slots") +
        f", empty slots masked: {m['mask_empty_memory']}; nil row `{m['nil_row']}`. Chosen by the task-15 pilot "
        "(Table pilot-task15, validation accuracy over three seeds): with the previous reading (50 slots, the "
        "paper's position encoding) task 15 sat on its two-answer plateau (about 55%) in every seed.",
        f"Optimiser: `{t['optimizer']}`, lr {t['lr']} halved every {t['lr_halve_every']} epochs, batch size "
        f"{t['batch_size']} (A-6), loss summed over the minibatch with the divergence scaled by |M|/N (A-4), "
        f"gradient noise N(0, {t['grad_noise_std']}^2) then {t['clip_scope']}-wise clipping at {t['clip_norm']} "
        f"(A-9), last partial batch {'dropped' if t['drop_last'] else 'kept'}"
        + (f", Adagrad initial accumulator {t['adagrad_initial_accumulator']}" if t["optimizer"] == "adagrad" else "")
        + ". The thesis's text says Adagrad at lr 0.01; its footnoted code (and the README numbers its Table 2 "
        "matches) uses SGD at 0.01, which we follow: Adagrad at 0.01 stalls at 64% validation accuracy on task 1 "
        "after 100 epochs. `memnet.train.optimizer: adagrad` restores the text's reading.",
        "t-MEM-NN: " + (
            "prior dof tied to each posterior's nu_Theta (A-1), so eq. 56 is an exact t-divergence (A-11). Used "
            "literally with a fixed prior nu = 100, eq. 56 is negative for nu_Theta < 100 and unbounded below in "
            "sigma: our first paper-scale run collapsed (nu_Theta -> 1.2, sigma -> 3-20, t-MEM-NN S=10 mean 35%); "
            "`memnet.bayes.tie_prior_dof: false` restores that reading"
            if b.get("tie_prior_dof") else
            f"prior dof nu = {b['prior_dof']} ({'learned' if b['learn_prior_dof'] else 'fixed'}, A-1); eq. 56 "
            "used literally as the regulariser (A-11)") +
        f". Divergence weight {b['divergence_weight']} on sum_Theta D_t / N (A-4): with weight 1 the pull of "
        "the unit-scale prior over-regularised (tasks 6 and 15 near 50% in a pilot on tasks 1, 6, 9, 15, seed 0); "
        "0.1 and 0.01 gave the same pilot accuracies. "
        f"Initial posterior scale sigma = {m['sigma_init']} (A-2); nu_Theta initialised at {m['dof_init']} and "
        f"floored at {m['dof_min']}; training draws one sample from the escort (eqs. 60-62); test predictions "
        f"average S samples from the {b['test_sampling']} (A-5).",
        "Accuracy is the percentage of the 1,000 test questions answered exactly; reproduced values keep one "
        "decimal, the paper prints integers.",
    ]


def table_parts(params: dict, d: Declared, runs_root: Path) -> TableParts:
    """The cells of a bAbI table: per task and column, the run the validation set selects, and the notes on how
    they were made (the core adds the declaration's claims and notes: nlpbench.results.build)."""
    exp = d.decl
    groups = declaration_groups(params, d)
    rows = [str(t) for t in exp["rows"]]
    spec = tables.spec_from_home(d.source, d.name, exp, rows, exp["columns"], pass_threshold=babi.PASS_THRESHOLD,
                                 mean_row=True)
    cells, wall, devices, commits, dofs, reads, kernels, hop_kernels = [], 0.0, set(), set(), [], set(), set(), set()
    for column, col in exp["columns"].items():
        group = groups[column_key(col)]
        summary_path = rundirs.run_dir(runs_root, group.group_id) / "group.json"
        if summary_path.exists():
            summary = io.read_json(summary_path)
            devices.add(summary["device"])
            commits.add(summary.get("code_commit", "unknown"))
        for task in exp["rows"]:
            if task not in group.tasks:
                cells.append(tables.Cell(str(task), column, None, "not_run", f"task not in scale {params['scale']}"))
                continue
            ms = [group.run_dir(runs_root, task, seed) / "metrics.json" for seed in group.seeds]
            found = [io.read_json(p) for p in ms if p.exists()]
            if any(m["status"] == "needs_data" for m in found):
                cells.append(tables.Cell(str(task), column, None, "needs_data", found[0]["detail"]))
                continue
            ok = [m for m in found if m["status"] == "ok"]
            if not ok:
                cells.append(tables.Cell(str(task), column, None, "not_run"))
                continue
            reads.update(m.get("memory_read", "gather") for m in ok)     # runs trained before the key existed: gathered
            hop_kernels.update(m.get("hop_kernels", "eager") for m in ok)     # runs before the key: eager
            kernels.update(m.get("posterior_kernels", "eager") for m in ok       # t-MEM-NN runs; before the key existed
                           if MODELS.get(m.get("model"), {}).get("posterior") == "student_t")   # kernels: eager
            if exp.get("report") in ("validation", "test_mean"):   # every seed counts: a reading pilot never
                split = "val" if exp["report"] == "validation" else "test"   # reads test, an explanation selects no run
                vals = [100 * (m[f"{split}_acc_by_task"][str(task)] if group.joint else m[f"{split}_acc"])[col["metric"]]
                        for m in sorted(ok, key=lambda m: m["seed"])]
                sd = f" ± {statistics.stdev(vals):.1f}" if len(vals) > 1 else ""
                what = ("validation accuracy, mean over seeds" if split == "val"
                        else f"test accuracy, mean{sd} over {len(vals)} seeds")
                cells.append(tables.Cell(str(task), column, statistics.mean(vals), "ok",
                                         f"{what}; per seed " + ", ".join(f"{v:.1f}" for v in vals),
                                         seeds={m["seed"]: v for m, v in zip(sorted(ok, key=lambda m: m["seed"]), vals)}))
                continue
            chosen = select_run(ok, col["metric"], params["memnet"]["tie_break"])

            def test_acc(m: dict) -> float:   # a joint model's metrics hold every task's accuracy
                return m["test_acc_by_task"][str(task)][col["metric"]] if group.joint else m["test_acc"][col["metric"]]

            tests = [100 * test_acc(m) for m in sorted(ok, key=lambda m: m["seed"])]
            spread = f"; seeds mean {statistics.mean(tests):.1f}" + (
                f" ± {statistics.stdev(tests):.1f} (n={len(tests)}; by seed " + ", ".join(f"{v:.1f}" for v in tests)
                + ")" if len(tests) > 1 else "")
            val = "" if group.joint else f" (validation {100 * chosen['val_acc'][col['metric']]:.1f})"
            cells.append(tables.Cell(str(task), column, 100 * test_acc(chosen), "ok",
                                     f"seed {chosen['seed']} chosen by validation{val}{spread}",
                                     seeds={m["seed"]: 100 * test_acc(m) for m in ok}))
            if "dof" in chosen and col["metric"] == "S10":
                dofs.append((task, chosen["dof"]))
    n_trained = 0                      # runs trained, not declared: a task without data ("needs data") trains none
    for group in groups.values():
        summary_path = rundirs.run_dir(runs_root, group.group_id) / "group.json"
        if summary_path.exists():
            summary = io.read_json(summary_path)
            wall += summary["wall_time_s"]
            n_trained += sum(state == "ok" for state in summary["runs"].values())
    provenance = {
        "scale": params["scale"],
        "code commit": code_commit() + (f" (runs trained at {', '.join(sorted(commits))})" if commits else ""),
        "device": ", ".join(sorted(devices)) or "none (nothing trained)",
        **execution_provenance(reads, hop_kernels, kernels),
        "training wall time": f"{wall / 60:.1f} min for {n_trained} "
                              f"runs in {len(groups)} vectorised groups",
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__,
        "runs": ", ".join(str(rundirs.run_dir(rundirs.RUNS, g.group_id)) for g in groups.values()),
    }
    # the t-MEM-NN group's settings carry the bayes section (with this experiment's overrides applied)
    settings = next((g.settings for g in groups.values() if "bayes" in g.settings),
                    next(iter(groups.values())).settings | {"bayes": params["memnet"]["bayes"]})
    notes = _reading_notes(params, settings, next(iter(groups.values())).seeds)
    seeds = ", ".join(map(str, next(iter(groups.values())).seeds))
    if exp.get("report") == "validation":
        notes[0] = (f"Scale `{params['scale']}`: a reading pilot. Each cell is the mean validation accuracy over seeds "
                    f"{seeds} (per seed in the CSV's note column); "
                    "test accuracy is never read, so the choice it supports is not selected on test numbers.")
    elif exp.get("report") == "test_mean":
        notes[0] = (f"Scale `{params['scale']}`: an explanation, not a reproduction. Each cell is the mean test accuracy "
                    f"over seeds {seeds} (its spread and each seed in "
                    "the CSV's note column); no run is selected, so a difference between columns is the effect of what "
                    "they change, not of which seed validation picks.")
    if dofs:
        nu = {n: [dof_by_role(d)[n] for _, d in dofs] for n in ("A", "B", "C")}
        notes.append("Fitted degrees of freedom of the reported t-MEM-NN runs (thesis §6.5.5 claims nu_A, nu_B <= 5 "
                     "and nu_C <= 20): " + "; ".join(
                         f"nu_{n} median {statistics.median(v):.1f} (range {min(v):.1f}-{max(v):.1f})"
                         for n, v in nu.items()) + ".")
    return TableParts(spec, cells, provenance, notes)

