"""Numbers in a table's notes, filled from the cells, so that a rebuild never leaves a note behind its table.

A declaration's notes quote our numbers only through placeholders; each is replaced by the value, or the range of
values, of the cells it names, read from this table or another table of the same source:

    {ours T:ROWS}            our cells of table T in ROWS, over every column of T
    {ours T:ROWS:COLUMN}     ... in one column (a column name may hold ':' and ',': it is read to the closing brace)
    {paper T:ROWS:COLUMN}    the printed cells
    {delta T:ROWS:COLUMN}    ours minus the printed ones, signed
    {mean ours T:ROWS:COLUMN}     the mean of the cells (also `mean paper`, `mean delta`)
    {passes ours T:ROWS:COLUMN}   "N of M": how many of the M cells with a value reach the table's pass threshold

ROWS is row labels separated by commas, or `*` for every row of T with a value on the side(s) read (a mean row
left out). A value keeps
the table's decimals, none where every value is whole (as the documents print integers); a range reads "lo-hi" ("lo to hi"
when signed). A cell not reproduced (yet) reads 'n/a'. A placeholder naming a table, row or column that does not
exist raises NoteError naming the table and the placeholder.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

from nlpbench.results import paper, tables
from nlpbench.config import ConfigError

WHATS = ("ours", "paper", "delta")
AGGREGATES = ("mean", "passes")

PLACEHOLDER = re.compile(r"\{(?:(mean|passes) )?(ours|paper|delta) ([^\s:{}]+):([^:{}]+?)(?::([^{}]+))?\}")
ATTEMPT = re.compile(r"\{(?:mean |passes )?(?:ours|paper|delta)\b[^{}]*\}?")   # what looks like one


class NoteError(ConfigError):
    """A note or a claim names a table, row or column that does not exist, or is not well formed."""


@dataclass(frozen=True)
class Quote:
    """One placeholder: what it reads and where."""

    text: str                  # as written, braces included
    aggregate: str | None      # None | "mean" | "passes"
    what: str                  # "ours" | "paper" | "delta"
    table: str
    rows: tuple[str, ...]      # ("*",) for every row with a value
    column: str | None         # None: every column of the table


def quotes(note: str) -> list[Quote]:
    """The placeholders of one note, in order; something that looks like a placeholder but does not parse raises."""
    found = [Quote(m[0], m[1], m[2], m[3], tuple(r.strip() for r in m[4].split(",") if r.strip()),
                   m[5] and m[5].strip()) for m in PLACEHOLDER.finditer(note)]
    bad = [m[0] for m in ATTEMPT.finditer(note) if not PLACEHOLDER.fullmatch(m[0])]
    bad += [q.text for q in found if q.aggregate == "passes" and q.what == "delta"]
    if bad:
        raise NoteError(f"note placeholder {bad[0]!r} does not parse: write {{[mean |passes ]ours|paper|delta "
                        "TABLE:ROWS[:COLUMN]}}")
    return found


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
        """The score at which a task of `table` passes, as its spec sets it; NoteError for a table without one."""
        threshold = self.pass_thresholds.get(table)
        if threshold is None:
            raise NoteError(f"Table {table} has no pass threshold (its rows are not tasks scored in percent), so "
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
            raise NoteError(f"{where}: no table {table!r} of {self.source} is read here "
                            f"(tables: {', '.join(self.columns)})")

    def check_column(self, table: str, column: str, where: str) -> None:
        self.check_table(table, where)
        if column not in self.columns[table]:
            raise NoteError(f"{where}: Table {table} has no column {column!r} "
                            f"(columns: {', '.join(self.columns[table])})")

    def check_row(self, table: str, row: str, where: str) -> None:
        self.check_table(table, where)
        rows = self.known_rows[table]
        task_table = any(r.isdigit() for r in rows) and all(r.isdigit() or r == "mean" for r in rows)
        # a scale may cut a task table's rows (bAbI tasks 1-20): a task it cut reads n/a
        if row not in rows and not (task_table and row.isdigit() and 1 <= int(row) <= 20):
            raise NoteError(f"{where}: Table {table} has no row {row!r} (rows: {', '.join(self.rows[table])})")


def referenced_tables(decl: dict, table: str) -> list[str]:
    """The other tables a declaration's notes quote and its claims compare with (their runs are read too)."""
    quoted = {q.table for note in decl.get("notes") or [] for q in quotes(note)}
    claimed = {split_ref(ref, table)[0] for c in decl.get("claims") or [] for key in ("a", "b", "columns")
               for ref in ([c[key]] if isinstance(c.get(key), str) else c.get(key) or [])}
    return sorted((quoted | claimed) - {table})


def _span(values: list[float], signed: bool, decimals: int = 1) -> str:
    """One value or a range, with the table's decimals, none where every value is whole (the thesis prints
    integers)."""
    digits = 0 if all(float(v).is_integer() for v in values) else decimals
    fmt = f"{{:+.{digits}f}}" if signed else f"{{:.{digits}f}}"
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo} to {hi}" if signed else f"{lo}-{hi}"


def _value(cells: TableCells, what: str, key: tuple[str, str, str]) -> float | None:
    if what == "ours":
        return cells.ours.get(key)
    if what == "paper":
        return cells.printed.get(key)
    a, b = cells.ours.get(key), cells.printed.get(key)
    return None if a is None or b is None else a - b


def fill(note: str, table: str, cells: TableCells, where: str = "") -> str:
    """`note` with each placeholder replaced by its cells' value, range, mean or pass count (module docstring).
    `where` (the note's key, say 'tables.tolias-thesis.8.notes.0') heads an error's message."""
    def value(q: Quote) -> str:
        where_q = f"{where or f'Table {table}'}: note placeholder {q.text!r}"
        cells.check_table(q.table, where_q)
        if q.column is not None:
            cells.check_column(q.table, q.column, where_q)
        columns = [q.column] if q.column is not None else cells.columns[q.table]
        if q.rows == ("*",):
            keys = [(q.table, r, c) for r in cells.rows[q.table] if r != "mean" for c in columns]
            values = [v for v in (_value(cells, q.what, k) for k in keys) if v is not None]
        else:
            for r in q.rows:
                cells.check_row(q.table, r, where_q)
            values = [_value(cells, q.what, (q.table, r, c)) for r in q.rows for c in columns]
            if any(v is None for v in values):
                return "n/a"
        if not values:
            return "n/a"
        digits = cells.decimals.get(q.table, 1)
        if q.aggregate == "mean":
            return f"{statistics.fmean(values):{'+' if q.what == 'delta' else ''}.{digits}f}"
        if q.aggregate == "passes":
            threshold = cells.pass_threshold(q.table)
            return f"{sum(v >= threshold for v in values)} of {len(values)}"
        return _span(values, signed=(q.what == "delta"), decimals=digits)

    try:
        parsed = {q.text: q for q in quotes(note)}
    except NoteError as e:
        raise NoteError(f"{where or f'Table {table}'}: {e}") from None
    return PLACEHOLDER.sub(lambda m: value(parsed[m[0]]), note)


