"""params.yaml `acvi:` (seeds 000 ch. 7 and 002): runs, their resolved settings, ids, paths and data availability.

A run is declared once under `acvi.runs` (its task and dotted overrides); its settings are `acvi.model` and
`acvi.train` (the documents' values), then `acvi.tasks.<task>` (what differs per task), then the run's overrides.
A table or output names runs in its rows and columns; an addition table lists `seeds`, each seed a run of its own.
The id of a run is its name, its seed and a digest of everything that determines it, so a changed setting is a
new run. No torch here: the Snakefile imports this module.

Which runs can train at a scale: QG (the mirror holds Du et al.'s pairs) always; CNN/DM when the user supplies the
stories (`acvi.data.cnndm_dir`), video when the user supplies MSVD (`acvi.data.msvd_dir`); CNN/DM and video on
their stand-ins (`acvi.stand_ins`, the smoke scale: a few mirror test articles, generated feature tensors). Paper
Table 4 needs DUC 2004 (`acvi.data.duc2004_dir`). Every other cell that needs data not supplied is "needs data".
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from nlpbench import claims, config
from nlpbench.config import ConfigError, set_dotted

FAMILY = "acvi"
TASKS = ("cnndm", "qg", "video")
RELEASED = ("lead3", "pgn", "s2s")

# External data sets: data step id -> (status dir, the key naming a user-supplied directory, how to obtain it)
EXTERNAL = {
    "acvi-cnndm-full": ("cnndm-full", "cnndm_dir", (
        "the CNN/DailyMail training split (287,226 stories; See et al. non-anonymised): cnn_stories.tgz and "
        "dailymail_stories.tgz from https://cs.nyu.edu/~kcho/DMQA/ with the url lists all_train.txt / all_val.txt / "
        "all_test.txt of https://github.com/abisee/cnn-dailymail (the mirror has the val/test lists and 250 test "
        "articles only); unpack and set acvi.data.cnndm_dir")),
    "acvi-msvd": ("msvd", "msvd_dir", (
        "MSVD (Chen & Dolan 2011) captions (https://www.cs.utexas.edu/users/ml/clamp/videoDescription/) and "
        "GoogLeNet pool5 frame features, 24 x 1024 per clip (Yao et al. 2015, "
        "https://github.com/yaoli/arctic-capgen-vid); the mirror has the split lists only. Set acvi.data.msvd_dir "
        "to a directory holding captions/<one>.csv (the MSR Video Description Corpus CSV with its header: VideoID, "
        "Start, End, ..., Language, Description) and features/<clip>.npy (float32 24 x 1024 per clip, <clip> = "
        "<VideoID>_<Start>_<End> as in the split lists, or its vidN name); acvi/README.md")),
    "acvi-duc2004": ("duc2004", "duc2004_dir", (
        "DUC 2004 task 1 (500 documents, 4 human summaries each) is licensed by NIST: request it at "
        "https://duc.nist.gov/data.html (Past DUC data, agreement forms), then set acvi.data.duc2004_dir to the "
        "directory holding docs/<cluster>/<DOCNO> (with <DOCNO> and <TEXT>) and eval/models/1/ (the task-1 model "
        "summaries, named like D30001.P.10.T.A.APW19981016.0240); acvi/README.md")),
}
TASK_DATA = {"cnndm": "acvi-cnndm-full", "video": "acvi-msvd"}


def declared(params: dict, section: str) -> dict[str, dict]:
    return {d.name: d.decl for d in config.declared(params, section, FAMILY)}


@dataclass(frozen=True)
class AcviRun:
    name: str
    seed: int
    run_id: str
    task: str
    label: str
    settings: dict            # model / train (/ video), overrides applied

    def run_dir(self, runs_root: str | Path = "runs") -> Path:
        return Path(runs_root) / "acvi" / self.run_id


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
    return {"task": task, "stand_in": task in TASK_DATA and a["stand_ins"],
            "data": a["data"] if task != "qg" else None}


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
    (acvi.data.cnndm_dir / msvd_dir: the data step TASK_DATA[task] prepares it)."""
    a = params["acvi"]
    return task == "qg" or a["stand_ins"] or a["data"][EXTERNAL[TASK_DATA[task]][1]] is not None


def _parts(decl: dict) -> list[dict]:
    return [v for part in ("rows", "columns") for v in (decl.get(part) or {}).values()]


def seeds_of(params: dict, decl: dict) -> list[int]:
    return list(decl.get("seeds") or [params["acvi"]["seed"]])


def table_runs(params: dict, decl: dict) -> list[AcviRun]:
    """The runs a table or output reads (one per seed of an addition table), trainable at this scale or not."""
    names = list(dict.fromkeys([p["run"] for p in _parts(decl) if p.get("run")] + list(decl.get("runs") or [])))
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
            if decl.get("kind") == "benchmark":
                continue
            for r in active(params, table_runs(params, decl)):
                out[r.run_id] = r
    return out


def data_dir(params: dict, step: str, data_root: str | Path = "data") -> Path:
    a = params["acvi"]
    if step == "acvi-cnndm-mirror":
        return Path(data_root) / "acvi" / f"cnndm-mirror-{config.digest({'tokenizer': a['data']['tokenizer']})}"
    if step == "acvi-qg":
        return Path(data_root) / "acvi" / "qg"
    if step == "acvi-released":
        key = {"tokenizer": a["data"]["tokenizer"], "released": a["released"], "stem": a["metrics"]["rouge_stem"]}
        return Path(data_root) / "acvi" / f"released-{config.digest(key)}"
    if step in EXTERNAL:
        d = a["data"][EXTERNAL[step][1]]
        return Path(data_root) / "acvi" / f"{EXTERNAL[step][0]}-{config.digest(d)}"
    raise ConfigError(f"acvi has no data step {step!r}")


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
            for p in _parts(d.decl) + [{"run": n} for n in d.decl.get("runs") or []]:
                if p.get("run") and p["run"] not in a["runs"]:
                    raise ConfigError(f"{d.where}: unknown run {p['run']!r} (not in acvi.runs)")
    claims.check_declared(params, FAMILY)
