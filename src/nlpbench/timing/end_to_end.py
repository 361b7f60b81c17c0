"""Whole-pipeline measurements, on demand: the tables a declaration names, built by snakemake in a scratch
clone of this commit from no data and no runs, timed end to end.

    nlpbench end-to-end NAME        (declared in pipeline/end-to-end.yaml: nlpbench.timing.records)

The clone holds the committed files only, so the measurement is what a fresh checkout of the commit does (the
data step from the official URLs, or the mirror when one is set). Its runs are then compared, run by run, with
this checkout's runs of the same group ids (the numbers of each metrics.json), which checks that a clean clone
retrains the numbers the committed tables read. The record, results/<source>/end-to-end-NAME.json, is shown by
the timing benchmark the declaration names; the clone is deleted afterwards, its snakemake log and training logs
kept under logs/end-to-end/.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path

from nlpbench import config
from nlpbench.clone import head, scratch_clone, snakemake
from nlpbench.plan import rule_name
from nlpbench.runtime import io
from nlpbench.status import job_seconds
from nlpbench.timing import records

# metrics.json keys that say how long or where a run was computed, not what it computed: left out of the comparison
NOT_NUMBERS = re.compile(r"time|_ms|seconds|device|commit|date")


def snakemake_command(decl: dict) -> list[str]:
    """snakemake's arguments: the declared tables' rules, its cores (each training job one thread on a CPU, as
    the pipeline runs them) and its --config."""
    targets = [rule_name("table", f"{decl['source']}/{t}") for t in decl["tables"]]
    settings = records.config_args(decl.get("config") or {})
    return [*targets, "--cores", str(decl["cores"]), "--resources", "gpu=1",
            *(["--config", *settings] if settings else [])]


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


def compare_again(params: dict, name: str, kept_runs: Path, results: Path, runs: Path, log=print,
                  repo: Path = Path(".")) -> Path:
    """Compare a measurement's kept runs (`measure`'s keep_runs) with `runs` again and rewrite the record's
    comparison (after this checkout's runs or the comparison changed); the timings stay as measured."""
    decl = records.declaration(params, name, records.load(repo))
    path = records.record_path(results, decl["source"], name)
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


def measure(params: dict, name: str, repo: Path, results: Path, runs: Path, logs: Path,
            keep_runs: Path | None = None, log=print) -> Path:
    """Clone `repo` at its HEAD into a scratch directory, build the declaration's tables there with snakemake from
    no data and no runs, and write the record (wall time, each training job's seconds from its `benchmark:` file,
    the runs compared with `runs`). Uncommitted changes are not in the clone: the record says so. The clone's
    training logs (each job's log and `benchmark:` file) are kept under logs/end-to-end/NAME/train/. keep_runs: a
    new directory the clone's runs/ are moved to (else they are deleted with the clone); with the kept logs they
    are what the pipeline would have left in runs/ and logs/train/ here."""
    decl = records.declaration(params, name, records.load(repo))
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
    path = records.record_path(results, decl["source"], name)
    io.write_json(path, record)
    minutes = sum(record["job_seconds"].values()) / 60
    log(f"end-to-end {name}: {wall / 60:.1f} min of wall time, {len(jobs)} training jobs, {minutes:.1f} job-minutes; "
        f"wrote {path}")
    return path
