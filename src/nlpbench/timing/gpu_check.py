"""The GPU check: one command that shows, in a few minutes on one GPU, that the pipeline runs there, and writes
what it measured to docs/gpu.md (a dated section per run, appended).

    bash envs/run.sh gpu-check            (= python -m nlpbench.timing.gpu_check)
    python -m nlpbench.timing.gpu_check --dry-run     the snakemake commands it would run, on any machine

In a scratch clone of this commit (nlpbench.clone, as `nlpbench end-to-end` builds), with snakemake:
  1. every family's tables at the smoke scale on CUDA (`--config scale=smoke device=cuda`), one family at a time;
  2. Table 2 of tolias-thesis at the paper scale: its two training groups (the paper protocol) on CUDA, each
     job's wall time from its `benchmark:` file;
  3. the timing benchmarks that time the configured device (nlpbench.timing.targets.ON_DEVICE) on CUDA, at the
     smoke scale's data; the others time the CPU and are left out.
Each of the three has a share of the time limit (STEPS), which its snakemake runs use in turn; a run past what
is left is stopped: the check ends within LIMIT_S and the section says which run ran out. Data come from the mirror ($NLPBENCH_MIRROR) when one is set.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from nlpbench import config, registry
from nlpbench.clone import head, scratch_clone, snakemake
from nlpbench.plan import Plan, make, rule_name
from nlpbench.runtime import io, stop_signals
from nlpbench.status import job_seconds
from nlpbench.timing.targets import ON_DEVICE

LIMIT_S = 8 * 60
# step -> its share of LIMIT_S in seconds (the clone and the writing take the rest)
STEPS = {"smoke": 240, "table 2": 150, "benchmarks": 75}
TABLE = "tolias-thesis/2"
DOC = Path("docs") / "gpu.md"
NOT_YET = "Not yet run on a GPU: run `bash envs/run.sh gpu-check` on a machine with one and commit this file."
HEADER = f"""# The GPU check

`bash envs/run.sh gpu-check` runs, in a scratch clone of the commit and within {LIMIT_S // 60} minutes on one GPU:
every family's tables at the smoke scale on CUDA, the two paper-protocol training groups of tolias-thesis Table 2
on CUDA, and the timing benchmarks that time the GPU ({", ".join(ON_DEVICE)}; the DMN and ACVI benchmarks time
the CPU). Each run appends a section below: the GPU, the torch and CUDA versions, and each step's command, wall
time and outcome (src/nlpbench/timing/gpu_check.py).

"""
NO_GPU = "no CUDA device here: run bash envs/run.sh gpu-check on a machine with a GPU"


@dataclass
class Step:
    name: str
    what: str
    args: list[str]               # snakemake's arguments
    pool: str                     # the key of STEPS whose time it uses
    groups: tuple[str, ...] = ()  # training jobs whose wall time is recorded
    outcome: str = "not run"
    wall_s: float | None = None
    job_s: dict[str, float] = field(default_factory=dict)


def _rules(plan: Plan, keys) -> list[str]:
    return [rule_name("table" if plan.targets[k].section == "tables" else "output", k) for k in keys]


def overrides(path: Path = Path("overrides.yaml")) -> dict:
    """The user's overrides the Snakefile reads (its configfile), which the clone has as committed."""
    return (config.read_yaml(path.read_text(), str(path)) or {}) if path.exists() else {}


def steps(base_params: dict, cores: int) -> list[Step]:
    """The snakemake runs of the check, planned from params.yaml (`base_params`: the overrides)."""
    common = ["--cores", str(cores), "--resources", "gpu=1"]
    out = []
    smoke_params = registry.load("params.yaml", {**base_params, "scale": "smoke", "device": "cuda"})
    smoke = make(smoke_params)
    families: dict[str, list[str]] = {}
    for t in smoke.part(study=False):
        families.setdefault(smoke.owner[t.key], []).append(t.key)
    for family, keys in sorted(families.items()):
        out.append(Step(f"smoke {family}", f"{family}: {len(keys)} tables and outputs at the smoke scale",
                        [*_rules(smoke, keys), *common, "--config", "scale=smoke", "device=cuda"], "smoke"))
    paper = make(registry.load("params.yaml", {**base_params, "scale": "paper", "device": "cuda"}))
    groups = paper.targets[TABLE].groups
    out.append(Step("table 2", f"{TABLE} at the paper scale: its {len(groups)} training groups",
                    [*(rule_name("train", g) for g in groups), *common, "--config", "scale=paper", "device=cuda"],
                    "table 2", groups=tuple(groups)))
    benchmarks = [k for k, t in smoke.targets.items()
                  if t.on_demand and config.declaration(smoke_params, "outputs", t.source, t.name)
                  .decl["measures"] in ON_DEVICE]
    for key in benchmarks:
        out.append(Step(f"benchmark {key}", f"timing benchmark {key} on CUDA",
                        [*_rules(smoke, [key]), *common, "--config", "scale=smoke", "device=cuda"], "benchmarks"))
    return out


def command(step: Step) -> str:
    return "snakemake " + " ".join(shlex.quote(a) for a in step.args)


def section(when: str, facts: dict[str, str], done: list[Step]) -> str:
    """The dated section of one run: the machine's facts, then a row per step."""
    lines = [f"## {when}", ""] + [f"- {k}: {v}" for k, v in facts.items()] + [
        "", "| step | what | wall time | outcome |", "|---|---|---|---|"]
    for s in done:
        wall = "-" if s.wall_s is None else f"{s.wall_s:.1f} s"
        lines.append(f"| {s.name} | {s.what} | {wall} | {s.outcome} |")
    jobs = [(g, sec) for s in done for g, sec in s.job_s.items()]
    if jobs:
        lines += ["", "Training jobs (wall time from Snakemake's `benchmark:` file):", ""]
        lines += [f"- `{g}`: {sec:.1f} s" for g, sec in jobs]
    lines += ["", "Commands (in the clone):", ""] + [f"- `{command(s)}`" for s in done]
    return "\n".join(lines) + "\n"


def append(path: Path, text: str) -> None:
    """Append a run's section to `path` (created with its header), written atomically: the header's "not yet run"
    line goes with the first section."""
    old = Path(path).read_text() if Path(path).exists() else HEADER + NOT_YET + "\n"
    body = old.replace(NOT_YET + "\n", "").rstrip("\n")
    io.write_text(path, body + "\n\n" + text)


def machine_facts() -> dict[str, str]:
    import torch
    return {"GPU": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "CUDA (torch's build)": str(torch.version.cuda), "cuDNN": str(torch.backends.cudnn.version()),
            "host": f"{platform.node()}, {os.cpu_count()} cores"}


def cuda_available() -> bool:
    import torch
    return torch.cuda.is_available()


def run(repo: Path, doc: Path, overrides: dict, mirror: str | None, log=print) -> list[Step]:
    if not cuda_available():
        raise config.ConfigError(NO_GPU)
    plan = steps(overrides, os.cpu_count() or 1)
    commit, uncommitted = head(repo, "gpu-check", log)
    facts = {**machine_facts(), "commit": commit[:10] + (" (uncommitted changes left out)" if uncommitted else "")}
    logs = repo / "logs" / "gpu-check"
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    t0 = time.perf_counter()
    left = dict(STEPS)
    with scratch_clone(repo, commit, mirror, prefix="nlpbench-gpu-check-") as (clone, env):
        for s in plan:
            if left[s.pool] < 1:
                s.outcome = f"not run: the {STEPS[s.pool]} s of `{s.pool}` were spent"
                log(f"gpu-check: {s.name}: {s.outcome}")
                continue
            slug = s.name.replace(" ", "-").replace("/", "-")
            log(f"gpu-check: {s.name}: {command(s)} (at most {left[s.pool]:.0f} s; log: {logs / slug}.log)")
            t = time.perf_counter()
            rc = snakemake(clone, env, s.args, logs / f"{slug}.log", timeout=left[s.pool])
            s.wall_s = time.perf_counter() - t
            s.outcome = ("ok" if rc == 0 else f"stopped at the {STEPS[s.pool]} s of `{s.pool}`" if rc == 124
                         else f"failed (exit {rc}; logs/gpu-check/{slug}.log)")
            left[s.pool] -= s.wall_s
            s.job_s = {g: sec for g in s.groups
                       if (sec := job_seconds(clone / "logs" / "train", g)) is not None}
            log(f"gpu-check: {s.name}: {s.outcome}, {s.wall_s:.1f} s")
    facts["total wall time"] = f"{time.perf_counter() - t0:.1f} s (limit {LIMIT_S} s)"
    append(doc, section(started, facts, plan))
    log(f"gpu-check: wrote {doc}")
    return plan


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nlpbench.timing.gpu_check", description=__doc__.split("\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="print the snakemake commands, run nothing")
    ap.add_argument("--doc", type=Path, default=DOC, help=f"the file the figures are appended to ({DOC})")
    a = ap.parse_args(argv)
    try:
        if a.dry_run:
            for s in steps(overrides(), os.cpu_count() or 1):
                print(f"{s.name}\t{s.pool} ({STEPS[s.pool]} s)\t{command(s)}")
            return 0
        with stop_signals.raised():      # a signal stops snakemake's jobs and deletes the scratch clone
            run(Path("."), a.doc, overrides(), os.environ.get("NLPBENCH_MIRROR"))
        return 0
    except stop_signals.Stopped as e:
        return stop_signals.report("gpu-check", e)
    except (config.ConfigError, OSError) as e:
        print(f"nlpbench: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
