"""From params.yaml (section `dmn`) and the Shen thesis's ch. 6 tables to groups of DMN runs and their jobs.

* Groups (`DMNGroup`): the runs of one model on one kind of data (patterns, augmented, tasks) under one resolved
  configuration, one run per item and seed (the seeds: a table's own `seeds`, else `dmn.seeds_by_kind` of the
  kind, else `dmn.seeds`). Each run is a pure function of the group's settings, its item and its seed; its directory
  (`DMNGroup.run_dir`) holds a resumable checkpoint while it trains, then model.pt, config.json, history.json,
  test_probs.pt, FILES.json (their sizes and sha256, metrics.json's too: nlpbench.runtime.run_record) and metrics.json
  (last). Runs shared between tables fall in one group.
* Derived data ids (`all_datasets`): the fact-order patterns and the augmented set the groups read, named by a
  digest of the settings that shape them (nlpbench.dmn.experiments.make_dataset writes them).
* Jobs (`jobs`): the pipeline trains each item of a group (a task, a pattern, the augmented set; all its seeds)
  as a job of its own, `<group id>.<item>`, whose <item>.json summary under the group's folder is written last.
  A DMN run is compute-bound and its length is set by early stopping, so one job per item lets the scheduler keep
  every core busy to the end, where one job per group left one core with the long DMN+ task group.

No torch here: the plan reads this module.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from nlpbench import config
from nlpbench.dmn import fact_order
from nlpbench.results.notes import referenced_tables
from nlpbench.runtime import rundirs

SOURCE = "shen-thesis"
MODEL_SLUG = {"dmn+": "dmnplus", "modmn+": "modmnplus", "ff-dmn": "ffdmn"}
ENSEMBLE_MEMBERS = ("ff-dmn", "dmn+")          # eq. 6.20: P^ = (P_ff-DMN + P_DMN+) / 2


# -- settings -------------------------------------------------------------------------------------------------

def dmn_tables(params: dict) -> dict[str, dict]:
    """table -> declaration, for every table of params.yaml that this family fills."""
    return {d.name: d.decl for d in config.declared(params, "tables", "dmn")}


def base_settings(params: dict) -> dict:
    """The dmn section's model/train/data/pattern settings (no table declarations)."""
    d = params["dmn"]
    return copy.deepcopy({k: d[k] for k in ("model", "train", "train_overrides", "data", "patterns", "augment")})


def resolved_settings(params: dict, kind: str, model: str, overrides: dict | None = None, where: str = "dmn"
                      ) -> dict:
    """What a group of `model` on `kind` depends on: model, train (with the kind's, then the model's
    train_overrides), the data keys it reads, and the pattern / augmentation settings its data derive from.
    `where` names the overrides' column in an error (its file and key: config.where)."""
    s = base_settings(params)
    for key, value in (overrides or {}).items():
        config.set_dotted(s, key, value, f"{where}.overrides")
    train = s["train"] | s["train_overrides"][kind] | s["train_overrides"][model]
    if model != "ff-dmn":           # the ff-DMN readings shape no other model: they leave its groups' ids alone
        s["model"] = {k: v for k, v in s["model"].items() if k not in FF_DMN_ONLY}
    out = {"model": s["model"], "train": train,
           "data": {k: s["data"][k] for k in ("memory_size", "max_train", "max_val", "max_test")}}
    if kind == "tasks":
        out["data"] |= {k: s["data"][k] for k in ("variant", "n_val", "split_seed")}
    else:
        out["patterns"] = s["patterns"] | {"variant": s["data"]["variant"]}
    if kind == "augmented":
        out["augment"] = s["augment"]
    return out


# Settings added after runs existed: left out of the digests while they hold these neutral values, so earlier
# data sets, groups and checkpoints keep their ids (every family's HASH_NEUTRAL, applied by config.drop_neutral).
HASH_NEUTRAL = {("patterns", "distractor_order"): "keep",
                ("model", "ffn_layers"): 1, ("model", "ffn_activation"): "relu",
                ("model", "question_in_update"): False}
# ff-DMN's readings of §6.5.2 (nlpbench.dmn.model.DMNConfig) that no other model reads
FF_DMN_ONLY = ("ffn_layers", "ffn_activation", "question_in_update")


def _hashed(settings: dict) -> dict:
    return config.drop_neutral(settings, HASH_NEUTRAL)


def dataset_id(kind: str, settings: dict) -> str:
    """data/dmn/<id>: 'patterns-<digest>' or 'augmented-<digest>' of the settings that shape the data set."""
    settings = _hashed(settings)
    key = {"patterns": settings["patterns"]}
    if kind == "augmented":
        key["augment"] = settings["augment"]
    return f"{kind}-{config.digest(key)}"


# -- groups of runs -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DMNGroup:
    """Runs of one model on one kind of data under one configuration: items x seeds."""

    group_id: str
    model: str                     # dmn+ | modmn+ | ff-dmn
    kind: str                      # patterns | augmented | tasks
    items: tuple[str, ...]         # pattern1..6 | augmented | task1..20
    seeds: tuple[int, ...]
    settings: dict

    def run_name(self, item: str, seed: int) -> str:
        return f"{item}-seed{seed}"

    def run_dir(self, runs_root: Path, item: str, seed: int) -> Path:
        return rundirs.run_dir(runs_root, f"{self.group_id}/{self.run_name(item, seed)}")

    def datasets(self) -> list[str]:
        """The derived data sets this group reads (data/dmn/<id>/manifest.json); none for full tasks."""
        if self.kind == "tasks":
            return []
        out = [dataset_id("patterns", self.settings)]
        if self.kind == "augmented":
            out.append(dataset_id("augmented", self.settings))
        return out


def _kind(data: str, where: str) -> str:
    """The kind of data a column's `data` (named `where`: its file and key) reads."""
    if data == "task":
        return "tasks"
    if data == "augmented":
        return "augmented"
    if data.startswith("pattern") and data[7:].isdigit() and int(data[7:]) in fact_order.PATTERNS:
        return "patterns"
    raise config.ConfigError(f"{where}: {data!r} is not task, augmented or pattern1..6")


def table_rows(params: dict, table: str) -> list[str]:
    rows = dmn_tables(params)[table]["rows"]
    return [str(k) for k in fact_order.PATTERNS] if rows == "patterns" else [str(t) for t in rows]


def _tasks_in_scale(params: dict, rows: list) -> list[int]:
    subset = params.get("task_subset")
    return [int(t) for t in rows if subset is None or int(t) in subset]


def _column_members(column: dict) -> list[str]:
    return list(ENSEMBLE_MEMBERS) if column["model"] == "ensemble" else [column["model"]]


def _group_key(model: str, kind: str, settings: dict, seeds: tuple[int, ...]) -> str:
    """Columns whose overrides resolve to the same settings (written out or left at the default) share a group."""
    return f"{model}|{kind}|{config.digest(_hashed(settings))}|{','.join(map(str, seeds))}"


def seeds_of(params: dict, decl: dict, kind: str) -> tuple[int, ...]:
    """The seeds a table's column of `kind` trains: the table's own `seeds`, else dmn.seeds_by_kind[kind] (where
    set), else dmn.seeds."""
    d = params["dmn"]
    return tuple(decl.get("seeds") or (d.get("seeds_by_kind") or {}).get(kind) or d["seeds"])


def reports_validation(decl: dict) -> bool:
    """True for a table whose cells are mean validation accuracies over the seeds (`report: validation`)."""
    return decl.get("report", "test") == "validation"


def all_groups(params: dict) -> dict[str, DMNGroup]:
    """group_key -> DMNGroup over every declared table; runs shared between tables fall in one group."""
    return _declared(params)[0]


def _declared(params: dict) -> tuple[dict[str, DMNGroup], dict[str, dict[str, dict[str, str]]]]:
    """Every declared table read once: the groups (as all_groups) and, per table and column, each member
    model's group key, so a column's groups are the ones its settings were resolved into here."""
    wanted: dict[str, dict] = {}
    keys: dict[str, dict[str, dict[str, str]]] = {}
    for table, decl in dmn_tables(params).items():
        keys[table] = {}
        if decl["rows"] != "patterns" and decl["rows"] and not isinstance(decl["rows"], list):
            raise config.ConfigError(f"{config.where(params, f'tables.{SOURCE}.{table}.rows')}: expected 'patterns' "
                                     "or a list of task numbers")
        for name, col in decl["columns"].items():
            where = config.where(params, f"tables.{SOURCE}.{table}.columns.{name}")
            kind = _kind(col["data"], f"{where}.data")
            if kind == "tasks" and decl["rows"] == "patterns":
                raise config.ConfigError(f"{where}: data 'task' needs task rows")
            if kind != "tasks" and decl["rows"] != "patterns":
                raise config.ConfigError(f"{where}: pattern data needs rows: patterns")
            if col["model"] == "ensemble" and kind != "tasks":
                raise config.ConfigError(f"{where}: the ensemble is per task (data: task)")
            if reports_validation(decl) and (kind != "tasks" or col["model"] == "ensemble"):
                raise config.ConfigError(f"{where}: report: validation reads a "
                                         "model's validation accuracy on a task (data: task, not the ensemble, "
                                         "whose runs keep test outputs only)")
            over = col.get("overrides") or {}
            seeds = seeds_of(params, decl, kind)
            items = ([f"task{t}" for t in _tasks_in_scale(params, decl["rows"])] if kind == "tasks"
                     else [col["data"]])
            for model in _column_members(col):
                settings = resolved_settings(params, kind, model, over, where)
                key = keys[table].setdefault(name, {})[model] = _group_key(model, kind, settings, seeds)
                w = wanted.setdefault(key,
                                      {"model": model, "kind": kind, "settings": settings, "seeds": seeds,
                                       "items": set()})
                w["items"].update(items)
    groups = {}
    for key, w in wanted.items():
        settings = w["settings"]
        order = {f"pattern{k}": k for k in fact_order.PATTERNS} | {f"task{t}": 100 + t for t in range(1, 21)}
        items = tuple(sorted(w["items"], key=lambda i: order.get(i, 0)))
        digest = config.digest({"model": w["model"], "kind": w["kind"], "items": items, "seeds": w["seeds"],
                                "settings": _hashed(settings)})
        gid = f"dmn-{MODEL_SLUG[w['model']]}-{w['kind']}-d{settings['model']['dim']}-{digest}"
        groups[key] = DMNGroup(gid, w["model"], w["kind"], items, w["seeds"], settings)
    return groups, keys


def groups_by_id(params: dict) -> dict[str, DMNGroup]:
    return {g.group_id: g for g in all_groups(params).values()}


def column_groups(params: dict, table: str) -> dict[str, dict[str, DMNGroup]]:
    """column -> {member model -> its group} for one table."""
    groups, keys = _declared(params)
    return {name: {m: groups[key] for m, key in members.items()} for name, members in keys[table].items()}


def table_groups(params: dict, table: str) -> list[DMNGroup]:
    """Every group a table reads (its own columns, and those of the tables its claims and notes read)."""
    seen: dict[str, DMNGroup] = {}
    for t in [table] + referenced_tables(dmn_tables(params)[table], table):
        for members in column_groups(params, t).values():
            for g in members.values():
                seen[g.group_id] = g
    return list(seen.values())


def all_datasets(params: dict) -> dict[str, tuple[str, dict]]:
    """data id -> (kind, settings) of every derived data set the groups read."""
    out = {}
    for g in all_groups(params).values():
        for did in g.datasets():
            out[did] = (did.split("-", 1)[0], g.settings)
    return out


# -- jobs ---------------------------------------------------------------------------------------------------

def jobs(params: dict) -> dict[str, tuple[DMNGroup, str]]:
    """Pipeline job id -> (group, item): one job per item of every group (all the item's seeds)."""
    return {job_id(g, item): (g, item) for g in all_groups(params).values() for item in g.items}


def job_id(group: DMNGroup, item: str) -> str:
    return f"{group.group_id}.{item}"


def job_done(group: DMNGroup, item: str, runs_root: Path | str = rundirs.RUNS) -> Path:
    """The summary a job writes last (the pipeline's marker that the item's runs are complete)."""
    return rundirs.run_dir(runs_root, group.group_id) / f"{item}.json"
