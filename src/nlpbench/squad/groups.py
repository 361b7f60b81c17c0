"""From params.yaml (section `squad`, tables.shen-thesis of family squad) to training groups: the trained
configurations (`Config`) the tables and outputs read, one group each, and its runs' directories.

A cell of a table declaration is the merge of the table's `fixed` part, its row's part and its column's part
(nlpbench.squad.experiments describes the keys). Every distinct trained configuration (model, similarity, output,
passage summary, d*) is one training group, `squad-<configuration>-<digest of its settings>`; its runs are one per
seed in squad.seeds, each in runs/<group>/seed<seed>/, with the group's summary group.json written last.
No torch here: the plan imports this module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from nlpbench import config
from nlpbench.config import ConfigError
from nlpbench.results import claims
from nlpbench.runtime import rundirs

SOURCE = "shen-thesis"
PART_KEYS = ("similarity", "output", "passage_summary", "revised_dim_D", "model", "metric", "cited")
MODEL_NAMES = {"bidaf": "BiDAF", "dcn": "DCN", "qanet": "QANet"}     # the full models of Table 4.4 (models.py)
MODELS = ("baseline", *MODEL_NAMES)
SUMMARY_OUTPUTS = ("RIG_2", "RIG_4", "RIG_5", "RIG_6", "proposed", "revised", "A1-O_1", "A1-O_2")


# -- the trained configurations -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Config:
    """One trained configuration (all seeds train it): the baseline model's, or a full model's (Table 4.4) with
    output = passage_summary = revised_dim_D = None."""

    similarity: str
    output: str | None
    passage_summary: str | None      # None where the output formation has no passage summary
    revised_dim_D: int | None        # None except for the revised method
    model: str = "baseline"          # | bidaf | dcn | qanet
    train: tuple = ()                # (key, value) pairs of the table's own `train` settings (TABLE_TRAIN_KEYS)

    def model_settings(self, params: dict) -> dict:
        if self.model != "baseline":     # the shared word input (squad.model), then the model's own settings
            shared = {k: params["squad"]["model"][k] for k in ("embed_adjust", "adjust_activation")}
            return {"arch": self.model, "similarity": self.similarity, **shared,
                    **params["squad"]["full_models"][self.model]["model"]}
        m = dict(params["squad"]["model"])
        D = 2 * m["hidden"]
        m.update(similarity=self.similarity, output=self.output,
                 passage_summary=self.passage_summary or m["passage_summary"],
                 revised_dim=None if self.revised_dim_D is None else self.revised_dim_D * D)
        return m

    def train_settings(self, params: dict) -> dict:
        """squad.train, with a full model's own training settings (squad.full_models.<model>.train) over it, then
        the table's own (its `train`, by scale)."""
        own = {} if self.model == "baseline" else params["squad"]["full_models"][self.model].get("train") or {}
        return {**params["squad"]["train"], **own, **dict(self.train)}

    def label(self) -> str:
        if self.model != "baseline":
            return f"{MODEL_NAMES[self.model]} / {self.similarity}"
        parts = [self.similarity, self.output]
        if self.passage_summary:
            parts.append(f"{self.passage_summary}-order")
        if self.revised_dim_D is not None:
            parts.append(f"d*={self.revised_dim_D}D")
        return " / ".join(parts)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.lower())


def tables_of(params: dict) -> dict[str, dict]:
    return {d.name: d.decl for d in config.declared(params, "tables", "squad")}


def cell_part(decl: dict, row: str, column: str) -> dict:
    """fixed <- row <- column (later wins)."""
    rows = decl["rows"]
    row_part = {decl["row_key"]: row} if isinstance(rows, list) else dict(rows[row] or {})
    return {**(decl.get("fixed") or {}), **row_part, **dict(decl["columns"][column] or {})}


def row_names(decl: dict) -> list[str]:
    return [str(r) for r in decl["rows"]] if isinstance(decl["rows"], list) else list(decl["rows"])


# The training settings a table may set for its own runs (its `train`, usually by scale): how long they train.
TABLE_TRAIN_KEYS = ("epochs", "patience", "min_epochs", "valid_articles")


def table_train(params: dict, name: str, decl: dict) -> tuple:
    """The table's own training settings as sorted (key, value) pairs; ConfigError naming the table's file."""
    train = decl.get("train") or {}
    at = config.where(params, f"tables.{SOURCE}.{name}.train")
    if not isinstance(train, dict):
        raise ConfigError(f"{at}: must map training settings ({', '.join(TABLE_TRAIN_KEYS)}) to values")
    unknown = sorted(set(train) - set(TABLE_TRAIN_KEYS))
    if unknown:
        raise ConfigError(f"{at}: unknown key(s) {unknown} (a table sets only {', '.join(TABLE_TRAIN_KEYS)})")
    return tuple(sorted(train.items()))


def config_of(params: dict, part: dict, where: str, train: tuple = ()) -> Config:
    """The trained configuration a (non-cited, baseline) cell reads, with its table's own training settings
    `train`; ConfigError naming `where` (the cell's file and key, config.where) if incomplete."""
    from nlpbench.squad.configs import OUTPUTS, SIMILARITY_NAMES

    for key in ("similarity",) if part.get("model", "baseline") != "baseline" else ("similarity", "output"):
        if key not in part:
            raise ConfigError(f"{where}: no {key} (set it in the row, the column or `fixed`)")
    if part["similarity"] not in SIMILARITY_NAMES:
        raise ConfigError(f"{where}: unknown similarity {part['similarity']!r} "
                          f"(known: {', '.join(SIMILARITY_NAMES)})")
    if "metric" not in part:
        raise ConfigError(f"{where}: no metric (em or f1)")
    if part.get("model", "baseline") != "baseline":
        extra = {"output", "passage_summary", "revised_dim_D"} & set(part)
        if extra:
            raise ConfigError(f"{where}: the {MODEL_NAMES[part['model']]} model has no {sorted(extra)} "
                              "to set (its own attention and output layers; settings in squad.full_models)")
        return Config(part["similarity"], None, None, None, part["model"], train)
    if part["output"] not in OUTPUTS:
        raise ConfigError(f"{where}: unknown output {part['output']!r} (known: {', '.join(OUTPUTS)})")
    summary = part.get("passage_summary", params["squad"]["model"]["passage_summary"])
    revised = part.get("revised_dim_D", params["squad"]["revised_dim_D"]) if part["output"] == "revised" else None
    return Config(part["similarity"], part["output"], summary if part["output"] in SUMMARY_OUTPUTS else None,
                  revised, train=train)


def cells_of(params: dict, name: str) -> list[tuple[str, str, dict, Config | None]]:
    """(row, column, part, config or None) over the table's grid; None for a cited cell (part `cited`) and for a
    row this scale does not train (part `paper_only`: the table's `trained_rows`, set per scale, omit it)."""
    decl = tables_of(params)[name]
    trained = decl.get("trained_rows")
    unknown = sorted(set(trained or []) - set(row_names(decl)))
    if unknown:
        raise ConfigError(f"{config.where(params, f'tables.{SOURCE}.{name}.trained_rows')}: no row {unknown[0]!r} "
                          f"(rows: {', '.join(row_names(decl))})")
    table_at = config.where(params, f"tables.{SOURCE}.{name}")
    train = table_train(params, name, decl)
    out = []
    for row in row_names(decl):
        for column in decl["columns"]:
            part = cell_part(decl, row, column)
            where = f"{table_at}: row {row!r} column {column!r}"
            unknown = set(part) - set(PART_KEYS)
            if unknown:
                raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)} (known: {PART_KEYS})")
            if part.get("model", "baseline") not in MODELS:
                raise ConfigError(f"{where}: model {part['model']!r} (known: {MODELS})")
            if part.get("cited"):
                out.append((row, column, part, None))
            elif trained is not None and row not in trained:
                out.append((row, column, {**part, "paper_only": True}, None))
            else:
                out.append((row, column, part, config_of(params, part, where, train)))
    return out


def data_id(params: dict) -> str:
    d = params["squad"]["data"]
    if d["source"] == "official":
        return "official"
    return f"dev-split-{config.digest({'split': d['split']})}"


def group_settings(params: dict, cfg: Config) -> dict:
    sq = params["squad"]
    return {"data": data_id(params), "vectors": sq["data"]["vectors"],
            "max_train_questions": sq["data"]["max_train_questions"],
            "max_test_questions": sq["data"]["max_test_questions"],
            "model": cfg.model_settings(params), "train": cfg.train_settings(params), "seeds": sq["seeds"]}


# Settings added after runs existed: left out of the digests while they hold these neutral values, so earlier
# groups keep their ids (the same rule as every family's HASH_NEUTRAL, applied by config.drop_neutral).
HASH_NEUTRAL = {("train", "valid_articles"): 0, ("train", "patience"): None,
                ("train", "min_epochs"): None}


def group_id(params: dict, cfg: Config) -> str:
    digest = config.digest(config.drop_neutral(group_settings(params, cfg), HASH_NEUTRAL))
    if cfg.model != "baseline":
        return f"squad-{cfg.model}-{_slug(cfg.similarity)}-{digest}"
    parts = [cfg.similarity, cfg.output] + ([cfg.passage_summary] if cfg.passage_summary else []) \
        + ([f"r{cfg.revised_dim_D}D"] if cfg.revised_dim_D is not None else [])
    return "squad-" + "-".join(_slug(p) for p in parts) + "-" + digest


def table_configs(params: dict, name: str) -> list[Config]:
    return list(dict.fromkeys(c for _, _, _, c in cells_of(params, name) if c is not None))


def all_configs(params: dict) -> dict[str, Config]:
    """group id -> configuration, over every declared squad table and heatmap output."""
    out = {}
    for name in tables_of(params):
        for cfg in table_configs(params, name):
            out[group_id(params, cfg)] = cfg
    for d in config.declared(params, "outputs", "squad"):
        if d.decl["kind"] in ("heatmap", "histogram"):
            for cfg in heatmap_configs(d.decl):
                out.setdefault(group_id(params, cfg), cfg)
    return out


def check(params: dict) -> None:
    from nlpbench.squad.configs import TrainConfig

    sq = params["squad"]
    try:
        TrainConfig.from_dict({**sq["train"], "model": {k: v for k, v in sq["model"].items()}})
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{config.where(params, 'squad.train')} / squad.model: {e}") from None
    for model in MODEL_NAMES:
        cfg = Config("trilinear", None, None, None, model)
        try:
            TrainConfig.from_dict({**cfg.train_settings(params), "model": cfg.model_settings(params)})
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{config.where(params, f'squad.full_models.{model}')}: {e}") from None
    for d in config.declared(params, "outputs", "squad"):
        if d.decl["kind"] in ("heatmap", "histogram"):
            for cfg in heatmap_configs(d.decl):
                config_of(params, {"similarity": cfg.similarity, "output": cfg.output, "metric": "em"}, d.at())
        elif d.decl["kind"] == "loss_curves":
            loss_lines(params, d.decl, d.where)
    for name, decl in tables_of(params).items():
        if isinstance(decl["rows"], list) and "row_key" not in decl:
            raise ConfigError(f"{config.where(params, f'tables.{SOURCE}.{name}.rows')}: a list, so row_key must say "
                              "what a row name sets (similarity, output, passage_summary)")
        for cfg in table_configs(params, name):
            try:
                TrainConfig.from_dict({**cfg.train_settings(params), "model": cfg.model_settings(params)})
            except (TypeError, ValueError) as e:
                raise ConfigError(f"{config.where(params, f'tables.{SOURCE}.{name}.train')}: {e}") from None
    claims.check_declared(params, "squad")

# -- the configurations an output reads -----------------------------------------------------------------------

def heatmap_configs(decl: dict) -> list[Config]:
    """The (similarity, output) configurations a heatmap or histogram output reads: every similarity it names
    under each of its `outputs` (default O_1 and O_2), Table 4.2's configurations."""
    return [Config(sim, out, None, None) for out in decl.get("outputs", ("O_1", "O_2")) for sim in decl["similarities"]]


def loss_lines(params: dict, decl: dict, where: str) -> list[tuple[str, str, Config]]:
    """(panel, line label, configuration) for every line, from the cells each panel's selections name."""
    if not isinstance(decl.get("panels"), dict) or not decl["panels"]:
        raise ConfigError(f"{config.where(params, f'{where}.panels')}: must map panel titles to selections of table "
                          "cells")
    tables = tables_of(params)
    out = []
    for panel, selections in decl["panels"].items():
        at = config.where(params, f"{where}.panels.{panel}")
        for sel in selections:
            table = str(sel.get("table"))
            if table not in tables:
                raise ConfigError(f"{at}: unknown squad table {table!r}")
            cells = {(r, c): (part, cfg) for r, c, part, cfg in cells_of(params, table)}
            rows = [str(r) for r in sel.get("rows") or row_names(tables[table])]
            columns = list(sel.get("columns") or [])
            if not columns:
                raise ConfigError(f"{at}: a selection names no columns")
            for r in rows:
                for c in columns:
                    if (r, c) not in cells:
                        raise ConfigError(f"{at}: table {table} has no cell ({r!r}, {c!r})")
                    part, cfg = cells[(r, c)]
                    if part.get("paper_only"):          # a row this scale does not train: no line
                        continue
                    if cfg is None:
                        raise ConfigError(f"{at}: ({r!r}, {c!r}) is cited, not run")
                    head = c.split(" / ")[0]
                    label = r if len(columns) == 1 else head if len(rows) == 1 else f"{r}, {head}"
                    out.append((panel, label, cfg))
    return out


def loss_configs(params: dict, decl: dict) -> list[Config]:
    return list(dict.fromkeys(cfg for _, _, cfg in loss_lines(params, decl, "outputs")))


# -- where a group's runs lie ---------------------------------------------------------------------------------

def run_dir(runs_root: str | Path, gid: str, seed: int) -> Path:
    """One run of a group: runs_root/<group>/seed<seed>."""
    return rundirs.run_dir(runs_root, f"{gid}/seed{seed}")
