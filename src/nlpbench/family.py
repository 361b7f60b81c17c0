"""The family interface: the few questions every model family answers. The core, the CLI and the Snakefile
speak only to this (through nlpbench.registry), never to a family's own modules.

    params -> data steps, training groups, targets (tables and other outputs)
    data step  -> prepared data on disk (its `output` is written last)
    group      -> trained runs, each with its own checkpoint and metrics.json (`done` is written last)
    target     -> the cells of one table (TableParts, written by nlpbench.results.tables) or another output's files
                  and their description (OutputPage, which the core writes to the index sidecar)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from nlpbench.results.tables import Cell, TableSpec


@dataclass(frozen=True)
class Paths:
    """Where a command reads and writes: data/, runs/, results/ (the CLI's --data, --runs, --results)."""

    data: Path = Path("data")
    runs: Path = Path("runs")
    results: Path = Path("results")


@dataclass(frozen=True)
class JobSize:
    """What one training job of a family is expected to hold and take before anything is measured: the cluster's
    request where results/costs.tsv has no row of the family at the scale (nlpbench.resources)."""

    mem_mb: int = 4000                 # peak memory, MB, at the small scales (smoke, cpu)
    paper_mem_mb: int = 16000          # ... at the paper scale
    paper_minutes: int = 24 * 60       # run time at the paper scale, minutes


@dataclass(frozen=True)
class DataStep:
    """Prepared data: `output` (a path relative to the repository) marks it done and is written last. A `light`
    step only downloads (or copies from a mirror), verifies and unpacks, or derives as little: a cluster run does it
    on the host that submits the jobs (Snakemake's localrule), which has the network, not as a job of its own."""

    id: str
    output: str
    needs: tuple[str, ...] = ()       # data steps it reads
    light: bool = False


@dataclass(frozen=True)
class TrainGroup:
    """Runs trained by one job (many small runs in one vectorised pass where that pays)."""

    id: str
    done: str                          # written last, once every run of the group is complete
    needs: tuple[str, ...] = ()        # data steps
    runs: int = 1                      # runs trained one after another (seeds); a job's cost grows with them


def table_figure(figure: str) -> str:
    """The file a table's declared figure (its home's `figure: "4.1"`) is drawn to, beside the table in
    results/<source>/: fig4.1.png."""
    return f"fig{figure}.png"


def declared_figures(decl: dict) -> list[str]:
    """The files a table's home declares as its figure (`figure: "4.1"` -> fig4.1.png); none where it declares none."""
    return [table_figure(str(decl["figure"]))] if decl.get("figure") else []


def table_files(source: str, name: str, decl: dict) -> tuple[str, ...]:
    """What a table writes, under the results folder: its Markdown, CSV and JSON, and the figures its home
    declares."""
    base = f"{source}/{name}"
    return (f"{base}.md", f"{base}.csv", f"{base}.json", *(f"{source}/{f}" for f in declared_figures(decl)))


def drawn_figures(decl: dict, directory: Path) -> list[str]:
    """The declared figures (declared_figures) that were drawn in `directory`, results/<source>/."""
    return [f for f in declared_figures(decl) if (Path(directory) / f).is_file()]


@dataclass(frozen=True)
class Target:
    """A table (cells beside the paper's numbers) or another output (qualitative table, figure, ...)."""

    section: str                       # "tables" | "outputs"
    source: str
    name: str
    files: tuple[str, ...]             # what it writes, under the results folder (Plan.result_path)
    groups: tuple[str, ...] = ()       # training groups whose runs it reads
    needs: tuple[str, ...] = ()        # data steps it reads directly
    on_demand: bool = False            # built only when asked for by name (a benchmark), never by `all`
    reads: tuple[str, ...] = ()        # files it cites, under the results folder (a benchmark's end-to-end records):
                                       # a new one reruns it
    study: bool = False                # a study behind the documents' tables (its home says `study: true`): built by
                                       # `snakemake studies`, not by `all` (set by nlpbench.plan from the declaration)

    @property
    def key(self) -> str:
        return f"{self.source}/{self.name}"


@dataclass(frozen=True)
class OutputPage:
    """What an output wrote, as the index lists it: nlpbench.results.build writes it to the output's sidecar,
    results/<source>/<name>.output.json (nlpbench.results.results_index.register_output)."""

    title: str
    kind: str                          # one of results_index.OUTPUT_KINDS
    files: tuple[str, ...]             # what it wrote, relative to results/<source>/
    status: str                        # a short free text: "generated", "not run at this scale", ...
    note: str = ""
    scale: str | None = None           # the scale the index names, where not params.yaml's chosen one


@dataclass
class TableParts:
    """The cells of one table and what is printed around them; nlpbench.results.tables renders and writes it."""

    spec: TableSpec
    cells: list[Cell]
    provenance: dict
    notes: list[str]
    # figures drawn from the written CSV: each returns its file, or the page of a figure the index lists on its
    # own (under its file's name: fig6.8.png -> fig6.8)
    after: list[Callable[[Path], Path | OutputPage]] = field(default_factory=list)


class Family(Protocol):
    name: str
    job_size: JobSize                  # a training job's memory and paper-scale time before any is measured

    def check(self, params: dict) -> None:
        """Raise config.ConfigError for what the schema cannot check (unknown runs, bad overrides)."""

    def data_steps(self, params: dict) -> list[DataStep]: ...

    def groups(self, params: dict) -> list[TrainGroup]: ...

    def targets(self, params: dict) -> list[Target]: ...

    def prepare(self, step: str, params: dict, paths: Paths, mirror: str | None) -> str:
        """Run one data step; returns a one-line summary."""

    def train(self, group: str, params: dict, paths: Paths, device: str) -> float | None:
        """Train the group's incomplete runs. Returns the training seconds of finished runs it took over from
        another group instead of training them (None: none), which the job's clock counts in its cost."""

    # optional: retrain(group, params, paths, device) trains every run of the group again from scratch, finished
    # ones included (`nlpbench train GROUP --again`); a family without it refuses the flag

    def table(self, source: str, name: str, params: dict, paths: Paths) -> TableParts: ...

    def output(self, source: str, name: str, params: dict, paths: Paths) -> OutputPage:
        """Write an output that is not a table (a qualitative table, a figure, a benchmark) under
        results/<source>/; returns its page, which the core writes to the index."""
