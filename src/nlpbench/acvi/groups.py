"""params.yaml `acvi:` (seeds 000 ch. 7 and 002) to runs: their resolved settings, ids, directories and needs.

A run is declared once under `acvi.runs` (its task and dotted overrides); its settings are `acvi.model` and
`acvi.train` (the documents' values), then `acvi.tasks.<task>` (what differs per task), then the run's overrides.
A table or output names runs in its rows and columns; an addition table lists `seeds`, each seed a run of its own.
The id of a run is its name, its seed and a digest of everything that determines it, so a changed setting is a
new run. A group of this family is one run that the scale can train. No torch here: the plan imports this module.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from nlpbench import config
from nlpbench.acvi.config import EXTERNAL, FAMILY, TASK_DATA, declared
from nlpbench.config import ConfigError, set_dotted
from nlpbench.results import claims
from nlpbench.runtime import rundirs


@dataclass(frozen=True)
class AcviRun:
    name: str
    seed: int
    run_id: str
    task: str
    label: str
    settings: dict            # model / train (/ video), overrides applied

    def run_dir(self, runs_root: str | Path = rundirs.RUNS) -> Path:
        return rundirs.run_dir(runs_root, f"acvi/{self.run_id}")


def _deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def run_settings(params: dict, name: str, seed: int) -> dict:
    a = params["acvi"]
    spec = a["runs"][name]
    settings = _deep_merge({"model": a["model"], "train": a["train"]}, a["tasks"][spec["task"]])
    for key, value in (spec.get("overrides") or {}).items():
        set_dotted(settings, key, value, f"acvi.runs.{name}.overrides")
    settings["train"]["seed"] = seed
    return settings


def data_key(params: dict, task: str) -> dict:
    """What the run's data depends on (a stand-in is other data than the real corpus)."""
    a = params["acvi"]
    data = {k: v for k, v in a["data"].items() if not (k == "cnndm_download" and not v)}   # off: the ids of before
    return {"task": task, "stand_in": task in TASK_DATA and a["stand_ins"], "data": data if task != "qg" else None}


# Settings added after runs existed that change nothing without a latent (VED, latent_dim 0): left out of the ids
# of such runs, so the runs trained before VED keep their ids and checkpoints.
LATENT_KEYS = ("latent_dim", "latent_kl_scale", "latent_test")


def id_settings(settings: dict) -> dict:
    """The settings that enter a run's id: without a latent, the latent keys are dropped."""
    if settings["model"].get("latent_dim", 0) != 0:
        return settings
    out = copy.deepcopy(settings)
    for k in LATENT_KEYS:
        out["model"].pop(k, None)
    return out


def make_run(params: dict, name: str, seed: int | None = None) -> AcviRun:
    a = params["acvi"]
    if name not in a["runs"]:
        raise ConfigError(f"acvi.runs: no run {name!r} (known: {', '.join(sorted(a['runs']))})")
    seed = a["seed"] if seed is None else seed
    spec = a["runs"][name]
    settings = run_settings(params, name, seed)
    key = {"settings": id_settings(settings), "data": data_key(params, spec["task"])}
    return AcviRun(name, seed, f"acvi-{name}-s{seed}-{config.digest(key)}", spec["task"], spec.get("label", name),
                   settings)


def trainable(params: dict, task: str) -> bool:
    """QG always (mirror data); CNN/DM and video on their stand-ins, or when the user supplies the data set
    (acvi.data.cnndm_dir / msvd_dir: the data step TASK_DATA[task] prepares it); CNN/DM also when the data step
    downloads it (acvi.data.cnndm_download)."""
    a = params["acvi"]
    return (task == "qg" or a["stand_ins"] or a["data"][EXTERNAL[TASK_DATA[task]][1]] is not None
            or (task == "cnndm" and a["data"]["cnndm_download"]))


def _parts(decl: dict) -> list[dict]:
    return [v for part in ("rows", "columns") for v in (decl.get(part) or {}).values()]


def seeds_of(params: dict, decl: dict) -> list[int]:
    return list(decl.get("seeds") or [params["acvi"]["seed"]])


def named_runs(decl: dict) -> list[tuple[str, str]]:
    """(key, run name) for every run a table or output declaration names: rows.<row>.run, columns.<column>.run,
    runs.<i>."""
    return [(f"{part}.{label}.run", v["run"]) for part in ("rows", "columns")
            for label, v in (decl.get(part) or {}).items() if v.get("run")] \
        + [(f"runs.{i}", name) for i, name in enumerate(decl.get("runs") or [])]


def table_runs(params: dict, decl: dict) -> list[AcviRun]:
    """The runs a table or output reads (one per seed of an addition table), trainable at this scale or not."""
    names = list(dict.fromkeys(name for _, name in named_runs(decl)))
    return [make_run(params, n, s) for n in names for s in seeds_of(params, decl)]


def active(params: dict, runs: list[AcviRun]) -> list[AcviRun]:
    """The runs this scale trains: trainable ones, limited to `acvi.run_subset` when set."""
    subset = params["acvi"].get("run_subset")
    return [r for r in runs if trainable(params, r.task) and (subset is None or r.name in subset)]


def all_runs(params: dict) -> dict[str, AcviRun]:
    """run id -> run, for every run a table or output of this scale reads and can train."""
    if FAMILY not in params:
        return {}
    out = {}
    for section in ("tables", "outputs"):
        for decl in declared(params, section).values():
            for r in active(params, table_runs(params, decl)):
                out[r.run_id] = r
    return out


def run_needs(params: dict, run: AcviRun) -> tuple[str, ...]:
    if run.task == "qg":
        return ("acvi-qg",)
    if run.task == "cnndm":
        return ("acvi-cnndm-mirror",) if params["acvi"]["stand_ins"] else ("acvi-cnndm-full",)
    return () if params["acvi"]["stand_ins"] else ("acvi-msvd",)


def check(params: dict) -> None:
    """What the schema cannot check: run overrides name existing keys, tables name declared runs."""
    if FAMILY not in params:
        return
    a = params["acvi"]
    for name in a.get("run_subset") or []:
        if name not in a["runs"]:
            raise ConfigError(f"acvi.run_subset: unknown run {name!r}")
    for name, spec in a["runs"].items():
        if spec["task"] not in a["tasks"]:
            raise ConfigError(f"acvi.runs.{name}.task: no settings acvi.tasks.{spec['task']}")
        run_settings(params, name, a["seed"])   # raises on an unknown override key
    for section in ("tables", "outputs"):
        for d in config.declared(params, section, FAMILY):
            for key, run in named_runs(d.decl):
                if run not in a["runs"]:
                    raise ConfigError(f"{d.at(key)}: unknown run {run!r} (not in {config.where(params, 'acvi.runs')})")
    claims.check_declared(params, FAMILY)
