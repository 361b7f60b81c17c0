"""params.yaml `textgen:` (seed 001, Bahuleyan thesis chs. 4-6) to runs: their resolved settings, ids and directories.

A run is declared once under `textgen.runs` (its corpus and dotted overrides of `textgen.settings.<corpus>`);
its id is the run name plus a digest of everything that determines it (corpus preparation, embeddings, model,
training and evaluation settings, seed), so a changed setting is a new run and an unchanged one is reused.
Each declared run trains once per seed of `textgen.seeds.<corpus>`; a table reports the seed its validation loss chooses
and reads the others as our seed spread. A group of this family is one seed of one run. No torch here: the plan
imports this module.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from nlpbench import config
from nlpbench.config import ConfigError, set_dotted
from nlpbench.results import claims
from nlpbench.runtime import rundirs
from nlpbench.textgen.config import SOURCE, corpus_key, digest, settings_key, tg_outputs, tg_tables


@dataclass(frozen=True)
class TextRun:
    name: str
    run_id: str
    corpus: str
    label: str
    settings: dict            # model / train / eval, overrides applied
    seed: int

    def run_dir(self, runs_root: str | Path = rundirs.RUNS) -> Path:
        return rundirs.run_dir(runs_root, f"textgen/{self.run_id}")


def run_settings(params: dict, name: str) -> dict:
    tg = params["textgen"]
    spec = tg["runs"][name]
    settings = copy.deepcopy(tg["settings"][spec["corpus"]])
    for key, value in (spec.get("overrides") or {}).items():
        set_dotted(settings, key, value, f"textgen.runs.{name}.overrides")
    return settings


def seeds(params: dict, corpus: str) -> list[int]:
    """The training seeds of every run on a corpus (`textgen.seeds.<corpus>`)."""
    return list(params["textgen"]["seeds"][corpus])


def make_run(params: dict, name: str, seed: int | None = None) -> TextRun:
    """One seed of a declared run (by default the first of `textgen.seeds`)."""
    tg = params["textgen"]
    if name not in tg["runs"]:
        raise ConfigError(f"textgen.runs: no run {name!r} (known: {', '.join(sorted(tg['runs']))})")
    spec = tg["runs"][name]
    seed = seeds(params, spec["corpus"])[0] if seed is None else seed
    settings = run_settings(params, name)
    key = {"corpus": spec["corpus"], "prep": corpus_key(params, spec["corpus"]), "embeddings": tg["embeddings"],
           "settings": settings_key(settings), "seed": seed}
    return TextRun(name, f"{name}-{digest(key)}", spec["corpus"], spec.get("label", name), settings, seed)


def run_seeds(params: dict, name: str) -> list[TextRun]:
    """Every seed of a declared run, in the order of `textgen.seeds`."""
    return [make_run(params, name, seed) for seed in seeds(params, params["textgen"]["runs"][name]["corpus"])]


def active(params: dict, names: list[str]) -> list[str]:
    """The names that the scale trains: all, or those in `textgen.run_subset` (the smoke scale's few runs)."""
    subset = params["textgen"].get("run_subset")
    return [n for n in names if subset is None or n in subset]


def all_runs(params: dict) -> dict[str, list[TextRun]]:
    """run name -> its TextRuns (one per seed), for every run some table, qualitative table or figure needs (a
    declared run that nothing reads is not trained)."""
    if "textgen" not in params:
        return {}
    names = [n for t in tg_tables(params) for n in table_runs(params, t)] + [n for o in tg_outputs(params)
                                                                               for n in output_runs(params, o)]
    return {name: run_seeds(params, name) for name in active(params, list(dict.fromkeys(names)))}


def runs_by_id(params: dict) -> dict[str, TextRun]:
    return {r.run_id: r for runs in all_runs(params).values() for r in runs}


def named_runs(spec: dict) -> list[tuple[str, str]]:
    """(key, run name) for every run a table or output declaration names: rows.<row>.run, columns.<column>.run
    (a table's rows and columns may each name one), runs.<i> (an output's)."""
    return [(f"{part}.{label}.run", v["run"]) for part in ("rows", "columns")
            for label, v in (spec.get(part) or {}).items() if v.get("run")] \
        + [(f"runs.{i}", name) for i, name in enumerate(spec.get("runs") or [])]


def table_runs(params: dict, table: str) -> list[str]:
    """Names of the runs one table reads (rows and columns may each name a run)."""
    return list(dict.fromkeys(name for _, name in named_runs(tg_tables(params)[table])))


def output_runs(params: dict, output: str) -> list[str]:
    return list(dict.fromkeys(name for _, name in named_runs(tg_outputs(params)[output])))


def check(params: dict) -> None:
    """What the schema cannot check: every run's overrides (keys and values, against the schema's settings
    definition) and the runs every table and output names."""
    if "textgen" not in params:
        return
    import jsonschema
    import yaml
    from nlpbench.config import SCHEMA

    schema = yaml.safe_load(SCHEMA.read_text())
    settings_schema = {**schema["$defs"]["tg_settings"], "$defs": schema["$defs"]}
    tg = params["textgen"]
    for name in tg.get("run_subset") or []:
        if name not in tg["runs"]:
            raise ConfigError(f"textgen.run_subset: unknown run {name!r}")
    for name in tg["runs"]:
        run = make_run(params, name)
        train = run.settings["train"]
        if train.get("patience") is not None and train["select"] != "best_val":
            raise ConfigError(f"textgen.runs.{name}: train.patience stops on the validation loss, so it needs "
                              f"train.select: best_val (not {train['select']!r})")
        errors = list(jsonschema.Draft202012Validator(settings_schema).iter_errors(run.settings))
        if errors:
            e = errors[0]
            raise ConfigError(f"textgen.runs.{name}.overrides: {'.'.join(map(str, e.path))}: {e.message}")
    for section, declarations in (("tables", tg_tables(params)), ("outputs", tg_outputs(params))):
        for name, spec in declarations.items():
            for key, run in named_runs(spec):
                if run not in tg["runs"]:
                    raise ConfigError(f"{config.where(params, f'{section}.{SOURCE}.{name}.{key}')}: unknown run "
                                      f"{run!r} (not in {config.where(params, 'textgen.runs')})")
    claims.check_declared(params, "textgen")
