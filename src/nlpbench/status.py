"""What the chosen scale still has to do, and how long it should take.

Measured costs live in the repository (results/costs.tsv: one line per training group id, the wall time of its
job as measured and its peak memory, the resident set size Snakemake's benchmark recorded). A group id is a digest
of everything that determines the group, so a measured id is exactly the same work; a group never measured is
estimated per run (the rows say how many runs, seeds, their job trained one after another) from the measured jobs
of the same model, data and item under other settings or seeds (its id without the digest), else from its family's
measured jobs at the same scale, times its runs. `nlpbench costs` refreshes the file
from the `benchmark:` files a real run leaves under logs/train/, or from a job's clock there where the job was
killed and resumed (the benchmark times only its last attempt) or took finished runs over from another group (a
fresh clone trains them).
"""

from __future__ import annotations

import csv
import io as _io
import math
import os
import re
import statistics
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from nlpbench.runtime import io, job_clock
from nlpbench.runtime.progress import duration

if TYPE_CHECKING:        # the plan is only passed in: the timing benchmarks read costs without loading it
    from nlpbench.plan import Plan

COSTS = Path("results") / "costs.tsv"
COLUMNS = ["group", "family", "scale", "seconds", "runs", "peak_mb", "device", "measured", "source"]
CLOCK_SLACK = 5.0   # seconds the job clock may exceed the benchmark by in one attempt (process start and exit)


def read_costs(path: Path = COSTS) -> dict[str, dict]:
    """group id -> its row (seconds as float)."""
    if not Path(path).exists():
        return {}
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    for i, row in enumerate(rows, start=2):
        try:
            row["seconds"] = float(row["seconds"])
            row["peak_mb"] = float(row["peak_mb"]) if row.get("peak_mb") else None   # None: not measured
            row["runs"] = int(row["runs"]) if row.get("runs") else None                # None: not recorded
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{path}, line {i}: seconds, runs and peak_mb must be numbers, got "
                             f"{row.get('seconds')!r}, {row.get('runs')!r} and {row.get('peak_mb')!r}") from None
        if job_clock.duration_problem(row["seconds"]) or (row["peak_mb"] is not None and not (
                math.isfinite(row["peak_mb"]) and row["peak_mb"] >= 0)):
            raise ValueError(f"{path}, line {i}: seconds must be from 0 to a year and peak_mb a finite size, got "
                             f"{row['seconds']!r} and {row['peak_mb']!r}")
        if row["runs"] is not None and row["runs"] < 1:
            raise ValueError(f"{path}, line {i}: runs must be at least 1, got {row['runs']}")
    return {r["group"]: r for r in rows}


def scale_costs(params: dict) -> dict[str, dict]:
    """The measured costs a plan of the chosen scale goes by: the committed results/costs.tsv, and over it a trial
    scale's own (results/<scale>/costs.tsv, where `nlpbench costs` writes at that scale)."""
    from nlpbench.config import results_dir
    costs = read_costs(COSTS)
    trial = results_dir(params) / COSTS.name
    if trial != COSTS:
        costs.update(read_costs(trial))
    return costs


def _seconds_text(seconds: float) -> str:
    """A job's seconds as costs.tsv holds them."""
    return f"{seconds:.1f}"


def write_costs(costs: dict[str, dict], path: Path = COSTS) -> None:
    buf = _io.StringIO()
    w = csv.DictWriter(buf, COLUMNS, delimiter="\t", lineterminator="\n")
    w.writeheader()
    for gid in sorted(costs):
        row = dict(costs[gid])
        row["seconds"] = _seconds_text(row["seconds"])
        row["peak_mb"] = "" if row.get("peak_mb") is None else f"{row['peak_mb']:.0f}"
        row["runs"] = "" if row.get("runs") is None else row["runs"]
        w.writerow({k: row.get(k, "") for k in COLUMNS})
    io.write_text(path, buf.getvalue())


BENCHMARK_SOURCE = "benchmark file of a pipeline run"
CLOCK_SOURCE = "job clock over its resumed attempts (nlpbench.runtime.job_clock)"
TAKEN_OVER_SOURCE = "job clock, with the training of the finished runs it took over (nlpbench.runtime.job_clock)"


def job_measurement(logs: Path, job: str) -> tuple[float, float | None, str] | None:
    """(wall seconds, peak resident memory in MB or None, source) of a training job from the `benchmark:` file
    Snakemake wrote for it (logs/train/<job>.benchmark.tsv; its last row), None where there is none. Where the job
    was killed and resumed, the benchmark timed its last attempt only: the job's clock beside it
    (logs/train/<job>.clock.json, nlpbench.runtime.job_clock) gives the seconds of all its attempts, and of the training
    of runs it took over from another group (what a fresh clone spends on them)."""
    bench = Path(logs) / f"{job}.benchmark.tsv"
    if not bench.exists():
        return None
    with open(bench, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    if not rows:
        return None
    try:
        peak = float(rows[-1].get("max_rss") or "")
    except ValueError:          # "-" where the platform could not measure it
        peak = None
    if peak is not None and not (math.isfinite(peak) and peak >= 0):
        peak = None
    try:
        seconds = float(rows[-1].get("s") or "")
    except (TypeError, ValueError):
        seconds = rows[-1].get("s")
    if problem := job_clock.duration_problem(seconds):
        warnings.warn(f"{bench}, line {len(rows) + 1}: 's' {problem}; the job counts as not measured")
        return None
    clock = job_clock.readable(job_clock.clock_path(logs, job), "its benchmark's time stands for the job")
    if clock is not None and clock.total > seconds + CLOCK_SLACK:   # resumed, or runs taken over: they count too
        return clock.total, peak, TAKEN_OVER_SOURCE if clock.taken_over else CLOCK_SOURCE
    return seconds, peak, BENCHMARK_SOURCE


def job_seconds(logs: Path, job: str) -> float | None:
    """Wall seconds of a training job over all its attempts (job_measurement), None where it left no benchmark."""
    measured = job_measurement(logs, job)
    return None if measured is None else measured[0]


def refresh_costs(plan: Plan, scale: str, device: str, logs: Path = job_clock.TRAIN_LOGS,
                  path: Path = COSTS) -> int:
    """Add or update the measured cost of every group of `plan` whose Snakemake benchmark file holds a new
    measurement; `device` names the device its jobs ran on. A row whose measurement is unchanged keeps its own
    device, so a refresh from another process never relabels earlier jobs. A row of a group in the plan takes the
    plan's count of the runs its job trains (the id digests the seeds, so the count is the plan's), where it said
    none or another. Returns the number of rows added or changed."""
    costs = read_costs(path)
    runs_set = set()
    for gid in plan.groups:
        if gid in costs and costs[gid].get("runs") != plan.groups[gid].runs:
            costs[gid]["runs"] = plan.groups[gid].runs
            runs_set.add(gid)
    n = 0
    for gid in plan.groups:
        measured = job_measurement(logs, gid)
        if measured is None:
            continue
        seconds, peak, source = measured
        bench = Path(logs) / f"{gid}.benchmark.tsv"
        stamp = datetime.fromtimestamp(bench.stat().st_mtime, timezone.utc).strftime("%Y-%m-%d")
        old = costs.get(gid)
        unchanged = old and (_seconds_text(old["seconds"]), old["measured"], old["scale"]) == (
            _seconds_text(seconds), stamp, scale)
        if unchanged and (old.get("peak_mb") is not None or peak is None):
            continue
        if unchanged:           # a row measured before the peak memory was kept: the same job, its peak added
            old["peak_mb"] = peak
        else:
            costs[gid] = {"group": gid, "family": plan.owner[gid], "scale": scale, "seconds": seconds,
                          "runs": plan.groups[gid].runs, "peak_mb": peak, "device": device, "measured": stamp,
                          "source": source}
        n += gid not in runs_set
    if n or runs_set:
        write_costs(costs, path)
    return n + len(runs_set)


@dataclass
class Estimate:
    seconds: float            # job-seconds of the groups still to train
    measured: int             # groups whose own cost is known
    estimated: int            # groups estimated from like jobs or their family (expected_seconds)
    unknown: int              # groups with nothing to go on
    longest: float = 0.0      # the longest single group: no schedule finishes before it does

    def wall(self, jobs: int) -> float:
        """Wall time with `jobs` side by side: the work spread over them, or the longest group if that is more."""
        return max(self.seconds / jobs, self.longest)


_DIGEST = re.compile(r"-[0-9a-f]{10}(?=(\.[^.]+)?$)")      # a group id's settings digest, before a job's .item


def job_kind(job: str) -> str | None:
    """A job's id without its settings digest: dmn-dmnplus-tasks-d80-d460583f1e.task2 -> dmn-dmnplus-tasks-d80.task2,
    shared by the jobs of one model, data and item under any settings and seeds; None for an id without one."""
    kind, found = _DIGEST.subn("", job, count=1)
    return kind if found else None


def like_job_medians(scale: str, costs: dict[str, dict]) -> dict[str, float]:
    """Per job kind (job_kind): the median seconds per run of its measured jobs at `scale` that say their runs."""
    per_run: dict[str, list[float]] = {}
    for gid, row in costs.items():
        if row["scale"] == scale and row.get("runs") and job_kind(gid):
            per_run.setdefault(job_kind(gid), []).append(row["seconds"] / row["runs"])
    return {kind: statistics.median(seconds) for kind, seconds in per_run.items()}


def family_medians(scale: str, costs: dict[str, dict]) -> dict[str, tuple[float, bool]]:
    """Per family: (the median seconds of its measured jobs at `scale`, whether that is per run). Per run where
    any of its rows says how many runs its job trained (over the rows that say), so a job of five seeds is not
    estimated at the cost of one; else per job, as for rows written before runs were recorded."""
    per_run: dict[str, list[float]] = {}
    per_job: dict[str, list[float]] = {}
    for row in costs.values():
        if row["scale"] == scale:
            per_job.setdefault(row["family"], []).append(row["seconds"])
            if row.get("runs"):
                per_run.setdefault(row["family"], []).append(row["seconds"] / row["runs"])
    return {fam: (statistics.median(per_run[fam]), True) if fam in per_run else (statistics.median(seconds), False)
            for fam, seconds in per_job.items()}


def expected_seconds(plan: Plan, scale: str, costs: dict[str, dict]) -> dict[str, tuple[float | None, str]]:
    """Per training group of the plan: (seconds, how) with how "measured" (its own cost), "estimated" (the median
    run of its kind of job at this scale, like_job_medians, else of its family, family_medians, times the group's
    runs where that is per run) or "unknown" (seconds None)."""
    like, medians = like_job_medians(scale, costs), family_medians(scale, costs)
    out = {}
    for gid, group in plan.groups.items():
        if gid in costs:
            out[gid] = (costs[gid]["seconds"], "measured")
        elif job_kind(gid) in like:
            out[gid] = (like[job_kind(gid)] * group.runs, "estimated")
        elif plan.owner[gid] in medians:
            median, per_run = medians[plan.owner[gid]]
            out[gid] = (median * group.runs if per_run else median, "estimated")
        else:
            out[gid] = (None, "unknown")
    return out


def estimate(plan: Plan, groups: list[str], scale: str, costs: dict[str, dict]) -> Estimate:
    expected = expected_seconds(plan, scale, costs)
    total, counts, longest = 0.0, {"measured": 0, "estimated": 0, "unknown": 0}, 0.0
    for gid in groups:
        cost, how = expected[gid]
        counts[how] += 1
        if cost is not None:
            total, longest = total + cost, max(longest, cost)
    return Estimate(total, counts["measured"], counts["estimated"], counts["unknown"], longest)


def longest_first(plan: Plan, scale: str, costs: dict[str, dict]) -> dict[str, int]:
    """A scheduling priority per training group, higher for a group expected to take longer (expected_seconds;
    a group with nothing to go on counts as the median of the others): with the longest jobs started first, the
    short ones fill the cores at the end instead of leaving one core idle beside a late long job."""
    expected = {gid: cost for gid, (cost, _) in expected_seconds(plan, scale, costs).items()}
    known = [c for c in expected.values() if c is not None]
    fallback = statistics.median(known) if known else 0.0
    order = sorted(plan.groups, key=lambda gid: (fallback if expected[gid] is None else expected[gid], gid))
    return {gid: rank for rank, gid in enumerate(order)}


def data_priorities(plan: Plan, group_priority: dict[str, int]) -> dict[str, int]:
    """A scheduling priority per data step: the highest of the training groups that read it, directly or through
    other data steps (0 where none does). Snakemake orders ready jobs by priority and does not pass a job's
    priority on to its inputs, so a data step left at 0 would wait behind every ready training job, and a long
    group that needs it would start last."""
    out = {step: 0 for step in plan.data}

    def raise_to(step: str, priority: int) -> None:
        if priority > out[step]:
            out[step] = priority
            for need in plan.data[step].needs:
                raise_to(need, priority)

    for gid, group in plan.groups.items():
        for step in group.needs:
            raise_to(step, group_priority[gid])
    return out


def is_done(path: str) -> bool:
    return Path(path).exists()


def is_current(plan: Plan, target, scale: str) -> bool:
    """Built, and from the runs the plan reads now: an output whose groups are not all trained was built from
    earlier settings (a seed list or a reading changed since) and is rebuilt once they are."""
    return is_done(plan.marker(target, scale)) and all(is_done(plan.groups[g].done) for g in target.groups)


def parallel_jobs(device: str, cores: int | None = None) -> int:
    """Training jobs side by side: one per core on a CPU (one thread each), one at a time on a GPU."""
    return 1 if device == "cuda" else max(1, cores or os.cpu_count() or 1)


def parts_eta(params: dict, plan: Plan, device: str, cores: int | None = None) -> list[str]:
    """One line each for the documents' tables (`snakemake`) and the studies behind them (`snakemake studies`):
    how many, the groups they read that are not trained yet, and the wall time those take here (a group both
    read counts with the documents)."""
    costs, jobs = scale_costs(params), parallel_jobs(device, cores)
    documents = plan.groups_of(plan.part(study=False))
    studies = [g for g in plan.groups_of(plan.part(study=True)) if g not in set(documents)]
    lines = []
    for label, command, targets, groups in (("documents", "snakemake", plan.part(study=False), documents),
                                           ("studies", "snakemake studies", plan.part(study=True), studies)):
        todo = [g for g in groups if not is_done(plan.groups[g].done)]
        est = estimate(plan, todo, params["scale"], costs)
        lines.append(f"{label} (`{command}`): {len(targets)} tables and outputs, {len(groups)} training groups "
                     f"({len(todo)} to train), estimated {duration(est.wall(jobs))} wall with {jobs} job(s) at a time")
    return lines


def report(params: dict, plan: Plan, device: str, cores: int | None = None, per_table: bool = True,
           this_run: list[str] | None = None) -> str:
    """The plan of the chosen scale: what is done, what is left per family and table, and the ETA (of the groups
    `this_run` trains, when a run asked for part of the scale; else of everything left)."""
    costs = scale_costs(params)
    jobs = parallel_jobs(device, cores)
    todo = [g for g, grp in plan.groups.items() if not is_done(grp.done)] if this_run is None else this_run
    est = estimate(plan, todo, params["scale"], costs)
    families = sorted(set(plan.owner[k] for k in plan.groups)       # a family of on-demand outputs only (timing)
                      | {plan.owner[t.key] for t in plan.targets.values() if not t.on_demand})   # has no row
    lines = [f"nlpbench plan: scale {params['scale']}, device {device}, {jobs} training job(s) at a time"]
    if params["scale"] == "paper" and device != "cuda":
        lines.append("  the paper scale on a CPU: chosen explicitly; it is meant for a GPU (see the ETA below)")
    lines.append(f"  {'family':<10} {'groups done':>12} {'to train':>9} {'tables+outputs built':>21}")
    for fam in families:
        gs = [g for g in plan.groups if plan.owner[g] == fam]
        ts = [t for t in plan.targets.values() if plan.owner[t.key] == fam and not t.on_demand]
        built = sum(is_current(plan, t, params["scale"]) for t in ts)
        done = sum(is_done(plan.groups[g].done) for g in gs)
        lines.append(f"  {fam:<10} {f'{done}/{len(gs)}':>12} {len(gs) - done:>9} {f'{built}/{len(ts)}':>21}")
    wall = est.wall(jobs)
    basis = f"{est.measured} measured, {est.estimated} estimated from like jobs or their family's" + (
        f", {est.unknown} never measured (not counted)" if est.unknown else "")
    what = "this run trains" if this_run is not None else "training left"
    per_family = ", ".join(f"{fam} {sum(plan.owner[g] == fam for g in todo)}" for fam in families
                           if any(plan.owner[g] == fam for g in todo))
    lines.append(f"  {what}: {len(todo)} groups ({per_family or 'none'}), estimated {duration(wall)} wall "
                 f"({duration(est.seconds)} of jobs; {basis}; costs from {COSTS})")
    if per_table:
        lines.append("  per table (groups trained / read):")
        shown = [t for t in plan.targets.values() if not t.on_demand and t.groups]
        width = max((len(t.key) for t in shown), default=0)
        for t in shown:
            done = sum(is_done(plan.groups[g].done) for g in t.groups)
            left = estimate(plan, [g for g in t.groups if not is_done(plan.groups[g].done)], params["scale"], costs)
            if done < len(t.groups):        # an output from earlier settings is stale until its new runs exist
                state = f"~{duration(left.wall(jobs))} of training left" + (
                    " (an earlier build stands until then)" if is_done(plan.marker(t, params["scale"])) else "")
            else:
                state = "built" if is_done(plan.marker(t, params["scale"])) else "ready to build"
            lines.append(f"    {t.key:<{width}} {done:>3}/{len(t.groups):<3} {state}")
    return "\n".join(lines)
