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
exist raises CellRefError naming the table and the placeholder.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

from nlpbench.results.cells import CellRefError, TableCells, split_ref

WHATS = ("ours", "paper", "delta")
AGGREGATES = ("mean", "passes")

PLACEHOLDER = re.compile(r"\{(?:(mean|passes) )?(ours|paper|delta) ([^\s:{}]+):([^:{}]+?)(?::([^{}]+))?\}")
ATTEMPT = re.compile(r"\{(?:mean |passes )?(?:ours|paper|delta)\b[^{}]*\}?")   # what looks like one


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
        raise CellRefError(f"note placeholder {bad[0]!r} does not parse: write {{[mean |passes ]ours|paper|delta "
                        "TABLE:ROWS[:COLUMN]}}")
    return found


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
    except CellRefError as e:
        raise CellRefError(f"{where or f'Table {table}'}: {e}") from None
    return PLACEHOLDER.sub(lambda m: value(parsed[m[0]]), note)


