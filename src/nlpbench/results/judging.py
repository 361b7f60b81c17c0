"""Is a reproduced cell the paper's number up to our own noise, and is a table reproduced? One rule for every table.

A cell is **within noise** when

    |Δ| <= ε                                     (one seed: this alone)
    or the printed value lies inside the range of our seeds, widened by the paper's rounding

where Δ = reproduced − paper in the cell's own unit and ε is the unit's tolerance for one number (below). Twice the
SD over our seeds does not count on its own: one failed seed inflates an SD until it covers numbers none of our runs
came near, while the range admits only a number between two of our runs (docs/tables.md). A table is

* **reproduced** when at least 90 % of its computed cells (a value beside a printed number) are within noise, for
  every unit it holds the mean |Δ| over those cells is within that unit's table tolerance, and every claim cell (a
  cell one of the table's declared claims compares) is within noise;
* **reproduced (k of n cells)** when that holds over the k computed cells and the others need data or were not run
  at this scale;
* **reproduced except claim cells (...)** (after "(k of n cells)" where that applies) when the share and the means
  hold but a claim cell is outside noise; the status names those cells;
* **metric check** when every computed cell re-scores released outputs (a published system's outputs, or lead-3,
  scored by our metric code: a row or column declared ``released:``) and the share and the means hold: it checks
  our metric code, it reproduces no training;
* **differs** when it does not;
* **not comparable at this scale** when the table's declaration says that this scale changes the data or the model
  size by design (the numbers and the claims' verdicts are still shown);
* **needs data** when no cell has a value and some need a data set that is not here;
* **not yet implemented** when no cell has a value at all;
* **addition (no paper numbers)** for a table the documents argue for but never ran.

How ε was chosen, per unit (fixed before looking at which tables it passes; a table may not tune it to pass):

* ``points`` (accuracy, EM, F1, BLEU, ROUGE as percentages): 3 points. The binomial standard error of an accuracy
  near 50 % on 1,000 test questions (a bAbI task's test set) is 1.6 points; two of them round to 3. The table
  tolerance of the mean |Δ| stays the 5 points the tables have always used.
* ``fraction`` (the same scores printed in 0-1: ROUGE, METEOR, CIDEr, Distinct-n): 0.03 and 0.05, the same bounds.
* ``nats`` (entropy of the generated words): 0.1 nat, about 3 % of the entropies printed (2-6 nats), the share
  3 points are of an accuracy near its middle; tolerance 0.2.
* ``count`` (the average number of rounds of a guess-the-number game): half a round, tolerance one round.

A declaration names the unit of its cells with ``unit:`` (default points) and, where it mixes units, ``units:``:
a mapping from a row label, a column label, or the last " / " part of either (``Rounds``, ``Entropy``) to a unit.
``epsilon:`` may override a unit's ε for one table where the unit's default is meaningless for its values (rates of
about 1 % printed in percent), with a comment saying why.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

WITHIN, OUTSIDE = "within noise", "outside noise"
SHARE_WITHIN = 0.9           # of the computed cells, for a table to count as reproduced


@dataclass(frozen=True)
class Unit:
    name: str
    epsilon: float           # one cell: |Δ| up to this is noise
    tolerance: float         # a table: the mean |Δ| of its cells in this unit up to this
    label: str               # how a figure in this unit is written ("points", "nats", ...)


UNITS = {u.name: u for u in (
    Unit("points", 3.0, 5.0, "points"),
    Unit("fraction", 0.03, 0.05, ""),
    Unit("nats", 0.1, 0.2, "nats"),
    Unit("count", 0.5, 1.0, "rounds"),
)}


def in_unit(value: float, unit: str) -> str:
    """A figure in its unit, two decimals: "2.55 points", "0.31 nats", "0.04" (a fraction carries no label)."""
    label = UNITS[unit].label
    return f"{value:.2f} {label}" if label else f"{value:.2f}"


def points_alone(units: list[str]) -> bool:
    """A table judged in points alone writes its figures bare ("mean |Δ| 2.55"); mixed units name each one."""
    return list(units) == ["points"]


REPRODUCED = "reproduced"
PARTLY = "reproduced ({k} of {n} cells)"
EXCEPT_CLAIM_CELLS = " except claim cells ({cells})"    # appended to either of the two above
CLAIM_CELLS_MISS = "reproduced except claim cells"
METRIC_CHECK = "metric check"
DIFFERS = "differs"
NOT_COMPARABLE = "not comparable at this scale"
NEEDS_DATA = "needs data"
NOT_IMPLEMENTED = "not yet implemented"
ADDITION = "addition (no paper numbers)"
STATUSES = (REPRODUCED, "reproduced (k of n cells)", CLAIM_CELLS_MISS, METRIC_CHECK, DIFFERS, NOT_COMPARABLE,
            NEEDS_DATA, NOT_IMPLEMENTED, ADDITION)


class JudgingError(ValueError):
    """A declaration's unit, units or epsilon is not well formed."""


@dataclass(frozen=True)
class Rules:
    """How one table at one scale is judged (from its declaration: `unit`, `units`, `epsilon`, `comparable`)."""

    unit: str = "points"
    units: dict = field(default_factory=dict)          # label -> unit
    epsilon: dict = field(default_factory=dict)        # unit -> ε override
    comparable: str | None = None                      # None: comparable; else why this scale is not
    rescored: frozenset = frozenset()                  # row or column labels whose cells re-score released outputs
    claim_cells: tuple = ()                            # ((rows, columns), ...) the table's claims compare (below)

    @classmethod
    def from_declaration(cls, decl: dict, where: str = "") -> "Rules":
        at = f"{where}: " if where else ""
        unit = decl.get("unit", "points")
        units = dict(decl.get("units") or {})
        epsilon = decl.get("epsilon") or {}
        if not isinstance(epsilon, dict):
            epsilon = {unit: epsilon}
        for key, u in [("unit", unit)] + [(f"units.{k}", v) for k, v in units.items()] + \
                [(f"epsilon.{k}", k) for k in epsilon]:
            if u not in UNITS:
                raise JudgingError(f"{at}{key}: {u!r} is not a unit ({', '.join(UNITS)})")
        for k, v in epsilon.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise JudgingError(f"{at}epsilon.{k}: {v!r} must be a number of 0 or more")
        comparable = decl.get("not_comparable")
        if comparable is not None and not (isinstance(comparable, str) and comparable.strip()):
            raise JudgingError(f"{at}not_comparable: say why this scale is not comparable with the document, in words")
        rescored = frozenset(str(label) for key in ("rows", "columns") if isinstance(decl.get(key), dict)
                             for label, part in decl[key].items() if isinstance(part, dict) and part.get("released"))
        return cls(unit, {str(k): v for k, v in units.items()}, {k: float(v) for k, v in epsilon.items()},
                   comparable, rescored)

    def unit_of(self, row: str, column: str) -> str:
        """The unit of a cell: its row's or column's label, else their last ' / ' part, else the table's unit."""
        for label in (row, column, row.rsplit(" / ", 1)[-1], column.rsplit(" / ", 1)[-1]):
            if label in self.units:
                return self.units[label]
        return self.unit

    def epsilon_of(self, unit: str) -> float:
        return self.epsilon.get(unit, UNITS[unit].epsilon)

    def is_rescored(self, row: str, column: str) -> bool:
        """The cell scores a released system's outputs with our metric code (nothing of ours was trained for it)."""
        return row in self.rescored or column in self.rescored

    def carries_claim(self, row: str, column: str) -> bool:
        """The cell is one a declared claim compares. `claim_cells` holds, per claim, (rows, columns): the rows a
        tuple of labels, TASK_ROWS (every bAbI task row: the claim's default) or ANY_ROW; the columns a tuple."""
        return any(compares(rows, columns, row, column) for rows, columns in self.claim_cells)


TASK_ROWS, ANY_ROW = "task rows", "any row"     # the rows of Rules.claim_cells that are not a list


def compares(rows, columns: tuple, row: str, column: str) -> bool:
    """Whether the cell (row, column) is among a claim's compared cells (claims.compared_cells): `rows` a tuple of
    labels, TASK_ROWS or ANY_ROW; `columns` a tuple."""
    return column in columns and (rows == ANY_ROW or (rows == TASK_ROWS and row.isdigit()) or
                                  (isinstance(rows, tuple) and row in rows))


def rounding(paper_text: str) -> float:
    """Half the last printed digit of a paper number ("85" -> 0.5, "84.3" -> 0.05): what its rounding hides."""
    text = paper_text.strip().rstrip("%")
    if "." not in text:
        return 0.5
    return 0.5 * 10.0 ** -len(text.split(".", 1)[1])


@dataclass(frozen=True)
class CellVerdict:
    status: str              # WITHIN | OUTSIDE
    unit: str
    epsilon: float
    reason: str              # why, in words


def judge_cell(reproduced: float, paper: float, paper_text: str, seeds: list[float] | None, unit: str,
               epsilon: float) -> CellVerdict:
    """The within-noise rule of the module docstring for one computed cell: |Δ| within ε, or the printed value
    inside our seeds' range widened by its rounding (never twice their SD: a failed seed inflates it)."""
    diff = reproduced - paper
    values = [v for v in (seeds or []) if v is not None and math.isfinite(v)]
    if abs(diff) <= epsilon + 1e-9:
        return CellVerdict(WITHIN, unit, epsilon, f"|Δ| {abs(diff):.4g} ≤ ε {epsilon:g}")
    if len(values) > 1:
        r = rounding(paper_text)
        lo, hi = min(values), max(values)
        if lo - r <= paper <= hi + r:
            return CellVerdict(WITHIN, unit, epsilon,
                               f"the paper's {paper_text} lies inside our {len(values)} seeds' range {lo:.4g}-{hi:.4g}")
        return CellVerdict(OUTSIDE, unit, epsilon, f"|Δ| {abs(diff):.4g} > ε {epsilon:g} and the paper's {paper_text} "
                           f"lies outside our {len(values)} seeds' range {lo:.4g}-{hi:.4g}")
    return CellVerdict(OUTSIDE, unit, epsilon, f"|Δ| {abs(diff):.4g} > ε {epsilon:g} (one seed: ε alone)")


@dataclass(frozen=True)
class UnitFigures:
    unit: str
    n: int                   # computed cells in this unit
    mean_abs_diff: float
    max_abs_diff: float
    tolerance: float

    @property
    def within_tolerance(self) -> bool:
        return self.mean_abs_diff <= self.tolerance + 1e-9


@dataclass(frozen=True)
class TableVerdict:
    status: str
    n_cells: int             # cells counted (cited and not-applicable ones left out)
    n_valued: int            # with a reproduced value
    n_computed: int          # with a value beside a printed number
    n_within: int            # of those, within noise
    units: tuple[UnitFigures, ...]
    claim_misses: tuple[str, ...] = ()    # claim cells outside noise, "ROW: COLUMN"

    @property
    def share_within(self) -> float | None:
        return self.n_within / self.n_computed if self.n_computed else None


def unit_figures(judged: list[tuple[float, CellVerdict]]) -> tuple[UnitFigures, ...]:
    """One mean and max |Δ| per unit, each in its own unit, over (diff, verdict) pairs."""
    out = []
    for unit in dict.fromkeys(v.unit for _, v in judged):
        diffs = [abs(d) for d, v in judged if v.unit == unit]
        out.append(UnitFigures(unit, len(diffs), statistics.fmean(diffs), max(diffs), UNITS[unit].tolerance))
    return tuple(out)


def judge_table(statuses: list[str], judged: list[tuple[float, CellVerdict]], rules: Rules,
                has_reference: bool, claim_misses: list[str] = (), rescored_only: bool = False) -> TableVerdict:
    """The table status of the module docstring.

    `statuses`: every counted cell's status ("ok", "needs_data", "not_run", "failed"); `judged`: (Δ, verdict) of
    every computed cell; `claim_misses`: the claim cells among them outside noise ("ROW: COLUMN"); `rescored_only`:
    every computed cell re-scores released outputs."""
    n_valued = statuses.count("ok")
    n_within = sum(v.status == WITHIN for _, v in judged)
    units = unit_figures(judged)

    def verdict(status: str) -> TableVerdict:
        return TableVerdict(status, len(statuses), n_valued, len(judged), n_within, units, tuple(claim_misses))

    if not has_reference:
        return verdict(ADDITION)
    if n_valued == 0:
        if "needs_data" in statuses:
            return verdict(NEEDS_DATA)
        return verdict(NOT_IMPLEMENTED if rules.comparable is None else NOT_COMPARABLE)
    if rules.comparable is not None:
        return verdict(NOT_COMPARABLE)
    if not judged or n_within < SHARE_WITHIN * len(judged) or not all(u.within_tolerance for u in units):
        return verdict(DIFFERS)
    missing = [s for s in statuses if s != "ok"]
    if any(s == "failed" for s in missing):
        return verdict(DIFFERS)
    if rescored_only:
        return verdict(METRIC_CHECK)
    status = REPRODUCED if not missing and len(judged) == n_valued else PARTLY.format(k=len(judged), n=len(statuses))
    if claim_misses:
        status += EXCEPT_CLAIM_CELLS.format(cells=", ".join(claim_misses))
    return verdict(status)


def status_kind(status: str) -> str:
    """A status with its counts and named cells taken out ("reproduced (57 of 60 cells)" -> "reproduced (k of n
    cells)"; "reproduced (20 of 21 cells) except claim cells (16: Ensemble)" -> "reproduced except claim cells")."""
    if status.startswith(REPRODUCED) and EXCEPT_CLAIM_CELLS.split(" (", 1)[0] in status:
        return CLAIM_CELLS_MISS
    return "reproduced (k of n cells)" if status.startswith("reproduced (") else status
