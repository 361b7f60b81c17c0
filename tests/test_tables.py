"""Tests for the reference loader, table building/writing and the results index."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from nlpbench.family import table_files
from nlpbench.results.paper import reference_cells, reference_index
from nlpbench.results.results_index import write_index
from nlpbench.results.tables import Cell, TableSpec, build_table, render_markdown, spec_from_home, write_table

COLS = ["Baseline / MemN2N", "t-MEM-NN / 1 sample", "t-MEM-NN / 10 samples"]
ROWS = [str(i) for i in range(1, 21)]
PIPELINE = Path(__file__).resolve().parents[1] / "pipeline"


def tolias2(**kw) -> TableSpec:
    args = dict(source="tolias-thesis", table="2", title="Quantitative assessment", rows=ROWS, columns=COLS,
                pass_threshold=95.0, mean_row=True)
    args.update(kw)
    return TableSpec(**args)


def paper_values() -> dict[tuple[str, str], float]:
    return {(c["row"], c["column"]): float(c["paper"]) for c in reference_cells("tolias-thesis", "2")}


def exact_cells(offset: float = 0.0) -> list[Cell]:
    return [Cell(r, c, v + offset) for (r, c), v in paper_values().items()]


def read_csv(path: Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def md_table(md: str) -> list[list[str]]:
    """Rows of the (single) Markdown table, split on unescaped pipes."""
    lines = [ln for ln in md.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in lines]


# ---------------------------------------------------------------- reference data


def test_reference_index_and_cells():
    index = reference_index()
    assert len(index) == 39
    assert {r["source"] for r in index} == {"tolias-thesis", "acvi-paper", "bahuleyan-thesis", "shen-thesis"}
    assert sum(r["cells"] for r in index) == 1332
    cells = reference_cells("tolias-thesis", "2")
    assert len(cells) == 60
    assert cells[0] == {"row": "1", "column": "Baseline / MemN2N", "paper": "100", "note": ""}
    for r in index:  # every table's CSV matches its declared cell count
        assert len(reference_cells(r["source"], r["table"])) == r["cells"], r


def test_reference_is_verbatim_copy():
    shared = Path(__file__).resolve().parents[2] / "shared" / "reference"   # beside the clone, as in CI
    if not shared.exists():
        pytest.skip("shared reference not available")
    for f in shared.rglob("*.csv"):
        rel = f.relative_to(shared)
        ours = (PIPELINE / "tables" / rel if rel.name == "index.csv" else
                PIPELINE / "outputs" / rel.parent / "attention.paper.csv" if rel.stem == "attention" else
                PIPELINE / "tables" / rel.parent / f"{rel.stem}.paper.csv")
        # every number and label verbatim; a note may only lose its pointer into the unshipped specification
        unshipped = lambda text: re.sub(r"garbled in the (text )?extraction( \([^)]*§[0-9.]+\)| of the thesis)",
                                        "garbled", text)
        assert unshipped(ours.read_text(encoding="utf-8")) == unshipped(f.read_text(encoding="utf-8")), f


def test_a_spec_from_its_home_takes_the_printed_title_then_the_homes_then_the_name():
    printed = next(r for r in reference_index() if r["source"] == "tolias-thesis" and r["table"] == "2")
    spec = spec_from_home("tolias-thesis", "2", {"title": "a home's own words"}, ["1", "2"], {"a": {}, "b": {}})
    assert (spec.title, spec.rows, spec.columns, spec.decimals) == (printed["title"], ["1", "2"], ["a", "b"], 1)
    study = spec_from_home("tolias-thesis", "hops-4", {"title": "Four hops", "decimals": 2}, [], [], mean_row=True)
    assert (study.title, study.decimals, study.mean_row) == ("Four hops", 2, True)
    assert spec_from_home("tolias-thesis", "hops-4", {}, [], []).title == "hops-4"


def test_a_table_writes_its_three_files_and_the_figures_its_home_declares():
    assert table_files("shen-thesis", "6.2", {}) == ("shen-thesis/6.2.md", "shen-thesis/6.2.csv", "shen-thesis/6.2.json")
    assert table_files("shen-thesis", "6.2", {"figure": "6.3"})[3:] == ("shen-thesis/fig6.3.png",)


def test_unknown_table_raises():
    with pytest.raises(KeyError):
        reference_cells("tolias-thesis", "99")


def test_reference_loader_returns_copies():
    reference_cells("tolias-thesis", "2")[0]["paper"] = "XXX"
    assert reference_cells("tolias-thesis", "2")[0]["paper"] == "100"


# ---------------------------------------------------------------- building


def test_diffs_mean_passes_and_flags(tmp_path):
    cells = exact_cells()
    # row 3 MemN2N: 40 vs printed 55 -> outside noise (-15, one seed); row 5 / 1 sample: 90 vs 87 -> +3, within ε
    cells = [Cell(c.row, c.column, 40.0) if (c.row, c.column) == ("3", COLS[0]) else c for c in cells]
    cells = [Cell(c.row, c.column, 90.0) if (c.row, c.column) == ("5", COLS[1]) else c for c in cells]
    res = build_table(tolias2(), cells, {"scale": "smoke"}, ["a reading"])
    rows = {(r["row"], r["column"]): r for r in read_csv(write_table(res, tmp_path)["csv"])}

    assert float(rows[("3", COLS[0])]["diff"]) == pytest.approx(-15.0)
    assert float(rows[("5", COLS[1])]["diff"]) == pytest.approx(3.0)
    assert float(rows[("1", COLS[0])]["diff"]) == 0.0
    assert rows[("1", COLS[0])]["paper"] == "100"

    mean = rows[("mean", COLS[0])]
    assert mean["paper"] == "80.70"
    assert float(mean["reproduced"]) == pytest.approx(80.70 - 15 / 20)
    assert float(mean["diff"]) == pytest.approx(-0.75)

    passes = rows[("passes", COLS[0])]
    assert passes["paper"] == "5"
    assert "paper: 1 4 12 15 20" in passes["note"]
    assert float(passes["reproduced"]) == 5.0
    # paper 10-sample column: row 13 is exactly 95 and counts
    assert rows[("passes", COLS[2])]["paper"] == "9"
    assert "paper: 1 4 6 11 12 13 14 15 20" in rows[("passes", COLS[2])]["note"]

    assert [(ln.row, ln.column) for ln in res.flagged] == [("3", COLS[0])]
    assert res.status == "reproduced"  # one cell outside noise of 60 does not veto the table
    side = json.loads((tmp_path / "tolias-thesis" / "2.json").read_text())
    assert [{k: v for k, v in c.items() if k != "why"} for c in side["outside_noise"]] == [
        {"row": "3", "column": COLS[0], "reproduced": 40.0, "paper": "55", "diff": -15.0}]
    assert side["n_compared"] == 60 and side["n_within_noise"] == 59
    assert side["n_cells"] == 60 and side["n_ok"] == 60 and side["max_abs_diff"] == 15.0
    assert side["provenance"] == {"scale": "smoke"}


def test_csv_layout_and_order(tmp_path):
    res = build_table(tolias2(), exact_cells(), {}, [])
    rows = read_csv(write_table(res, tmp_path)["csv"])
    assert list(rows[0]) == ["row", "column", "reproduced", "paper", "diff", "status", "note", "seeds", "noise"]
    assert len(rows) == 60 + 3 + 3
    assert [(r["row"], r["column"]) for r in rows[:60]] == [(r, c) for r in ROWS for c in COLS]
    assert [r["row"] for r in rows[60:]] == ["mean"] * 3 + ["passes"] * 3
    assert res.status == "reproduced"


def test_partial_mean_note(tmp_path):
    cells = [c for c in exact_cells() if not (c.column == COLS[0] and c.row in ("19", "20"))]
    res = build_table(tolias2(), cells, {}, [])
    rows = {(r["row"], r["column"]): r for r in read_csv(write_table(res, tmp_path)["csv"])}
    mean = rows[("mean", COLS[0])]
    assert float(mean["reproduced"]) == pytest.approx((1614 - 12 - 100) / 18)
    assert mean["paper"] == "80.70"
    assert "over 18 of 20 rows" in mean["note"]
    assert rows[("19", COLS[0])]["status"] == "not_run"
    assert rows[("19", COLS[0])]["reproduced"] == "" and rows[("19", COLS[0])]["diff"] == ""
    assert res.status == "reproduced (58 of 60 cells)"  # the others were not run


def test_needs_data(tmp_path):
    detail = "missing en-10k/qa3_three-supporting-facts_train.txt"
    cells = [Cell(c.row, c.column, None, "needs_data", detail) if c.row == "3" else c for c in exact_cells()]
    res = build_table(tolias2(), cells, {}, [])
    assert res.status == "reproduced (57 of 60 cells)"
    paths = write_table(res, tmp_path)
    md = paths["md"].read_text()
    table = md_table(md)
    row3 = next(r for r in table if r[0] == "3")
    assert row3[1] == row3[4] == row3[7] == "needs data"
    assert row3[2] == "55" and row3[3] == ""
    assert detail in md
    rows = {(r["row"], r["column"]): r for r in read_csv(paths["csv"])}
    assert rows[("3", COLS[0])]["status"] == "needs_data"
    assert detail in rows[("3", COLS[0])]["note"]
    side = json.loads(paths["json"].read_text())
    assert side["status"] == "reproduced (57 of 60 cells)" and side["n_needs_data"] == 3 and side["n_ok"] == 57


def test_not_run_and_failed_render():
    cells = [Cell("1", COLS[0], None, "failed", "CUDA OOM"), Cell("2", COLS[0], float("nan"))]
    res = build_table(tolias2(), cells, {}, [])
    table = md_table(render_markdown(res))
    assert table[2][1] == "failed"
    assert table[3][1] == "failed"  # NaN is a failure, not a number
    assert table[4][1] == "not run"
    assert res.status == "not yet implemented"  # no cell has a value
    assert build_table(tolias2(), cells + [Cell("3", COLS[0], 55.0)], {}, []).status == "differs"
    assert build_table(tolias2(), [], {}, []).status == "not yet implemented"


def test_markdown_shape(tmp_path):
    res = build_table(tolias2(), exact_cells(0.5), {"device": "cpu", "code commit": "abc123", "scale": "smoke"},
                      ["reading: 1k split"])
    md = write_table(res, tmp_path)["md"].read_text()
    assert md.startswith("# Tolias, PhD thesis (2020), seed 000 — Table 2: Quantitative assessment\n")
    # provenance bullets in one order (tables.PROVENANCE_ORDER), whatever order they were given in
    assert md.index("- **scale**: smoke") < md.index("- **code commit**: abc123") < md.index("- **device**: cpu")
    # a table computed on a CPU says what agreement a rebuild elsewhere should give, and how to check it
    assert md.index("- **device**: cpu") < md.index("- **rebuilding it**: bit for bit on a CPU whose torch kernels")
    assert "`nlpbench verify tolias-thesis/2`" in md
    table = md_table(md)
    assert len(table) == 2 + 20 + 2  # header, separator, 20 tasks, mean, passes
    assert all(len(r) == 1 + 3 * 3 for r in table)
    assert table[0][:4] == ["row", "Baseline / MemN2N (reproduced)", "(paper)", "(Δ)"]
    assert set(table[1][1:]) == {"---:"}
    assert table[2] == ["1", "100.5", "100", "+0.5", "100.5", "100", "+0.5", "100.5", "100", "+0.5"]
    assert table[-2][0] == "**mean**" and table[-1][0] == "**# ≥ 95%**"
    assert table[-2][2] == "**80.70**"
    assert table[-1][2] == "**5** (1 4 12 15 20)"
    assert "## Cells outside our noise\n\nnone" in md
    assert "- reading: 1k split" in md
    assert res.status == "reproduced"


def test_markdown_escapes_pipes_and_marks_cited(tmp_path):
    cols = ["ROUGE / 1", "METEOR / + stem/syn/para"]
    spec = TableSpec("acvi-paper", "1", "ROUGE | test", ["seq2seq with SA"], cols, decimals=2)
    res = build_table(spec, [Cell("seq2seq with SA", "ROUGE / 1", 30.0)], {"config": {"a": 1, "b": "x|y"}}, [])
    md = write_table(res, tmp_path)["md"].read_text()
    table = md_table(md)
    assert all(len(r) == 7 for r in table)
    assert table[2][1:4] == ["30.00", "31.33 (cited)", "-1.33"]   # Δ with the paper's decimals
    assert table[2][4:7] == ["not run", "13.20 (cited)", ""]
    assert "printed cell(s) are not part of this table" in md  # other rows of paper table 1


def test_misprint_note_carried(tmp_path):
    spec = TableSpec("tolias-thesis", "10", "Joint", ["2"], COLS)
    res = build_table(spec, [Cell("2", COLS[0], 80.0)], {}, [])
    rows = read_csv(write_table(res, tmp_path)["csv"])
    assert rows[0]["note"].startswith("misprint:")
    md = (tmp_path / "tolias-thesis" / "10.md").read_text()
    assert "(misprint)" in md and "Paper misprint:" in md


def test_unknown_cell_has_empty_paper(tmp_path):
    spec = TableSpec("tolias-thesis", "2", "t", ["1", "21"], [COLS[0], "Extra / col"])
    cells = [Cell("21", COLS[0], 50.0), Cell("1", "Extra / col", 60.0), Cell("1", COLS[0], 100.0)]
    res = build_table(spec, cells, {}, [])
    rows = {(r["row"], r["column"]): r for r in read_csv(write_table(res, tmp_path)["csv"])}
    assert rows[("21", COLS[0])]["reproduced"] == "50"
    assert rows[("21", COLS[0])]["paper"] == "" and rows[("21", COLS[0])]["diff"] == ""
    assert rows[("1", "Extra / col")]["reproduced"] == "60"
    table = md_table((tmp_path / "tolias-thesis" / "2.md").read_text())
    assert table[3][1:4] == ["50.0", "", ""]


def test_invalid_cells_raise():
    with pytest.raises(ValueError):
        build_table(tolias2(), [Cell("1", COLS[0], 1.0), Cell("1", COLS[0], 2.0)], {}, [])
    with pytest.raises(ValueError):
        build_table(tolias2(), [Cell("99", COLS[0], 1.0)], {}, [])
    with pytest.raises(ValueError):
        build_table(tolias2(), [Cell("1", COLS[0], 1.0, "weird")], {}, [])


def test_write_is_atomic(tmp_path):
    paths = write_table(build_table(tolias2(), exact_cells(), {"date": "2024-01-01"}, []), tmp_path)
    assert set(paths) == {"csv", "md", "json"} and all(p.exists() for p in paths.values())
    write_index(tmp_path)
    leftovers = [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


# ---------------------------------------------------------------- results index


def test_write_index(tmp_path):
    write_table(build_table(tolias2(), exact_cells(), {}, []), tmp_path)
    needs = [Cell("1", COLS[0], None, "needs_data", "missing hn-1k")]
    write_table(build_table(tolias2(table="11"), needs, {}, []), tmp_path)
    write_index(tmp_path)

    with open(tmp_path / "index.csv", encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert reader.fieldnames == ["source", "table", "title", "status", "path"]
    assert len(rows) == 39
    assert [(r["source"], r["table"]) for r in rows] == [(r["source"], r["table"]) for r in reference_index()]
    by = {(r["source"], r["table"]): r for r in rows}
    assert by[("tolias-thesis", "2")]["status"] == "reproduced"
    assert by[("tolias-thesis", "2")]["path"] == "tolias-thesis/2.csv"
    assert by[("tolias-thesis", "11")]["status"] == "needs data"
    assert by[("shen-thesis", "6.7")]["status"] == "not yet implemented"
    assert by[("shen-thesis", "6.7")]["path"] == ""

    readme = (tmp_path / "README.md").read_text()
    for label in ("Tolias, PhD thesis (2020), seed 000", "Tolias, Kourouklides & Chatzis, ACVI paper, seed 002",
                  "Bahuleyan, MASc thesis (2018), seed 001", "Shen, PhD thesis, seed 004"):
        assert f"## {label}" in readme
    assert "Seed 003" in readme
    assert "[md](tolias-thesis/2.md) · [csv](tolias-thesis/2.csv)" in readme
    tables = md_table(readme)
    assert all(len(r) == 6 for r in tables)  # "Mean |Δ|" header pipes are escaped
    assert len([r for r in tables if r[0] not in ("Table", "---")]) == 39
    row2 = next(r for r in tables if r[0] == "2" and "Quantitative" in r[1])
    assert row2[2:5] == ["reproduced", "60 / 60", "0.00"]


def test_table_and_index_print_the_same_mean(tmp_path):
    # one cell at 40.2975 puts the mean |Δ| at 0.2450417: printed raw that is 0.25, but the sidecar stores 0.245
    # (a binary 0.24499...), which the index prints as 0.24; both must print what the sidecar stores
    cells = [Cell(c.row, c.column, 40.2975) if (c.row, c.column) == ("3", COLS[0]) else c for c in exact_cells()]
    res = build_table(tolias2(), cells, {}, [])
    assert f"{res.mean_abs_diff:.2f}" != f"{round(res.mean_abs_diff, 4):.2f}"   # the case this test is about
    write_table(res, tmp_path)
    write_index(tmp_path)
    row2 = next(r for r in md_table((tmp_path / "README.md").read_text()) if r[0] == "2" and "Quantitative" in r[1])
    md = (tmp_path / "tolias-thesis" / "2.md").read_text()
    assert f"mean |Δ| {row2[4]}," in md


def test_index_lists_registered_outputs(tmp_path):
    from nlpbench.results.results_index import register_output
    write_table(build_table(tolias2(), exact_cells(), {}, []), tmp_path)
    register_output(tmp_path, "tolias-thesis", "fig16", "Test error per epoch, task 11", "figure", ["fig16.png"],
                    "generated", "smoke")
    with pytest.raises(ValueError):
        register_output(tmp_path, "tolias-thesis", "x", "x", "poster", ["x.md"], "generated", "smoke")
    write_index(tmp_path)
    readme = (tmp_path / "README.md").read_text()
    assert "| fig16 | Test error per epoch, task 11 | figure | generated | smoke | [png](tolias-thesis/fig16.png) |" in readme
    with open(tmp_path / "index.csv", encoding="utf-8", newline="") as f:
        assert len(list(csv.DictReader(f))) == 39      # index.csv stays one row per reference table
    register_output(tmp_path, "nobody", "x", "x", "figure", ["x.png"], "generated", "smoke")
    with pytest.raises(ValueError, match="nobody"):
        write_index(tmp_path)


def test_dof_summary_counts_each_run_once_and_judges_the_claim(tmp_path):
    from nlpbench import config
    from nlpbench.memnet.groups import all_groups
    from nlpbench.memnet.qualitative import dof_summary

    params = config.load(Path(__file__).resolve().parents[1] / "params.yaml", {"scale": "smoke"})
    groups = [g for g in all_groups(params).values() if g.model == "tmemnn"]
    assert any(g.joint for g in groups) and any(not g.joint for g in groups)
    runs, expected, per_task_groups = tmp_path / "runs", 0, 0
    for g in groups:
        dirs = {g.run_dir(runs, t, s) for t in g.tasks for s in g.seeds}
        per_task_groups += bool(dirs) and not g.joint
        for i, d in enumerate(sorted(dirs)):
            d.mkdir(parents=True)
            nu_c = 30.0 if (g.joint or i) else 2.0            # only one run per per-task group within the claim
            (d / "metrics.json").write_text(json.dumps({"status": "ok", "dof": {"A": 2.0, "B": 3.0, "C": nu_c}}))
            expected += 1
    dof_summary(params, runs, tmp_path / "results")
    rows = read_csv(tmp_path / "results" / "tolias-thesis" / "dof.csv")
    assert len(rows) == expected                               # a joint model is one run, not one per task
    assert sum(r["task"] == "joint" for r in rows) == sum(len(g.seeds) for g in groups if g.joint)
    n_ok = sum(r["within_claim"] == "True" for r in rows)
    assert n_ok == per_task_groups
    assert f"Claim holds in {n_ok} of {expected} runs." in (tmp_path / "results" / "tolias-thesis" / "dof.md").read_text()


def test_every_family_labels_smoke_tables_and_says_what_ok_means(tmp_path):
    """Smoke tables carry the note that their numbers mean nothing, whatever the family; the status line says
    that a counted cell has a value (nothing about being close to the paper)."""
    from nlpbench import config
    from nlpbench.results import build
    from nlpbench.family import Paths

    params = config.load(Path(__file__).resolve().parents[1] / "params.yaml", {"scale": "smoke"})
    paths = Paths(data=tmp_path / "data", runs=tmp_path / "runs", results=tmp_path / "results")
    for source, table in (("tolias-thesis", "2"), ("shen-thesis", "6.5"), ("bahuleyan-thesis", "4.2")):
        md = build.table(params, source, table, paths, allow_empty=True)["md"].read_text()
        assert "mean nothing about the models" in md, source
        assert "0 with a reproduced value" in md and " ok" not in md.split("## Provenance")[0]
    cpu = config.load(Path(__file__).resolve().parents[1] / "params.yaml", {"scale": "cpu"})
    assert "mean nothing" not in build.table(cpu, "tolias-thesis", "2", paths, allow_empty=True)["md"].read_text()


def test_a_table_with_nothing_trained_never_replaces_an_existing_one(tmp_path):
    from nlpbench import config
    from nlpbench.results import build
    from nlpbench.config import ConfigError
    from nlpbench.family import Paths

    params = config.load(Path(__file__).resolve().parents[1] / "params.yaml", {"scale": "cpu"})
    paths = Paths(data=tmp_path / "data", runs=tmp_path / "runs", results=tmp_path / "results")
    committed = paths.results / "tolias-thesis" / "2.md"
    committed.parent.mkdir(parents=True)
    committed.write_text("the committed table\n")
    with pytest.raises(ConfigError, match=r"2\.md: nothing trained for this table at scale cpu"):
        build.table(params, "tolias-thesis", "2", paths)
    assert committed.read_text() == "the committed table\n"
    assert not (paths.results / "index.csv").exists()          # only `nlpbench index` writes the index
    build.table(params, "tolias-thesis", "2", paths, allow_empty=True)
    assert "not run" in committed.read_text()


def test_compare_seeds_judges_a_difference_against_the_larger_seed_sd():
    from nlpbench.results.tables import compare_seeds
    c = compare_seeds([10.0, 12.0], [5.0, 5.0])           # means 11 and 5, SDs 1.414 and 0
    assert c["diff"] == 6.0 and abs(c["spread"] - 2 ** 0.5) < 1e-12 and c["exceeds"]
    assert not compare_seeds([10.0, 16.0], [10.0, 10.0])["exceeds"]    # diff 3 inside SD 4.24
    assert not compare_seeds([20.0], [5.0])["exceeds"]                  # one seed: never judged beyond the spread


@pytest.mark.parametrize("source, name, fails", [
    ("tolias-thesis", "2", "md"),          # the second of the table's files
    ("shen-thesis", "6.3", "png"),         # its figure, drawn after the table's three files
])
def test_a_table_whose_build_fails_midway_leaves_its_old_files_unchanged(tmp_path, monkeypatch, source, name, fails):
    """A full disk while a table is written: never a new CSV beside an old .md (or an old figure)."""
    import errno
    import os

    from nlpbench import config
    from nlpbench.results import build
    from nlpbench.runtime import io
    from nlpbench.family import Paths
    params = config.load(Path(__file__).resolve().parents[1] / "params.yaml", {"scale": "smoke"})
    paths = Paths(tmp_path / "data", tmp_path / "runs", tmp_path / "results")
    written = build.table(params, source, name, paths, allow_empty=True)
    old = {}
    for path in (tmp_path / "results" / source).iterdir():
        path.write_bytes(b"old " + path.name.encode())
        old[path.name] = path.read_bytes()
    assert {"csv", "md", "json"} <= set(written) and (fails != "png" or "figure" in written)
    real = io.atomic_path

    def full_disk(path, *args, **kwargs):
        if str(path).endswith(f".{fails}"):
            raise io.OutputError(path, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        return real(path, *args, **kwargs)
    monkeypatch.setattr(io, "atomic_path", full_disk)
    with pytest.raises(io.OutputError, match="No space left"):
        build.table(params, source, name, paths, allow_empty=True)
    assert {p.name: p.read_bytes() for p in (tmp_path / "results" / source).iterdir()} == old
    assert [p.name for p in (tmp_path / "results").iterdir()] == [source]


def test_a_tables_figure_is_linked_from_its_page(tmp_path):
    res = build_table(tolias2(figures=["fig4.1.png"]), exact_cells(), {}, [])
    assert "## Figure\n\n![fig4.1](fig4.1.png)\n" in write_table(res, tmp_path)["md"].read_text()


def test_a_truncated_run_metrics_file_stops_the_table_on_one_line_naming_it(tmp_path, capsys):
    """A run's metrics.json cut short (a full disk, a hand edit): the table is not built, the error names the file
    in one line and the committed table stays as it was."""
    from nlpbench import cli, config
    from nlpbench.memnet.groups import declaration_groups
    repo = Path(__file__).resolve().parents[1]
    params = config.load(repo / "params.yaml", {"scale": "smoke"})
    group = next(iter(declaration_groups(params, config.declaration(params, "tables", "tolias-thesis", "2")).values()))
    metrics = group.run_dir(tmp_path / "runs", group.tasks[0], group.seeds[0]) / "metrics.json"
    metrics.parent.mkdir(parents=True)
    metrics.write_text('{"status": "ok", "seed": 0, "test_acc": {"po')
    committed = tmp_path / "results" / "tolias-thesis" / "2.md"
    committed.parent.mkdir(parents=True)
    committed.write_text("the committed table\n")
    code = cli.main(["--params", str(repo / "params.yaml"), "--overrides", str(tmp_path / "none.yaml"),
                     "--set", "scale=smoke", "--runs", str(tmp_path / "runs"), "--results", str(tmp_path / "results"),
                     "table", "tolias-thesis", "2"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{metrics}: not valid JSON (line 1, column 42" in err
    assert [p.name for p in committed.parent.iterdir()] == ["2.md"] and committed.read_text() == "the committed table\n"
