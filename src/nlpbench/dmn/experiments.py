"""From params.yaml (section `dmn`) to trained DMN+ / MoDMN+ / ff-DMN runs, and Tables 6.2-6.7 with their figures.

Shen thesis ch. 6; §6.2-6.6 (the models §6.2, §6.4.2, §6.5.2, §6.6; training §6.3.2; data §6.3.3-6.3.4).

* Derived data (`make_dataset`): the six task-16 fact-order patterns and the augmented training set, written by
  nlpbench.dmn.fact_order under data/dmn/<id>/ (the id is a digest of the settings that shape it).
* Training (`train_item`): one job of nlpbench.dmn.groups (an item of a group, all its seeds), each run resumable;
  the job's summary last.
* Tables (`build_table`): every declared column reads its runs (or, for the ensemble, averages the softmax
  outputs of the ff-DMN and DMN+ runs, eqs. 6.20-6.21); cited columns keep the printed numbers. The notes state
  the readings used and what the scale cuts (the core judges the declared claims: nlpbench.results.claims).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import json
import shutil
import statistics
import time
from pathlib import Path
from typing import Callable

import torch

from nlpbench import config
from nlpbench.data import babi
from nlpbench.data.fetch import FetchError, PreparedDataChanged
from nlpbench.dmn import fact_order
from nlpbench.results import tables
from nlpbench.runtime import checkpoints, io, run_record, rundirs
from nlpbench.dmn.groups import (ENSEMBLE_MEMBERS, FF_DMN_ONLY, HASH_NEUTRAL, SOURCE, DMNGroup, _kind,
                                 _tasks_in_scale, all_datasets, base_settings, column_groups, dmn_tables, job_done,
                                 job_id, reports_validation, table_groups, table_rows)
from nlpbench.family import OutputPage, TableParts, table_figure
from nlpbench.runtime.provenance import code_commit, device_label, now_utc

MODEL_LABEL = {"dmn+": "DMN+", "modmn+": "MoDMN+", "ff-dmn": "ff-DMN"}


# -- derived data ---------------------------------------------------------------------------------------------

def pattern_config(settings: dict) -> fact_order.PatternConfig:
    p = {k: v for k, v in settings["patterns"].items() if k != "variant"}
    return fact_order.PatternConfig(**p)


def make_dataset(data_id: str, params: dict, data_root: Path, out_root: Path,
                 log: Callable[[str], None] = print) -> Path:
    """Write one derived data set (patterns or augmented) under out_root/<data_id>/; returns its manifest."""
    sets = all_datasets(params)
    if data_id not in sets:
        raise config.ConfigError(f"unknown DMN data set {data_id!r} for scale {params['scale']}; "
                                 f"known: {', '.join(sorted(sets)) or 'none'}")
    kind, settings = sets[data_id]
    cfg = pattern_config(settings)
    train, _ = babi.load_task(data_root, settings["patterns"]["variant"], 16)
    if not train:       # nothing derived from nothing: no manifest (the step's "done") for an empty data set
        path = babi.task_file(data_root, settings["patterns"]["variant"], 16, "train")
        raise FetchError(f"{path}: no questions, so no DMN data set {data_id!r} can be derived; delete {data_root} "
                         "and run the data step babi again")
    hist = fact_order.pattern_histogram(train)
    log(f"task 16 ({settings['patterns']['variant']}, {len(train)} training questions): natural pattern "
        f"histogram {hist}")
    patterns = fact_order.make_patterns(train, cfg)
    meta = {"kind": kind, "settings": {k: settings[k] for k in ("patterns", "augment") if k in settings},
            "natural_pattern_histogram": {str(k): v for k, v in hist.items()},
            "order_cue_natural": fact_order.order_cue(train),
            "order_cue_by_pattern": {str(k): fact_order.order_cue(v["train"] + v["val"] + v["test"])
                                     for k, v in patterns.items()}}
    if kind == "patterns":
        splits = fact_order.flatten_patterns(patterns)
    else:
        a = fact_order.make_augmented(patterns, fact_order.AugmentConfig(**settings["augment"]))
        splits = {"train": a["train"], "val": a["val"]}
    manifest = fact_order.write_dataset(Path(out_root) / data_id, splits, meta)
    log(f"wrote {manifest}: " + ", ".join(f"{k} {len(v)}" for k, v in splits.items()))
    return manifest


# -- training -------------------------------------------------------------------------------------------------

def _cap(samples: list, n: int | None) -> list:
    return list(samples) if n is None else list(samples)[:n]


@functools.lru_cache(maxsize=4)
def _derived(path: str) -> dict[str, list]:
    return fact_order.read_dataset(path)


def run_splits(group: DMNGroup, item: str, data_root: Path, dmn_data_root: Path) -> dict[str, list]:
    """train / val / test splits of one run (test: 'test', or one 'pattern<k>' per pattern test set)."""
    d = group.settings["data"]
    if group.kind == "tasks":
        train, test = babi.load_task(data_root, d["variant"], int(item.removeprefix("task")))
        tr, va = babi.train_val_split(train, d["n_val"], d["split_seed"])
        splits = {"train": tr, "val": va, "test": test}
    else:
        pat = fact_order.unflatten_patterns(_derived(str(dmn_data_root / group.datasets()[0])))
        if group.kind == "patterns":
            k = int(item.removeprefix("pattern"))
            splits = {"train": pat[k]["train"], "val": pat[k]["val"]}
        else:
            aug = _derived(str(dmn_data_root / group.datasets()[1]))
            splits = {"train": aug["train"], "val": aug["val"]}
        splits |= {f"pattern{k}": pat[k]["test"] for k in fact_order.PATTERNS}
    splits["train"] = _cap(splits["train"], d["max_train"])
    splits["val"] = _cap(splits["val"], d["max_val"])
    for k in splits:
        if k not in ("train", "val"):
            splits[k] = _cap(splits[k], d["max_test"])
    return splits


def model_config(model: str, settings: dict) -> DMNConfig:
    """The DMNConfig of a group's runs (the trainer sets the vocabulary and answer sizes from the data): its
    `model` settings, and the ff-DMN readings, which resolved_settings drops for a model that does not read them,
    at their neutral values, so that its config (a checkpoint's identity, model.pt's) never follows a default."""
    from nlpbench.dmn.model import DMNConfig
    neutral = {key: HASH_NEUTRAL[("model", key)] for key in FF_DMN_ONLY}
    return DMNConfig(n_words=0, n_answers=0, variant=model, **{**neutral, **settings["model"]})


def _needs_data(group: DMNGroup, item: str, seed: int, runs_root: Path, error: Exception,
                log: Callable[[str], None]) -> dict:
    run_id = f"{group.group_id}/{group.run_name(item, seed)}"
    metrics = {"run_id": run_id, "status": "needs_data", "item": item, "seed": seed, "detail": str(error)}
    run_record.finish(group.run_dir(runs_root, item, seed), (), metrics)
    log(f"{run_id}: needs data ({error})")
    return metrics


def _trainer(group: DMNGroup, item: str, seed: int, data, device: str, log: Callable[[str], None]):
    """The run's DMNTrainer (its model initialised from its seed), logging under its run id."""
    from nlpbench.dmn.train import DMNTrainConfig, DMNTrainer
    run_id = f"{group.group_id}/{group.run_name(item, seed)}"
    s = group.settings
    trainer = DMNTrainer(model_config(group.model, s), DMNTrainConfig(**s["train"]), data, seed,
                         log=lambda msg: log(f"{run_id}: {msg}"), device=device)
    log(f"{run_id}: {group.model} on {item}: " + ", ".join(f"{k} {data.size(k)}" for k in data.splits)
        + f"; {len(data.vocab)} words, {len(data.answers)} answers, "
        f"{int(max(int(v['n_facts'].max()) for v in data.splits.values()))} facts at most")
    return trainer


def _item_data(group: DMNGroup, item: str, data_root: Path, dmn_data_root: Path):
    """The item's vectorised splits (every seed of the item reads the same) and the names of its test splits."""
    from nlpbench.dmn.train import build_data
    splits = run_splits(group, item, data_root, dmn_data_root)
    return build_data(splits, memory_size=group.settings["data"]["memory_size"]), \
        [k for k in splits if k not in ("train", "val")]


def train_run(group: DMNGroup, item: str, seed: int, data_root: Path, dmn_data_root: Path, runs_root: Path,
              device: str = "cpu", log: Callable[[str], None] = print) -> dict:
    """Train (or resume) one run and write its files; then their record (sizes and sha256, nlpbench.runtime.run_record)
    and metrics.json last. Returns the metrics."""
    try:
        data, tests = _item_data(group, item, data_root, dmn_data_root)
    except babi.MissingDataError as e:
        return _needs_data(group, item, seed, runs_root, e, log)
    trainer = _trainer(group, item, seed, data, device, log)
    t0 = time.perf_counter()
    trainer.fit(group.run_dir(runs_root, item, seed) / "checkpoint.pt")
    return _write_run(group, item, seed, trainer, tests, time.perf_counter() - t0, runs_root, device, log)


def train_together(group: DMNGroup, item: str, seeds: list[int], data_root: Path, dmn_data_root: Path,
                   runs_root: Path, device: str = "cpu", log: Callable[[str], None] = print) -> dict[int, dict]:
    """Train (or resume) the runs of several seeds of one item in one pass (nlpbench.dmn.group_train: each run
    keeps its generators, early stopping, selected epoch and checkpoint) and write each run's files as train_run
    does. Returns each seed's metrics."""
    from nlpbench.dmn.group_train import GroupTrainer
    try:
        data, tests = _item_data(group, item, data_root, dmn_data_root)
    except babi.MissingDataError as e:
        return {seed: _needs_data(group, item, seed, runs_root, e, log) for seed in seeds}
    trainers = [_trainer(group, item, seed, data, device, log) for seed in seeds]
    log(f"{group.group_id}.{item}: seeds {', '.join(map(str, seeds))} trained together in one pass")
    t0 = time.perf_counter()
    GroupTrainer(trainers, log=log).fit([group.run_dir(runs_root, item, seed) / "checkpoint.pt" for seed in seeds])
    wall = time.perf_counter() - t0
    return {seed: _write_run(group, item, seed, t, tests, wall, runs_root, device, log)
            for seed, t in zip(seeds, trainers)}


def _write_run(group: DMNGroup, item: str, seed: int, trainer, tests: list[str], wall: float, runs_root: Path,
               device: str, log: Callable[[str], None]) -> dict:
    """A trained run's files (its selected weights, test outputs, config, history), their record, metrics.json
    last; the checkpoint goes."""
    run_dir = group.run_dir(runs_root, item, seed)
    run_id = f"{group.group_id}/{group.run_name(item, seed)}"
    data, s = trainer.data, group.settings
    model = trainer.selected_model()
    test_acc = {k: trainer.loss_and_accuracy(k, model)[1] for k in tests}
    probs = {k: torch.softmax(trainer.logits(k, model), -1).cpu() for k in tests}
    checkpoints.save({"model_config": dataclasses.asdict(trainer.model_cfg), "state": model.state_dict(),
                      "vocab": data.vocab.to_dict(), "answers": list(data.answers)}, run_dir / "model.pt")
    checkpoints.save({"answers": list(data.answers), "probs": probs,
                      "gold": {k: data.splits[k]["answers"].cpu() for k in tests}}, run_dir / "test_probs.pt")
    io.write_json(run_dir / "config.json", {"group": group.group_id, "model": group.model, "kind": group.kind,
                                            "item": item, "seed": seed, "settings": s})
    io.write_json(run_dir / "history.json", trainer.history)
    best = trainer.best
    metrics = {"run_id": run_id, "status": "ok", "model": group.model, "item": item, "seed": seed,
               "epochs": trainer.epoch, "best_epoch": best["epoch"], "val_loss": best["val_loss"],
               "val_acc": best["val_acc"], "test_acc": test_acc, "sizes": {k: data.size(k) for k in data.splits},
               "n_answers": len(data.answers), "device": device_label(device),
               "train_wall_time_s": sum(h["seconds"] for h in trainer.history),
               "wall_time_s_this_call": wall}
    together = max((h.get("runs_in_pass", 1) for h in trainer.history), default=1)
    if together > 1:
        metrics["runs_in_pass"] = together      # trained with others: its epochs' seconds are its share of the pass
    run_record.finish(run_dir, RECORDED, metrics)
    (run_dir / "checkpoint.pt").unlink(missing_ok=True)   # model.pt keeps the selected weights
    log(f"{run_id}: best epoch {best['epoch']} of {trainer.epoch}, val acc {best['val_acc']:.3f}, test "
        + ", ".join(f"{k} {v:.3f}" for k, v in test_acc.items()))
    return metrics


RUN_FILES = ("model.pt", "test_probs.pt", "history.json")   # a finished run's files besides config and metrics
RECORDED = (*RUN_FILES, "config.json")                        # what its record covers, with metrics.json


def run_remedy(group: DMNGroup, item: str, seed: int, runs_root: Path) -> str:
    """What to do about a run of this group whose files fail their check: train it again."""
    return f"{run_record.remedy_for(group.run_dir(runs_root, item, seed))} (nlpbench train {job_id(group, item)})"


def read_run(group: DMNGroup, item: str, seed: int, runs_root: Path) -> dict:
    """One run's metrics, its files checked against their record first (nlpbench.runtime.run_record.read_metrics)."""
    return run_record.read_metrics(group.run_dir(runs_root, item, seed), run_remedy(group, item, seed, runs_root))


def finished_twin(group: DMNGroup, item: str, seed: int, runs_root: Path, device: str = "cpu",
                  log: Callable[[str], None] = print) -> Path | None:
    """A finished run of another DMN group with exactly this run's configuration (model, data kind, item, seed and
    every setting) on a device of the same label: the same computation, so a group that differs from it only in
    its lists of seeds or items (a table given five seeds, a pilot's runs) takes it over (adopt_run) instead of
    training it again. Only a run whose files pass the check a run's own get (nlpbench.runtime.run_record.verify: every
    file, metrics.json too, as its run recorded it) is taken over; one that fails is passed over with a line that
    names the file and why. None where there is none."""
    mine = {"model": group.model, "kind": group.kind, "item": item, "seed": seed,
            "settings": json.loads(json.dumps(group.settings))}   # as config.json holds them
    label = device_label(device)
    run_id = f"{group.group_id}/{group.run_name(item, seed)}"
    for other in sorted(Path(runs_root).glob("dmn-*")):
        run = other / group.run_name(item, seed)
        if other.name == group.group_id or not (run / "metrics.json").is_file() or not (run / "config.json").is_file():
            continue
        # what the files say before they are checked decides only whether the run is one to take over: another
        # computation, or one not finished on a device of this label, is passed over whatever its files hold (an
        # unreadable file is checked below)
        cfg, metrics = (run_record.read_json_or_none(run / name) for name in ("config.json", "metrics.json"))
        if cfg is not None and {k: cfg.get(k) for k in mine} != mine:
            continue
        if metrics is not None and (metrics.get("status") != "ok" or metrics.get("device") != label):
            continue
        try:
            recorded = run_record.verify(run, RECORDED, remedy="trained here instead")
        except PreparedDataChanged as e:
            log(f"{run_id}: the finished run {other.name}/{run.name} is not taken over: {e}")
            continue
        if not recorded:
            log(f"{run_id}: the finished run {other.name}/{run.name} is not taken over: {run / run_record.RECORD} "
                "not found (it was finished by an older nlpbench), so its files cannot be verified; trained here "
                "instead")
            continue
        if cfg is not None and metrics is not None:      # as recorded: the files just read are the run's own
            return run
    return None


def adopt_run(group: DMNGroup, item: str, seed: int, twin: Path, runs_root: Path,
              log: Callable[[str], None] = print) -> dict:
    """Copy a finished twin run (finished_twin, its files verified) into this group's run directory under this
    group's run id, with `adopted_from` naming the run it was trained as; the record of its files, then
    metrics.json last."""
    run_dir = group.run_dir(runs_root, item, seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    for name in RUN_FILES:
        with io.atomic_path(run_dir / name) as tmp:
            shutil.copyfile(twin / name, tmp)
    io.write_json(run_dir / "config.json", {**io.read_json(twin / "config.json"), "group": group.group_id})
    source = f"{twin.parent.name}/{twin.name}"
    metrics = {**io.read_json(twin / "metrics.json"), "run_id": f"{group.group_id}/{group.run_name(item, seed)}",
               "adopted_from": source}
    run_record.finish(run_dir, RECORDED, metrics)
    (run_dir / "checkpoint.pt").unlink(missing_ok=True)      # an unfinished attempt at the same computation
    log(f"{metrics['run_id']}: the finished run {source} has this configuration and seed: taken over, not trained")
    return metrics


EXECUTIONS = ("auto", "grouped", "alone")       # dmn.execution (execution only: no group id reads it)


def seeds_together(execution: str, device: str) -> bool:
    """Whether an item's seeds train in one pass: `grouped` always, `alone` never, `auto` on a GPU only (on one
    CPU thread the pass measured 1.0-1.2x per run: timing.dmn; docs/dmn.md)."""
    if execution not in EXECUTIONS:
        raise config.ConfigError(f"dmn.execution: unknown value {execution!r} (expected one of {', '.join(EXECUTIONS)})")
    return execution == "grouped" or (execution == "auto" and torch.device(device).type != "cpu")


def train_item(group: DMNGroup, item: str, data_root: Path, dmn_data_root: Path, runs_root: Path,
               device: str = "cpu", log: Callable[[str], None] = print, together: bool = False) -> dict:
    """Train every incomplete run of one item of the group (its seeds one after the other, or with `together` in
    one pass: train_together), taking over a run another group finished with the same configuration
    (finished_twin); its summary last, with `taken_over_s`, the training seconds of the runs taken over (part of
    the group's cost on a fresh clone). A finished run's files are checked against their record before it counts
    as done (read_run)."""
    records, to_train = {}, []
    for seed in group.seeds:
        if (group.run_dir(runs_root, item, seed) / "metrics.json").exists():
            metrics = read_run(group, item, seed, runs_root)
            if metrics.get("status") == "ok":
                records[seed] = metrics
                continue
        twin = finished_twin(group, item, seed, runs_root, device, log)
        if twin is not None:
            records[seed] = adopt_run(group, item, seed, twin, runs_root, log)
            continue
        to_train.append(seed)
    if together and len(to_train) > 1:
        records |= train_together(group, item, to_train, data_root, dmn_data_root, runs_root, device, log)
    else:
        for seed in to_train:
            records[seed] = train_run(group, item, seed, data_root, dmn_data_root, runs_root, device, log)
    records = {seed: records[seed] for seed in group.seeds}
    trained = len(to_train)
    ok = [m for m in records.values() if m["status"] == "ok"]
    summary = {"group": group.group_id, "model": group.model, "kind": group.kind, "item": item,
               "seeds": list(group.seeds), "device": device_label(device), "trained_now": trained,
               "taken_over_s": sum(m["train_wall_time_s"] for m in ok if "adopted_from" in m),   # by this or an
               "wall_time_s": sum(m["train_wall_time_s"] for m in ok),                           # earlier attempt
               "runs": {f"{item}-seed{s}": m["status"] for s, m in records.items()}, "settings": group.settings}
    io.write_json(job_done(group, item, runs_root), summary)
    return summary


# -- tables ---------------------------------------------------------------------------------------------------

def _read_metrics(group: DMNGroup, runs_root: Path, item: str) -> list[dict]:
    return [read_run(group, item, seed, runs_root) for seed in group.seeds
            if (group.run_dir(runs_root, item, seed) / "metrics.json").exists()]


def select_run(metrics: list[dict]) -> dict:
    """The seed the validation set picks: highest validation accuracy, ties to the lowest seed (never test)."""
    return max(sorted(metrics, key=lambda m: m["seed"]), key=lambda m: m["val_acc"])


def _test_key(row: str, kind: str) -> str:
    return "test" if kind == "tasks" else f"pattern{row}"


def _ensemble_accuracy(runs: dict[str, Path], row: str) -> float:
    """Eqs. 6.20-6.21 on the task's test set from the members' saved softmax outputs."""
    saved = {m: checkpoints.load(p / "test_probs.pt") for m, p in runs.items()}
    answers = {tuple(s["answers"]) for s in saved.values()}
    if len(answers) != 1:
        raise ValueError(f"task {row}: ensemble members have different answer classes")
    from nlpbench.dmn.model import ensemble_predict
    pred = ensemble_predict(*(saved[m]["probs"]["test"] for m in ENSEMBLE_MEMBERS))
    gold = saved[ENSEMBLE_MEMBERS[0]]["gold"]["test"]
    return float((pred == gold).float().mean())


def _per_seed(values: dict[int, float]) -> dict[int, float] | None:
    """The per-seed values a cell carries (tables.Cell.seeds; the core judges the cell against their spread and
    shows their range): none for a single seed, which adds nothing to the judging."""
    return dict(sorted(values.items())) if len(values) > 1 else None


def _ensemble_cell(members: dict[str, DMNGroup], ok: dict[str, list[dict]], runs_root: Path, item: str, row: str
                   ) -> tuple[float, str, dict[int, float]]:
    """Eqs. 6.20-6.21 per seed, over the members' runs of that seed (the seeds both members trained); the value
    is the seed whose two runs have the highest mean validation accuracy (ties to the lowest seed; never test), so
    it is one of the per-seed values the cell's range shows. With one seed in common: the members' runs that
    validation selects."""
    paired = sorted(set.intersection(*({r["seed"] for r in runs} for runs in ok.values())))
    by_seed = {s: 100 * _ensemble_accuracy({m: members[m].run_dir(runs_root, item, s) for m in members}, row)
               for s in paired} if len(paired) > 1 else {}
    if by_seed:
        val = {s: sum(r["val_acc"] for runs in ok.values() for r in runs if r["seed"] == s) / len(ok) for s in paired}
        seed = max(paired, key=lambda s: (val[s], -s))
        detail = (f"eqs. 6.20-6.21 over " + ", ".join(f"{MODEL_LABEL[m]} seed {seed}" for m in ok)
                  + f" (the seed whose two runs have the highest mean validation accuracy, {100 * val[seed]:.1f})")
        return by_seed[seed], detail, by_seed
    chosen = {m: select_run(runs) for m, runs in ok.items()}
    value = 100 * _ensemble_accuracy({m: members[m].run_dir(runs_root, item, chosen[m]["seed"]) for m in members},
                                     row)
    detail = "eqs. 6.20-6.21 over " + ", ".join(f"{MODEL_LABEL[m]} seed {c['seed']}" for m, c in chosen.items())
    return value, detail, by_seed


def table_cells(params: dict, table: str, runs_root: Path) -> tuple[list[tables.Cell], dict]:
    """The cells of one declared table (run columns and cited columns); info: the devices its runs were trained
    on and, per group id, the items it reads.

    A test cell is the run of the seed with the highest validation accuracy (select_run; never test) and carries
    every seed's value; a `report: validation` table's cell is the mean validation accuracy over the seeds."""
    decl = dmn_tables(params)[table]
    rows = table_rows(params, table)
    printed_mean = decl["rows"] != "patterns"
    validation = reports_validation(decl)
    cols = column_groups(params, table)
    cells: list[tables.Cell] = []
    info = {"devices": set(), "items": {}}
    for column, members in cols.items():
        col = decl["columns"][column]
        kind = _kind(col["data"], config.where(params, f"tables.{SOURCE}.{table}.columns.{column}.data"))
        values, row_seeds = [], []
        for row in rows:
            item = f"task{row}" if kind == "tasks" else col["data"]
            if kind == "tasks" and int(row) not in _tasks_in_scale(params, [row]):
                cells.append(tables.Cell(row, column, None, "not_run", f"task not in scale {params['scale']}"))
                continue
            ok, missing = {}, None
            for model, group in members.items():
                info["items"].setdefault(group.group_id, set()).add(item)
                found = _read_metrics(group, runs_root, item)
                if any(m["status"] == "needs_data" for m in found):
                    missing = ("needs_data", next(m["detail"] for m in found if m["status"] == "needs_data"))
                    break
                ok[model] = sorted((m for m in found if m["status"] == "ok"), key=lambda m: m["seed"])
                if not ok[model]:
                    missing = ("not_run", "")
                    break
            if missing:
                cells.append(tables.Cell(row, column, None, *missing))
                continue
            if validation:
                runs = ok[col["model"]]
                by_seed = {m["seed"]: 100 * m["val_acc"] for m in runs}
                value = statistics.mean(by_seed.values())
                detail = (f"validation accuracy (at the epoch of lowest validation loss), mean over {len(runs)} "
                          f"seed{'s' if len(runs) > 1 else ''}; test never read; per seed "
                          + ", ".join(f"{v:.1f}" for v in by_seed.values()))
                info["devices"].update(m["device"] for m in runs)
            elif col["model"] == "ensemble":
                value, detail, by_seed = _ensemble_cell(members, ok, runs_root, item, row)
                info["devices"].update(select_run(runs)["device"] for runs in ok.values())
            else:
                runs = ok[col["model"]]
                m = select_run(runs)
                by_seed = {r["seed"]: 100 * r["test_acc"][_test_key(row, kind)] for r in runs}
                value = by_seed[m["seed"]]
                picked = (f" of {len(runs)} (the highest validation accuracy, {100 * m['val_acc']:.1f})"
                          if len(runs) > 1 else "")
                detail = (f"seed {m['seed']}{picked}, epoch {m['best_epoch']} of {m['epochs']} (lowest validation "
                          f"loss), {m['sizes']['train']} training questions")
                info["devices"].add(m["device"])
            values.append(value)
            row_seeds.append(by_seed)
            cells.append(tables.Cell(row, column, value, "ok", detail, seeds=_per_seed(by_seed)))
        if printed_mean:
            cells.append(_mean_cell(column, values, row_seeds, len(rows), validation))
    for column in decl.get("cited") or []:
        for row in rows + (["mean"] if printed_mean else []):
            cells.append(tables.Cell(row, column, None, "cited"))
    return cells, info


def _mean_cell(column: str, values: list[float], row_seeds: list[dict[int, float]], n_rows: int,
               validation: bool) -> tables.Cell:
    """The printed mean row: the mean of the column's cells. Where every row has the same seeds, the cell also
    carries each seed's own mean over the rows, so the core judges it against our seeds' spread and a claim can be
    judged seed by seed. A validation table's cells are means over the seeds, so its mean lies in that range; a
    test table's mean averages the seeds validation picked row by row, so it may lie outside it (the note says)."""
    if not values:
        return tables.Cell("mean", column, None, "not_run", "")
    same = all(r and r.keys() == row_seeds[0].keys() for r in row_seeds)
    mean_seeds = {s: statistics.mean(r[s] for r in row_seeds) for s in row_seeds[0]} if same else {}
    detail = [f"over {len(values)} of {n_rows} rows"] if len(values) < n_rows else []
    if len(mean_seeds) > 1 and not validation:
        detail.append("the mean of the cells (each the seed validation picks); the range: each seed's own mean "
                      "over the rows")
    return tables.Cell("mean", column, statistics.mean(values), "ok", "; ".join(detail), seeds=_per_seed(mean_seeds))


def seed_notes(decl: dict, cells: list[tables.Cell]) -> list[str]:
    """How each cell uses the seeds, and the spread of our seeds (max - min of a cell's seeds) where they are
    several."""
    spans = sorted((max(c.seeds.values()) - min(c.seeds.values()), c.row, c.column)
                   for c in cells if c.seeds and c.row != "mean")
    if not spans:
        return []
    counts = sorted({len(c.seeds) for c in cells if c.seeds})
    widest, row, column = spans[-1]
    how = ("each cell is the mean of our seeds' validation accuracies" if reports_validation(decl) else
           "each cell is the run of the seed with the highest validation accuracy (never test), judged against "
           "the spread of all our seeds")
    where = f"test pattern {row}" if decl["rows"] == "patterns" else f"task {row}"
    mean = ("" if reports_validation(decl) or not any(c.seeds for c in cells if c.row == "mean") else
            " The mean row is the mean of the cells above it; the range beside it is that of each seed's own mean "
            "over the rows, which the cells' seeds, picked row by row, can exceed.")
    return [f"Seeds: {how}; the range beside a value spans our {' or '.join(map(str, counts))} seeds. Over the "
            f"{len(spans)} cells with several seeds the range is {statistics.median(s for s, _, _ in spans):.1f} "
            f"points wide at the median and {widest:.1f} at the widest ({column}, {where}).{mean}"]


def scale_note(params: dict, groups: list[DMNGroup] | None = None) -> str:
    """What the chosen scale cuts relative to the thesis's (paper) settings, from the overrides themselves
    (train_overrides and seeds_by_kind of kinds and models this table does not read are left out)."""
    used = {g.kind for g in groups or []} | {g.model for g in groups or []}

    def unused(key: str) -> bool:
        return bool(groups) and any(key.startswith(p) and key.removeprefix(p) not in used
                                    for p in ("dmn.train_overrides.", "dmn.seeds_by_kind."))

    over = {k: v for k, v in params["scales"].get(params["scale"], {}).items() if k.startswith("dmn.")
            and not unused(k)}
    if params.get("task_subset") is not None:
        over["task_subset"] = params["task_subset"]
    if not over:
        return f"Scale `{params['scale']}`: the thesis's settings (readings below), no cuts."
    return (f"Scale `{params['scale']}` cuts relative to `paper`: "
            + "; ".join(f"`{k}` = {v}" for k, v in over.items())
            + ". `--config scale=paper` (the default in params.yaml) restores the thesis's settings.")


def _seeds_text(params: dict, groups: list[DMNGroup]) -> str:
    """'[0]', or the seeds per data kind where the groups' differ ('patterns [0, 1], tasks [0]')."""
    by_kind = {g.kind: list(g.seeds) for g in sorted(groups, key=lambda g: g.kind)}
    if len({tuple(v) for v in by_kind.values()}) > 1:
        return ", ".join(f"{k} {v}" for k, v in by_kind.items())
    return str(next(iter(by_kind.values()), params["dmn"]["seeds"]))


def _ff_dmn_text(m: dict) -> str:
    """ff-DMN's readings of §6.5.2 (nlpbench.dmn.model) in the equations' words."""
    act = {"relu": "ReLU", "tanh": "tanh"}[m.get("ffn_activation", "relu")]
    layers = m.get("ffn_layers", 1)
    encoders = (f"f_t = {act}(W PE(x_t) + b), q = {act}(W_q PE(question) + b_q)" if layers == 1 else
                f"f_t and q: {layers} layers of {act}(W h + b) over PE(x_t) and PE(question)")
    update = ("m^i = ReLU(W^(i)[c^i; q] + b) (no m^{i-1})" if m.get("question_in_update") else
              "m^i = ReLU(W^(i) c^i + b) (no m^{i-1}, no q)")
    return (f"ff-DMN (§6.5.2): {encoders} with {'a shared' if m['share_ffn'] else 'a separate'} question FNN, "
            f"c^i = sum_t g_t^i f_t (6.16), {update}, m^0 = q [D].")


def reading_notes(params: dict, groups: list[DMNGroup], decl: dict | None = None) -> list[str]:
    """The value used for every reading of an ambiguity that shapes this table's runs (`decl`: the table's
    declaration, for its columns' own settings and how its cells read the seeds)."""
    s = base_settings(params)
    m, t, d, p, a = s["model"], s["train"], s["data"], s["patterns"], s["augment"]
    kinds = {g.kind for g in groups}
    models = {g.model for g in groups}
    out = [scale_note(params, groups),
           f"Training (§6.3.2): Adam lr {t['lr']} [T], Glorot uniform weights, embeddings U[-sqrt 3, sqrt 3] [T], "
           f"{m['hops']} hops [T]; d = {m['dim']}, batch {t['batch_size']}, up to {t['max_epochs']} epochs with "
           f"early stopping after {t['patience']} epochs without a lower validation loss, keeping the epoch "
           f"selected by `{t['select_by']}`, L2 {t['l2']} on every non-bias weight, dropout {m['input_dropout']} "
           f"on s_t and {m['answer_dropout']} on [q; m^I] [D: DMN+ paper]; seeds {_seeds_text(params, groups)} "
           + ("(every seed counts: a cell is their mean validation accuracy; test accuracy is never read)."
              if decl and reports_validation(decl) else "(several: validation accuracy picks the reported one).")
           + "".join(f" Training overrides for {k} at this scale: {v}." for k, v in s["train_overrides"].items()
                     if v and (k in kinds or k in models)),
           f"Position encoding: `{m['pe_index']}` (MemN2N form, the sentence's own length, [D]); "
           + ("no cap on a story's facts (`memory_size` null: every fact is kept) [D]; " if d["memory_size"] is None
              else f"a story's {d['memory_size']} most recent facts kept (`memory_size`; null: every fact); ")
           + "training/validation/test questions capped at "
           + "/".join(str(d[k] or "all") for k in ("max_train", "max_val", "max_test")) + "."]
    if "ff-dmn" in models:
        out.append(_ff_dmn_text(m))
    if models & {"dmn+", "modmn+"}:
        out.append(f"DMN+/MoDMN+: m^0 = q, m^i = ReLU(W^(i)[m^(i-1); c^i; q] + b) with "
                   f"{'one tied' if m['tie_update'] else 'untied per-hop'} W^(i); answer softmax(W^(a)[q; m^I]) "
                   f"{'with' if m['answer_bias'] else 'without'} bias (eq. 6.5).")
    if kinds & {"patterns", "augmented"}:
        out.append(f"Patterns (§6.3.3): blocks of {p['block_size']} en-10k task-16 training questions in "
                   f"`{p['block_order']}` order, F1/F2/F3 from the supporting-fact annotation written into the "
                   f"facts' own line slots in the pattern's order; test {p['test_size'] or 'floor(' + str(p['test_fraction']) + ' x block)'} "
                   f"per pattern (the printed accuracies' granularity implies 300), the rest split "
                   f"{1 - p['val_fraction']:.0%}/{p['val_fraction']:.0%} train/validation (seed {p['seed']}); "
                   f"unique_test_content {p['unique_test_content']}: test stories are drawn only from stories whose "
                   "content occurs once in the file, so no re-ordered copy of a test story is trained on; "
                   f"distractor_order `{p['distractor_order']}` (" + (
                       "each distractor entity's species and colour facts swap lines with probability 1/2, so that "
                       "fact order alone does not single out the answer entity; our reading, see the order-cue note"
                       if p["distractor_order"] == "shuffle" else
                       "distractors keep their lines; see the order-cue note") + ").")
    if "augmented" in kinds:
        out.append(f"Augmentation (§6.3.4, [D]): `{a['source']}`, every story in all 6 fact orders; "
                   f"validation augmented too: {a['augment_val']}.")
    if "tasks" in kinds:
        out.append(f"Full tasks: bAbI {d['variant']}, {d['n_val']} of the 10,000 training questions held out "
                   f"for validation (seeded random, seed {d['split_seed']}), 1,000 test questions; accuracy = "
                   "percentage answered exactly; the mean row averages the rows that ran.")
    own = {name: col["overrides"] for name, col in (decl or {}).get("columns", {}).items() if col.get("overrides")}
    if own:
        out.append("Columns with settings of their own, over the ones above: " + "; ".join(
            f"{name}: " + ", ".join(f"`{k}` = {v}" for k, v in over.items()) for name, over in own.items()) + ".")
    return out


def order_cue_notes(groups: list[DMNGroup], data_root: Path | None) -> list[str]:
    """The order cue of the pattern data these runs trained on (nlpbench.dmn.fact_order.order_cue)."""
    ids = sorted({g.datasets()[0] for g in groups if g.kind != "tasks"})
    out = []
    for did in ids:
        path = Path(data_root or "data") / "dmn" / did
        if not (path / fact_order.MANIFEST).exists():
            continue
        pat = fact_order.unflatten_patterns(_derived(str(path)))
        cues = {k: fact_order.order_cue(v["train"] + v["val"] + v["test"]) for k, v in pat.items()}
        dist = sum(c["distractors_species_first"] for c in cues.values()), sum(c["distractors"] for c in cues.values())
        ans = ", ".join(f"{k}: {c['answer_entity_species_first']}/{c['answer_entity']}" for k, c in cues.items())
        cue = dist[0] == dist[1]
        out.append(f"Order cue in these pattern data ({did}): distractor entities whose species fact precedes their "
                   f"colour fact: {dist[0]} of {dist[1]}; the answer entity's (F2/F3) species fact first, per pattern: "
                   f"{ans}. " + (
                       "Where F3 precedes F2 (patterns 2, 5, 6) the answer entity is the only one in reverse order, a "
                       "cue an order-aware model can answer from without the induction; "
                       "`dmn.patterns.distractor_order: shuffle` removes it." if cue else
                       "Distractors stand in both orders too, so in patterns 2, 5 and 6 fact order does not single "
                       "out the answer entity (with `distractor_order: keep` every distractor is species-first and "
                       "it would)."))
    return out


def table_parts(params: dict, table: str, runs_root: Path, data_root: Path | None = None) -> TableParts:
    """The cells of one of Tables 6.2-6.7, its notes and claims, and the declared figure (drawn from its CSV)."""
    decl = dmn_tables(params)[table]
    cells, info = table_cells(params, table, runs_root)
    rows = table_rows(params, table) + (["mean"] if decl["rows"] != "patterns" else [])
    task_table = decl["rows"] != "patterns"
    spec = tables.spec_from_home(SOURCE, table, decl, rows, [*decl["columns"], *(decl.get("cited") or [])],
                                 pass_threshold=babi.PASS_THRESHOLD if task_table and not reports_validation(decl)
                                 else None)
    groups = table_groups(params, table)
    wall, n_runs = 0.0, 0
    for g in groups:               # the items this table reads: a pilot reads three tasks of a 20-task group
        items = sorted(info["items"].get(g.group_id, ()))
        for summary in (job_done(g, item, runs_root) for item in items):
            if summary.exists():
                wall += io.read_json(summary)["wall_time_s"]
        n_runs += len(items) * len(g.seeds)
    provenance = {
        "scale": params["scale"],
        "code commit": code_commit(),
        "device": ", ".join(sorted(info["devices"])) or "none (nothing trained)",
        "training wall time": f"{wall / 60:.1f} min for the {n_runs} runs of {len(groups)} groups this table reads "
                              "(sum of the runs' training epochs; shared runs count once per table)",
        "generated": now_utc(),
        "torch": torch.__version__,
        "runs": ", ".join(str(rundirs.run_dir(rundirs.RUNS, g.group_id)) for g in groups),
    }
    notes = reading_notes(params, groups, decl) + seed_notes(decl, cells) + order_cue_notes(groups, data_root)
    after = [lambda results_dir: draw_figure(params, table, decl["figure"], results_dir)] if decl.get("figure") else []
    return TableParts(spec, cells, provenance, notes, after)


# -- figures --------------------------------------------------------------------------------------------------

def draw_figure(params: dict, table: str, figure: str, results_dir: Path) -> OutputPage:
    """Grouped bars of a pattern table, read back from its CSV: x = test pattern, one bar per trained network;
    left panel reproduced, right panel the thesis's numbers (Figures 6.3, 6.4, 6.8); the index lists it on its own."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    csv_path = Path(results_dir) / SOURCE / f"{table}.csv"
    with open(csv_path, newline="", encoding="utf-8") as f:
        lines = [r for r in csv.DictReader(f) if r["row"] not in ("mean", "passes")]
    rows = list(dict.fromkeys(r["row"] for r in lines))
    columns = list(dict.fromkeys(r["column"] for r in lines))
    value = {(r["row"], r["column"], side): float(r[side]) for r in lines for side in ("reproduced", "paper")
             if r[side] != ""}
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
    width = 0.8 / max(len(columns), 1)
    n_ok = 0
    for ax, side in zip(axes, ("reproduced", "paper")):
        for j, column in enumerate(columns):
            xs = [i + (j - (len(columns) - 1) / 2) * width for i in range(len(rows))]
            ys = [value.get((r, column, side), 0.0) for r in rows]
            n_ok += side == "reproduced" and sum((r, column, side) in value for r in rows)
            ax.bar(xs, ys, width, label=column.rsplit("/", 1)[-1].strip())
        ax.set_xticks(range(len(rows)), [f"pattern {r}" for r in rows])
        ax.set_xlabel("test pattern")
        ax.set_title(f"{side} ({'scale ' + params['scale'] if side == 'reproduced' else 'thesis'})")
        ax.set_ylim(0, 100)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("test accuracy (%)")
    axes[1].legend(title="trained on", fontsize=8, title_fontsize=8, ncol=2)
    title = f"Figure {figure}: graphical presentation of Table {table}"
    fig.suptitle(title)
    fig.tight_layout()
    out = Path(results_dir) / SOURCE / table_figure(figure)
    with io.atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return OutputPage(title + f" (from {table}.csv)", "figure", (out.name, csv_path.name),
                      "generated" if n_ok else "not run at this scale")
