"""Claim lines of the ch. 6 tables and the validation-only reading pilots."""

from pathlib import Path

import pytest

from nlpbench import config, registry
from nlpbench.family import Paths
from nlpbench.memnet.experiments import table_parts
from nlpbench.memnet.groups import declaration_groups
from nlpbench.results import build, claims, notes
from nlpbench.results.cells import CellRefError, TableCells, split_ref
from nlpbench.runtime import io

REPO = Path(__file__).resolve().parents[1]


def _cells(ours: dict, printed: dict, columns: dict | None = None) -> TableCells:
    """TableCells of tolias-thesis from {(table, row, column): value} dicts (rows and columns as they occur)."""
    cells = TableCells("tolias-thesis", dict(ours), dict(printed))
    for key in list(ours) + list(printed):
        cells.rows.setdefault(key[0], [])
        cells.columns.setdefault(key[0], [])
        if key[1] not in cells.rows[key[0]]:
            cells.rows[key[0]].append(key[1])
        if key[2] not in cells.columns[key[0]]:
            cells.columns[key[0]].append(key[2])
        cells.pass_thresholds[key[0]] = 95.0                   # bAbI task tables
    for t, cols in (columns or {}).items():
        cells.columns[t] = cols
    cells.known_rows = {t: set(r) for t, r in cells.rows.items()}
    return cells


def claim_lines(claims_: list[dict], table: str, ours: dict, printed: dict) -> list[str]:
    return claims.lines(claims_, table, _cells(ours, printed))


def test_claim_lines_judge_our_cells_and_the_printed_ones():
    ours = {("2", "1", "a"): 100.0, ("2", "2", "a"): 96.0, ("2", "1", "b"): 99.0, ("2", "2", "b"): 50.0,
            ("6", "1", "a"): 97.0, ("6", "2", "a"): 40.0}
    printed = {("2", "1", "a"): 100.0, ("2", "2", "a"): 90.0, ("2", "1", "b"): 100.0, ("2", "2", "b"): 95.0}
    lines = claim_lines([{"kind": "more_passes", "a": "a", "b": "b", "text": "a passes more"},
                         {"kind": "higher_mean", "a": "2:a", "b": "a", "text": "more hops"}], "2", ours, printed)
    assert "in our numbers it holds: 2 tasks pass (1 2) against 1 (1)" in lines[0]
    assert "in the thesis's numbers it does not hold: 1 tasks pass (1) against 2 (1 2)" in lines[0]
    lines = claim_lines([{"kind": "higher_mean", "a": "2:a", "b": "a", "text": "more hops"}], "6", ours, printed)
    assert "a (Table 2) against a" in lines[0] and "holds: mean 98.0 against 68.5" in lines[0]
    assert "thesis" not in lines[0].split(";", 1)[1]          # no printed cells of Table 6 given: judged once


def test_table_2s_claim_holds_in_the_thesiss_own_numbers():
    """The printed Table 2 says what §6.4.2 says: t-MEM-NN (S = 10) passes 95% on more tasks than MemN2N."""
    cells = TableCells("tolias-thesis")
    cells.add("2", [str(t) for t in range(1, 21)], ["Baseline / MemN2N", "t-MEM-NN / 10 samples"], [],
              pass_threshold=95.0)
    line = claims.lines([{"kind": "more_passes", "a": "t-MEM-NN / 10 samples", "b": "Baseline / MemN2N",
                          "text": "x"}], "2", cells)[0]
    assert "in the thesis's numbers it holds: 9 tasks pass" in line and "against 5" in line


def _table_of_made_up_runs(name: str, root: Path, metrics):
    """The cpu-scale parts of table `name` read from runs under `root` whose metrics.json is
    metrics(key, task, seed) (key: the column's metric, S10 or point)."""
    params = registry.load(REPO / "params.yaml", {"scale": "cpu"})
    d = config.declaration(params, "tables", "tolias-thesis", name)
    for group in declaration_groups(params, d).values():
        key = "S10" if group.model == "tmemnn" else "point"
        for task in group.tasks:
            for seed in group.seeds:
                io.write_json(group.run_dir(root, task, seed) / "metrics.json",
                              {"status": "ok", "seed": seed, **metrics(key, task, seed)})
    return table_parts(params, d, root)


def _declared_notes(name: str, root: Path, scale: str = "cpu") -> list[str]:
    """The claim lines and filled notes the build adds to table `name`, read from runs under `root`."""
    params = registry.load(REPO / "params.yaml", {"scale": scale})
    d = config.declaration(params, "tables", "tolias-thesis", name)
    parts = table_parts(params, d, root) if d.decl.get("kind", "table") == "table" else None
    if parts is None:
        from nlpbench.memnet.game import game_table_parts
        parts = game_table_parts(params, name, root)
    cells = build.table_cells(params, d, parts, Paths(runs=root))
    judged = claims.judged(d.decl.get("claims") or [], d.name, cells, "differs")
    return [c["sentence"] for c in judged] + build.declared_notes(d, cells)


def test_a_pilot_table_reports_mean_validation_accuracy_and_never_reads_test(tmp_path):
    parts = _table_of_made_up_runs("pilot-task15", tmp_path, lambda key, task, seed: {
        "val_acc": {key: 0.5 + 0.1 * seed}, "test_acc": {key: 0.01 * (seed + task)}})
    assert all(c.reproduced == pytest.approx(60.0) for c in parts.cells)      # mean of 50, 60, 70: validation only
    assert all("per seed 50.0, 60.0, 70.0" in c.detail for c in parts.cells)
    reading = next(n for n in _declared_notes("pilot-task15", tmp_path)
                   if n.startswith("Reading of the result"))   # its quoted numbers filled in
    assert "task 2 reaches 60 and task 15 stays near its two-answer plateau (60)" in reading
    assert "{" not in reading


def test_an_explanation_table_reports_mean_test_accuracy_and_selects_no_run(tmp_path):
    """report: test_mean (Table hindi-answer-forms): each cell is the mean test accuracy over the seeds, its spread
    and each seed in the detail; the seed validation would pick plays no part."""
    parts = _table_of_made_up_runs("hindi-answer-forms", tmp_path, lambda key, task, seed: {
        "val_acc": {key: 1.0 if seed == 9 else 0.5}, "val_nll": {key: 1.0}, "test_acc": {key: 0.2 + 0.02 * seed}})
    assert all(c.reproduced == pytest.approx(29.0) for c in parts.cells)    # 20, 22, ..., 38: not seed 9's 38
    assert all(c.detail.startswith("test accuracy, mean ± 6.1 over 10 seeds; per seed 20.0, 22.0") for c in parts.cells)
    assert parts.notes[0].startswith("Scale `cpu`: an explanation, not a reproduction.")


def test_tracks_measures_the_mean_gap_per_task_and_names_the_widest():
    ours = {("11", "1", "a"): 99.0, ("11", "2", "a"): 50.0, ("11", "3", "a"): 80.0,
            ("2", "1", "a"): 100.0, ("2", "2", "a"): 90.0, ("2", "3", "a"): 82.0}
    line = claim_lines([{"kind": "tracks", "a": "a", "b": "2:a", "within": 5.0, "text": "hn near en"}],
                       "11", ours, {})[0]
    # gaps 1, 40, 2: mean 14.3 > 5, the widest first
    assert "it does not hold: mean |difference| 14.3 over 3 tasks (bound 5), widest on task 2 (50 against 90), " \
           "task 3 (80 against 82), task 1 (99 against 100)" in line
    ours[("11", "2", "a")] = 88.0
    assert "it holds: mean |difference| 1.7" in claim_lines(
        [{"kind": "tracks", "a": "a", "b": "2:a", "within": 5.0, "text": "x"}], "11", ours, {})[0]


def test_numbers_in_notes_are_filled_from_the_cells():
    ours = {("8", "15", "S1"): 99.4, ("8", "15", "S10"): 100.0, ("8", "2", "S1"): 82.0, ("8", "2", "S10"): 85.0,
            ("2", "9", "S10"): 84.96}
    printed = {("8", "15", "S1"): 70.0, ("8", "15", "S10"): 74.0, ("8", "2", "S1"): 55.0, ("8", "2", "S10"): 60.0}
    cells = _cells(ours, printed, {"8": ["S1", "S10"], "2": ["S10"]})
    note = ("task 15: {ours 8:15} against {paper 8:15}, {delta 8:2,15} points; S1 alone {ours 8:15:S1}; "
            "Table 2 {ours 2:9:S10}; not run {ours 8:3}")
    assert notes.fill(note, "8", cells) == (
        "task 15: 99.4-100.0 against 70-74, +25.0 to +29.4 points; S1 alone 99.4; Table 2 85.0; not run n/a")
    with pytest.raises(CellRefError, match=r"Table 8: note placeholder '\{ours 8:15:S5\}': Table 8 has no column 'S5'"):
        notes.fill("{ours 8:15:S5}", "8", cells)
    with pytest.raises(CellRefError, match="no table '9' of tolias-thesis"):
        notes.fill("{ours 9:15}", "8", cells)
    assert notes.referenced_tables({"notes": [note, "{paper 13:1}"], "claims": []}, "8") == ["13", "2"]


def test_a_table_quoting_another_tables_numbers_reads_its_runs():
    """Table 11's notes and claims quote Table 2: its targets wait for Table 2's groups as well."""
    params = registry.load(REPO / "params.yaml", {"scale": "cpu"})
    d = config.declaration(params, "tables", "tolias-thesis", "11")
    assert "2" in notes.referenced_tables(d.decl, "11")


def test_a_column_whose_name_holds_a_colon_is_read_whole():
    assert split_ref("code (earlier reading: J = padded)", "pilot") == ("pilot", "code (earlier reading: J = padded)")
    assert split_ref("2:t-MEM-NN / 10 samples", "8") == ("2", "t-MEM-NN / 10 samples")


@pytest.mark.parametrize("note, message", [
    ("{ours 2:9:t-MEM-NN / 5 samples}", r"tolias-thesis/8\.yaml: notes\.0: note placeholder .*: Table 2 has no column 't-MEM-NN / 5 samples'"),
    ("{ours 13:21}", r"tolias-thesis/8\.yaml: notes\.0: note placeholder '\{ours 13:21\}': Table 13 has no row '21'"),
    ("{paper 99:1}", r"no 'tolias-thesis' '99'"),
    ("{ours 2:9:t-MEM-NN / 10 samples", r"tolias-thesis/8\.yaml: notes\.0: note placeholder '\{ours 2:9:t-MEM-NN / 10 samples' does not parse"),
])
def test_a_note_quoting_a_cell_that_does_not_exist_is_refused_when_params_load(note, message):
    with pytest.raises(config.ConfigError, match=message):
        registry.load(REPO / "params.yaml", {"scale": "cpu", "tables.tolias-thesis.8.notes": [note]})


def test_a_tables_provenance_names_how_its_runs_read_the_memory(tmp_path):
    """Runs record memory_read; runs from before it gathered every slot. The table says which reads
    its runs used."""
    params = registry.load(REPO / "params.yaml", {"scale": "cpu"})
    d = config.declaration(params, "tables", "tolias-thesis", "pilot-task15")
    for group in declaration_groups(params, d).values():
        for task in group.tasks:
            for seed in group.seeds:
                key = "S10" if group.model == "tmemnn" else "point"
                m = {"status": "ok", "seed": seed, "val_acc": {key: 0.5}, "test_acc": {key: 0.5}}
                if seed == 1:
                    m["memory_read"], m["hop_kernels"] = "whole_table", "compiled"
                m["model"] = group.model
                if group.model == "tmemnn" and seed == 2:
                    m["posterior_kernels"] = "compiled"
                io.write_json(group.run_dir(tmp_path, task, seed) / "metrics.json", m)
    provenance = table_parts(params, d, tmp_path).provenance
    assert provenance["memory read"].startswith("gather, whole_table (")
    # t-MEM-NN runs say how their Student-t draw and divergence ran; runs from before the key ran eager
    assert provenance["posterior kernels"].startswith("compiled, eager (`memnet.model.posterior_kernels`")
    assert provenance["hop kernels"].startswith("compiled, eager (`memnet.model.hop_kernels`")   # likewise
    empty = table_parts(params, d, tmp_path / "empty").provenance
    assert empty["memory read"] == "none (nothing trained)" and "posterior kernels" not in empty


def test_outperforms_judges_every_game_cell_fewer_rounds_better_and_a_tie_is_no_win():
    """§6.6's claim on Tables 16-17: t-MEM-NN beats the baseline in every metric and scenario (Rounds: fewer)."""
    ours = {("17", "1k / Accuracy", "t"): 27.5, ("17", "1k / Accuracy", "m"): 19.4,
            ("17", "1k / Rounds", "t"): 7.0, ("17", "1k / Rounds", "m"): 15.6,
            ("17", "10k / Accuracy", "t"): 91.7, ("17", "10k / Accuracy", "m"): 95.7}
    claim = [{"kind": "outperforms", "a": "t", "b": "m", "text": "t outperforms m"}]
    line = claim_lines(claim, "17", ours, {})[0]
    assert "it does not hold: better in 2 of 3 cells, worse in 1 (10k / Accuracy: 91.7 against 95.7)" in line
    ours[("17", "10k / Accuracy", "t")] = 96.0
    assert "it holds: better in 3 of 3 cells" in claim_lines(claim, "17", ours, {})[0]
    ours[("17", "1k / Rounds", "t")] = 15.6                    # as many guesses: a tie, not a win
    assert "does not hold: better in 2 of 3 cells, tied in 1 (1k / Rounds)" in claim_lines(claim, "17", ours, {})[0]


def test_the_game_claim_in_the_thesiss_own_numbers():
    """The printed Table 17 says what §6.6 says; the printed Table 16 ties the baseline at 100% success (1k)."""
    for table, verdict in (("17", "holds: better in 9 of 9 cells"),
                           ("16", "does not hold: better in 8 of 9 cells, tied in 1 (1k / Success)")):
        cells = TableCells("tolias-thesis")
        cells.add(table, [], ["t-MEM-NN / 1 sample", "Baseline / MemN2N"], [])
        line = claims.lines([{"kind": "outperforms", "a": "t-MEM-NN / 1 sample", "b": "Baseline / MemN2N",
                              "text": "x"}], table, cells)[0]
        assert f"in the thesis's numbers it {verdict}" in line, line


def test_a_game_table_carries_its_claim_lines(tmp_path):
    """Tables 16-17 built from their runs' games end with §6.6's claim judged on our cells and the printed ones."""
    from nlpbench.memnet.game import game_groups, game_table_parts
    params = registry.load(REPO / "params.yaml", {"scale": "smoke"})
    game = params["memnet"]["game"]
    lo, hi = game["ranges"]["17"]
    for group in game_groups(params).values():
        better = group.model == "tmemnn"
        metrics = {"accuracy": 60.0 if better else 50.0, "success": 70.0 if better else 50.0,
                   "rounds": 6.0 if better else 9.0, "n_success": 50, "n_games": 100}
        for seed in group.seeds:
            io.write_json(group.run_dir(tmp_path, lo, hi, seed) / "games.json",
                          {f"S{S}": {"metrics": metrics} for S in (1, 10)})
            io.write_json(group.run_dir(tmp_path, lo, hi, seed) / "metrics.json",
                          {"seed": seed, "run_id": f"r{seed}", "val_acc": {"point": 0.5, "S1": 0.5, "S10": 0.5},
                           "val_nll": {"point": 1.0, "S1": 1.0, "S10": 1.0}})
    lines = [n for n in _declared_notes("17", tmp_path, "smoke") if n.startswith("Claim (§6.6")]
    assert len(lines) == 2, lines
    assert all("in our numbers it holds: better in" in line and "in the thesis's numbers it holds" in line
               for line in lines), lines


def test_game_runs_record_how_they_were_computed_and_their_tables_say_so(tmp_path):
    """A guess-the-number run's metrics.json records the execution-only keys, as a bAbI run's does, and Tables
    16-17 name them, the device and the training commit in their provenance (they named none before)."""
    from nlpbench.memnet.game import game_groups, game_table_parts, train_game_group
    params = registry.load(REPO / "params.yaml", {"scale": "smoke"})
    lo, hi = params["memnet"]["game"]["ranges"]["16"]
    for group in game_groups(params).values():
        train_game_group(group, params, tmp_path, "cpu", log=lambda _: None)
        m = io.read_json(group.run_dir(tmp_path, lo, hi, group.seeds[0]) / "metrics.json")
        assert m["memory_read"] in ("gather", "whole_table") and m["hop_kernels"] in ("eager", "compiled")
        assert (m.get("posterior_kernels") in ("eager", "compiled")) == (group.model == "tmemnn")
    prov = game_table_parts(params, "16", tmp_path).provenance
    assert prov["posterior kernels"].startswith(("eager", "compiled")) and "memnet.model.hop_kernels" in prov["hop kernels"]
    assert prov["device"].startswith("cpu") and "runs trained at" in prov["code commit"]


def test_a_game_cell_reports_the_seed_validation_chooses_with_the_spread_of_the_others(tmp_path):
    """Tables 16-17: five seeds a cell (two at smoke); the reported game metrics are those of the seed with the best
    validation accuracy on held-out training states, never of the best test games; the others give the range."""
    from nlpbench.memnet.game import game_groups, game_table_parts
    params = registry.load(REPO / "params.yaml", {"scale": "smoke"})
    lo, hi = params["memnet"]["game"]["ranges"]["16"]
    for group in game_groups(params).values():
        assert group.seeds == (0, 1)
        for seed, (val, accuracy) in zip(group.seeds, ((0.4, 90.0), (0.8, 70.0))):   # seed 1 validates better
            m = {"accuracy": accuracy, "success": 80.0, "rounds": 4.0, "n_success": 4, "n_games": 5}
            io.write_json(group.run_dir(tmp_path, lo, hi, seed) / "games.json", {"S1": {"metrics": m},
                                                                               "S10": {"metrics": m}})
            io.write_json(group.run_dir(tmp_path, lo, hi, seed) / "metrics.json",
                          {"seed": seed, "run_id": f"r{seed}", "val_acc": {"point": val, "S1": val, "S10": val},
                           "val_nll": {"point": 1.0, "S1": 1.0, "S10": 1.0}})
    cells = {(c.row, c.column): c for c in game_table_parts(params, "16", tmp_path).cells}
    cell = cells[("100 / Accuracy", "Baseline / MemN2N")]
    assert cell.reproduced == 70.0 and cell.seeds == {0: 90.0, 1: 70.0}
    assert cell.detail.startswith("seed 1 chosen by validation (80.0)")


def test_the_attention_tables_name_their_runs_as_the_project_does_not_by_this_disks_path():
    """Tables 3-5 list the runs they read as runs/<group>/<run>, whatever --runs pointed at."""
    for name in ("3", "4", "5"):
        text = (REPO / "results" / "tolias-thesis" / f"{name}.md").read_text()
        assert "`runs/" in text and "`/" not in text, name
