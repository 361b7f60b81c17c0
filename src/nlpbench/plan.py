"""Everything the chosen scale builds, gathered from every family: data steps, training groups, targets.

The Snakefile, `nlpbench plan` and the tests read this one object; ids are unique across families.
"""

from __future__ import annotations

from dataclasses import dataclass

from nlpbench import registry
from nlpbench.config import ConfigError
from nlpbench.data.shared import SHARED_STEPS
from nlpbench.family import DataStep, Family, Target, TrainGroup


@dataclass
class Plan:
    data: dict[str, DataStep]            # step id -> step
    groups: dict[str, TrainGroup]        # group id -> group
    targets: dict[str, Target]           # "source/name" -> target
    owner: dict[str, str]                # step, group or target id -> family name ("core" for shared data)

    def family_of(self, item: str) -> str:
        return self.owner[item]

    def marker(self, target: Target, scale: str) -> str:
        """The per-scale file that says this clone built the target (results/ itself is committed)."""
        return f"runs/_tables/{scale}/{target.source}/{target.name}.done"


def _add(into: dict, owner: dict, item, key: str, family: str) -> None:
    if key in into and into[key] != item:
        raise ConfigError(f"{key!r} is declared twice, differently ({owner[key]} and {family})")
    into[key] = item
    owner.setdefault(key, family)


def make(params: dict) -> Plan:
    plan = Plan({}, {}, {}, {})
    families: list[Family] = registry.families_in(params)
    for fam in families:
        for step in fam.data_steps(params):
            _add(plan.data, plan.owner, step, step.id, fam.name)
        for group in fam.groups(params):
            _add(plan.groups, plan.owner, group, group.id, fam.name)
        for target in fam.targets(params):
            _add(plan.targets, plan.owner, target, target.key, fam.name)
    needed = {n for s in plan.data.values() for n in s.needs} | {n for g in plan.groups.values() for n in g.needs} \
        | {n for t in plan.targets.values() for n in t.needs}
    for step_id in sorted(needed - set(plan.data)):
        if step_id not in SHARED_STEPS:
            raise ConfigError(f"data step {step_id!r} is needed but no family declares it")
        plan.data[step_id] = SHARED_STEPS[step_id]
        plan.owner[step_id] = "core"
    return plan
