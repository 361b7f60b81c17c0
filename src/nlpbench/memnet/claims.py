"""The thesis's headline claims for the tables of ch. 6 (bAbI, the game), checked in words and numbers.

A claim is declared under a table (`claims:` in params.yaml) as a kind and two columns, `a` and `b`; a column is
"<column>" of this table or "<table>:<column>" of another table of the same source (whose runs the table then
reads too). Each claim is judged twice, on our cells and on the printed ones, so a reader sees whether the thesis's
own numbers say what its text says and whether ours do:

  more_passes   a passes the 95% threshold on more tasks than b
  higher_mean   a's mean accuracy over the tasks is above b's
  similar_mean  the means of a and b differ by at most `within` points
  samples_help  on the tasks where b (one sample) is below 95%, a (ten samples) is higher on average
  tracks        a stays within `within` points of b per task on average (mean |a - b| over the tasks): a check of
                consistency, e.g. a translated or letter-shuffled variant of the tasks against the English ones
  outperforms   a beats b in every cell of a table whose rows are "<scenario> / <metric>" (the guess-the-number
                Tables 16-17): a higher Accuracy and Success, fewer Rounds; a tie is not a win

Numbers a table's notes quote are generated as well, so that a re-run never leaves a note behind its cells: a
note holds `{ours T:ROWS}`, `{paper T:ROWS}` or `{delta T:ROWS}` (optionally `{ours T:ROWS:COLUMN}`), T a table of
the same source, ROWS task numbers separated by commas; it is replaced by the value, or the range of values, of
those cells over the named column (default: every column of the table): our accuracy, the printed one, or ours
minus the printed one.
"""

from __future__ import annotations

import re
import statistics

from nlpbench import paper

PASS = 95.0
KINDS = ("more_passes", "higher_mean", "similar_mean", "samples_help", "tracks", "outperforms")
LOWER_IS_BETTER = ("Rounds",)   # metrics of the game tables where fewer is better (guesses to win)
OURS, PAPERS = "our numbers", "the thesis's numbers"


def split_ref(ref: str, table: str) -> tuple[str, str]:
    """"<table>:<column>" or "<column>" (of `table`) -> (table, column). Table names hold no space, so a column
    whose name holds a colon ("code (earlier reading: ...)") is read whole."""
    other, sep, column = ref.partition(":")
    return (other, column) if sep and " " not in other else (table, ref)


NUMBER = re.compile(r"\{(ours|paper|delta) ([^:{}]+):([0-9][0-9, ]*)(?::([^{}]+))?\}")


def _quoted(m: re.Match) -> tuple[str, str, list[str], str | None]:
    """One placeholder: (what, table, task rows, column or None)."""
    return m[1], m[2].strip(), [r.strip() for r in m[3].split(",") if r.strip()], m[4] and m[4].strip()


def note_refs(note: str) -> list[tuple[str, str, list[str], str | None]]:
    """The numbers a note quotes, one tuple of `_quoted` per placeholder."""
    return [_quoted(m) for m in NUMBER.finditer(note)]


def referenced_tables(decl: dict, table: str) -> list[str]:
    """The other tables a declaration's claims and the numbers in its notes read."""
    claimed = {t for c in decl.get("claims") or [] for t, _ in (split_ref(c["a"], table), split_ref(c["b"], table))}
    quoted = {t for note in decl.get("notes") or [] for _, t, _, _ in note_refs(note)}
    return sorted((claimed | quoted) - {table})


def _span(values: list[float], signed: bool) -> str:
    """One value or a range; one decimal, none where every value is whole (the thesis prints integers)."""
    digits = 0 if all(float(v).is_integer() for v in values) else 1
    fmt = f"{{:+.{digits}f}}" if signed else f"{{:.{digits}f}}"
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo} to {hi}" if signed else f"{lo}-{hi}"


def fill_numbers(note: str, table: str, ours: dict, printed: dict, columns: dict[str, list[str]]) -> str:
    """`note` with each placeholder (module docstring) replaced by its cells' value or range. `ours`/`printed`:
    {(table, task, column): accuracy}; `columns`: each quoted table's columns. A placeholder naming an unknown
    table or column raises ValueError; cells not reproduced (yet) read 'n/a'."""
    def value(m: re.Match) -> str:
        what, other, rows, column = _quoted(m)
        if other not in columns:
            raise ValueError(f"Table {table}: note placeholder {m[0]!r} names table {other!r}, not one of this source")
        if column is not None and column not in columns[other]:
            raise ValueError(f"Table {table}: note placeholder {m[0]!r}: no column {column!r} in Table {other} "
                             f"(columns: {', '.join(columns[other])})")
        keys = [(other, r, c) for r in rows for c in ([column] if column else columns[other])]
        if what == "ours":
            values = [ours.get(k) for k in keys]
        elif what == "paper":
            values = [printed.get(k) for k in keys]
        else:
            values = [None if ours.get(k) is None or printed.get(k) is None else ours[k] - printed[k] for k in keys]
        if any(v is None for v in values):
            return "n/a"
        return _span(values, signed=(what == "delta"))
    return NUMBER.sub(value, note)


def paper_grid(source: str, table: str) -> dict[tuple[str, str], float]:
    out = {}
    for r in paper.reference_cells(source, table):
        value = paper.parse_paper(r["paper"])
        if value is not None:
            out[(r["row"], r["column"])] = value
    return out


def _column(grid: dict, table_column: tuple[str, str]) -> dict[str, float]:
    """row -> value of one column, every row (the kinds over tasks keep the task rows: `_judge`)."""
    table, column = table_column
    return {row: v for (t, row, col), v in grid.items() if t == table and col == column}


def _outperforms(a: dict[str, float], b: dict[str, float]) -> tuple[bool, str] | None:
    """Whether a beats b in every "<scenario> / <metric>" cell both have (fewer is better for LOWER_IS_BETTER)."""
    rows = [r for r in a if r in b]
    if not rows:
        return None
    better, tied, worse = [], [], []
    for r in rows:
        gain = b[r] - a[r] if r.rsplit(" / ", 1)[-1] in LOWER_IS_BETTER else a[r] - b[r]
        (better if gain > 0 else tied if gain == 0 else worse).append(r)
    detail = f"better in {len(better)} of {len(rows)} cells"
    if tied:
        detail += f", tied in {len(tied)} ({', '.join(tied)})"
    if worse:
        detail += f", worse in {len(worse)} (" + ", ".join(f"{r}: {a[r]:.1f} against {b[r]:.1f}" for r in worse) + ")"
    return not tied and not worse, detail


def _judge(kind: str, a: dict[str, float], b: dict[str, float], within: float) -> tuple[bool, str] | None:
    if kind == "outperforms":
        return _outperforms(a, b)
    tasks = sorted((row for row in set(a) & set(b) if row.isdigit()), key=int)     # the other kinds judge tasks
    if not tasks:
        return None
    if kind == "more_passes":
        pa, pb = [t for t in tasks if a[t] >= PASS], [t for t in tasks if b[t] >= PASS]
        return len(pa) > len(pb), (f"{len(pa)} tasks pass ({' '.join(pa) or 'none'}) against {len(pb)} "
                                    f"({' '.join(pb) or 'none'})")
    ma, mb = statistics.mean(a[t] for t in tasks), statistics.mean(b[t] for t in tasks)
    if kind == "higher_mean":
        return ma > mb, f"mean {ma:.1f} against {mb:.1f} over {len(tasks)} tasks"
    if kind == "similar_mean":
        return abs(ma - mb) <= within, f"mean {ma:.1f} against {mb:.1f} (|difference| {abs(ma - mb):.1f}, bound {within:g})"
    if kind == "samples_help":
        hard = [t for t in tasks if b[t] < PASS]
        if not hard:
            return None
        gains = [a[t] - b[t] for t in hard]
        better = [t for t in hard if a[t] > b[t]]
        return statistics.mean(gains) > 0, (f"on the {len(hard)} tasks below {PASS:g}% with one sample, ten samples "
                                            f"gain {statistics.mean(gains):+.1f} points on average and are higher on "
                                            f"{len(better)} ({' '.join(better) or 'none'})")
    if kind == "tracks":
        gaps = {t: abs(a[t] - b[t]) for t in tasks}
        mean_gap = statistics.mean(gaps.values())
        widest = sorted(tasks, key=lambda t: (-gaps[t], int(t)))[:3]
        return mean_gap <= within, (f"mean |difference| {mean_gap:.1f} over {len(tasks)} tasks (bound {within:g}), "
                                    "widest on " + ", ".join(f"task {t} ({a[t]:.0f} against {b[t]:.0f})"
                                                             for t in widest))
    raise ValueError(f"unknown claim kind {kind!r} (known: {', '.join(KINDS)})")


def claim_lines(claims: list[dict], source: str, table: str, ours: dict, printed: dict) -> list[str]:
    """One line per claim and side. `ours`/`printed`: {(table, task, column): accuracy} over this table and
    every table its claims name."""
    out = []
    for c in claims:
        a, b = split_ref(c["a"], table), split_ref(c["b"], table)
        verdicts = []
        for label, grid in ((OURS, ours), (PAPERS, printed)):
            judged = _judge(c["kind"], _column(grid, a), _column(grid, b), c.get("within", 1.0))
            if judged is not None:
                holds, detail = judged
                verdicts.append(f"in {label} it {'holds' if holds else 'does not hold'}: {detail}")
        names = " against ".join(f"{col} (Table {t})" if t != table else col for t, col in (a, b))
        out.append(f"Claim ({c['text']}; {names}): " + ("; ".join(verdicts) or "no cells to judge yet") + ".")
    return out
