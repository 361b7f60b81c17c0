"""The core's note placeholders and claim schema: every placeholder kind, every claim kind (holds, does not hold,
nothing to judge), named errors, and every declaration's notes and claims parsing at the three scales."""

from pathlib import Path

import pytest

from nlpbench import config, registry
from nlpbench.results import claims, notes
from nlpbench.results.cells import CellRefError, TableCells
from nlpbench.results.tables import Cell

REPO = Path(__file__).resolve().parents[1]


def _cells(tables: dict, printed: dict | None = None, seeds: dict | None = None,
           pass_threshold: float | None = 95.0) -> TableCells:
    """tables: {table: {(row, column): value}} -> TableCells of an addition source (no printed reference), each
    table with `pass_threshold` (a bAbI task table's)."""
    cells = TableCells("nowhere")
    for t, grid in tables.items():
        rows = list(dict.fromkeys(r for r, _ in grid))
        cols = list(dict.fromkeys(c for _, c in grid))
        cells.add(t, rows, cols, [Cell(r, c, v, seeds=(seeds or {}).get((t, r, c))) for (r, c), v in grid.items()
                                  if v is not None], pass_threshold=pass_threshold)
    cells.printed.update(printed or {})
    return cells


GRID = {"8": {("1", "a"): 96.0, ("1", "b"): 90.0, ("2", "a"): 50.25, ("2", "b"): None, ("mean", "a"): 73.1}}


def test_passes_count_at_the_tables_own_threshold_and_a_table_without_one_says_so():
    """The pass threshold is the table's (its TableSpec's, bAbI: data.babi.PASS_THRESHOLD), not a constant of the
    notes or the claims: a table at 50 counts both tasks as passed; one without a threshold cannot count passes."""
    from nlpbench.data.babi import PASS_THRESHOLD
    assert PASS_THRESHOLD == 95.0
    note = "{passes ours 8:*:a}"
    assert notes.fill(note, "8", _cells(GRID, pass_threshold=50.0)) == "2 of 2"
    assert notes.fill(note, "8", _cells(GRID)) == "1 of 2"
    with pytest.raises(CellRefError, match="Table 8 has no pass threshold"):
        notes.fill(note, "8", _cells(GRID, pass_threshold=None))
    claim = [{"kind": "more_passes", "a": "a", "b": "b", "text": "a passes more"}]
    assert "2 tasks pass (1 2) against 1 (1)" in claims.lines(claim, "8", _cells(
        {"8": {("1", "a"): 96.0, ("1", "b"): 90.0, ("2", "a"): 60.0, ("2", "b"): 40.0}}, pass_threshold=50.0))[0]
PRINTED = {("8", "1", "a"): 99.0, ("8", "2", "a"): 40.0, ("8", "1", "b"): 95.0}


@pytest.mark.parametrize("note, filled", [
    ("{ours 8:1:a}", "96"), ("{ours 8:1}", "90-96"), ("{ours 8:1,2:a}", "50.2-96.0"),
    ("{paper 8:1:a}", "99"), ("{delta 8:1,2:a}", "-3.0 to +10.2"), ("{delta 8:1:a}", "-3"),
    ("{mean ours 8:1,2:a}", "73.1"), ("{mean delta 8:*:a}", "+3.6"), ("{passes ours 8:*:a}", "1 of 2"),
    ("{passes paper 8:*}", "2 of 3"), ("{ours 8:2:b}", "n/a"), ("{ours 8:*:b}", "90"),
    ("no placeholder {2, 5} here", "no placeholder {2, 5} here"),
])
def test_each_placeholder_kind_is_filled_from_the_cells(note, filled):
    assert notes.fill(note, "8", _cells(GRID, PRINTED)) == filled


@pytest.mark.parametrize("note, message", [
    ("{ours 8:1:c}", r"T8: note placeholder '\{ours 8:1:c\}': Table 8 has no column 'c' \(columns: a, b\)"),
    ("{ours 8:x:a}", r"T8: note placeholder '\{ours 8:x:a\}': Table 8 has no row 'x'"),
    ("{paper 9:1:a}", r"T8: note placeholder '\{paper 9:1:a\}': no table '9' of nowhere is read here"),
    ("{ours 8:1:a", r"T8: note placeholder '\{ours 8:1:a' does not parse"),
    ("{passes delta 8:*:a}", r"does not parse"),
])
def test_a_placeholder_naming_what_does_not_exist_is_a_named_error(note, message):
    with pytest.raises(config.ConfigError, match=message):
        notes.fill(note, "8", _cells(GRID, PRINTED), "T8")


def test_a_task_the_scale_cut_reads_na_but_no_task_21():
    cells = _cells({"2": {("1", "a"): 99.0}})
    assert notes.fill("{ours 2:15:a}", "2", cells) == "n/a"
    with pytest.raises(CellRefError, match="no row '21'"):
        notes.fill("{ours 2:21:a}", "2", cells)


def _one(claim: dict, tables: dict, printed: dict | None = None, seeds: dict | None = None, table: str = "t") -> str:
    lines = claims.lines([{"text": "§1: x", **claim}], table, _cells(tables, printed, seeds))
    assert len(lines) == 1
    return lines[0]


TASKS = {"t": {("1", "a"): 99.0, ("2", "a"): 96.0, ("3", "a"): 60.0,
               ("1", "b"): 97.0, ("2", "b"): 70.0, ("3", "b"): 50.0}}


@pytest.mark.parametrize("claim, verdict", [
    ({"kind": "more_passes", "a": "a", "b": "b"}, "holds: 2 tasks pass (1 2) against 1 (1)"),
    ({"kind": "more_passes", "a": "b", "b": "a"}, "does not hold: 1 tasks pass"),
    ({"kind": "higher_mean", "a": "a", "b": "b"}, "holds: mean 85.0 against 72.3 over 3 tasks"),
    ({"kind": "higher_mean", "a": "b", "b": "a"}, "does not hold"),
    ({"kind": "similar_mean", "a": "a", "b": "b", "within": 15}, "holds: mean 85.0 against 72.3 (|difference| 12.7"),
    ({"kind": "similar_mean", "a": "a", "b": "b", "within": 5}, "does not hold"),
    ({"kind": "samples_help", "a": "a", "b": "b"}, "holds: on the 2 tasks below 95% with one sample"),
    ({"kind": "samples_help", "a": "b", "b": "a"}, "does not hold"),
    ({"kind": "tracks", "a": "a", "b": "b", "within": 15}, "holds: mean |difference| 12.7 over 3 tasks"),
    ({"kind": "tracks", "a": "a", "b": "b", "within": 5}, "does not hold"),
    ({"kind": "first_beats_second", "a": "a", "b": "b"}, "holds: over tasks 1 2 3, a is higher on 3"),
    ({"kind": "first_beats_second", "a": "b", "b": "a"}, "does not hold"),
    ({"kind": "ensemble_passes_all", "a": "a", "b": "b"}, "does not hold: over tasks 1 2 3"),
])
def test_each_task_kind_holds_or_not_on_our_cells(claim, verdict):
    assert f"in our numbers it {verdict}" in _one(claim, TASKS)


def test_a_claim_is_judged_on_the_printed_cells_too_and_printed_as_names_their_column():
    printed = {("t", "1", "A"): 99.0, ("t", "2", "A"): 99.0, ("t", "1", "b"): 90.0, ("t", "2", "b"): 91.0}
    line = _one({"kind": "ensemble_passes_all", "a": "a", "b": "b", "printed_as": {"a": "A"}},
                {"t": {("1", "a"): 99.0, ("2", "a"): 96.0, ("1", "b"): 97.0, ("2", "b"): 70.0}}, printed)
    assert "in our numbers it holds: over tasks 1 2, a is higher on 2" in line
    assert "in the thesis's numbers it holds: over tasks 1 2, A is higher on 2" in line


def test_a_claim_with_no_cells_to_judge_says_so():
    assert _one({"kind": "higher_mean", "a": "a", "b": "b"}, {"t": {("1", "a"): 1.0}}).endswith(
        "no cells to judge yet.")
    assert _one({"kind": "above", "rows": ["x", "y"], "columns": ["c"]}, {"t": {("x", "c"): 1.0}}).endswith(
        "no cells to judge yet.")


def test_outperforms_and_the_spread_kinds():
    game = {"t": {("1k / Accuracy", "a"): 30.0, ("1k / Accuracy", "b"): 20.0,
                  ("1k / Rounds", "a"): 5.0, ("1k / Rounds", "b"): 4.0}}
    assert "does not hold: better in 1 of 2 cells, worse in 1 (1k / Rounds: 5.0 against 4.0)" in _one(
        {"kind": "outperforms", "a": "a", "b": "b"}, game)
    pats = {("1", "N / 1"): 80.0, ("2", "N / 1"): 40.0, ("1", "N / 2"): 30.0, ("2", "N / 2"): 70.0,
            ("1", "N / aug"): 60.0, ("2", "N / aug"): 58.0}
    assert "it holds: 2 of 2 networks score best" in _one({"kind": "own_pattern_best", "a": ["N / 1", "N / 2"]},
                                                          {"t": pats})
    pats[("2", "N / 1")] = 90.0
    assert "it does not hold: 1 of 2 networks score best on their own pattern (not network 1: 80.0 on its own " \
           "pattern, 90.0 on pattern 2)" in _one({"kind": "own_pattern_best", "a": ["N / 1", "N / 2"]}, {"t": pats})
    assert "it holds: spread (max - min over the 2 rows) 2.0 points for N / aug against 25.0" in _one(
        {"kind": "augmented_evens", "a": "N / aug", "b": ["N / 1", "N / 2"]}, {"t": pats})
    other = {"u": {("1", "N / 2"): 30.0, ("2", "N / 2"): 70.0}}
    assert "it holds: mean spread (max - min over the rows) 10.0 points here against 40.0 in Table u" in _one(
        {"kind": "smaller_spread_than", "a": ["N / 1"], "b": ["u:N / 2"]}, {"t": pats, **other})
    assert "does not hold (the two are within 40 points)" in _one(
        {"kind": "smaller_spread_than", "a": ["N / 1"], "b": ["u:N / 2"], "within": 40}, {"t": pats, **other})


def test_a_claim_the_document_s_own_table_does_not_bear_out_says_so():
    ours = {"t": {("1", "N / 1"): 80.0, ("2", "N / 1"): 90.0, ("1", "N / 2"): 30.0, ("2", "N / 2"): 70.0}}
    claim = {"kind": "own_pattern_best", "a": ["N / 1", "N / 2"]}
    same = {("t", "1", "N / 1"): 80.0, ("t", "2", "N / 1"): 85.0, ("t", "1", "N / 2"): 30.0, ("t", "2", "N / 2"): 70.0}
    line = _one(claim, ours, same)
    assert "in our numbers it does not hold" in line and line.endswith(
        "As in the thesis's numbers: the document's own table does not bear the claim out either."), line
    bears = {**same, ("t", "2", "N / 1"): 10.0}
    assert "bear the claim out" not in _one(claim, ours, bears)


SEEDS = {("t", "hi", "c"): {0: 30.0, 1: 31.0, 2: 32.0}, ("t", "lo", "c"): {0: 20.0, 1: 21.0, 2: 22.0},
         ("t", "mid", "c"): {0: 20.0, 1: 35.0, 2: 25.0}}
SEEDED = {"t": {(r, "c"): max(v.values()) for (_, r, _), v in SEEDS.items()}}


@pytest.mark.parametrize("claim, verdict", [
    ({"kind": "above", "rows": ["hi", "lo"]}, "holds, and the difference is larger than the seed spread"),
    ({"kind": "above", "rows": ["mid", "hi"]}, "holds, but not beyond the seed spread"),
    ({"kind": "above", "rows": ["lo", "hi"]}, "does not hold"),
    ({"kind": "order", "rows": ["lo", "hi"]}, "holds, every step larger than the seed spread"),
    ({"kind": "order", "rows": ["hi", "lo"]}, "does not hold: our order, lowest first (reported cells): lo < hi"),
    ({"kind": "best", "rows": ["hi", "lo"]}, "holds, and its lead is larger than the seed spread"),
    ({"kind": "best", "rows": ["lo", "mid"]}, "does not hold: best here: mid"),
    ({"kind": "above_spread", "rows": ["hi", "lo"]}, "holds: hi 31.00 ± 1.00 against lo 21.00 ± 1.00"),
    ({"kind": "above_spread", "rows": ["lo", "hi"]}, "is reversed"),
    ({"kind": "above_spread", "rows": ["mid", "lo"]}, "holds, but not beyond the seed spread"),
    ({"kind": "close", "rows": ["hi", "mid"], "within": 5},
     "holds: hi 32.00 (reported cells) against mid 35.00 (+3.00); largest |difference| 3.00 (bound 5)"),
    ({"kind": "close", "rows": ["hi", "mid", "lo"], "within": 5}, "does not hold: hi 32.00 (reported cells) against "
     "mid 35.00 (+3.00), lo 22.00 (-10.00); largest |difference| 10.00 (bound 5)"),
])
def test_each_seed_kind_holds_or_not(claim, verdict):
    printed = {("t", "hi", "c"): 50.0, ("t", "lo", "c"): 40.0, ("t", "mid", "c"): 10.0}
    line = _one({"columns": ["c"], **claim}, SEEDED, printed, SEEDS)
    assert f"Claim (§1: x; c): in our numbers it {verdict}" in line, line


def test_a_seed_kind_judges_the_reported_cells_not_the_best_test_seed():
    """Where the family reports the seed validation chose, a seed with a higher test number decides nothing: the
    claim is judged on the cells the table shows (and on the seed means)."""
    seeds = {("t", "a", "c"): {0: 30.0, 1: 40.0}, ("t", "b", "c"): {0: 35.0, 1: 36.0}}
    shown = {"t": {("a", "c"): 30.0, ("b", "c"): 35.0}}          # seed 0 of a reported, though seed 1 tests higher
    line = _one({"kind": "above", "rows": ["a", "b"], "columns": ["c"]}, shown, {}, seeds)
    assert "in our numbers it does not hold: a − b: -5.00 (reported cells), -0.50 (seed means)" in line, line
    best = {"t": {("a", "c"): 40.0, ("b", "c"): 36.0}}            # a best-of-N table reports the maximum
    assert "it holds, but not beyond the seed spread" in _one(
        {"kind": "above", "rows": ["a", "b"], "columns": ["c"]}, best, {}, seeds)


def test_columns_above_compares_with_where_the_document_has_it_above():
    seeds = {("t", "r", "a"): {0: 5.0, 1: 6.0}, ("t", "r", "b"): {0: 1.0, 1: 2.0}}
    grid = {"t": {("r", "a"): 6.0, ("r", "b"): 2.0}}
    assert "a against b): in our numbers it holds: a above b (reported cells) for 1 of 1 rows (r)" in _one(
        {"kind": "columns_above", "a": "a", "b": "b", "rows": ["r"]}, grid, {("t", "r", "a"): 1.0}, seeds)


def test_a_column_judged_column_by_column_may_hold_a_colon_when_named_with_its_table():
    seeds = {("t", "hi", "c: x"): {0: 30.0, 1: 31.0}, ("t", "lo", "c: x"): {0: 20.0, 1: 21.0}}
    grid = {"t": {("hi", "c: x"): 31.0, ("lo", "c: x"): 21.0}}
    claim = {"kind": "above", "rows": ["hi", "lo"], "columns": ["t:c: x"]}
    claims.check([{"text": "x", **claim}], "t", _cells(grid), "T.claims")
    assert "Claim (§1: x; c: x): in our numbers it holds" in _one(claim, grid, None, seeds)
    other = {**grid, "u": {("hi", "c"): 1.0}}
    with pytest.raises(config.ConfigError, match=r"T\.claims\.0\.columns: kind above reads this table's columns"):
        claims.check([{"text": "x", **claim, "columns": ["u:c"]}], "t", _cells(other), "T.claims")


@pytest.mark.parametrize("claim, message", [
    ({"kind": "bigger", "a": "a", "b": "b"}, r"T\.claims\.0\.kind: 'bigger' is not a claim kind"),
    ({"kind": "higher_mean", "a": "a"}, r"T\.claims\.0: kind higher_mean needs b"),
    ({"kind": "higher_mean", "a": "a", "b": "z"}, r"T\.claims\.0\.b: Table t has no column 'z'"),
    ({"kind": "above", "rows": ["1", "99"], "columns": ["a"]}, r"T\.claims\.0\.rows: Table t has no row '99'"),
    ({"kind": "higher_mean", "a": "a", "b": "b", "wthin": 1}, r"unknown key\(s\) wthin"),
    ({"kind": "close", "rows": ["1", "2"], "columns": ["a"]}, r"T\.claims\.0: kind close needs within"),
])
def test_a_claim_that_names_what_does_not_exist_is_a_named_error(claim, message):
    with pytest.raises(config.ConfigError, match=message):
        claims.check([{"text": "x", **claim}], "t", _cells(TASKS), "T.claims")


@pytest.mark.parametrize("scale", ["smoke", "cpu", "paper"])
def test_every_declarations_notes_and_claims_parse_at_each_scale(scale):
    params = config.load(REPO / "params.yaml", {"scale": scale})      # the families' checks run the core's
    n_notes = n_claims = 0
    for d in config.declared(params, "tables"):
        for note in d.decl.get("notes") or []:
            n_notes += len(notes.quotes(note))
        for c in d.decl.get("claims") or []:
            assert c["kind"] in claims.KINDS, (d.where, c)
            n_claims += 1
    for family in registry.families_in(params):
        claims.check_declared(params, family.name)
    assert n_notes > 100 and n_claims > 50


@pytest.mark.parametrize("seed_values, verdict, held, words", [
    # a over b on every seed's own cells: holds
    ({"a": [(90, 91, 92), (80, 81, 82)], "b": [(70, 71, 72), (60, 61, 62)]}, "holds", 3, ""),
    # the selected cells say a > b, but two of three seeds say otherwise: inside our noise
    ({"a": [(90, 60, 60), (80, 50, 50)], "b": [(70, 75, 75), (60, 65, 65)]}, "holds within noise", 1,
     ": it rests on the selected cells alone"),
    # the mirror image: the selected cells say a <= b, but two of three seeds show a > b: inside our noise too
    ({"a": [(60, 90, 90), (50, 80, 80)], "b": [(75, 70, 70), (65, 60, 60)]}, "holds within noise", 2,
     ", though not on the selected cells"),
    # neither reading shows it
    ({"a": [(60, 60, 90), (50, 50, 80)], "b": [(75, 75, 70), (65, 65, 60)]}, "does not hold", 1, ""),
])
def test_a_claims_selected_cells_and_each_seeds_own_cells_weigh_alike(seed_values, verdict, held, words):
    grid = {"t": {(row, col): seed_values[col][i][0] for col in "ab" for i, row in enumerate(("1", "2"))}}
    seeds = {("t", row, col): dict(enumerate(seed_values[col][i])) for col in "ab" for i, row in enumerate(("1", "2"))}
    [record] = claims.judged([{"text": "§1: x", "kind": "higher_mean", "a": "a", "b": "b"}], "t",
                             _cells(grid, None, seeds), "differs")
    assert record["verdict"] == verdict
    assert f"it holds on {held} of our 3 seeds, each judged on its own cells{words}" in record["sentence"]


def test_a_claim_the_documents_own_numbers_cannot_decide_is_unresolved_with_those_numbers():
    printed = {("3.1", "SAN", "EM"): 63.5, ("3.1", "DCN", "EM"): 64.3, ("3.1", "BiDAF", "EM"): 65.6}
    cells = _cells({"3.1": {("SAN", "EM"): 30.0, ("DCN", "EM"): 31.0, ("BiDAF", "EM"): 32.0}}, printed)
    claim = {"kind": "order", "rows": ["SAN", "DCN", "BiDAF"], "columns": ["EM"], "text": "§3.3: BiDAF > DCN > SAN",
             "unresolved": "each is the best of five runs (§4.2) and the thesis gives no spread for them"}
    [record] = claims.judged([claim], "3.1", cells, "not comparable at this scale")
    assert record["verdict"] == claims.UNRESOLVED == "unresolved in the document"
    assert record["sentence"] == (
        "Claim (§3.3: BiDAF > DCN > SAN): unresolved in the document: in the thesis's numbers, EM: SAN 63.5 < "
        "DCN 64.3 < BiDAF 65.6, steps +0.8 and +1.3; each is the best of five runs (§4.2) and the thesis gives no "
        "spread for them.")
    tie = {**claim, "rows": ["SAN", "DCN", "BiDAF", "QANet"]}
    cells.printed[("3.1", "QANet", "EM")] = 65.6
    cells.add("3.1", ["SAN", "DCN", "BiDAF", "QANet"], ["EM"], [])
    assert "EM: SAN 63.5 < DCN 64.3 < BiDAF 65.6 = QANet 65.6, steps +0.8, +1.3 and +0.0" in \
        claims.judged([tie], "3.1", cells, "")[0]["sentence"]
    above = {"kind": "above", "rows": ["BiDAF", "SAN"], "columns": ["EM"], "text": "x", "unresolved": "why"}
    best = {"kind": "best", "rows": ["SAN", "DCN", "BiDAF"], "columns": ["EM"], "text": "x", "unresolved": "why"}
    assert "EM: BiDAF 65.6 against SAN 63.5 (+2.1)" in claims.judged([above], "3.1", cells, "")[0]["sentence"]
    assert "EM: best BiDAF 65.6, next DCN 64.3 (lead +1.3)" in claims.judged([best], "3.1", cells, "")[0]["sentence"]
    with pytest.raises(config.ConfigError, match=r"T\.claims\.0: a claim is untestable .* or unresolved"):
        claims.check([{**claim, "untestable": "why"}], "3.1", cells, "T.claims")


def test_a_claim_with_nothing_to_judge_needs_data_where_its_table_lacks_data():
    cells = _cells({"t": {("1", "a"): 90.0}}, None, None)
    claim = [{"text": "§1: x", "kind": "higher_mean", "a": "a", "b": "b"}]
    assert claims.judged(claim, "t", cells, "reproduced (1 of 2 cells)", needs_data=True)[0]["verdict"] == "needs data"
    assert claims.judged(claim, "t", cells, "differs")[0]["verdict"] == "untestable at this scale"
    assert claims.judged(claim, "t", cells, "not comparable at this scale")[0]["verdict"] == "untestable at this scale"


BENCH = ("section,quantity,measured,paper,unit,note\n"
         "Training,t-MEM-NN / MemN2N,1.6,1.02,x,\n"
         "Inference,\"t-MEM-NN / MemN2N, S = 1\",1.07,,x,\n")


def test_a_measured_claim_is_judged_on_its_outputs_csv():
    declared = [{"kind": "at_most", "where": {"section": "Training", "quantity": "t-MEM-NN / MemN2N"},
                 "column": "measured", "bound": 1.1, "text": "§6.4.4: negligible"},
                {"kind": "at_most", "where": {"section": "Inference", "quantity": "t-MEM-NN / MemN2N, S = 1"},
                 "column": "measured", "bound": 1.1, "text": "§6.4.4: comparable"},
                {"kind": "at_least", "where": {"section": "Inference", "quantity": "missing"},
                 "column": "measured", "bound": 1.1, "text": "§6.5.2: costs more"}]
    first, second, third = claims.judge_measured(declared, "timing", BENCH, "outputs.x.timing.claims")
    assert first["verdict"] == "does not hold" and "1.6 x (at most 1.1); the document's: 1.02" in first["sentence"]
    assert second["verdict"] == "holds"
    assert third["verdict"] == "needs data" and "not measured" in third["sentence"]
    dofs = "group,task,seed,nu_A,nu_B,nu_C,within_claim\ng,1,0,2,2,2,True\ng,1,1,9,2,2,False\n"
    [share] = claims.judge_measured([{"kind": "share_at_least", "column": "within_claim", "bound": 1.0,
                                      "text": "§6.5.5: all"}], "dof", dofs, "outputs.x.dof.claims")
    assert share["verdict"] == "does not hold" and "1 of 2 (50.0 %)" in share["sentence"]
    # judged over the documents' experiments, an addition's own runs (its other reading) counted apart and named
    dofs += "layerwise,4,0,2,9,2,False\nlayerwise,5,0,2,2,2,True\n"
    dofs = dofs.replace("g,1,1,9,2,2,False", "g,1,1,2,2,2,True")
    declared_apart = [{"kind": "share_at_least", "column": "within_claim", "bound": 1.0, "studies_apart": True,
                       "text": "§6.5.5: all"}]
    [share] = claims.judge_measured(declared_apart, "dof", dofs, "outputs.x.dof.claims",
                                    {"layerwise": ["2-layerwise"]})
    assert share["verdict"] == "holds" and "2 of 2 runs of the documents' tables (100.0 %)" in share["sentence"]
    assert "apart, the studies' own runs (not the document's experiments): 2-layerwise: 1 of 2 within, 1 outside " \
           "it on task 4" in share["sentence"]
    [mixed] = claims.judge_measured([{**declared_apart[0], "studies_apart": False}], "dof", dofs, "x", {"layerwise": ["s"]})
    assert mixed["verdict"] == "does not hold" and "3 of 4" in mixed["sentence"]
    with pytest.raises(CellRefError, match=r"outputs.x.timing.claims.0.column: the output has no column 'secs'"):
        claims.judge_measured([{**declared[0], "column": "secs"}], "timing", BENCH, "outputs.x.timing.claims")


def test_a_row_trained_to_the_documents_budget_is_judged_there_and_the_sentence_says_why():
    """The learning check holds a claim back while a compared run is still learning, except in a row the home
    names under `judged_at_budget` (trained the document's own number of updates): its claim is judged, and the
    sentence names the row, the reason and the seeds still learning there; another row still holds it back."""
    grid = {"4.2": {("SGD", "B1"): 30.0, ("Adam", "B1"): 20.0, ("Lin", "B1"): 25.0}}
    seeds = {("4.2", "SGD", "B1"): {0: 30.0, 1: 31.0, 2: 29.0}, ("4.2", "Adam", "B1"): {0: 20.0, 1: 21.0, 2: 19.0},
             ("4.2", "Lin", "B1"): {0: 25.0, 1: 26.0, 2: 24.0}}
    cells = _cells(grid, seeds=seeds, pass_threshold=None)
    cells.still_learning[("4.2", "SGD", "B1")] = (0, 2)
    cells.still_learning[("4.2", "Lin", "B1")] = (1,)
    sgd = {"kind": "above", "rows": ["SGD", "Adam"], "columns": ["B1"], "text": "SGD above Adam"}
    lin = {"kind": "above", "rows": ["Lin", "Adam"], "columns": ["B1"], "text": "Lin above Adam"}
    why = "the thesis's 24,380 updates"
    plain = claims.judged([sgd], "4.2", cells, "not comparable at this scale", claims_testable=True)[0]
    assert plain["verdict"] == claims.UNTESTABLE and "SGD: B1 (seeds 0, 2)" in plain["sentence"]
    budget = claims.judged([sgd, lin], "4.2", cells, "not comparable at this scale", claims_testable=True,
                           at_budget={"SGD": why})
    assert budget[0]["verdict"] == claims.HOLDS, budget[0]["sentence"]
    assert budget[0]["sentence"].endswith(f" SGD is compared at the document's budget, not at convergence: {why} "
                                          "(still learning there: SGD: B1 (seeds 0, 2)).")
    assert budget[1]["verdict"] == claims.UNTESTABLE and "Lin: B1 (seed 1)" in budget[1]["sentence"]
    assert "document's budget" not in budget[1]["sentence"]
