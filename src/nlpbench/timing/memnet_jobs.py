"""Chapter 6's training jobs as the pipeline ran them, for the memnet timing benchmark: each table's job-minutes
from the `benchmark:` files snakemake writes (else results/costs.tsv), and from them chapter 6 at five seeds per
cell at the paper scale's settings, measured where the cpu scale trains five seeds and projected elsewhere."""

from __future__ import annotations

from pathlib import Path

from nlpbench import config
from nlpbench.memnet.experiments import training_questions
from nlpbench.memnet.groups import babi_declarations, declaration_groups
from nlpbench.status import COSTS, job_seconds, read_costs

CH6_TABLES = ("2", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15")   # chapter 6 at five seeds
PROTOCOL_SEEDS = 5      # seeds per cell of the five-seed protocol: its 100-run group and figure (the 1k tables train ten)



def ch6_declarations(params: dict) -> list:
    """The chapter 6 tables (CH6_TABLES) as `params`' scale declares them."""
    return [d for d in babi_declarations(params)
            if d.section == "tables" and d.source == "tolias-thesis" and d.name in CH6_TABLES]


def pipeline_job_minutes(logs: Path, costs_path: Path = COSTS) -> dict[str, tuple[float, int, int]]:
    """From the `benchmark:` files snakemake writes for each training job (logs/train/<group>.benchmark.tsv), else
    a group's cpu row of results/costs.tsv (cpu_job_seconds), the job-minutes of each chapter 6 table's groups at
    the cpu scale: {table: (minutes, groups found, groups)}; key "all" counts each group once."""
    cpu = config.load(Path("params.yaml"), {"scale": "cpu"})
    costs = read_costs(costs_path)
    seconds, out = {}, {}
    for d in ch6_declarations(cpu):
        gids = {g.group_id for g in declaration_groups(cpu, d).values()}
        for gid in gids:
            if (s := cpu_job_seconds(logs, gid, costs)) is not None:
                seconds[gid] = s
        found = [seconds[g] for g in gids if g in seconds]
        out[d.name] = (sum(found) / 60, len(found), len(gids))
        out.setdefault("_groups", set()).update(gids)
    groups = out.pop("_groups", set())
    out["all"] = (sum(seconds.values()) / 60, len(seconds), len(groups))
    return out


def run_steps(params: dict, d, seeds: int | None = None) -> dict[str, int]:
    """Training steps of every run of a declaration's groups at `params`' scale: {group id: runs x epochs x
    minibatches per epoch} (a joint run trains on every task's stories); `seeds`: as if each group trained that
    many seeds instead of its own."""
    out = {}
    for g in declaration_groups(params, d).values():
        runs = g.n_runs if seeds is None else g.n_runs // len(g.seeds) * seeds
        t = g.settings["train"]
        n_train = training_questions(g.settings, g.variant) * (len(g.tasks) if g.joint else 1)
        out[g.group_id] = runs * t["epochs"] * (n_train // t["batch_size"])
    return out


def cpu_seeds_text() -> str:
    """How many seeds the cpu scale trains per chapter 6 group, e.g. "five seeds on 1k, one seed on 10k"."""
    cpu = config.load(Path("params.yaml"), {"scale": "cpu"})
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 10: "ten"}
    by_kind: dict[str, set[int]] = {}
    for d in ch6_declarations(cpu):
        for g in declaration_groups(cpu, d).values():
            by_kind.setdefault("10k" if g.variant.endswith("10k") else "1k", set()).add(len(g.seeds))
    return ", ".join(f"{' or '.join(words.get(n, str(n)) for n in sorted(ns))} seed{'s' if max(ns) > 1 else ''} "
                     f"on {kind}" for kind, ns in sorted(by_kind.items(), key=lambda kv: kv[0] == "10k"))


def cpu_job_seconds(logs: Path, gid: str, costs: dict[str, dict]) -> float | None:
    """A cpu-scale group's job seconds: its Snakemake `benchmark:` file, else its cpu row of results/costs.tsv (a
    group trained through `nlpbench train` leaves no benchmark file; costs.tsv records its group.json time)."""
    if (seconds := job_seconds(logs, gid)) is not None:
        return seconds
    row = costs.get(gid)
    return row["seconds"] if row is not None and row["scale"] == "cpu" else None


def five_seed_projection(logs: Path, costs_path: Path = COSTS, cpu: dict | None = None,
                         paper: dict | None = None) -> dict[str, float] | None:
    """Chapter 6 (Tables 2 and 6-15) at five seeds per cell (PROTOCOL_SEEDS) at the paper scale's
    settings, projected from the cpu scale's measured training jobs: each cpu group's job-minutes x (its paper
    group's training steps at five seeds / its own). Per-run cost falls as a group grows, yet measured groups came
    out above it: an estimate, not a bound. Where the cpu scale trains a group as that, its time is measured,
    not projected.
    {"job_minutes", "groups", "cpu_job_minutes", "projected_groups"}; None while a chapter 6 group of the cpu
    scale has no time. `cpu`, `paper`: the two scales' params (default: params.yaml's)."""
    cpu = cpu or config.load(Path("params.yaml"), {"scale": "cpu"})
    paper = paper or config.load(Path("params.yaml"), {"scale": "paper"})
    costs = read_costs(costs_path)
    seen, projected, measured, scaled = set(), 0.0, 0.0, 0
    for d_cpu in ch6_declarations(cpu):
        d_paper = config.declaration(paper, "tables", "tolias-thesis", d_cpu.name)
        at_five = run_steps(paper, d_paper, PROTOCOL_SEEDS).values()
        for (gid, steps), paper_steps in zip(run_steps(cpu, d_cpu).items(), at_five):
            if gid in seen:
                continue
            seen.add(gid)
            if (seconds := cpu_job_seconds(logs, gid, costs)) is None:
                return None                              # a group never timed: no projection
            measured += seconds / 60
            projected += seconds / 60 * paper_steps / steps
            scaled += paper_steps != steps
    return ({"job_minutes": projected, "groups": len(seen), "cpu_job_minutes": measured, "projected_groups": scaled}
            if seen else None)
