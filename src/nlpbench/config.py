"""params.yaml: loading, scale overrides, validation, and the runs each experiment needs.

A run is a pure function of its resolved configuration; runs that differ only in task and seed form a group
that trains in one vectorised pass (nlpbench.memnet_train). Paths are derived here, in one place, for the
CLI, the Snakefile and the tests alike.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SCHEMA = Path(__file__).with_name("schema") / "params.schema.yaml"
# model name -> its fixed model settings: MemN2N, t-MEM-NN (Student-t posteriors, eqs. 48-62), and the
# Gaussian-posterior variant of the priors ablation (KL variational inference, eqs. 38-40)
MODELS = {"memn2n": {"bayesian": False}, "tmemnn": {"bayesian": True, "posterior": "student_t"},
          "gmemnn": {"bayesian": True, "posterior": "gaussian"}}


def is_bayesian(model: str) -> bool:
    return MODELS[model]["bayesian"]


class ConfigError(ValueError):
    """A bad params.yaml: the message names the file and the key."""


def _validate(params: dict, where: str) -> None:
    schema = yaml.safe_load(SCHEMA.read_text())
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(params), key=lambda e: list(e.path))
    if errors:
        lines = []
        for e in errors[:10]:
            key = ".".join(str(p) for p in e.path) or "(top level)"
            lines.append(f"  {key}: {e.message}")
        raise ConfigError(f"{where}: invalid parameters\n" + "\n".join(lines))


def set_dotted(cfg: dict, dotted: str, value: Any, where: str) -> None:
    """cfg['a']['b'] = value for 'a.b'; the key must already exist (a typo is an error, not a new key)."""
    node = cfg
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if not isinstance(node, dict) or part not in node:
            raise ConfigError(f"{where}: unknown key {dotted!r} (no {'.'.join(parts[:i + 1])!r} in params.yaml)")
        if i == len(parts) - 1:
            node[part] = value
        else:
            node = node[part]


def load(path: str | Path = "params.yaml", overrides: dict | None = None) -> dict:
    """Read params.yaml, apply `overrides` (e.g. Snakemake's --config), then the chosen scale; validate."""
    path = Path(path)
    try:
        params = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(params, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    _validate(params, str(path))
    params = copy.deepcopy(params)
    for key, value in (overrides or {}).items():
        set_dotted(params, key, value, f"{path} (override)")
    scale = params["scale"]
    if scale not in params["scales"]:
        raise ConfigError(f"{path}: scale: unknown scale {scale!r} (known: {', '.join(params['scales'])})")
    for key, value in params["scales"][scale].items():
        set_dotted(params, key, value, f"{path}: scales.{scale}")
    for name, exp in params["experiments"].items():
        for key, value in exp.get("overrides", {}).items():
            set_dotted(copy.deepcopy(params["memnet"]), key, value, f"{path}: experiments.{name}.overrides")
    _validate(params, f"{path} (scale {scale})")
    from . import textgen_config   # cross-references of the textgen section (imports this module)
    textgen_config.check(params)
    return params


# -- experiments -> groups of runs ----------------------------------------------------------------------

@dataclass(frozen=True)
class Group:
    """Runs of one model configuration over several tasks and seeds, trained together."""

    group_id: str
    model: str                  # memn2n | tmemnn
    variant: str
    tasks: tuple[int, ...]
    seeds: tuple[int, ...]
    settings: dict              # resolved memnet settings (model, train, bayes, data)
    joint: bool = False         # one model over all the tasks (Table 10): every task maps to the seed's run

    def run_name(self, task: int, seed: int) -> str:
        return f"joint-seed{seed}" if self.joint else f"qa{task}-seed{seed}"

    def run_dir(self, runs_root: Path, task: int, seed: int) -> Path:
        return Path(runs_root) / self.group_id / self.run_name(task, seed)


def experiment_tasks(params: dict, name: str) -> list[int]:
    tasks = params["experiments"][name]["tasks"]
    subset = params.get("task_subset")
    return [t for t in tasks if subset is None or t in subset]


def memnet_settings(params: dict, name: str | None, overrides: dict | None = None) -> dict:
    """The memnet section with experiment `name`'s overrides (or explicit `overrides`) applied."""
    settings = copy.deepcopy({k: params["memnet"][k] for k in ("model", "train", "bayes", "data")})
    where = f"experiments.{name}.overrides" if name else "overrides"
    if overrides is None:
        overrides = params["experiments"][name].get("overrides", {}) if name else {}
    for key, value in overrides.items():
        set_dotted(settings, key, value, where)
    return settings


def column_key(column: dict) -> str:
    """Columns with the same model and the same column overrides share one group."""
    over = column.get("overrides") or {}
    return column["model"] + (json.dumps(over, sort_keys=True) if over else "")


# Settings added after runs existed: left out of a group's hash while they hold these neutral values, so the
# ids (and checkpoints) of earlier runs stay valid. A new key with a behaviour-changing default belongs here.
HASH_NEUTRAL = {("model", "prior_sigma"): 1.0, ("train", "track_test_samples"): []}


def drop_neutral(settings: dict, neutral: dict = HASH_NEUTRAL) -> dict:
    """A copy of `settings` without the keys that hold their neutral value ({(section, key): value})."""
    out = copy.deepcopy(settings)
    for (section, key), value in neutral.items():
        sec = out.get(section)
        if isinstance(sec, dict) and key in sec and sec[key] == value:
            del sec[key]
    return out


def settings_digest(obj: dict) -> str:
    """sha256 prefix of a JSON-able description of runs; `settings` in it lose their neutral keys."""
    if "settings" in obj:
        obj = {**obj, "settings": drop_neutral(obj["settings"])}
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:10]


def make_group(model: str, variant: str, tasks: tuple[int, ...], seeds: tuple[int, ...], settings: dict,
               joint: bool = False) -> Group:
    s = copy.deepcopy(settings)
    if not is_bayesian(model):
        s.pop("bayes")
    key = {"model": model, "variant": variant, "tasks": tasks, "seeds": seeds, "settings": s}
    if joint:
        key["joint"] = True
    digest = settings_digest(key)
    m = s["model"]
    gid = f"{model}-{variant}{'-joint' if joint else ''}-h{m['hops']}-d{m['embedding_dim']}-{digest}"
    return Group(gid, model, variant, tasks, seeds, s, joint)


def experiment_groups(params: dict, name: str) -> dict[str, Group]:
    """column_key -> the Group that fills those columns of experiment `name`."""
    exp = params["experiments"][name]
    tasks = tuple(experiment_tasks(params, name))
    seeds = tuple(exp.get("seeds") or params["memnet"]["seeds"])
    out = {}
    for col in exp["columns"].values():
        key = column_key(col)
        if key in out:
            continue
        settings = memnet_settings(params, name)
        for k, v in (col.get("overrides") or {}).items():
            set_dotted(settings, k, v, f"experiments.{name}.columns overrides")
        out[key] = make_group(col["model"], exp["variant"], tasks, seeds, settings, exp.get("joint", False))
    return out


def all_groups(params: dict) -> dict[str, Group]:
    groups = {}
    for name in params["experiments"]:
        for g in experiment_groups(params, name).values():
            groups[g.group_id] = g
    return groups


def table_paths(params: dict, name: str, results: str | Path = "results") -> dict[str, Path]:
    exp = params["experiments"][name]
    base = Path(results) / exp["source"] / exp["table"]
    return {ext: Path(f"{base}.{ext}") for ext in ("md", "csv", "json")}
