"""The documents' claims about a table, judged from its cells: one schema and one verdict line for every family.

A claim is declared under a table (`claims:`) as a mapping:

    kind:        what is compared (below)
    a, b:        the columns compared: "<column>" of this table or "<table>:<column>" of another table of the same
                 source (whose runs the table then reads too); the spread kinds take a list of columns
    rows:        the rows judged (default: every bAbI task row of the tables read)
    columns:     for the kinds judged column by column: one verdict line per column
    within:      the tolerance, in points, of the kinds that have one
    printed_as:  {our column: the printed column} where the document prints a counterpart under another name
                 (our own DMN+ run against the DMN+ paper's numbers the thesis copied)
    text:        the document's sentence, with its section ("§6.4.2: ...")

Kinds judged on our cells and on the printed ones alike (does the document's own table say what its text says,
and does ours?):

  more_passes         a passes the table's threshold (bAbI: 95%) on more tasks than b
  higher_mean         a's mean over the tasks is above b's
  similar_mean        the means of a and b differ by at most `within` points
  samples_help        on the tasks where b (one sample) is below the threshold, a (ten samples) is higher on average
  tracks              a stays within `within` points of b per task on average (mean |a - b|): a consistency check
  outperforms         a beats b in every "<scenario> / <metric>" row: higher Accuracy and Success, fewer Rounds
  first_beats_second  a is higher than b on more tasks than it is lower, and has the higher mean
  ensemble_passes_all a passes the threshold on every task and has a higher mean than b
  own_pattern_best    each column of `a` ("<name> / <pattern>") scores best on the row of its own pattern
  augmented_evens     the spread (max - min over the rows) of column a is below the mean spread of the columns b
                      by more than `within` points (default 5)
  smaller_spread_than the mean spread of the columns a is below that of the columns b by more than `within` (5)

Kinds judged on our per-seed values (the printed tables have one number a cell), column by column, each saying
whether a difference is larger than the spread over seeds. "Reported" is the cell the table shows: the seed the
family's protocol reports (the best of seeds where the document reports a best of N, the seed chosen by validation
where it reports one run), never a choice made here on the test numbers:

  above          rows[0] is above each later row (reported cells)
  order          the rows are in ascending order (reported cells)
  best           the best row (reported cells) is the document's best
  columns_above  column a is above column b on at least the rows where the document has it above
  above_spread   rows[0]'s seed mean is above rows[1]'s by more than the larger seed SD (reversed below minus it)
  close          each later row is within `within` (in the column's unit) of rows[0] (reported cells): "similar"
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable

from nlpbench import config
from nlpbench.results import judging, tables
from nlpbench.results.cells import CellRefError, TableCells, split_ref
from nlpbench.results.notes import fill, quotes, referenced_tables

LOWER_IS_BETTER = ("Rounds",)      # metrics of the game tables where fewer is better (guesses to win)
SPREAD_MARGIN = 5.0                # points: a spread counts as reduced only when it is this much smaller

BOTH_SIDES = ("more_passes", "higher_mean", "similar_mean", "samples_help", "tracks", "outperforms",
              "first_beats_second", "ensemble_passes_all", "own_pattern_best", "augmented_evens",
              "smaller_spread_than")
PER_COLUMN = ("above", "order", "best", "above_spread", "close")
KINDS = BOTH_SIDES + PER_COLUMN + ("columns_above",)
LIST_SIDES = ("own_pattern_best", "augmented_evens", "smaller_spread_than")   # a or b may be a list of columns
NEEDS = {k: ("a", "b") for k in BOTH_SIDES}
NEEDS.update({"own_pattern_best": ("a",), "above": ("rows", "columns"), "order": ("rows", "columns"),
              "best": ("rows", "columns"), "above_spread": ("rows", "columns"), "columns_above": ("a", "b", "rows"),
              "close": ("rows", "columns", "within")})
KEYS = ("kind", "a", "b", "rows", "columns", "within", "printed_as", "text", "untestable", "unresolved", "proxy_for")


def _refs(value, table: str) -> list[tuple[str, str]]:
    return [split_ref(v, table) for v in ([] if value is None else [value] if isinstance(value, str) else value)]


def check(claims: list[dict], table: str, cells: TableCells, where: str) -> None:
    """Raise CellRefError for an unknown kind or key, a missing key, or a column or row that does not exist; `where`
    names the claims list (its file and key: config.Declared.at("claims"))."""
    for i, c in enumerate(claims):
        at = f"{where}.{i}"
        if c.get("kind") not in KINDS:
            raise CellRefError(f"{at}.kind: {c.get('kind')!r} is not a claim kind ({', '.join(KINDS)})")
        unknown = sorted(set(c) - set(KEYS))
        missing = [k for k in NEEDS[c["kind"]] + ("text",) if not c.get(k)]
        if unknown or missing:
            raise CellRefError(f"{at}: " + (f"unknown key(s) {', '.join(unknown)}" if unknown else
                                        f"kind {c['kind']} needs {', '.join(missing)}") + f" (keys: {', '.join(KEYS)})")
        if c.get("untestable") and c.get("unresolved"):
            raise CellRefError(f"{at}: a claim is untestable (no data of ours can test it) or unresolved in the document "
                            "(the document's own numbers cannot decide it), not both")
        for key in ("a", "b", "columns"):
            if not isinstance(c.get(key, ""), str) and key != "columns" and c["kind"] not in LIST_SIDES:
                raise CellRefError(f"{at}.{key}: one column for kind {c['kind']}")
            for t, column in _refs(c.get(key), table):
                cells.check_column(t, column, f"{at}.{key}")
        for ours, printed in (c.get("printed_as") or {}).items():
            cells.check_column(table, ours, f"{at}.printed_as")
            if not any(k[0] == table and k[2] == printed for k in cells.printed):
                raise CellRefError(f"{at}.printed_as: Table {table} prints no column {printed!r}")
        for r in c.get("rows") or []:
            cells.check_row(table, r, f"{at}.rows")
        if c["kind"] in PER_COLUMN and any(t != table for t, _ in _refs(c["columns"], table)):
            raise CellRefError(f"{at}.columns: kind {c['kind']} reads this table's columns only (a column whose name "
                            f"holds a colon is named \"{table}:<column>\")")


def compared_cells(c: dict, table: str) -> tuple:
    """(rows, columns) of this table that a claim compares (judging.Rules.claim_cells): its `rows`, or by default
    every task row (every row for the kinds that read all rows), and the columns it names that are this table's."""
    if c["kind"] in PER_COLUMN:
        columns = _own_columns(c, table)
    else:
        columns = [column for key in ("a", "b") for t, column in _refs(c.get(key), table) if t == table]
    if c.get("rows"):
        rows = tuple(str(r) for r in c["rows"])
    else:
        rows = judging.ANY_ROW if c["kind"] in ("outperforms",) + LIST_SIDES else judging.TASK_ROWS
    return rows, tuple(columns)


def _own_columns(c: dict, table: str) -> list[str]:
    """The columns of a kind judged column by column, "<table>:" removed (a name holding a colon needs it)."""
    return [column for _, column in _refs(c["columns"], table)]


# -- kinds judged on both sides ---------------------------------------------------------------------------------

def _column(grid: dict, ref: tuple[str, str]) -> dict[str, float]:
    table, column = ref
    return {row: v for (t, row, col), v in grid.items() if t == table and col == column}


def _tasks(a: dict, b: dict, rows: list[str] | None) -> list[str]:
    keep = set(rows) if rows else None
    return sorted((r for r in set(a) & set(b) if r.isdigit() and (keep is None or r in keep)), key=int)


def _outperforms(a: dict[str, float], b: dict[str, float]) -> tuple[str, str] | None:
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
    return _holds(not tied and not worse), detail


def _holds(ok: bool) -> str:
    return "holds" if ok else "does not hold"


def _spread(col: dict[str, float], rows: list[str]) -> float | None:
    """max - min of a column over the rows (None unless every row has a value)."""
    if not rows or any(r not in col for r in rows):
        return None
    return max(col[r] for r in rows) - min(col[r] for r in rows)


def _spread_verdict(smaller: float, larger: float, margin: float) -> str:
    if larger - smaller > margin:
        return "holds"
    if abs(larger - smaller) <= margin:
        return f"does not hold (the two are within {margin:g} points)"
    return "does not hold"


def _own_pattern(grid: dict, table: str, columns: list[str], rows: list[str]) -> tuple[int, int, list[str]]:
    """Networks ("<name> / <pattern>") whose own pattern is their best row (ties count as best)."""
    hits, n, misses = 0, 0, []
    for column in columns:
        col = _column(grid, (table, column))
        own = column.rsplit("/", 1)[-1].strip()
        if own not in rows or any(r not in col for r in rows):
            continue
        n += 1
        best = max(col[r] for r in rows)
        if col[own] >= best:
            hits += 1
        else:
            top = max(rows, key=lambda r: col[r])
            misses.append(f"network {own}: {col[own]:.1f} on its own pattern, {best:.1f} on pattern {top}")
    return hits, n, misses


def _judge(c: dict, table: str, cells: TableCells, printed: bool) -> tuple[str, str] | None:
    """(verdict, detail) of a both-sides kind on our cells or the printed ones; None when nothing can be judged."""
    kind, grid, within = c["kind"], cells.side(printed), c.get("within")
    if kind in ("own_pattern_best", "augmented_evens", "smaller_spread_than"):
        return _judge_spread(c, table, cells, grid, printed)
    a_ref, b_ref = split_ref(c["a"], table), split_ref(c["b"], table)
    if printed:
        alias = c.get("printed_as") or {}
        a_ref = (a_ref[0], alias.get(a_ref[1], a_ref[1])) if a_ref[0] == table else a_ref
        b_ref = (b_ref[0], alias.get(b_ref[1], b_ref[1])) if b_ref[0] == table else b_ref
    a, b = _column(grid, a_ref), _column(grid, b_ref)
    if kind == "outperforms":
        return _outperforms(a, b)
    tasks = _tasks(a, b, c.get("rows"))
    if not tasks:
        return None
    ma, mb = statistics.mean(a[t] for t in tasks), statistics.mean(b[t] for t in tasks)
    if kind == "more_passes":
        threshold = cells.pass_threshold(table)
        pa, pb = [t for t in tasks if a[t] >= threshold], [t for t in tasks if b[t] >= threshold]
        return _holds(len(pa) > len(pb)), (f"{len(pa)} tasks pass ({' '.join(pa) or 'none'}) against {len(pb)} "
                                          f"({' '.join(pb) or 'none'})")
    if kind == "higher_mean":
        return _holds(ma > mb), f"mean {ma:.1f} against {mb:.1f} over {len(tasks)} tasks"
    if kind == "similar_mean":
        within = 1.0 if within is None else within
        return _holds(abs(ma - mb) <= within), (f"mean {ma:.1f} against {mb:.1f} (|difference| {abs(ma - mb):.1f}, "
                                                f"bound {within:g})")
    if kind == "samples_help":
        threshold = cells.pass_threshold(table)
        hard = [t for t in tasks if b[t] < threshold]
        if not hard:
            return None
        gains = [a[t] - b[t] for t in hard]
        better = [t for t in hard if a[t] > b[t]]
        return _holds(statistics.mean(gains) > 0), (
            f"on the {len(hard)} tasks below {threshold:g}% with one sample, ten samples gain {statistics.mean(gains):+.1f} "
            f"points on average and are higher on {len(better)} ({' '.join(better) or 'none'})")
    if kind == "tracks":
        within = 1.0 if within is None else within
        gaps = {t: abs(a[t] - b[t]) for t in tasks}
        mean_gap = statistics.mean(gaps.values())
        widest = sorted(tasks, key=lambda t: (-gaps[t], int(t)))[:3]
        return _holds(mean_gap <= within), (
            f"mean |difference| {mean_gap:.1f} over {len(tasks)} tasks (bound {within:g}), widest on "
            + ", ".join(f"task {t} ({a[t]:.0f} against {b[t]:.0f})" for t in widest))
    # first_beats_second, ensemble_passes_all
    wins = [t for t in tasks if a[t] > b[t]]
    ties = [t for t in tasks if a[t] == b[t]]
    losses = len(tasks) - len(wins) - len(ties)
    detail = (f"over tasks {' '.join(tasks)}, {a_ref[1]} is higher on {len(wins)} ({' '.join(wins) or 'none'}), "
              f"equal on {len(ties)}, mean {ma:.1f} against {mb:.1f} for {b_ref[1]}")
    if kind == "ensemble_passes_all":
        threshold = cells.pass_threshold(table)
        passed = [t for t in tasks if a[t] >= threshold]
        return (_holds(len(passed) == len(tasks) and ma > mb),
                detail + f"; {a_ref[1]} passes (>= {threshold:g}%) {len(passed)} of {len(tasks)} tasks")
    return _holds(ma > mb and len(wins) > losses), detail


def _judge_spread(c: dict, table: str, cells: TableCells, grid: dict, printed: bool) -> tuple[str, str] | None:
    rows = c.get("rows") or cells.rows.get(table, [])
    a = _refs(c["a"], table)
    margin = SPREAD_MARGIN if c.get("within") is None else c["within"]
    if c["kind"] == "own_pattern_best":
        hits, n, misses = _own_pattern(grid, table, [col for _, col in a], rows)
        if not n:
            return None
        return _holds(hits == n), (f"{hits} of {n} networks score best on their own pattern"
                                   + (f" (not {'; '.join(misses)})" if misses else ""))
    b = _refs(c["b"], table)
    if c["kind"] == "augmented_evens":
        aug = _column(grid, a[0])
        s_aug = _spread(aug, rows)
        spreads = [s for s in (_spread(_column(grid, ref), rows) for ref in b) if s is not None]
        if s_aug is None or not spreads:
            return None
        own = [_column(grid, ref).get(ref[1].rsplit("/", 1)[-1].strip()) for ref in b]
        own = [v for v in own if v is not None]
        mean_spread = statistics.mean(spreads)
        return _spread_verdict(s_aug, mean_spread, margin), (
            f"spread (max - min over the {len(rows)} rows) {s_aug:.1f} points for {a[0][1]} against "
            f"{mean_spread:.1f} on average for the single-pattern networks; its mean "
            f"{statistics.mean(aug[r] for r in rows):.1f} against {statistics.mean(own):.1f} for the pattern networks "
            "on their own patterns")
    # smaller_spread_than: the rows are this table's, for both lists
    mine = [s for s in (_spread(_column(grid, ref), rows) for ref in a) if s is not None]
    theirs = [s for s in (_spread(_column(grid, ref), rows) for ref in b) if s is not None]
    if not mine or not theirs:
        return None
    hits, n, _ = _own_pattern(grid, table, [col for t, col in a if t == table], rows)
    others = sorted({t for t, _ in b} - {table})
    return _spread_verdict(statistics.mean(mine), statistics.mean(theirs), margin), (
        f"mean spread (max - min over the rows) {statistics.mean(mine):.1f} points here against "
        f"{statistics.mean(theirs):.1f} in " + ", ".join(f"Table {t}" for t in others or [table])
        + f"; {hits} of {n} networks here still score best on their own pattern")


# -- kinds judged on our per-seed values ----------------------------------------------------------------------------

def _seeds(cells: TableCells, table: str, row: str, column: str) -> dict[int, float] | None:
    key = (table, row, column)
    if key in cells.seeds:
        return cells.seeds[key]
    return {0: cells.ours[key]} if key in cells.ours else None


def _reported(cells: TableCells, table: str, row: str, column: str, seeds: dict[int, float]) -> float:
    """The cell the table shows (its family's reported seed); the best of seeds where none is stored."""
    value = cells.ours.get((table, row, column))
    return max(seeds.values()) if value is None else value


def _compare(a: dict[int, float], b: dict[int, float], shown_a: float, shown_b: float) -> dict:
    """a against b: difference of the reported cells and of the seed means, the larger seed SD, paired wins."""
    paired = sorted(set(a) & set(b))
    cmp = tables.compare_seeds(list(a.values()), list(b.values()))
    return {"d_shown": shown_a - shown_b, "d_mean": cmp["diff"], "spread": cmp["spread"],
            "exceeds": cmp["exceeds"], "wins": sum(a[s] > b[s] for s in paired), "pairs": len(paired)}


def _pair_words(cmp: dict, a: str, b: str) -> str:
    seeds = "" if not cmp["pairs"] else f", {a} ahead in {cmp['wins']} of {cmp['pairs']} paired seeds"
    spread = ("larger than" if cmp["exceeds"] else "within") + f" the seed spread (SD {cmp['spread']:.2f})"
    return f"{a} − {b}: {cmp['d_shown']:+.2f} (reported cells), {cmp['d_mean']:+.2f} (seed means), {spread}{seeds}"


def _judge_column(c: dict, table: str, column: str, cells: TableCells) -> tuple[str, str] | None:
    rows = c["rows"]
    have = {r: s for r in rows if (s := _seeds(cells, table, r, column)) is not None}
    if len(have) < len(rows):
        return None
    shown = {r: _reported(cells, table, r, column, have[r]) for r in rows}
    kind = c["kind"]
    if kind == "above_spread":
        better, worse = rows[:2]
        if min(len(have[better]), len(have[worse])) < 2:
            return None
        cmp = tables.compare_seeds(list(have[better].values()), list(have[worse].values()))
        diff, spread = cmp["diff"], cmp["spread"]
        verdict = ("holds" if diff > spread else "is reversed" if diff < -spread else
                   "holds, but not beyond the seed spread" if diff > 0 else "does not hold (within the seed spread)")
        return verdict, (f"{better} {cmp['mean_a']:.2f} ± {cmp['sd_a']:.2f} against {worse} {cmp['mean_b']:.2f} ± "
                         f"{cmp['sd_b']:.2f} (mean ± sample SD over {len(have[better])} and {len(have[worse])} seeds; "
                         f"difference {diff:+.2f}; it holds when the difference exceeds the larger SD, is reversed "
                         "below minus it)")
    if kind == "above":
        parts, holds, strong = [], True, True
        for b in rows[1:]:
            cmp = _compare(have[rows[0]], have[b], shown[rows[0]], shown[b])
            holds &= cmp["d_shown"] > 0
            strong &= cmp["exceeds"] and cmp["d_mean"] > 0
            parts.append(_pair_words(cmp, rows[0], b))
        verdict = _holds(holds) + (", and the difference is larger than the seed spread" if holds and strong else
                                   ", but not beyond the seed spread" if holds else "")
        return verdict, "; ".join(parts)
    if kind == "close":
        gaps = {b: shown[b] - shown[rows[0]] for b in rows[1:]}
        widest = max(gaps, key=lambda b: abs(gaps[b]))
        return _holds(abs(gaps[widest]) <= c["within"]), (
            f"{rows[0]} {shown[rows[0]]:.2f} (reported cells) against "
            + ", ".join(f"{b} {shown[b]:.2f} ({gaps[b]:+.2f})" for b in rows[1:])
            + f"; largest |difference| {abs(gaps[widest]):.2f} (bound {c['within']:g})")
    if kind == "order":
        steps, holds, strong = [], True, True
        for lo, hi in zip(rows, rows[1:]):
            cmp = _compare(have[hi], have[lo], shown[hi], shown[lo])
            holds &= cmp["d_shown"] > 0
            strong &= cmp["exceeds"] and cmp["d_mean"] > 0
            steps.append(_pair_words(cmp, hi, lo))
        ours = sorted(rows, key=lambda r: shown[r])
        verdict = _holds(holds) + (", every step larger than the seed spread" if holds and strong else
                                   ", but not every step is beyond the seed spread" if holds else "")
        return verdict, f"our order, lowest first (reported cells): {' < '.join(ours)}; " + "; ".join(steps)
    # best
    ours = max(rows, key=lambda r: shown[r])
    tied = [r for r in rows if r != ours and shown[r] == shown[ours]]
    ours_mean = max(rows, key=lambda r: statistics.fmean(have[r].values()))
    paper_v = {r: cells.printed.get((table, r, column)) for r in rows}
    printed = [r for r in rows if paper_v[r] is not None]
    theirs = max(printed, key=lambda r: paper_v[r]) if printed else None
    others = [r for r in rows if r != ours]
    runner = max(others, key=lambda r: shown[r]) if others else None
    cmp = None if runner is None else _compare(have[ours], have[runner], shown[ours], shown[runner])
    verdict = _holds(ours == theirs)
    if ours == theirs and cmp is not None:
        verdict += (", and its lead is larger than the seed spread" if cmp["exceeds"] and cmp["d_mean"] > 0
                    else ", but its lead is not beyond the seed spread")
    if tied:
        verdict = f"is not decided (the reported cells tie {ours} with {', '.join(tied)})"
    detail = f"best here: {ours} (reported cells; by seed mean: {ours_mean}); the document's best: {theirs}"
    return verdict, detail + ("" if cmp is None else "; " + _pair_words(cmp, ours, runner))


def _columns_above(c: dict, table: str, cells: TableCells) -> tuple[str, str] | None:
    (ta, a), (tb, b) = split_ref(c["a"], table), split_ref(c["b"], table)
    pairs = {r: (_seeds(cells, ta, r, a), _seeds(cells, tb, r, b)) for r in c["rows"]}
    rows = [r for r, (x, y) in pairs.items() if x is not None and y is not None]
    if not rows:
        return None
    ahead, beyond, paper_ahead, parts = [], [], [], []
    for r in rows:
        cmp = _compare(*pairs[r], _reported(cells, ta, r, a, pairs[r][0]), _reported(cells, tb, r, b, pairs[r][1]))
        if cmp["d_shown"] > 0:
            ahead.append(r)
            if cmp["exceeds"] and cmp["d_mean"] > 0:
                beyond.append(r)
        pa, pb = cells.printed.get((ta, r, a)), cells.printed.get((tb, r, b))
        if pa is not None and pb is not None and pa > pb:
            paper_ahead.append(r)
        parts.append(f"{r} {cmp['d_shown']:+.1f}")
    verdict = _holds(len(ahead) >= len(paper_ahead) and set(paper_ahead) <= set(ahead))
    return verdict, (f"{a} above {b} (reported cells) for {len(ahead)} of {len(rows)} rows "
                     f"({', '.join(ahead) or 'none'}), beyond the seed spread for {len(beyond)} "
                     f"({', '.join(beyond) or 'none'}); the document: {len(paper_ahead)} of {len(rows)}; "
                     "differences: " + "; ".join(parts))


# -- the verdict lines --------------------------------------------------------------------------------------------

def printed_label(source: str) -> str:
    return "the paper's numbers" if source.endswith("-paper") else "the thesis's numbers"


def _name(ref: tuple[str, str], table: str) -> str:
    return f"{ref[1]} (Table {ref[0]})" if ref[0] != table else ref[1]


def lines(claims: list[dict], table: str, cells: TableCells) -> list[str]:
    """One line per claim (per column for the kinds judged column by column): the document's sentence, what is
    compared, and the verdict with its numbers, on our cells and, for the kinds that read them, the printed ones."""
    return [r["sentence"] for r in judged(claims, table, cells, "")]


# -- the register: one verdict per claim line, in the categories of a reproduction report --------------------

HOLDS, WITHIN_NOISE, NOT_HOLD, REVERSED = "holds", "holds within noise", "does not hold", "reversed"
UNRESOLVED = "unresolved in the document"
UNTESTABLE, NEEDS_DATA = "untestable at this scale", "needs data"
VERDICTS = (HOLDS, WITHIN_NOISE, NOT_HOLD, REVERSED, UNRESOLVED, UNTESTABLE, NEEDS_DATA)


def still_learning(selected_epoch: int, epochs_trained: int) -> bool:
    """A run stopped while it was still learning: validation chose an epoch among the last tenth of those it
    trained (the last one at least). Such a run has not converged, so an ordering of its cells may yet change."""
    return selected_epoch > epochs_trained - math.ceil(epochs_trained / 10)


def _learning_cells(c: dict, table: str, cells: TableCells, column: str | None,
                    rows_where: Callable[[str], bool] = lambda row: True) -> list[str]:
    """The cells a claim compares (only `column`'s, for a kind judged column by column; only the rows
    `rows_where` keeps) whose runs stopped while still learning, each as "ROW: COLUMN (seeds ...)"."""
    rows, columns = compared_cells(c, table)
    columns = (column,) if column else columns
    return [f"{row}: {col} (seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))})"
            for (t, row, col), seeds in sorted(cells.still_learning.items())
            if t == table and seeds and rows_where(row) and judging.compares(rows, columns, row, col)]


def _at_budget(c: dict, table: str, cells: TableCells, column: str | None, at_budget: dict[str, str]) -> str:
    """The words for the rows a claim compares that train for the document's own number of updates rather than
    until they converge (a home's `judged_at_budget`: row -> why): the learning check does not hold them back,
    and the sentence says so, with the seeds still learning there."""
    rows, columns = compared_cells(c, table)
    columns = (column,) if column else columns
    out = []
    for row, why in at_budget.items():
        if not any(judging.compares(rows, columns, row, col) for col in columns):
            continue
        learning = _learning_cells(c, table, cells, column, lambda r: r == row)
        out.append(f" {row} is compared at the document's budget, not at convergence: {why.rstrip('.')}"
                   + (f" (still learning there: {', '.join(learning)})." if learning else "."))
    return "".join(out)


def category(verdict: str | None, table_status: str, needs_data: bool = False, claims_testable: bool = False) -> str:
    """A judged verdict's category ("holds, but not beyond the seed spread" -> holds within noise; `judged` then
    weighs the selected cells and our seeds' own cells alike: `with_seeds`); a claim with nothing to judge needs data where the table lacks data (`needs_data`: some of its cells need a data set), and is
    untestable otherwise, as it is where the table's scale is not comparable with the document, unless the table
    declares its claims testable there (`claims_testable`: the level of its cells is not the document's, but the
    orderings its claims state are judged between our own cells)."""
    if table_status == judging.NOT_COMPARABLE and not claims_testable:
        return UNTESTABLE
    if verdict is None:
        return NEEDS_DATA if needs_data or table_status == judging.NEEDS_DATA else UNTESTABLE
    if verdict.startswith("holds, but") or verdict.startswith("is not decided"):
        return WITHIN_NOISE
    if verdict.startswith("holds"):
        return HOLDS
    if verdict.startswith("is reversed"):
        return REVERSED
    return NOT_HOLD


def over_seeds(c: dict, table: str, cells: TableCells) -> tuple[int, int] | None:
    """(k, n): the claim holds on the cells of k of our n seeds, each seed's cells judged alone (the columns it
    compares paired by seed); None unless every compared cell has the same two or more seeds."""
    columns = set(_refs(c.get("a"), table)) | set(_refs(c.get("b"), table))
    keys = [k for k in cells.ours if (k[0], k[2]) in columns]
    if not keys or any(k not in cells.seeds for k in keys):
        return None
    ids = set.intersection(*(set(cells.seeds[k]) for k in keys))
    if len(ids) < 2:
        return None
    held = 0
    for seed in sorted(ids):
        ours = dict(cells.ours)
        ours.update({k: cells.seeds[k][seed] for k in keys})
        one = _judge(c, table, dataclasses.replace(cells, ours=ours), False)
        held += one is not None and one[0].startswith("holds")
    return held, len(ids)


def with_seeds(verdict: str, held: int, n: int) -> tuple[str, str]:
    """A claim's category once its selected cells and each seed's own cells are both read, and the words that say
    how: the two readings weigh alike, so where they disagree, either way round, it holds within noise."""
    seeds = f"it holds on {held} of our {n} seeds, each judged on its own cells"
    if verdict == HOLDS and held <= n / 2:
        return WITHIN_NOISE, f"{seeds}: it rests on the selected cells alone"
    if verdict == NOT_HOLD and held > n / 2:
        return WITHIN_NOISE, f"{seeds}, though not on the selected cells"
    return verdict, seeds


def judged(claims: list[dict], table: str, cells: TableCells, table_status: str, needs_data: bool = False,
           not_comparable: str | None = None, claims_testable: bool = False,
           at_budget: dict[str, str] | None = None) -> list[dict]:
    """One record per claim line (per column for the kinds judged column by column): the document's sentence, what
    is compared, the verdict category on our numbers, and the generated sentence with the numbers. A claim that
    declares itself `untestable` (no data of ours can test it) or `unresolved` (the document's own numbers cannot
    decide it: a gap inside its own run-to-run spread or its best-of-N protocol) is not judged: its line gives the
    reason, an unresolved one with the document's numbers it compares. Where the claims are judged between our own
    cells (`claims_testable`), a claim whose runs had not converged is untestable, except in the rows `at_budget`
    names (row -> why), which train the document's own number of updates and are compared there."""
    at_budget = at_budget or {}
    out = []
    for c in claims:
        kind = c["kind"]
        if c.get("untestable"):
            out.append({"table": table, "claim": c["text"], "subject": "", "verdict": UNTESTABLE,
                        "sentence": f"{_head(c['text'])}: untestable, {c['untestable'].rstrip('.')}."})
            continue
        if c.get("unresolved"):
            out.append({"table": table, "claim": c["text"], "subject": "", "verdict": UNRESOLVED,
                        "sentence": f"{_head(c['text'])}: unresolved in the document: in "
                                    f"{printed_label(cells.source)}, {document_numbers(c, table, cells)}; "
                                    f"{c['unresolved'].rstrip('.')}."})
            continue
        if kind in PER_COLUMN:
            pairs = [(column, [("our numbers", _judge_column(c, table, column, cells))])
                     for column in _own_columns(c, table)]
        else:
            subject = ""
            if isinstance(c.get("a"), str) and isinstance(c.get("b"), str):
                subject = " against ".join(_name(split_ref(c[k], table), table) for k in ("a", "b"))
            sides = [("our numbers", _columns_above(c, table, cells) if kind == "columns_above" else
                      _judge(c, table, cells, False))]
            if kind != "columns_above":
                sides.append((printed_label(cells.source), _judge(c, table, cells, True)))
            pairs = [(subject, sides)]
        seeds = over_seeds(c, table, cells) if kind in BOTH_SIDES else None
        for subject, sides in pairs:
            ours = sides[0][1]
            verdict = category(ours[0] if ours else None, table_status, needs_data, claims_testable)
            if ours is not None and seeds is not None:
                verdict, words = with_seeds(verdict, *seeds)
                sides = [(sides[0][0], (ours[0], ours[1] + f" (the selected seeds); {words}"))] + sides[1:]
            sentence = _line(c["text"], subject, sides)
            printed = sides[1][1] if len(sides) > 1 else None
            if verdict == NOT_HOLD and printed is not None and not printed[0].startswith("holds"):
                sentence += (f" As in {printed_label(cells.source)}: the document's own table does not bear the "
                             "claim out either.")
            column = subject if kind in PER_COLUMN else None
            judged_here = claims_testable and verdict not in (UNTESTABLE, NEEDS_DATA)
            learning = (_learning_cells(c, table, cells, column, lambda row: row not in at_budget)
                        if judged_here else [])
            if judged_here and not learning:
                sentence += _at_budget(c, table, cells, column, at_budget)
            if learning:                    # judged between our own cells only where their runs converged
                verdict = UNTESTABLE
                sentence += (" Untestable at this scale: the runs had not converged (validation chose an epoch "
                             f"among the last tenth of those trained) in {', '.join(learning)}.")
            elif verdict == UNTESTABLE and not_comparable:
                sentence += f" Untestable at this scale: {not_comparable}."
            out.append({"table": table, "claim": c["text"], "subject": subject, "verdict": verdict,
                        "sentence": sentence, **({"proxy_for": c["proxy_for"]} if c.get("proxy_for") else {})})
    return out


def document_numbers(c: dict, table: str, cells: TableCells) -> str:
    """The printed numbers a claim compares, with the gaps between them, in the table's decimals: what an
    unresolved claim's sentence quotes ("EM: SAN 63.5 < DCN 64.3 < BiDAF 65.6, steps +0.8 and +1.3")."""
    d = cells.decimals.get(table, 1)

    def value(row: str, column: str) -> float | None:
        return cells.printed.get((table, row, column))

    def num(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.{d}f}"

    def gap(v: float) -> str:
        return f"{v:+.{d}f}"

    parts = []
    if c["kind"] == "columns_above":
        (_, a), (_, b) = split_ref(c["a"], table), split_ref(c["b"], table)
        pairs = [(r, value(r, a), value(r, b)) for r in c["rows"]]
        return f"{a} against {b}: " + ", ".join(
            f"{r} {num(x)} against {num(y)}" + (f" ({gap(x - y)})" if x is not None and y is not None else "")
            for r, x, y in pairs)
    if c["kind"] not in PER_COLUMN:
        printed = _judge(c, table, cells, True)
        return printed[1] if printed else "nothing printed to compare"
    for column in _own_columns(c, table):
        rows = [(r, value(r, column)) for r in c["rows"]]
        have = [(r, v) for r, v in rows if v is not None]
        if c["kind"] == "order":           # each step's sign as printed: "<", or "=" and ">" where it fails
            steps = [gap(hi - lo) for (_, lo), (_, hi) in zip(have, have[1:])]
            chain = f"{rows[0][0]} {num(rows[0][1])}"
            for (_, lo), (r, hi) in zip(rows, rows[1:]):
                sign = "<" if lo is None or hi is None or round(hi - lo, d) > 0 else \
                    "=" if round(hi - lo, d) == 0 else ">"
                chain += f" {sign} {r} {num(hi)}"
            parts.append(f"{column}: {chain}"
                         + (f", steps {', '.join(steps[:-1]) + ' and ' if len(steps) > 1 else ''}{steps[-1]}"
                            if steps else ""))
        elif c["kind"] == "best" and len(have) > 1:
            ranked = sorted(have, key=lambda rv: -rv[1])
            (top, vt), (runner, vr) = ranked[0], ranked[1]
            parts.append(f"{column}: best {top} {num(vt)}, next {runner} {num(vr)} (lead {gap(vt - vr)})")
        elif c["kind"] in ("above", "above_spread", "close") and rows[0][1] is not None:
            (first, v0), rest = rows[0], rows[1:]
            parts.append(f"{column}: {first} {num(v0)} against " + ", ".join(
                f"{r} {num(v)}" + (f" ({gap(v0 - v)})" if v is not None else "") for r, v in rest))
        else:
            parts.append(f"{column}: " + ", ".join(f"{r} {num(v)}" for r, v in rows))
    return "; ".join(parts)


def _line(text: str, subject: str, sides: list[tuple[str, tuple[str, str] | None]]) -> str:
    verdicts = [f"in {label} it {judged[0]}: {judged[1]}" for label, judged in sides if judged is not None]
    return f"{_head(text, subject)}: " + ("; ".join(verdicts) or "no cells to judge yet") + "."


def _head(text: str, subject: str = "") -> str:
    """How a claim's sentence opens: the document's words, and what is compared where a claim names it."""
    return f"Claim ({text}; {subject})" if subject else f"Claim ({text})"


def sentence_body(record: dict) -> str:
    """A claim record's sentence without its opening (the claim's own words, which may hold '): ' themselves):
    what the register prints beside the claim."""
    for head in (_head(record["claim"], record.get("subject") or ""), _head(record["claim"])):
        if record["sentence"].startswith(head + ": "):
            return record["sentence"][len(head) + 2:]
    return record["sentence"]


# -- checks at load -----------------------------------------------------------------------------------------------

def _declared_rows(decl: dict) -> list[str]:
    rows = decl.get("rows")
    if rows == "patterns":
        return [str(p) for p in range(1, 7)]
    return [str(r) for r in rows] if isinstance(rows, (list, dict)) else []


def declared_cells(params: dict, source: str, tables_read: list[str]) -> TableCells:
    """The rows and columns of each table as declared (no cells): enough to check names before anything runs."""
    cells = TableCells(source)
    for t in tables_read:
        decl = config.declaration(params, "tables", source, t).decl
        columns = list(decl.get("columns") or []) + list(decl.get("cited") or [])
        if not columns:            # a table whose columns its family sets (the game tables): the printed ones
            columns = list(dict.fromkeys(k[2] for k in TableCells(source).with_printed(t)))
        cells.add(t, _declared_rows(decl), columns, [])
    return cells


def check_declared(params: dict, family: str) -> None:
    """Every note placeholder and every claim of a family's tables names a table, row and column that exist and a
    known kind (a family's check calls it, so that a typo stops the load, not the table's build)."""
    for d in config.declared(params, "tables", family):
        for i, note in enumerate(d.decl.get("notes") or []):
            try:
                quotes(note)
            except CellRefError as e:
                raise CellRefError(f"{d.at(f'notes.{i}')}: {e}") from None
        cells = declared_cells(params, d.source, [d.name] + referenced_tables(d.decl, d.name))
        for i, note in enumerate(d.decl.get("notes") or []):
            fill(note, d.name, cells, d.at(f"notes.{i}"))
        check(d.decl.get("claims") or [], d.name, cells, d.at("claims"))
        unknown = sorted(set(d.decl.get("judged_at_budget") or {}) - set(cells.rows[d.name]))
        if unknown:
            raise config.ConfigError(f"{d.at('judged_at_budget')}: {unknown[0]!r} is no row of the table "
                                     f"(rows: {', '.join(cells.rows[d.name])})")


# -- claims on a measured output (a benchmark's ratios, the fitted dofs): read from its CSV ----------------------

MEASURED_KINDS = ("at_most", "at_least", "share_at_least")
MEASURED_KEYS = ("kind", "where", "column", "bound", "text", "studies_apart")


def _studies_apart(rows: list[dict], studies: dict[str, list[str]], column: str) -> str:
    """The words on the rows of the studies' own groups, each study with its share and its misses."""
    by_study: dict[str, list[dict]] = {}
    for r in rows:
        for study in studies.get(r.get("group"), []):
            by_study.setdefault(study, []).append(r)
    parts = []
    for study, mine in by_study.items():
        misses = [r for r in mine if r[column] != "True"]
        where = sorted({r["task"] for r in misses if r.get("task")}, key=lambda t: (len(t), t))
        parts.append(f"{study}: {len(mine) - len(misses)} of {len(mine)} within"
                     + (f", {len(misses)} outside it on task{'s' if len(where) > 1 else ''} {', '.join(where)}"
                        if misses and where else ""))
    return f"; apart, the studies' own runs (not the document's experiments): {'; '.join(parts)}" if parts else ""


def judge_measured(declared: list[dict], name: str, csv_text: str, where: str,
                   studies_only: dict[str, list[str]] | None = None) -> list[dict]:
    """One register record per claim an output's home declares, judged on the output's CSV:

      at_most / at_least  the `column` of the one row matching `where` ({CSV column: value}) is at most / at least
                          `bound` (a benchmark's ratio: "no loss of efficiency" as t-MEM-NN / MemN2N <= 1.1)
      share_at_least      the share of the rows whose `column` reads True is at least `bound` (the fitted dofs);
                          with `studies_apart`, over the rows whose `group` the documents' tables read, the rows of
                          `studies_only` groups (group id -> the studies that read it) counted apart and named
    """
    import csv as _csv
    import io as _io
    rows = list(_csv.DictReader(_io.StringIO(csv_text)))
    out = []
    for i, c in enumerate(declared):
        at = f"{where}.{i}"
        if c.get("kind") not in MEASURED_KINDS:
            raise CellRefError(f"{at}.kind: {c.get('kind')!r} is not a measured claim kind ({', '.join(MEASURED_KINDS)})")
        if rows and c["column"] not in rows[0]:
            raise CellRefError(f"{at}.column: the output has no column {c['column']!r} ({', '.join(rows[0])})")
        if c["kind"] == "share_at_least":
            studies = (studies_only or {}) if c.get("studies_apart") else {}
            if studies and rows and "group" not in rows[0]:
                raise CellRefError(f"{at}.studies_apart: the output has no column 'group' to tell the studies' runs")
            judged_rows = [r for r in rows if r.get("group") not in studies]
            hits = [r for r in judged_rows if r[c["column"]] == "True"]
            if not judged_rows:
                verdict, numbers = NEEDS_DATA, "no rows measured"
            else:
                share = len(hits) / len(judged_rows)
                verdict = _holds(share >= c["bound"])
                scope = " runs of the documents' tables" if studies else ""
                numbers = (f"in our numbers it {verdict}: {len(hits)} of {len(judged_rows)}{scope} "
                           f"({100 * share:.1f} %) (bound {100 * c['bound']:g} %)")
                numbers += _studies_apart(rows, studies, c["column"])
        else:
            match = [r for r in rows if all(r.get(k) == v for k, v in (c.get("where") or {}).items())]
            if len(match) > 1:
                raise CellRefError(f"{at}.where: {len(match)} rows match; name one")
            if not match:
                verdict, numbers = NEEDS_DATA, "not measured"
            else:
                r = match[0]
                value = float(r[c["column"]])
                ok = value <= c["bound"] if c["kind"] == "at_most" else value >= c["bound"]
                verdict = _holds(ok)
                printed = f"; the document's: {r['paper']}" if r.get("paper") else ""
                unit = f" {r['unit']}" if r.get("unit") else ""
                numbers = (f"in our numbers it {verdict}: {' / '.join(str(v) for v in (c.get('where') or {}).values())}"
                           f" {value:.4g}{unit} ({'at most' if c['kind'] == 'at_most' else 'at least'} "
                           f"{c['bound']:g}){printed}")
        out.append({"table": name, "claim": c["text"], "subject": "", "verdict": verdict,
                    "sentence": f"{_head(c['text'])}: {numbers}."})
    return out
