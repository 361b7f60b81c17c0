"""Everything the chosen scale builds, gathered from every family: data steps, training groups, targets.

The Snakefile, `nlpbench plan` and the tests read this one object; ids are unique across families.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass, replace
from pathlib import Path

from nlpbench import config, registry
from nlpbench.config import ConfigError
from nlpbench.data.shared import SHARED_STEPS
from nlpbench.family import DataStep, Family, Target, TrainGroup
from nlpbench.runtime import io, rundirs


@dataclass
class Plan:
    data: dict[str, DataStep]            # step id -> step
    groups: dict[str, TrainGroup]        # group id -> group
    targets: dict[str, Target]           # "source/name" -> target
    owner: dict[str, str]                # step, group or target id -> family name ("core" for shared data)
    results: str = "results"             # the scale's results folder (config.results_dir)

    def result_path(self, file: str) -> str:
        """A target's file (Target.files, Target.reads) as a path of the repository: under the results folder."""
        return (Path(self.results) / file).as_posix()

    def family_of(self, item: str) -> str:
        return self.owner[item]

    def part(self, study: bool) -> list[Target]:
        """The documents' tables and outputs (`study=False`: what `snakemake` builds) or the studies behind them
        (`snakemake studies`); benchmarks, built only when named, are in neither."""
        return [t for t in self.targets.values() if not t.on_demand and t.study == study]

    def groups_of(self, targets: list[Target]) -> list[str]:
        """The training groups these targets read, in plan order."""
        wanted = {g for t in targets for g in t.groups}
        return [g for g in self.groups if g in wanted]

    def marker(self, target: Target, scale: str) -> str:
        """The per-scale file that says this clone built the target (results/ itself is committed)."""
        return str(rundirs.run_dir(rundirs.RUNS, f"_tables/{scale}/{target.source}") / f"{target.name}.done")

    def report_copies(self, target: Target, scale: str) -> list[tuple[str, str]]:
        """(file under the results folder, its copy beside the marker) for the target's pages, tables and figures: the
        copies are what `snakemake --report` shows (a rule's outputs; the committed files are none, see
        pipeline/targets.smk)."""
        beside = Path(self.marker(target, scale)).parent
        return [(self.result_path(f), str(beside / Path(f).name)) for f in target.files
                if f.endswith((".md", ".csv", ".png"))]


def rule_name(kind: str, key: str) -> str:
    """The Snakefile's rule of a data step, group or target: data_babi, train_memn2n_en_h3_d20_...,
    table_tolias_thesis_2."""
    return f"{kind}_{re.sub(r'[^A-Za-z0-9]', '_', key)}"


def _add(into: dict, owner: dict, item, key: str, family: str) -> None:
    if key in into and into[key] != item:
        raise ConfigError(f"{key!r} is declared twice, differently ({owner[key]} and {family})")
    into[key] = item
    owner.setdefault(key, family)


def make(params: dict) -> Plan:
    plan = Plan({}, {}, {}, {}, config.results_dir(params).as_posix())
    families: list[Family] = registry.families_in(params)
    for fam in families:
        for step in fam.data_steps(params):
            _add(plan.data, plan.owner, step, step.id, fam.name)
        for group in fam.groups(params):
            _add(plan.groups, plan.owner, group, group.id, fam.name)
        for target in fam.targets(params):
            if (params.get(target.section) or {}).get(target.source, {}).get(target.name, {}).get("study"):
                target = replace(target, study=True)
            _add(plan.targets, plan.owner, target, target.key, fam.name)
    needed = {n for s in plan.data.values() for n in s.needs} | {n for g in plan.groups.values() for n in g.needs} \
        | {n for t in plan.targets.values() for n in t.needs}
    for step_id in sorted(needed - set(plan.data)):
        if step_id not in SHARED_STEPS:
            raise ConfigError(f"data step {step_id!r} is needed but no family declares it")
        plan.data[step_id] = SHARED_STEPS[step_id]
        plan.owner[step_id] = "core"
    _check_names_and_paths(plan, params["scale"])
    return plan


def _check_names_and_paths(plan: Plan, scale: str) -> None:
    """Every id becomes a rule's command word and a file name, and every file a rule writes lies inside the
    project: checked here, where every family's plan meets, so that no family can pass a name from params.yaml
    (or one built from its settings) to the shell or out of the project."""
    project = Path.cwd()
    for step in plan.data.values():
        config.check_name(step.id, f"data step of {plan.owner[step.id]}")
        io.inside(project, step.output)
    for group in plan.groups.values():
        config.check_name(group.id, f"training group of {plan.owner[group.id]}")
        io.inside(project, group.done)
    for target in plan.targets.values():
        config.check_name(target.source, f"{target.section} source")
        config.check_name(target.name, f"{target.section}.{target.source}")
        for path in (*map(plan.result_path, target.files), plan.marker(target, scale),
                     *(c for _, c in plan.report_copies(target, scale))):
            io.inside(project, path)


PACKAGE = Path(__file__).resolve().parent
# the core modules that turn a family's cells into files (their code decides a table's content too)
BUILDER_CORE = ("results/build.py", "results/tables.py", "results/paper.py", "results/results_index.py", "family.py")


@functools.cache
def builder_version(family: str) -> str:
    """A digest of the code that builds a family's tables and outputs: the family's package, the core modules
    that render them and the reference numbers. Training groups do not depend on it (their ids follow their
    settings); tables and outputs do, so that changed code never leaves a stale table."""
    h = hashlib.sha256()
    files = [PACKAGE / f for f in BUILDER_CORE] + sorted((PACKAGE / family).rglob("*.py")) \
        + sorted((PACKAGE / "reference").rglob("*.csv"))
    for path in files:
        h.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:12]


def declaration_digest(params: dict, target: Target) -> str:
    """A digest of everything params.yaml says about one table or output, with the scale it is built at."""
    d = config.declaration(params, target.section, target.source, target.name)
    return config.digest({"declaration": d.decl, "scale": params["scale"]})
