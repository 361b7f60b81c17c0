"""nlpbench verify: are the committed tables what this commit rebuilds? Committed tables are retrained from no runs
in a scratch clone of HEAD (nlpbench.clone.scratch_clone) and compared, cell by cell, with the committed CSV.

    nlpbench verify [SOURCE/TABLE ...] [--sample N] [--seed S] [--tolerance T]

Each table is rebuilt at the scale its committed JSON records, on the CPU when it was computed on one, by
snakemake in the clone (its data steps, training groups and table rule, as a fresh checkout builds them). Every
cell whose reproduced value differs from the committed one (as written in the CSV, or by more than the tolerance)
is printed; exit status 0 when all agree, 1 when some differ. The clone is deleted afterwards, however verify ends
(a stop signal stops snakemake's jobs first: nlpbench.runtime.stop_signals, under `nlpbench verify`); snakemake's log and
the rebuilt CSVs are kept under logs/verify/.
"""

from __future__ import annotations

import csv
import io as _io
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from nlpbench import config, plan, status
from nlpbench.clone import head, scratch_clone, snakemake
from nlpbench.runtime import io, provenance


@dataclass(frozen=True)
class Candidate:
    """A committed table that this checkout can retrain: its key (source/name), the scale and device it was built
    at (from its JSON), the training groups it reads and their expected job-seconds (results/costs.tsv)."""

    key: str
    family: str
    scale: str
    cpu: bool
    groups: tuple[str, ...]
    seconds: float
    built_with: str = ""       # the torch and device its provenance records


@dataclass(frozen=True)
class Difference:
    table: str
    row: str
    column: str
    committed: str            # as written in the CSV; "" for an empty cell, "(none)" for a cell one side lacks
    rebuilt: str

    @property
    def delta(self) -> float | None:
        a, b = _number(self.committed), _number(self.rebuilt)
        return None if a is None or b is None else b - a

    def line(self) -> str:
        delta = "" if self.delta is None else f"  Δ {self.delta:+.4f}"
        return (f"{self.table}  row {self.row!r}  column {self.column!r}: committed {self.committed or '(empty)'}, "
                f"rebuilt {self.rebuilt or '(empty)'}{delta}")


NONE = "(none)"


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def cells(csv_text: str) -> dict[tuple[str, str], str]:
    """A table's CSV as {(row, column): reproduced value as written}; a repeated (row, column) gets a #2, #3 ..."""
    out: dict[tuple[str, str], str] = {}
    for rec in csv.DictReader(_io.StringIO(csv_text)):
        key, n = (rec["row"], rec["column"]), 1
        while key in out:
            n += 1
            key = (rec["row"], f"{rec['column']} #{n}")
        out[key] = rec["reproduced"]
    return out


def compare(table: str, committed: str, rebuilt: str, tolerance: float = 0.0) -> tuple[int, list[Difference]]:
    """Compare two CSV texts of one table cell by cell: (cells compared, the differences). Cells agree when
    written alike, or when both are numbers at most `tolerance` apart; a cell only one side has differs."""
    old, new = cells(committed), cells(rebuilt)
    diffs = []
    for key in list(old) + [k for k in new if k not in old]:
        a, b = old.get(key, NONE), new.get(key, NONE)
        if a == b:
            continue
        x, y = _number(a), _number(b)
        if tolerance > 0 and x is not None and y is not None and abs(y - x) <= tolerance:
            continue
        diffs.append(Difference(table, key[0], key[1], a, b))
    return len(old.keys() | new.keys()), diffs


def committed_tables(results: Path) -> dict[str, dict]:
    """The committed tables' JSON summaries by key (source/name)."""
    out = {}
    for path in sorted(Path(results).glob("*/*.json")):
        summary = io.read_json(path)
        if isinstance(summary, dict) and "table" in summary and path.with_suffix(".csv").exists():
            out[f"{summary['source']}/{summary['table']}"] = summary
    return out


def _scale(summary: dict) -> str:
    """The scale a committed table was built at: the first word of its provenance's scale (some add a sentence on
    what it cut)."""
    return str((summary.get("provenance") or {}).get("scale", "")).split(" ", 1)[0]


def candidates(results: Path, params_at: Callable[[str], dict], scales) -> dict[str, Candidate]:
    """Every committed table under `results` that can be retrained here (one that reads training groups: a table
    whose trained rows all need data reads none), keyed source/name. params_at(scale): params.yaml at that scale."""
    costs = status.read_costs(Path(results) / "costs.tsv")
    plans: dict[str, plan.Plan] = {}
    out = {}
    for key, summary in committed_tables(results).items():
        scale = _scale(summary)
        if scale not in scales:          # not recorded: nothing to rebuild it at
            continue
        if scale not in plans:
            plans[scale] = plan.make(params_at(scale))
        p = plans[scale]
        target = p.targets.get(key)
        if target is None or target.section != "tables" or not target.groups:
            continue
        prov = summary.get("provenance") or {}
        device = str(prov.get("device", "cpu"))
        seconds = status.estimate(p, list(target.groups), scale, costs).seconds
        out[key] = Candidate(key, p.owner[key], scale, device.startswith("cpu"), target.groups, seconds,
                             f"torch {prov.get('torch', '?')}, {device}")
    return out


def sample(cands: dict[str, Candidate], n: int, seed: int, max_seconds: float) -> list[Candidate]:
    """N tables drawn at random (seeded) among those whose groups results/costs.tsv expects to train in at most
    `max_seconds` of jobs, spread over the families: one of each family in turn, the families in a drawn order."""
    rng = random.Random(seed)
    by_family: dict[str, list[Candidate]] = {}
    for c in sorted(cands.values(), key=lambda c: c.key):
        if c.seconds <= max_seconds:
            by_family.setdefault(c.family, []).append(c)
    if not by_family:
        raise config.ConfigError(f"verify --sample: no committed table trains in {max_seconds / 60:g} job-minutes "
                                 "or less by results/costs.tsv; raise --max-minutes or name the tables")
    families = sorted(by_family)
    rng.shuffle(families)
    for tables in by_family.values():
        rng.shuffle(tables)
    picked: list[Candidate] = []
    while len(picked) < n and any(by_family.values()):
        for family in families:
            if by_family[family] and len(picked) < n:
                picked.append(by_family[family].pop())
    return picked


def choose(cands: dict[str, Candidate], targets: list[str], n: int | None, seed: int,
           max_minutes: float) -> list[Candidate]:
    """The named tables (each must be a committed, retrainable one), else a sample of N."""
    if targets:
        unknown = [t for t in targets if t not in cands]
        if unknown:
            raise config.ConfigError(f"verify: {', '.join(unknown)}: not a committed table that trains here "
                                     f"(SOURCE/TABLE, e.g. shen-thesis/6.2); retrainable: {', '.join(sorted(cands))}")
        return [cands[t] for t in dict.fromkeys(targets)]
    if not n or n < 1:
        raise config.ConfigError("verify: name the tables (SOURCE/TABLE ...) or draw some with --sample N")
    return sample(cands, n, seed, max_minutes * 60)


def verify(params: dict, repo: Path, logs: Path, targets: list[str],
           n: int | None = None, seed: int = 0, tolerance: float = 0.0, max_minutes: float = 15.0, cores: int = 1,
           log=print) -> int:
    """Rebuild the chosen committed tables from no runs in a scratch clone of `repo`'s HEAD and compare every cell
    with the committed CSV; print each difference and a summary line. 0 when all agree, 1 when some differ."""
    if not targets and not n:           # before cloning
        choose({}, targets, n, seed, max_minutes)
    commit, _ = head(repo, "verify", log)
    t0 = time.perf_counter()
    with scratch_clone(repo, commit, params.get("mirror"), prefix="nlpbench-verify-") as (clone, env):
        results = clone / "results"      # the committed tables, and the clone's params.yaml without overrides
        cands = candidates(results, lambda scale: config.load(clone / "params.yaml", {"scale": scale}),
                           params["scales"])
        chosen = choose(cands, targets, n, seed, max_minutes)
        log_path = Path(logs) / "verify" / f"{commit[:7]}.log"
        committed = {c.key: (results / f"{c.key}.csv").read_text() for c in chosen}
        expected = sum(c.seconds for c in chosen) / 60
        log(f"verify: {', '.join(c.key for c in chosen)} retrained from no runs in a clone of {commit[:7]} "
            f"(about {expected:.0f} job-minutes by results/costs.tsv; log: {log_path})")
        for built, cpu in dict.fromkeys((c.built_with, c.cpu) for c in chosen):
            here = provenance.device_label("cpu", 1) if cpu else provenance.device_label(
                provenance.resolve_device("auto"))
            log(f"verify: committed with {built}; rebuilt with torch {torch.__version__}, {here} (another CPU "
                "instruction set, torch or device gives other last bits, and can give other cells: "
                "docs/reproducibility.md)")
        for i, (scale, cpu) in enumerate(dict.fromkeys((c.scale, c.cpu) for c in chosen)):
            run_log = log_path.with_name(f"{log_path.stem}-{i + 1}.log") if i else log_path
            rules = [plan.rule_name("table", c.key) for c in chosen if (c.scale, c.cpu) == (scale, cpu)]
            settings = [f"scale={scale}", *(["device=cpu"] if cpu else [])]
            code = snakemake(clone, env, [*rules, "--cores", str(cores), "--resources", "gpu=1",
                                                     "--config", *settings], run_log)
            if code != 0:
                raise SystemExit(f"nlpbench verify: snakemake failed (exit {code}); see {run_log}")
        rebuilt = {c.key: (clone / config.results_dir(config.load(clone / "params.yaml", {"scale": c.scale}))
                           / f"{c.key}.csv").read_text() for c in chosen}     # a trial scale builds in results/<scale>/
    kept = Path(logs) / "verify"
    for key, text in rebuilt.items():      # kept for a closer look, never outside logs/verify/
        path = kept / f"{key}.csv"
        if path.resolve().is_relative_to(kept.resolve()):
            io.write_text(path, text)
    return report(committed, rebuilt, tolerance, commit, time.perf_counter() - t0, log)


def report(committed: dict[str, str], rebuilt: dict[str, str], tolerance: float, commit: str, seconds: float,
           log=print) -> int:
    """Print every cell that differs between the committed and the rebuilt CSV of each table, then a summary line;
    0 when all agree, 1 when some differ."""
    total, differences = 0, []
    for key in committed:
        n_cells, diffs = compare(key, committed[key], rebuilt[key], tolerance)
        total += n_cells
        differences += diffs
        for d in diffs:
            log(d.line())
    deltas = [abs(d.delta) for d in differences if d.delta is not None]
    within = f" by more than {tolerance:g}" if tolerance > 0 else ""
    log(f"verify: {len(committed)} table(s), {total} cells, {len(differences)} differ{within}"
        + (f" (max |Δ| {max(deltas):.4f})" if deltas else "")
        + f"; rebuilt at {commit[:7]} in {seconds / 60:.1f} min")
    return 1 if differences else 0
