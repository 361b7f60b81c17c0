"""From table declarations to groups of memory-network runs (seed 000 ch. 6).

A run is a pure function of its resolved configuration; runs that differ only in task and seed form a group
that trains in one vectorised pass (nlpbench.memnet.train). The guess-the-number groups (Tables 16-18) are made
here too, from the game's settings (nlpbench.memnet.game trains and plays them). No torch here: the plan and the
Snakefile read this module.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

from nlpbench import config
from nlpbench.config import Declared
from nlpbench.runtime import rundirs

# model name -> its fixed model settings: MemN2N, t-MEM-NN (Student-t posteriors, eqs. 48-62), and the
# Gaussian-posterior variant of the priors ablation (KL variational inference, eqs. 38-40)
MODELS = {"memn2n": {"bayesian": False}, "tmemnn": {"bayesian": True, "posterior": "student_t"},
          "gmemnn": {"bayesian": True, "posterior": "gaussian"}}
BABI_KINDS = ("table", "test_error_figure")   # declarations whose columns train bAbI groups


def is_bayesian(model: str) -> bool:
    return MODELS[model]["bayesian"]


def own_settings(model: str, settings: dict) -> dict:
    """A copy of `settings` without what `model` never reads: the bayes section for MemN2N, the Student-t
    sampler for every model without Student-t posteriors. Group ids hash these, so a change of a setting the
    model ignores never retrains its runs."""
    s = copy.deepcopy(settings)
    if not is_bayesian(model):
        s.pop("bayes")
    if MODELS[model].get("posterior") != "student_t":
        s["model"].pop("t_sampler", None)
    return s


@dataclass(frozen=True)
class Group:
    """Runs of one model configuration over several tasks and seeds, trained together."""

    group_id: str
    model: str                  # memn2n | tmemnn | gmemnn
    variant: str
    tasks: tuple[int, ...]
    seeds: tuple[int, ...]
    settings: dict              # resolved memnet settings (model, train, bayes, data)
    joint: bool = False         # one model over all the tasks (Table 10): every task maps to the seed's run

    @property
    def n_runs(self) -> int:
        """A joint group trains one run per seed; any other, one per task and seed."""
        return len(self.seeds) * (1 if self.joint else len(self.tasks))

    def run_name(self, task: int, seed: int) -> str:
        return f"joint-seed{seed}" if self.joint else f"qa{task}-seed{seed}"

    def run_dir(self, runs_root: Path, task: int, seed: int) -> Path:
        return rundirs.run_dir(runs_root, f"{self.group_id}/{self.run_name(task, seed)}")


# Settings added after runs existed: left out of a group's hash while they hold these neutral values, so the
# ids (and checkpoints) of earlier runs stay valid. A new key with a behaviour-changing default belongs here.
HASH_NEUTRAL = {("model", "prior_sigma"): 1.0, ("train", "track_test_samples"): [], ("train", "clip_scope"): "tensor",
                ("train", "drop_last"): True, ("model", "nil_row"): "zero",
                ("model", "memory_slots"): "fixed", ("model", "position_form"): "paper",
                ("bayes", "test_draws"): "sequential", ("model", "t_sampler"): "gamma",
                ("data", "train_questions"): None, ("data", "answer_forms"): {}}
# The same for the game's own section (memnet.game), which the game groups' hash holds whole.
GAME_NEUTRAL = {("game", "example_unit"): "states"}
# Settings that choose how a run is computed, not what: never in a group's hash, as the device, the thread count
# and the runs a group trains together are not (each changes only float rounding: the order of sums, fused kernels).
EXECUTION_ONLY = (("model", "memory_read"), ("model", "posterior_kernels"), ("model", "hop_kernels"))


def settings_digest(obj: dict) -> str:
    """config.digest of a description of runs whose `settings` lose their neutral and execution-only keys."""
    if "settings" in obj:
        settings = config.drop_neutral(obj["settings"], HASH_NEUTRAL)
        for section, key in EXECUTION_ONLY:
            settings.get(section, {}).pop(key, None)
        obj = {**obj, "settings": settings}
    return config.digest(obj)


def memnet_settings(params: dict, overrides: dict, where: str) -> dict:
    """The memnet section's model/train/bayes/data with dotted `overrides` applied."""
    settings = copy.deepcopy({k: params["memnet"][k] for k in ("model", "train", "bayes", "data")})
    for key, value in overrides.items():
        config.set_dotted(settings, key, value, where)
    return settings


def declared_tasks(params: dict, d: Declared) -> list[int]:
    """The declaration's rows (bAbI task numbers) that the scale runs (`task_subset`)."""
    subset = params.get("task_subset")
    return [t for t in d.decl["rows"] if subset is None or t in subset]


def column_key(column: dict) -> str:
    """Columns with the same model and the same column overrides share one group."""
    over = column.get("overrides") or {}
    return column["model"] + (json.dumps(over, sort_keys=True) if over else "")


def make_group(model: str, variant: str, tasks: tuple[int, ...], seeds: tuple[int, ...], settings: dict,
               joint: bool = False) -> Group:
    s = own_settings(model, settings)
    key = {"model": model, "variant": variant, "tasks": tasks, "seeds": seeds, "settings": s}
    if joint:
        key["joint"] = True
    m = s["model"]
    gid = f"{model}-{variant}{'-joint' if joint else ''}-h{m['hops']}-d{m['embedding_dim']}-{settings_digest(key)}"
    return Group(gid, model, variant, tasks, seeds, s, joint)


def declaration_groups(params: dict, d: Declared) -> dict[str, Group]:
    """column_key -> the Group that fills those columns of declaration `d`."""
    decl = d.decl
    tasks = tuple(declared_tasks(params, d))
    seeds = tuple(decl.get("seeds") or params["memnet"]["seeds"])
    out = {}
    for col in decl["columns"].values():
        key = column_key(col)
        if key in out:
            continue
        settings = memnet_settings(params, decl.get("overrides") or {}, d.at("overrides"))
        for k, v in (col.get("overrides") or {}).items():
            config.set_dotted(settings, k, v, d.at("columns") + " overrides")
        out[key] = make_group(col["model"], decl["variant"], tasks, seeds, settings, decl.get("joint", False))
    return out


def babi_declarations(params: dict) -> list[Declared]:
    """The memnet tables and outputs whose columns are trained on bAbI (not the game, not derived outputs)."""
    return [d for section in ("tables", "outputs") for d in config.declared(params, section, "memnet")
            if d.decl.get("kind", "table") in BABI_KINDS]


def all_groups(params: dict) -> dict[str, Group]:
    groups = {}
    for d in babi_declarations(params):
        for g in declaration_groups(params, d).values():
            groups[g.group_id] = g
    return groups


# -- guess the number (Tables 16-18) ---------------------------------------------------------------------------

@dataclass(frozen=True)
class GameGroup:
    """One model and training size of the game: its runs are the number ranges x seeds (memnet.game trains them)."""

    group_id: str
    model: str
    train_size: int
    ranges: tuple[tuple[str, int, int], ...]     # (table, lo, hi)
    seeds: tuple[int, ...]
    settings: dict                               # the memnet section with the game's overrides

    def run_dir(self, runs_root: Path, lo: int, hi: int, seed: int) -> Path:
        return rundirs.run_dir(runs_root, f"{self.group_id}/range{lo}-{hi}-seed{seed}")


def game_groups(params: dict) -> dict[str, GameGroup]:
    g = params["memnet"]["game"]
    ranges = tuple((t, lo, hi) for t, (lo, hi) in sorted(g["ranges"].items()))
    out = {}
    for model in ("memn2n", "tmemnn"):
        settings = own_settings(model, memnet_settings(params, g.get("overrides", {}), "memnet.game.overrides"))
        for size in g["train_sizes"]:
            key = {"model": model, "size": size, "ranges": ranges, "seeds": g["seeds"],
                   "game": config.drop_neutral({"game": g}, GAME_NEUTRAL)["game"],
                   "settings": settings}
            gid = f"game-{model}-n{size}-{settings_digest(key)}"
            out[gid] = GameGroup(gid, model, size, ranges, tuple(g["seeds"]), settings)
    return out


def dof_by_role(dof: dict[str, float]) -> dict[str, float]:
    """A run's fitted nu per role of the thesis's claim: {A, B, C}. Layer-wise: the matrices themselves;
    adjacent (E_0 .. E_K): B = nu_E0, A = the largest nu over E_0 .. E_{K-1}, C = the largest over E_1 .. E_K."""
    if "A" in dof:
        return {n: dof[n] for n in ("A", "B", "C")}
    K = len(dof) - 1
    return {"B": dof["E0"], "A": max(dof[f"E{k}"] for k in range(K)), "C": max(dof[f"E{k}"] for k in range(1, K + 1))}
