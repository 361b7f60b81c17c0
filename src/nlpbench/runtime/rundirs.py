"""Where trained runs live: the one place that turns a run id into a directory under runs/.

A run id is one or more names joined by '/', read from the runs directory down: `<group>` for a group's folder
(its summary, its shared checkpoint), `<group>/<run>` for one run of a group, `textgen/<run>` for a run of a
family that keeps its runs in a folder of its own. How an id is composed is each family's business (its
groups.py); every family asks this module for the directory, so every run path is built, and checked, here.
"""

from __future__ import annotations

from pathlib import Path

from nlpbench import config

RUNS = Path("runs")        # the pipeline's runs directory, relative to the project (the CLI's --runs default)


def run_dir(runs_root: str | Path, run_id: str) -> Path:
    """runs_root/<run_id>. Every '/'-separated part of the id must be a valid name (config.check_name), so a
    run id built from a setting can neither leave runs_root nor pass anything but a plain name to a command."""
    if not isinstance(run_id, str) or not run_id:
        raise config.ConfigError(f"run id {run_id!r}: expected one or more names joined by '/'")
    for part in run_id.split("/"):
        config.check_name(part, f"run id {run_id!r}")
    return Path(runs_root).joinpath(*run_id.split("/"))
