"""The whole-pipeline measurements: their declarations (pipeline/end-to-end.yaml) and their records
(results/<source>/end-to-end-NAME.json), as a timing benchmark shows them. Measuring is nlpbench.timing.end_to_end.

A declaration names a source, tables of that source, the timing benchmark that shows its record (an output of
the same source), the cores and optionally snakemake's --config and the wall time aimed at.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from nlpbench import config
from nlpbench.config import ConfigError
from nlpbench.runtime import io

FILE = Path("pipeline") / "end-to-end.yaml"      # relative to the repository
REQUIRED = ("source", "tables", "benchmark", "cores")
OPTIONAL = ("config", "target_minutes")


def load(root: str | Path = ".") -> dict[str, dict]:
    """The measurements declared in `root`/pipeline/end-to-end.yaml (none if the file is absent), checked: every
    name becomes a file name or a word of a command."""
    path = Path(root) / FILE
    if not path.exists():
        return {}
    data = config.read_yaml(path.read_text(), str(path)) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of measurement names to declarations")
    for name, decl in data.items():
        config.check_name(name, f"{path}: measurement")
        where = f"{path}: {name}"
        if not isinstance(decl, dict):
            raise ConfigError(f"{where}: expected a mapping with {', '.join(REQUIRED)}")
        missing = [k for k in REQUIRED if k not in decl]
        unknown = sorted(set(decl) - set(REQUIRED) - set(OPTIONAL))
        problems = ([f"missing {', '.join(missing)}"] if missing else []) + \
            ([f"unknown key {', '.join(unknown)}"] if unknown else [])
        if problems:
            raise ConfigError(f"{where}: {'; '.join(problems)} (keys: {', '.join(REQUIRED + OPTIONAL)})")
        config.check_name(decl["source"], f"{where}.source")
        config.check_name(decl["benchmark"], f"{where}.benchmark")
        if not isinstance(decl["tables"], list) or not decl["tables"]:
            raise ConfigError(f"{where}.tables: expected a list of table names (quoted: \"6\", \"6.2\")")
        for i, table in enumerate(decl["tables"]):
            config.check_name(table, f"{where}.tables.{i}")
        if isinstance(decl["cores"], bool) or not isinstance(decl["cores"], int) or decl["cores"] < 1:
            raise ConfigError(f"{where}.cores: {decl['cores']!r} is not a positive whole number")
        target = decl.get("target_minutes")
        if target is not None and (isinstance(target, bool) or not isinstance(target, (int, float)) or target <= 0):
            raise ConfigError(f"{where}.target_minutes: {target!r} is not a positive number")
        if not isinstance(decl.get("config") or {}, dict):
            raise ConfigError(f"{where}.config: expected a mapping (snakemake's --config)")
    return data


def declaration(params: dict, name: str, measurements: dict[str, dict]) -> dict:
    """One measurement's declaration, its tables and its benchmark checked against `params` (a ConfigError naming
    the known measurements if there is none of that name)."""
    if name not in measurements:
        raise ConfigError(f"{FILE}: no measurement {name!r}; known: {', '.join(sorted(measurements)) or 'none'}")
    decl = measurements[name]
    tables = (params.get("tables") or {}).get(decl["source"], {})
    missing = [str(t) for t in decl["tables"] if str(t) not in tables]
    if missing:
        raise ConfigError(f"{FILE}: {name}.tables: no table {', '.join(missing)} of {decl['source']} "
                          "(`nlpbench plan` lists the tables)")
    shown = config.declaration(params, "outputs", decl["source"], decl["benchmark"])
    if shown.family != "timing":
        raise ConfigError(f"{FILE}: {name}.benchmark: {shown.where} is not a timing benchmark (family: timing)")
    return decl


def record_path(results: Path, source: str, name: str) -> Path:
    return Path(results) / source / f"end-to-end-{name}.json"


def shown_by(source: str, benchmark: str, measurements: dict[str, dict]) -> list[str]:
    """The measurements whose records the benchmark `source`/`benchmark` shows."""
    return [name for name, decl in measurements.items()
            if decl["source"] == source and decl["benchmark"] == benchmark]


def record_files(source: str, benchmark: str, measurements: dict[str, dict]) -> tuple[str, ...]:
    """Where the records a benchmark shows go, measured or not, under the results folder: what it reads.
    Unchecked (unlike declaration), so that a plan of fewer tables than a measurement names still builds."""
    return tuple(record_path(Path(), source, name).as_posix()
                 for name in shown_by(source, benchmark, measurements))


def read_records(results: Path, source: str, benchmark: str, measurements: dict[str, dict]
                 ) -> dict[str, dict | None]:
    """Every measurement a benchmark shows, with its last record (None before the first)."""
    out = {}
    for name in shown_by(source, benchmark, measurements):
        path = record_path(results, source, name)
        out[name] = io.read_json(path) if path.exists() else None
    return out


def config_args(config_overrides: dict) -> list[str]:
    """A declaration's `config` as snakemake's --config arguments: KEY=VALUE, the value in YAML's flow style."""
    return [f"{k}={yaml.safe_dump(v, default_flow_style=True).strip().removesuffix('...').strip()}"
            for k, v in config_overrides.items()]


def rows(name: str, record: dict | None, target_column: bool = True) -> list[tuple]:
    """A benchmark's rows (section, quantity, measured, target, unit, note) for a measurement's record, or one row
    saying there is none. target_column False: a table with no target (paper) column; the wall time's note names
    the target instead."""
    if record is None:
        return [(f"Measured end to end: `nlpbench end-to-end {name}`", "not measured yet", None, None, "min",
                 f"run the command (its declaration: {FILE.as_posix()})")]
    sec = (f"Measured end to end: `nlpbench end-to-end {name}` (Tables {', '.join(record['tables'])}, from no data "
           f"or runs in a clean clone of {record['commit'][:7]}, {record['started']}, load "
           f"{record['load_at_start']:.2f} at start)")
    job_minutes, jobs = sum(record["job_seconds"].values()) / 60, len(record["job_seconds"])
    compared = record["runs_compared_with_checkout"].values()
    total, same = sum(c["runs"] for c in compared), sum(c["identical"] for c in compared)
    differ, new = sum(c["differ"] for c in compared), sum(c["new"] for c in compared)
    settings = " ".join(config_args(record["config"])) or "none"
    target = record.get("target_minutes")
    where = ("paper column: the declared target" if target_column
             else f"the declared target: {target:g} min" if target else "no target declared")
    return [(sec, f"wall time, {record['cores']} jobs side by side", record["wall_time_s"] / 60,
             target if target_column else None, "min", f"snakemake --config {settings}; {where}"),
            (sec, "training jobs", job_minutes, None, "min",
             f"{jobs} {'job' if jobs == 1 else 'jobs'}, each timed by its `benchmark:` file; over {record['cores']} "
             f"cores {job_minutes / record['cores']:.1f} min"),
            (sec, "runs with exactly the numbers of this checkout's run of the same id", same, None, "runs",
             f"of {total} trained; {differ} with other numbers, {new} with no run here")]


def note(source: str) -> str:
    """A benchmark's note on what a measurement's section shows."""
    return (f"Measured end to end: `nlpbench end-to-end NAME` (declared in {FILE.as_posix()}) clones a "
            "commit into a scratch directory and builds the declared tables there with snakemake from no data and no "
            "runs (on a CPU one thread a training job, as many jobs side by side as its cores); its record "
            f"(results/{source}/end-to-end-NAME.json) gives the wall time, each training job's time from its "
            "`benchmark:` file, and how many of the clone's runs hold exactly the numbers of this checkout's run of "
            "the same id (metrics.json without its times and device). The section reads that record, made by that "
            "commit on that day; this benchmark does not measure it again.")
