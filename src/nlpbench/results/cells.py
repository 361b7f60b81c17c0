"""A reference to a table's cell, and the cells a table's notes and claims read: what the notes
(nlpbench.results.notes) and the claims (nlpbench.results.claims) of a table share.

A reference names a column of this table ("t-MEM-NN / 10 samples") or of another table of the same source
("2:t-MEM-NN / 10 samples"); TableCells holds our cells and the printed ones of the table being built and of every
table it reads, keyed (table, row, column), with each key checked before it is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nlpbench.config import ConfigError
from nlpbench.results import paper, tables


class CellRefError(ConfigError):
    """A note or a claim names a table, row or column that does not exist, or is not well formed."""


def split_ref(ref: str, table: str) -> tuple[str, str]:
    """"<table>:<column>" or "<column>" (of `table`) -> (table, column). Table names hold no space, so a column
    whose name holds a colon ("code (earlier reading: ...)") is read whole."""
    other, sep, column = ref.partition(":")
    return (other, column) if sep and " " not in other else (table, ref)


@dataclass
class TableCells:
    """Our cells and the printed ones of a table and of every table its notes and claims read.

    Keys are (table, row, column). `seeds` holds, where the family keeps them, the per-seed values behind one of
    our cells ({seed: value}); `rows`/`columns` are each table's rows and columns as built at this scale, `known_rows`
    also the rows its printed table has (a scale may cut rows: a row cut reads n/a, a row that exists nowhere is an
    error)."""

    source: str
    ours: dict[tuple[str, str, str], float] = field(default_factory=dict)
    printed: dict[tuple[str, str, str], float] = field(default_factory=dict)
    seeds: dict[tuple[str, str, str], dict[int, float]] = field(default_factory=dict)
    still_learning: dict[tuple[str, str, str], tuple[int, ...]] = field(default_factory=dict)
    rows: dict[str, list[str]] = field(default_factory=dict)
    columns: dict[str, list[str]] = field(default_factory=dict)
    known_rows: dict[str, set[str]] = field(default_factory=dict)
    decimals: dict[str, int] = field(default_factory=dict)
    pass_thresholds: dict[str, float | None] = field(default_factory=dict)

    def add(self, table: str, rows: list[str], columns: list[str], cells, decimals: int = 1,
            pass_threshold: float | None = None) -> None:
        """One table: its rows, columns and cells (nlpbench.results.tables.Cell), with the printed numbers beside them;
        `decimals`: the digits its values are quoted with (as the table prints them); `pass_threshold`: the score at
        which a task of it passes (its TableSpec's; None for a table without one)."""
        self.rows[table], self.columns[table] = list(rows), list(columns)
        self.decimals[table] = decimals
        self.pass_thresholds[table] = pass_threshold
        self.known_rows[table] = set(rows)
        for c in cells:
            if c.status == "ok" and c.reproduced is not None:
                self.ours[(table, c.row, c.column)] = tables.stored_value(c.reproduced)
                if getattr(c, "seeds", None):
                    self.seeds[(table, c.row, c.column)] = {k: tables.stored_value(v) for k, v in c.seeds.items()}
                if getattr(c, "still_learning", ()):
                    self.still_learning[(table, c.row, c.column)] = tuple(c.still_learning)
        for key in self.with_printed(table):
            self.known_rows[table].add(key[1])

    def pass_threshold(self, table: str) -> float:
        """The score at which a task of `table` passes, as its spec sets it; CellRefError for a table without one."""
        threshold = self.pass_thresholds.get(table)
        if threshold is None:
            raise CellRefError(f"Table {table} has no pass threshold (its rows are not tasks scored in percent), so "
                            "nothing in it passes or fails")
        return threshold

    def with_printed(self, table: str) -> list[tuple[str, str, str]]:
        """Adds the printed cells of `table`; returns the keys of every cell it prints (a '-' too)."""
        try:
            printed = paper.reference_cells(self.source, table)
        except KeyError:                          # an addition: no printed numbers
            printed = []
        for r in printed:
            value = paper.parse_paper(r["paper"])
            if value is not None:
                self.printed[(table, r["row"], r["column"])] = value
        return [(table, r["row"], r["column"]) for r in printed]

    def side(self, printed: bool) -> dict[tuple[str, str, str], float]:
        return self.printed if printed else self.ours

    def check_table(self, table: str, where: str) -> None:
        if table not in self.columns:
            raise CellRefError(f"{where}: no table {table!r} of {self.source} is read here "
                            f"(tables: {', '.join(self.columns)})")

    def check_column(self, table: str, column: str, where: str) -> None:
        self.check_table(table, where)
        if column not in self.columns[table]:
            raise CellRefError(f"{where}: Table {table} has no column {column!r} "
                            f"(columns: {', '.join(self.columns[table])})")

    def check_row(self, table: str, row: str, where: str) -> None:
        self.check_table(table, where)
        rows = self.known_rows[table]
        task_table = any(r.isdigit() for r in rows) and all(r.isdigit() or r == "mean" for r in rows)
        # a scale may cut a task table's rows (bAbI tasks 1-20): a task it cut reads n/a
        if row not in rows and not (task_table and row.isdigit() and 1 <= int(row) <= 20):
            raise CellRefError(f"{where}: Table {table} has no row {row!r} (rows: {', '.join(self.rows[table])})")
