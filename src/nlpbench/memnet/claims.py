"""The thesis's headline claims for the bAbI tables of ch. 6, checked in words and numbers.

A claim is declared under a table (`claims:` in params.yaml) as a kind and two columns, `a` and `b`; a column is
"<column>" of this table or "<table>:<column>" of another table of the same source (whose runs the table then
reads too). Each claim is judged twice, on our cells and on the printed ones, so a reader sees whether the thesis's
own numbers say what its text says and whether ours do:

  more_passes   a passes the 95% threshold on more tasks than b
  higher_mean   a's mean accuracy over the tasks is above b's
  similar_mean  the means of a and b differ by at most `within` points
  samples_help  on the tasks where b (one sample) is below 95%, a (ten samples) is higher on average
"""

from __future__ import annotations

import statistics

from nlpbench import paper

PASS = 95.0
KINDS = ("more_passes", "higher_mean", "similar_mean", "samples_help")
OURS, PAPERS = "our numbers", "the thesis's numbers"


def split_ref(ref: str, table: str) -> tuple[str, str]:
    """"<table>:<column>" or "<column>" (of `table`) -> (table, column)."""
    other, sep, column = ref.partition(":")
    return (other, column) if sep else (table, ref)


def referenced_tables(decl: dict, table: str) -> list[str]:
    """The other tables a declaration's claims read."""
    return sorted({t for c in decl.get("claims") or [] for t, _ in (split_ref(c["a"], table), split_ref(c["b"], table))
                   if t != table})


def paper_grid(source: str, table: str) -> dict[tuple[str, str], float]:
    out = {}
    for r in paper.reference_cells(source, table):
        value = paper.parse_paper(r["paper"])
        if value is not None:
            out[(r["row"], r["column"])] = value
    return out


def _column(grid: dict, table_column: tuple[str, str]) -> dict[str, float]:
    """task -> accuracy of one column (task rows only: the derived mean/passes rows are not in a grid)."""
    table, column = table_column
    return {row: v for (t, row, col), v in grid.items() if t == table and col == column and row.isdigit()}


def _judge(kind: str, a: dict[str, float], b: dict[str, float], within: float) -> tuple[bool, str] | None:
    tasks = sorted(set(a) & set(b), key=int)
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
