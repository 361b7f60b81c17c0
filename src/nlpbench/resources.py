"""What each rule asks of the machine that runs it: threads, GPUs, run time, memory and disk.

The rules (pipeline/*.smk) take these values as they are; Snakemake schedules local jobs by them (`--cores`,
and `gpu`: one per GPU the machine shows unless `--resources gpu=N` says otherwise, local_gpu_limit) and a cluster
executor passes them to the scheduler (SLURM: `--cpus-per-task`, `--gpus`, `--time`, `--mem`). None depends on the
submitting host's `--cores`.

* GPUs follow params.yaml's `device` (provenance.planned_device): `cuda` gives every training job one GPU on any
  host, a CPU-only login node included; `cpu` none; `auto` one when the host that plans the run also runs its jobs
  and torch sees a GPU there. On a cluster executor the planning host is not where jobs run, so `auto` requests no
  GPU and each job computes on whatever its node shows: set `device: cuda` to ask the cluster for GPUs.
* Threads: a CPU training job takes one (on 2 shared cores two 1-thread jobs measured faster than one 2-thread
  job: docs/scales.md), a GPU training job GPU_TRAIN_THREADS to feed its device. A benchmark (an on-demand
  target) must run alone: locally it asks for WHOLE_MACHINE threads, which Snakemake cuts to `--cores`, so nothing
  runs beside it; on a cluster it asks for one thread and a node of its own (`--exclusive`).
* Run time (minutes) of a training job: its group's measured wall time in results/costs.tsv, else the longest
  measured group of its family at this scale, times RUNTIME_MARGIN plus RUNTIME_SLACK_MINUTES (a cluster node is
  not the machine that measured, and a job killed at its limit loses its work); where the family has no
  measurement at this scale, DEFAULT_TRAIN_MINUTES at a small scale and the family's own `job_size` at the paper's.
* Memory (MB) of a training job: its group's measured peak (results/costs.tsv, peak_mb: the resident set size
  Snakemake's benchmark file recorded), else the largest measured peak of its family at this scale, times
  MEM_MARGIN rounded up to 500 MB; where nothing is measured (the paper scale), the family's own estimate from
  the data each job holds (vocabularies, GloVe rows, CNN/DM documents): its `job_size` (nlpbench.family.JobSize).
* Disk (MB): declared where a step writes much (the paper scale's downloads and checkpoints).

A cluster's limits differ: a profile overrides any of these per rule (`set-resources`, `set-threads`).
"""

from __future__ import annotations

import math

from nlpbench import registry
from nlpbench.family import JobSize
from nlpbench.runtime import gpu_slots
from nlpbench.runtime.provenance import planned_device

CPU_TRAIN_THREADS = 1
GPU_TRAIN_THREADS = 4
WHOLE_MACHINE = 1024            # more cores than a machine has: Snakemake gives a local job at most --cores

RUNTIME_MARGIN = 3.0
MEM_MARGIN = 2.0                 # a measured peak x 2: another node's libraries and allocator differ
MIN_MEM_MB = 1000
RUNTIME_SLACK_MINUTES = 10
SMALL_SCALES = ("smoke", "cpu")  # the scales measured in results/costs.tsv; any other is sized as the paper's

# minutes of a training job whose family has no measured group at a small scale (the paper scale: the family's
# JobSize.paper_minutes)
DEFAULT_TRAIN_MINUTES = {"smoke": 30, "cpu": 12 * 60}
DATA_MEM_MB = (4000, 16000)      # a data step: the paper scale streams GloVe 840B and reads CNN/DM
TARGET_MEM_MB = 4000             # a table or output: reads its runs' metrics and checkpoints
SMALL_MEM_MB = 2000              # the index, the report

TRAIN_DISK_MB_PAPER = 10_000     # a paper-scale group's checkpoints
DATA_DISK_MB_PAPER = 20_000      # the largest download (CNN/DM) and what is derived from it
DATA_MINUTES = {"smoke": 30, "cpu": 60, "paper": 6 * 60}   # the paper scale downloads several GB
TARGET_MINUTES = 60
BENCHMARK_MINUTES = 6 * 60
SMALL_MINUTES = 15


def _small(scale: str) -> bool:
    return scale in SMALL_SCALES


def runs_here(workflow) -> bool:
    """Whether the host that plans a Snakemake run also runs its jobs: no cluster executor, and not a job that a
    cluster node runs. Known only once the run starts (Snakemake reads the Snakefile before it chooses the
    executor), so the rules ask it per job."""
    return bool(workflow.local_exec and not workflow.remote_exec)


def gpus(device: str, runs_here: bool) -> int:
    """GPUs a training job requests for params.yaml's `device`; `runs_here`: the host that plans the run runs
    its jobs (Snakemake's local execution)."""
    if device == "auto" and not runs_here:
        return 0
    return 1 if planned_device(device) == "cuda" else 0


def local_gpu_limit() -> int:
    """The `gpu` resource of a run that `--resources gpu=N` does not set: one per device this machine shows
    (gpu_slots.visible_devices), at least one. Locally, that many GPU jobs run at once. On a cluster `gpu` is
    scoped local (the Snakefile), so it counts no jobs there; Snakemake still caps each job's request by it,
    which one keeps at a job's one GPU on a login node that shows none."""
    return max(1, len(gpu_slots.visible_devices()))


def train_threads(gpu: int) -> int:
    return GPU_TRAIN_THREADS if gpu else CPU_TRAIN_THREADS


def benchmark_threads(runs_here: bool) -> int:
    return WHOLE_MACHINE if runs_here else 1


def job_size(family: str) -> JobSize:
    """The family's own estimate of a training job (nlpbench.family.JobSize)."""
    return registry.get(family).job_size


def _minutes(seconds: float) -> int:
    """A limit in whole minutes, rounded up to 5, for a job measured at `seconds`."""
    raw = seconds * RUNTIME_MARGIN / 60 + RUNTIME_SLACK_MINUTES
    return int(math.ceil(raw / 5) * 5)


def train_runtime(group: str, family: str, scale: str, costs: dict[str, dict]) -> int:
    """Minutes a training job may run (see the module's note)."""
    own = costs.get(group)
    if own is not None and own["scale"] == scale:
        return _minutes(own["seconds"])
    family_rows = [r["seconds"] for r in costs.values() if r["family"] == family and r["scale"] == scale]
    if family_rows:
        return _minutes(max(family_rows))
    return DEFAULT_TRAIN_MINUTES[scale] if _small(scale) else job_size(family).paper_minutes


def train_mem_mb(group: str, family: str, scale: str, costs: dict[str, dict]) -> int:
    """Memory (MB) a training job may use (see the module's note)."""
    own = costs.get(group)
    if own is not None and own["scale"] == scale and own.get("peak_mb"):
        peak = own["peak_mb"]
    else:
        peaks = [r["peak_mb"] for r in costs.values() if r["family"] == family and r["scale"] == scale
                 and r.get("peak_mb")]
        if not peaks:
            size = job_size(family)
            return size.mem_mb if _small(scale) else size.paper_mem_mb
        peak = max(peaks)
    return max(MIN_MEM_MB, int(math.ceil(peak * MEM_MARGIN / 500) * 500))


def train(group: str, family: str, scale: str, costs: dict[str, dict]) -> dict:
    """A training rule's run time, memory and (at the paper scale) disk; its GPUs: gpus()."""
    small = _small(scale)
    out = {"runtime": train_runtime(group, family, scale, costs),
           "mem_mb": train_mem_mb(group, family, scale, costs)}
    if not small:
        out["disk_mb"] = TRAIN_DISK_MB_PAPER
    return out


def data(scale: str) -> dict:
    """A data step's resources (one thread)."""
    small = _small(scale)
    out = {"runtime": DATA_MINUTES.get(scale, DATA_MINUTES["paper"]), "mem_mb": DATA_MEM_MB[0 if small else 1]}
    if not small:
        out["disk_mb"] = DATA_DISK_MB_PAPER
    return out


def target(on_demand: bool) -> dict:
    """A table's or output's run time and memory; a benchmark (on demand) also takes the device it times
    (gpus()) and, on a cluster, a node of its own (benchmark_slurm_extra)."""
    return {"runtime": BENCHMARK_MINUTES if on_demand else TARGET_MINUTES, "mem_mb": TARGET_MEM_MB}


def benchmark_slurm_extra(runs_here: bool) -> str:
    return "" if runs_here else "--exclusive"


def small() -> dict:
    """The index and the report."""
    return {"runtime": SMALL_MINUTES, "mem_mb": SMALL_MEM_MB}
