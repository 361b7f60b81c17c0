"""Whole-pipeline measurements, on demand: the tables a declaration names, built by snakemake in a scratch
clone of this commit from no data and no runs, timed end to end.

    nlpbench end-to-end NAME        (declared under `end_to_end:` in params.yaml)

The clone holds the committed files only, so the measurement is what a fresh checkout of the commit does (the
data step from the official URLs, or the mirror when one is set). Its runs are then compared, run by run, with
this checkout's runs of the same group ids (the numbers of each metrics.json), which checks that a clean clone
retrains the numbers the committed tables read. The record, results/<source>/end-to-end-NAME.json, is read by
the source's timing benchmarks; the clone is deleted afterwards, its snakemake log and training logs kept under
logs/end-to-end/.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import yaml

from nlpbench import config, io
from nlpbench.plan import rule_name
from nlpbench.status import job_seconds

# metrics.json keys that say how long or where a run was computed, not what it computed: left out of the comparison
NOT_NUMBERS = re.compile(r"time|_ms|seconds|device|commit|date")


def declaration(params: dict, name: str) -> dict:
    """The declaration `end_to_end: NAME:` of params.yaml (a ConfigError naming the known ones if absent)."""
    known = params.get("end_to_end") or {}
    if name not in known:
        raise config.ConfigError(f"end_to_end: no measurement {name!r} in params.yaml; known: "
                                 f"{', '.join(sorted(known)) or 'none'}")
    decl = known[name]
    tables = params["tables"].get(decl["source"], {})
    missing = [str(t) for t in decl["tables"] if str(t) not in tables]
    if missing:
        raise config.ConfigError(f"end_to_end.{name}.tables: no table {', '.join(missing)} under tables: "
                                 f"{decl['source']}: in params.yaml")
    return decl


def record_path(results: Path, params: dict, name: str) -> Path:
    return _path(Path(results), declaration(params, name)["source"], name)


def _path(results: Path, source: str, name: str) -> Path:
    return results / source / f"end-to-end-{name}.json"


def names_of(params: dict, source: str) -> list[str]:
    """The measurements declared for `source`."""
    return [name for name, decl in (params.get("end_to_end") or {}).items() if decl["source"] == source]


def record_files(params: dict, source: str, results: str = "results") -> tuple[str, ...]:
    """Where the records of every measurement declared for `source` go, measured or not: what its benchmark reads.
    Unchecked (unlike record_path), so that a plan of fewer tables than a measurement names still builds."""
    return tuple(_path(Path(results), source, name).as_posix() for name in names_of(params, source))


def read_record(results: Path, params: dict, name: str) -> dict | None:
    """The last measurement of NAME, or None before the first."""
    path = record_path(results, params, name)
    return io.read_json(path) if path.exists() else None


def read_records(results: Path, params: dict, source: str) -> dict[str, dict | None]:
    """Every measurement declared for `source`, with its last record (None before the first)."""
    return {name: read_record(results, params, name) for name in names_of(params, source)}


def config_args(config_overrides: dict) -> list[str]:
    """A declaration's `config` as snakemake's --config arguments: KEY=VALUE, the value in YAML's flow style."""
    return [f"{k}={yaml.safe_dump(v, default_flow_style=True).strip().removesuffix('...').strip()}"
            for k, v in config_overrides.items()]


def snakemake_command(decl: dict) -> list[str]:
    """snakemake's arguments: the declared tables' rules, its cores (each training job one thread on a CPU, as
    the pipeline runs them) and its --config."""
    targets = [rule_name("table", f"{decl['source']}/{t}") for t in decl["tables"]]
    settings = config_args(decl.get("config") or {})
    return [*targets, "--cores", str(decl["cores"]), "--resources", "gpu=1",
            *(["--config", *settings] if settings else [])]


def rows(name: str, record: dict | None, target_column: bool = True) -> list[tuple]:
    """A benchmark's rows (section, quantity, measured, target, unit, note) for a measurement's record, or one row
    saying there is none. target_column False: a table with no target (paper) column; the wall time's note names
    the target instead."""
    if record is None:
        return [(f"Measured end to end: `nlpbench end-to-end {name}`", "not measured yet", None, None, "min",
                 "run the command (its declaration: end_to_end in params.yaml)")]
    sec = (f"Measured end to end: `nlpbench end-to-end {name}` (Tables {', '.join(record['tables'])}, from no data "
           f"or runs in a clean clone of {record['commit'][:7]}, {record['started']}, load "
           f"{record['load_at_start']:.2f} at start)")
    job_minutes, jobs = sum(record["job_seconds"].values()) / 60, len(record["job_seconds"])
    compared = record["runs_compared_with_checkout"].values()
    total, same = sum(c["runs"] for c in compared), sum(c["identical"] for c in compared)
    differ, new = sum(c["differ"] for c in compared), sum(c["new"] for c in compared)
    config = " ".join(config_args(record["config"])) or "none"
    target = record.get("target_minutes")
    where = ("paper column: the declared target" if target_column
             else f"the declared target: {target:g} min" if target else "no target declared")
    return [(sec, f"wall time, {record['cores']} jobs side by side", record["wall_time_s"] / 60,
             target if target_column else None, "min", f"snakemake --config {config}; {where}"),
            (sec, "training jobs", job_minutes, None, "min",
             f"{jobs} {'job' if jobs == 1 else 'jobs'}, each timed by its `benchmark:` file; over {record['cores']} "
             f"cores {job_minutes / record['cores']:.1f} min"),
            (sec, "runs with exactly the numbers of this checkout's run of the same id", same, None, "runs",
             f"of {total} trained; {differ} with other numbers, {new} with no run here")]


def note(source: str) -> str:
    """A benchmark's note on what a measurement's section shows."""
    return ("Measured end to end: `nlpbench end-to-end NAME` (declared under `end_to_end:` in params.yaml) clones a "
            "commit into a scratch directory and builds the declared tables there with snakemake from no data and no "
            "runs (on a CPU one thread a training job, as many jobs side by side as its cores); its record "
            f"(results/{source}/end-to-end-NAME.json) gives the wall time, each training job's time from its "
            "`benchmark:` file, and how many of the clone's runs hold exactly the numbers of this checkout's run of "
            "the same id (metrics.json without its times and device). The section reads that record, made by that "
            "commit on that day; this benchmark does not measure it again.")


def same_numbers(theirs: dict, ours: dict) -> bool:
    """Whether two runs' metrics.json hold the same values under every key both record, the keys that say how
    long or where a run was computed (NOT_NUMBERS) left out: a run trained before a key was recorded (the
    memory read, the validation NLL) is compared on the keys it has."""
    return all(theirs[k] == ours[k] for k in theirs.keys() & ours.keys() if not NOT_NUMBERS.search(k))


def compare_runs(theirs: Path, ours: Path) -> dict[str, dict[str, int]]:
    """Per group of `theirs` (a runs/ directory), how many of its runs' metrics.json hold exactly the numbers of
    the run of the same id under `ours` ("identical", `same_numbers`), other numbers ("differ"), or have none
    there ("new")."""
    out: dict[str, dict[str, int]] = {}
    for path in sorted(Path(theirs).glob("*/*/metrics.json")):
        group, run = path.parent.parent.name, path.parent.name
        counts = out.setdefault(group, {"runs": 0, "identical": 0, "differ": 0, "new": 0})
        counts["runs"] += 1
        mine = Path(ours) / group / run / "metrics.json"
        if not mine.exists():
            counts["new"] += 1
        elif same_numbers(io.read_json(path), io.read_json(mine)):
            counts["identical"] += 1
        else:
            counts["differ"] += 1
    return out


def compare_again(params: dict, name: str, kept_runs: Path, results: Path, runs: Path, log=print) -> Path:
    """Compare a measurement's kept runs (`measure`'s keep_runs) with `runs` again and rewrite the record's
    comparison (after this checkout's runs or the comparison changed); the timings stay as measured."""
    path = record_path(results, params, name)
    if not path.exists():
        raise config.ConfigError(f"end-to-end {name}: no record {path} to compare again (measure it first)")
    if not Path(kept_runs).is_dir():
        raise config.ConfigError(f"--compare {kept_runs}: not a directory of kept runs")
    record = io.read_json(path)
    record["runs_compared_with_checkout"] = compare_runs(kept_runs, runs)
    record["compared_again"] = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    io.write_json(path, record)
    log(f"end-to-end {name}: runs of {kept_runs} compared again with {runs}; wrote {path}")
    return path


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def head(repo: Path, what: str, log=print) -> tuple[str, bool]:
    """The commit a clone of `repo` checks out (its HEAD) and whether the checkout has uncommitted changes, which
    the clone leaves out (said in the log)."""
    commit = _git(repo, "rev-parse", "HEAD")
    uncommitted = bool(_git(repo, "status", "--porcelain", "--untracked-files=no"))
    if uncommitted:
        log(f"{what}: the checkout has uncommitted changes; the clone has {commit[:7]} without them")
    return commit, uncommitted


@contextlib.contextmanager
def scratch_clone(repo: Path, commit: str, mirror: str | None, prefix: str = "nlpbench-end-to-end-"):
    """A clean clone of `repo` at `commit` in a scratch directory, deleted afterwards; yields the clone and the
    environment that runs the clone's own code (whatever nlpbench this interpreter has installed, an editable
    install's path included), with `mirror` for its data steps when one is set."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        clone = Path(tmp) / "repo"
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(repo), str(clone)], check=True)
        _git(clone, "checkout", "-q", commit)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(clone / "src"), os.environ.get("PYTHONPATH", "")]),
               "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}  # `nlpbench`
        if mirror:
            env["NLPBENCH_MIRROR"] = str(Path(mirror).resolve())
        yield clone, env


def snakemake(clone: Path, env: dict, args: list[str], log_path: Path) -> int:
    """Run snakemake with `args` in a scratch clone, its output to `log_path`; its exit status."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as out:
        return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=clone, env=env, stdout=out,
                              stderr=subprocess.STDOUT).returncode


def measure(params: dict, name: str, repo: Path, results: Path, runs: Path, logs: Path,
            keep_runs: Path | None = None, log=print) -> Path:
    """Clone `repo` at its HEAD into a scratch directory, build the declaration's tables there with snakemake from
    no data and no runs, and write the record (wall time, each training job's seconds from its `benchmark:` file,
    the runs compared with `runs`). Uncommitted changes are not in the clone: the record says so. The clone's
    training logs (each job's log and `benchmark:` file) are kept under logs/end-to-end/NAME/train/. keep_runs: a
    new directory the clone's runs/ are moved to (else they are deleted with the clone); with the kept logs they
    are what the pipeline would have left in runs/ and logs/train/ here."""
    decl = declaration(params, name)
    if keep_runs is not None and keep_runs.exists():
        raise config.ConfigError(f"--keep-runs {keep_runs}: exists already (the clone's runs/ go to a new directory)")
    commit, uncommitted = head(repo, f"end-to-end {name}", log)
    log_path = Path(logs) / "end-to-end" / f"{name}.log"
    with scratch_clone(repo, commit, params.get("mirror")) as (clone, env):
        command = snakemake_command(decl)
        log(f"end-to-end {name}: snakemake {' '.join(command)} in a clone of {commit[:7]} (log: {log_path})")
        load = os.getloadavg()[0]
        started = datetime.now(timezone.utc)
        t0 = time.perf_counter()
        returncode = snakemake(clone, env, command, log_path)
        wall = time.perf_counter() - t0
        if returncode != 0:
            raise SystemExit(f"nlpbench end-to-end {name}: snakemake failed (exit {returncode}); see {log_path}")
        jobs = {p.name.removesuffix(".benchmark.tsv"): job_seconds(p.parent, p.name.removesuffix(".benchmark.tsv"))
                for p in sorted((clone / "logs" / "train").glob("*.benchmark.tsv"))}
        compared = compare_runs(clone / "runs", runs)
        kept_logs = Path(logs) / "end-to-end" / name / "train"    # each training job's log and benchmark file
        if kept_logs.exists():
            shutil.rmtree(kept_logs)
        kept_logs.parent.mkdir(parents=True, exist_ok=True)
        if (clone / "logs" / "train").is_dir():
            shutil.move(clone / "logs" / "train", kept_logs)
        if keep_runs is not None:
            keep_runs.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(clone / "runs", keep_runs)
    record = {
        "name": name, "source": decl["source"], "tables": [str(t) for t in decl["tables"]],
        "config": decl.get("config") or {}, "cores": decl["cores"], "target_minutes": decl.get("target_minutes"),
        "commit": commit, "uncommitted_changes_left_out": uncommitted,
        "started": started.strftime("%Y-%m-%d %H:%M UTC"), "load_at_start": round(load, 2),
        "cpu_count": os.cpu_count(), "wall_time_s": round(wall, 1),
        "job_seconds": {g: s for g, s in jobs.items() if s is not None},
        "runs_compared_with_checkout": compared, "training_logs": str(kept_logs),
    }
    path = record_path(results, params, name)
    io.write_json(path, record)
    minutes = sum(record["job_seconds"].values()) / 60
    log(f"end-to-end {name}: {wall / 60:.1f} min of wall time, {len(jobs)} training jobs, {minutes:.1f} job-minutes; "
        f"wrote {path}")
    return path
