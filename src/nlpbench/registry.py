"""Family name -> implementation: the one core module that imports from inside a family.

Adding a family is one line here, one subpackage implementing nlpbench.family.Family, its tables in
params.yaml and its reference CSVs. The timing package (nlpbench.timing), which measures the families and is
never imported by them, answers the same interface for the timing benchmarks and is listed here too.
"""

from __future__ import annotations

import importlib

from pathlib import Path

from nlpbench import config
from nlpbench.family import Family

FAMILIES = {   # name -> "module:attribute" (imported on first use: the Snakefile must not load torch models)
    "memnet": "nlpbench.memnet.family:MEMNET",
    "dmn": "nlpbench.dmn.family:DMN",
    "textgen": "nlpbench.textgen.family:TEXTGEN",
    "squad": "nlpbench.squad.family:SQUAD",
    "acvi": "nlpbench.acvi.family:ACVI",
    "timing": "nlpbench.timing.targets:TIMING",    # the benchmarks of the families above (outputs, on demand)
}

MEASUREMENT = ("timing",)    # entries above that measure the model families rather than being one (no groups of runs)

# Family packages whose models, data and metrics are built and tested but that do not implement the interface
# yet (no tables declared): they are listed here so that nothing else mistakes them for core modules.
NOT_YET_WIRED: tuple[str, ...] = ()    # none at present


def get(name: str) -> Family:
    if name not in FAMILIES:
        raise config.ConfigError(f"unknown family {name!r} (known: {', '.join(FAMILIES)})")
    module, attr = FAMILIES[name].split(":")
    return getattr(importlib.import_module(module), attr)


def families_in(params: dict) -> list[Family]:
    """The families params.yaml configures (a settings section) or declares tables and outputs for."""
    named = {d["family"] for section in ("tables", "outputs") for items in (params.get(section) or {}).values()
             for d in items.values()}
    return [get(n) for n in FAMILIES if n in params or n in named]


def check(params: dict) -> None:
    """Let every family check what the schema cannot (cross-references: runs a table names, override keys)."""
    for family in families_in(params):
        family.check(params)


def load(path: str | Path = "params.yaml", overrides: dict | None = None, overrides_from: str = "override") -> dict:
    """params.yaml and the declarations (nlpbench.config.load), checked by every family they name."""
    params = config.load(path, overrides, overrides_from)
    check(params)
    return params
