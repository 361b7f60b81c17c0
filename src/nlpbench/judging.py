"""Is a reproduced cell the paper's number up to our own noise, and is a table reproduced? One rule for every table.

A cell is **within noise** when

    |Δ| <= max(ε, 2 × SD over our seeds)        (one seed: |Δ| <= ε)
    or the printed value lies inside the range of our seeds, widened by the paper's rounding

where Δ = reproduced − paper in the cell's own unit and ε is the unit's tolerance for one number (below). A table is

* **reproduced** when at least 90 % of its computed cells (a value beside a printed number) are within noise and,
  for every unit it holds, the mean |Δ| over those cells is within that unit's table tolerance;
* **reproduced (k of n cells)** when that holds over the k computed cells and the others need data or were not run
  at this scale;
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
SD_FACTOR = 2.0              # |Δ| within this many SDs over our seeds is noise


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
DIFFERS = "differs"
NOT_COMPARABLE = "not comparable at this scale"
NEEDS_DATA = "needs data"
NOT_IMPLEMENTED = "not yet implemented"
ADDITION = "addition (no paper numbers)"
STATUSES = (REPRODUCED, "reproduced (k of n cells)", DIFFERS, NOT_COMPARABLE, NEEDS_DATA, NOT_IMPLEMENTED, ADDITION)


class JudgingError(ValueError):
    """A declaration's unit, units or epsilon is not well formed."""


@dataclass(frozen=True)
class Rules:
    """How one table at one scale is judged (from its declaration: `unit`, `units`, `epsilon`, `comparable`)."""

    unit: str = "points"
    units: dict = field(default_factory=dict)          # label -> unit
    epsilon: dict = field(default_factory=dict)        # unit -> ε override
    comparable: str | None = None                      # None: comparable; else why this scale is not

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
        return cls(unit, {str(k): v for k, v in units.items()}, {k: float(v) for k, v in epsilon.items()},
                   comparable)

    def unit_of(self, row: str, column: str) -> str:
        """The unit of a cell: its row's or column's label, else their last ' / ' part, else the table's unit."""
        for label in (row, column, row.rsplit(" / ", 1)[-1], column.rsplit(" / ", 1)[-1]):
            if label in self.units:
                return self.units[label]
        return self.unit

    def epsilon_of(self, unit: str) -> float:
        return self.epsilon.get(unit, UNITS[unit].epsilon)


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
    bound: float             # max(ε, 2 SD): the |Δ| this cell may have
    reason: str              # why, in words


def judge_cell(reproduced: float, paper: float, paper_text: str, seeds: list[float] | None, unit: str,
               epsilon: float) -> CellVerdict:
    """The within-noise rule of the module docstring for one computed cell."""
    diff = reproduced - paper
    values = [v for v in (seeds or []) if v is not None and math.isfinite(v)]
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    bound = max(epsilon, SD_FACTOR * sd)
    if abs(diff) <= bound + 1e-9:
        why = f"|Δ| {abs(diff):.4g} ≤ ε {epsilon:g}" if bound == epsilon else \
            f"|Δ| {abs(diff):.4g} ≤ 2 SD {bound:.4g} over {len(values)} seeds"
        return CellVerdict(WITHIN, unit, epsilon, bound, why)
    if len(values) > 1:
        r = rounding(paper_text)
        lo, hi = min(values), max(values)
        if lo - r <= paper <= hi + r:
            return CellVerdict(WITHIN, unit, epsilon, bound,
                               f"the paper's {paper_text} lies inside our {len(values)} seeds' range {lo:.4g}-{hi:.4g}")
    return CellVerdict(OUTSIDE, unit, epsilon, bound, f"|Δ| {abs(diff):.4g} > {bound:.4g}"
                       + (f" and the paper's {paper_text} lies outside our {len(values)} seeds' range "
                          f"{min(values):.4g}-{max(values):.4g}" if len(values) > 1 else " (one seed: ε alone)"))


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
                has_reference: bool) -> TableVerdict:
    """The table status of the module docstring.

    `statuses`: every counted cell's status ("ok", "needs_data", "not_run", "failed"); `judged`: (Δ, verdict) of
    every computed cell."""
    n_valued = statuses.count("ok")
    n_within = sum(v.status == WITHIN for _, v in judged)
    units = unit_figures(judged)

    def verdict(status: str) -> TableVerdict:
        return TableVerdict(status, len(statuses), n_valued, len(judged), n_within, units)

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
    if not missing and len(judged) == n_valued:
        return verdict(REPRODUCED)
    return verdict(PARTLY.format(k=len(judged), n=len(statuses)))


def status_kind(status: str) -> str:
    """A status with its counts taken out ("reproduced (57 of 60 cells)" -> "reproduced (k of n cells)")."""
    return "reproduced (k of n cells)" if status.startswith("reproduced (") else status
