"""params.yaml: schema validation with errors that name the key, scales as overrides, one declaration shape,
run ids that the committed tables name, and the package's shape (families behind one interface)."""

import ast
import re
import shutil
import types
from pathlib import Path

import pytest
import yaml

from nlpbench import config, plan, registry
from nlpbench.memnet import groups as mg
from nlpbench.results import paper
from nlpbench.runtime.io import OutputError
from nlpbench.timing import records
from project_repo import edit_params
from yaml_bombs import DEEP, alias_bomb, alias_bomb_value

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "nlpbench"


@pytest.fixture
def params_file(tmp_path):
    path = tmp_path / "params.yaml"
    shutil.copy(REPO / "params.yaml", path)
    shutil.copytree(REPO / "pipeline", tmp_path / "pipeline")      # the declarations' homes
    return path


def _edit(path, fn):
    edit_params(path, fn)


def _table2(params):
    return mg.declaration_groups(params, config.declaration(params, "tables", "tolias-thesis", "2"))


def test_the_shipped_params_are_valid_at_every_scale():
    for scale in ("paper", "cpu", "smoke"):
        params = config.load(REPO / "params.yaml", {"scale": scale})
        p = plan.make(params)
        assert params["scale"] == scale and p.groups and p.targets
        assert {p.owner[k] for k in p.targets} == {"memnet", "dmn", "textgen", "squad", "acvi", "timing"}


def test_unknown_key_is_named(params_file):
    _edit(params_file, lambda d: d["memnet"]["train"].update(learning_rate=0.1))
    with pytest.raises(config.ConfigError, match=r"memnet\.train.*learning_rate"):
        config.load(params_file)


def test_bad_value_is_named(params_file):
    _edit(params_file, lambda d: d["memnet"]["model"].update(hops=0))
    with pytest.raises(config.ConfigError, match=r"memnet\.model\.hops"):
        config.load(params_file)


def test_bad_override_and_unknown_scale_are_named(params_file):
    with pytest.raises(config.ConfigError, match="memnet.train.epoch"):
        config.load(params_file, {"memnet.train.epoch": 3})
    with pytest.raises(config.ConfigError, match="tiny"):
        config.load(params_file, {"scale": "tiny"})
    _edit(params_file, lambda d: d["scales"]["smoke"].update({"memnet.train.epochs": -1}))
    with pytest.raises(config.ConfigError, match=r"memnet\.train\.epochs"):
        config.load(params_file, {"scale": "smoke"})


@pytest.mark.parametrize("family, section, source, name, key", [
    ("memnet", "tables", "tolias-thesis", "2", "colums"),
    ("dmn", "tables", "shen-thesis", "6.2", "figures"),
    ("textgen", "tables", "bahuleyan-thesis", "4.2", "tolerence"),
    ("textgen", "outputs", "bahuleyan-thesis", "4.3", "sample"),
    ("memnet", "outputs", "tolias-thesis", "3", "stroy"),
])
def test_a_bad_key_in_any_declaration_is_named(params_file, family, section, source, name, key):
    _edit(params_file, lambda d: d[section][source][name].update({key: 1}))
    with pytest.raises(config.ConfigError, match=rf"{section}\.{source}\.{re.escape(name)}.*'{key}'"):
        config.load(params_file)


def test_an_unknown_family_or_source_is_named(params_file):
    _edit(params_file, lambda d: d["tables"]["tolias-thesis"]["2"].update(family="memnets"))
    with pytest.raises(config.ConfigError, match=r"tables\.tolias-thesis\.2\.family"):
        config.load(params_file)


def test_dotted_keys_reach_declarations_whose_names_hold_dots():
    params = config.load(REPO / "params.yaml", {"tables.bahuleyan-thesis.4.2.decimals": 3,
                                                "outputs.bahuleyan-thesis.fig4.7.smooth": 7})
    assert params["tables"]["bahuleyan-thesis"]["4.2"]["decimals"] == 3
    assert params["outputs"]["bahuleyan-thesis"]["fig4.7"]["smooth"] == 7
    with pytest.raises(config.ConfigError, match=r"tables\.bahuleyan-thesis\.4\.3"):
        config.load(REPO / "params.yaml", {"tables.bahuleyan-thesis.4.3.decimals": 3})


def test_scales_change_the_runs_not_the_code():
    gp = _table2(config.load(REPO / "params.yaml", {"scale": "paper"}))
    gs = _table2(config.load(REPO / "params.yaml", {"scale": "smoke"}))
    assert set(gp) == set(gs) == {"memn2n", "tmemnn"}
    assert gp["memn2n"].group_id != gs["memn2n"].group_id          # different settings, different runs
    assert len(gp["memn2n"].tasks) == 20 and gs["memn2n"].tasks == (1, 20)
    assert gs["tmemnn"].settings["train"]["epochs"] == 2
    assert "bayes" not in gp["memn2n"].settings and "bayes" in gp["tmemnn"].settings


def test_group_ids_are_stable_and_follow_the_settings():
    a = _table2(config.load(REPO / "params.yaml", {"scale": "paper"}))
    b = _table2(config.load(REPO / "params.yaml", {"scale": "paper"}))
    c = _table2(config.load(REPO / "params.yaml", {"scale": "paper", "memnet.model.hops": 1}))
    assert a["tmemnn"].group_id == b["tmemnn"].group_id != c["tmemnn"].group_id
    assert c["tmemnn"].group_id.startswith("tmemnn-en-h1-d20-")


def _committed_runs(md: Path) -> set[str]:
    line = next((ln for ln in md.read_text().splitlines() if ln.startswith("- **runs**:")), None)
    if line is None:      # a table with nothing to train here names no runs
        return set()
    return {r.strip() for r in line.split(":", 1)[1].split(",")} - {"none"}   # "none": a table nothing trains here


def _claim_tables(params: dict, target) -> list[str]:
    from nlpbench.results.notes import referenced_tables
    return referenced_tables(params["tables"][target.source][target.name], target.name)


def test_the_committed_tables_name_exactly_the_runs_the_code_derives():
    """The committed tables are the cpu scale's; their provenance names the runs they read. The code must derive
    exactly those ids from params.yaml (a renamed run would retrain, or read nothing)."""
    params = config.load(REPO / "params.yaml", {"scale": "cpu"})
    p = plan.make(params)
    checked = 0
    for target in p.targets.values():
        md = REPO / "results" / target.source / f"{target.name}.md"
        if target.section != "tables" or not md.exists():
            continue
        derived = {str(Path(p.groups[g].done).parent) for g in target.groups}
        committed = _committed_runs(md)
        # a table's provenance names its own runs; it also reads those of the tables its claims compare with
        compared = {str(Path(p.groups[g].done).parent) for t in _claim_tables(params, target)
                    for g in p.targets[f"{target.source}/{t}"].groups}
        assert committed <= derived and derived - committed <= compared, target.key
        checked += 1
    assert checked == 52       # every committed table of the five families (squad: 9; acvi: 20, 25, 26, acvi-qg, paper 1-4;
                               # memnet: + the task-3 and en-10k task-15 seed tables, the position, Hindi and
                               # minibatch pilots, hindi-size, hindi-answer-forms; dmn: + the ff-DMN reading pilot)


def test_notes_never_change_run_ids(params_file):
    def ids(path):
        return sorted(plan.make(config.load(path, {"scale": "cpu"})).groups)

    before = ids(params_file)

    def add_notes(data):
        for source in data["tables"].values():
            for decl in source.values():
                decl["notes"] = ["a new explanation"]
    _edit(params_file, add_notes)
    assert ids(params_file) == before


def test_declaration_overrides_are_checked(params_file):
    _edit(params_file, lambda d: d["tables"]["tolias-thesis"]["2"].update(overrides={"model.hopz": 1}))
    with pytest.raises(config.ConfigError, match=r"tables\.tolias-thesis\.2\.overrides.*model.hopz"):
        registry.load(params_file)


# -- the package's shape ----------------------------------------------------------------------------------

def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return out


def test_the_core_imports_no_family_except_through_the_registry():
    families = (set(registry.FAMILIES) | set(registry.NOT_YET_WIRED)) - {"timing"}   # timing measures them
    assert families <= {p.name for p in PACKAGE.iterdir() if p.is_dir()}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        home = rel.parts[0] if len(rel.parts) > 1 else None
        for module in _imports(path):
            parts = module.split(".")
            if parts[0] == "nlpbench" and len(parts) > 1 and parts[1] in families and parts[1] != home:
                assert rel.as_posix() == "registry.py" or home == "timing", f"{rel} imports {module}"
    for family in registry.FAMILIES:
        assert f"nlpbench.{family}." in registry.FAMILIES[family]


def test_the_top_level_holds_only_the_core_and_one_folder_per_family():
    # the pipeline's face; the table engine is the results wing, what a running job needs the runtime wing
    core = {"__init__", "cli", "clone", "config", "family", "plan", "registry", "resources", "share", "share_pull",
            "status", "verify"}
    assert {p.stem for p in PACKAGE.glob("*.py")} == core
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(registry.FAMILIES) | set(registry.NOT_YET_WIRED) | {"data", "metrics", "nn",
                                                                             "schema", "results", "runtime"}


def test_the_readme_ablation_pastes_into_params_and_adds_its_groups_and_table(params_file):
    """README, 'Adding an ablation': the home as shown, copied beside the others, is a valid table (a study)."""
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Adding an ablation"):readme.index("## Adding a model family")]
    snippet = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    (params_file.parent / "pipeline" / "tables" / "tolias-thesis" / "hops-4.yaml").write_text(snippet)
    before = plan.make(config.load(REPO / "params.yaml", {"scale": "cpu"}))
    params = config.load(params_file, {"scale": "cpu"})
    after = plan.make(params)
    assert set(after.targets) - set(before.targets) == {"tolias-thesis/hops-4"}
    new = set(after.groups) - set(before.groups)
    assert len(new) == 2 and all("-h4-" in g for g in new)
    assert len(after.targets) == len(before.targets) + 1     # nothing else was dropped
    assert after.targets["tolias-thesis/hops-4"].study and after.targets["tolias-thesis/hops-4"] in after.part(True)


def test_scale_auto_follows_the_device():
    assert config.load(REPO / "params.yaml", {"device": "cpu"})["scale"] == "cpu"
    assert yaml.safe_load((REPO / "params.yaml").read_text())["scale"] == "auto"


def test_a_value_the_user_sets_beats_the_scale_and_is_validated():
    smoke = config.load(REPO / "params.yaml", {"scale": "smoke", "memnet.train.epochs": 5})
    assert smoke["memnet"]["train"]["epochs"] == 5
    default = _table2(config.load(REPO / "params.yaml", {"scale": "smoke"}))["tmemnn"]
    assert _table2(smoke)["tmemnn"].group_id != default.group_id          # a new run, not the 2-epoch one
    with pytest.raises(config.ConfigError, match=r"memnet\.train\.epochs"):
        config.load(REPO / "params.yaml", {"scale": "smoke", "memnet.train.epochs": "abc"})
    assert config.load(REPO / "params.yaml", {"scale": "smoke", "task_subset": [1]})["task_subset"] == [1]


def test_nested_overrides_mean_the_same_as_dotted_ones():
    """Snakemake's --config takes identifier keys only: memnet='{train: {lr: 0.01}}' is memnet.train.lr=0.01."""
    dotted = config.load(REPO / "params.yaml", {"scale": "cpu", "memnet.train.lr": 0.01})
    nested = config.load(REPO / "params.yaml", {"scale": "cpu", "memnet": {"train": {"lr": 0.01}}})
    assert dotted == nested and nested["memnet"]["train"]["epochs"] == 100   # siblings kept
    as_snakemake_hands_it = config.load(REPO / "params.yaml", {"scale": "cpu", "memnet": {"train": {"lr": "0.01"}}})
    assert as_snakemake_hands_it == dotted                                   # its leaves arrive as strings
    tables = config.load(REPO / "params.yaml", {"tables": {"bahuleyan-thesis": {"4.2": {"decimals": 3}}}})
    assert tables["tables"]["bahuleyan-thesis"]["4.2"]["decimals"] == 3
    assert tables["tables"]["bahuleyan-thesis"]["4.2"]["family"] == "textgen"   # siblings kept
    slot = config.load(REPO / "params.yaml", {"scale": "cpu", "dmn": {"train_overrides": {"tasks": {"max_epochs": 4}}}})
    assert slot["dmn"]["train_overrides"]["tasks"] == {"max_epochs": 4}     # an empty mapping is set whole
    with pytest.raises(config.ConfigError, match=r"memnet\.train\.lrr"):
        config.load(REPO / "params.yaml", {"memnet": {"train": {"lrr": 0.01}}})


def test_the_docs_show_the_real_code_of_the_smallest_family():
    section = (REPO / "docs" / "adding-a-family.md").read_text()
    shown = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert shown.rstrip() == (PACKAGE / "dmn" / "family.py").read_text().rstrip()
    assert '"dmn": "nlpbench.dmn.family:DMN"' in section and registry.FAMILIES["dmn"] == "nlpbench.dmn.family:DMN"


# names that could run a command in a rule's shell, hide a file, pass for an option, or climb out of results/
BAD_NAMES = ["2; touch X; echo", "../../../../../tmp/x", "a b", "it's", ".hidden", "-x", "a..b", "a/b", "x.", ""]


def _rename_table_2(bad):
    def edit(d):
        d["tables"]["tolias-thesis"][bad] = d["tables"]["tolias-thesis"]["2"]
    return edit


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_a_table_name_that_is_not_a_plain_name_is_refused_naming_the_key(params_file, bad):
    _edit(params_file, _rename_table_2(bad))
    with pytest.raises(config.ConfigError, match=rf"tables\.tolias-thesis: key {re.escape(repr(bad))} is not a "
                                                 r"valid name \(letters, digits"):
        config.load(params_file)


@pytest.mark.parametrize("where", ["outputs", "scales"])
def test_output_and_scale_names_are_refused_likewise(params_file, where):
    bad = "x; rm -rf y"

    def edit(d):
        if where == "outputs":
            d["outputs"]["tolias-thesis"][bad] = d["outputs"]["tolias-thesis"]["3"]
        else:
            d["scales"][bad] = {}
    _edit(params_file, edit)
    key = {"outputs": r"outputs\.tolias-thesis: key ", "scales": r"scales: key "}[where]
    with pytest.raises(config.ConfigError, match=key + re.escape(repr(bad)) + " is not a valid name"):
        config.load(params_file)


@pytest.mark.parametrize("home", ["4.2", "6.2"])      # a SQuAD table's home and a DMN table's
@pytest.mark.parametrize("bad", ["../../../x", "a b; touch X", ".hidden", "-x", "4/1"])
def test_a_figure_that_is_not_a_plain_name_is_refused_naming_its_home_and_key(params_file, home, bad):
    """`figure: "4.1"` is drawn to fig4.1.png beside the table: a name like any other."""
    file = params_file.parent / "pipeline" / "tables" / "shen-thesis" / f"{home}.yaml"
    text = file.read_text()
    assert re.search(r'^figure: "[0-9.]+"$', text, re.M)
    file.write_text(re.sub(r'^figure: "[0-9.]+"$', f"figure: {bad!r}", text, flags=re.M))
    with pytest.raises(config.ConfigError) as e:
        config.load(params_file)
    assert str(e.value).startswith(f"{file}: invalid parameters")
    assert f"\n  figure: {bad!r} is not a valid name (letters, digits" in str(e.value)      # the key in the home


def test_every_shipped_name_is_a_valid_name():
    pattern = config.name_pattern()
    params = config.load(REPO / "params.yaml", {"scale": "paper"})
    names = [n for section in ("tables", "outputs") for items in params[section].values() for n in items]
    names += list(params["scales"]) + list(records.load(REPO))
    assert {"4.2", "A.1", "fig5.2-loss", "2-layerwise"} <= set(names)
    assert all(re.fullmatch(pattern, n) for n in names)


@pytest.mark.parametrize("bad_id, bad_path", [("a b; touch X", None), (None, "../elsewhere/group.json"),
                                              (None, "/tmp/group.json")])
def test_the_plan_refuses_an_id_or_a_file_that_a_family_builds_badly(monkeypatch, bad_id, bad_path):
    """Group and step ids are built by the families from their settings: the one place a plan is made checks
    every id and every file a rule would write, whatever the family."""
    from nlpbench.family import TrainGroup
    params = config.load(REPO / "params.yaml", {"scale": "smoke"})
    memnet = registry.get("memnet")
    real = memnet.groups

    def groups(p):
        out = real(p)
        g = out[0]
        return [TrainGroup(bad_id or g.id, bad_path or g.done, g.needs)] + out[1:]
    monkeypatch.setattr(memnet, "groups", groups)
    with pytest.raises((config.ConfigError, OSError), match=re.escape(bad_id or bad_path)):
        plan.make(params)


def test_nlpbench_table_writes_nothing_outside_the_project_for_a_name_that_climbs_out(tmp_path, capsys):
    from nlpbench import cli
    project = tmp_path / "a" / "b" / "c" / "project"      # results/tolias-thesis/../../../../../tmp/x: a/tmp/x.*
    project.mkdir(parents=True)
    params_file = project / "params.yaml"
    shutil.copy(REPO / "params.yaml", params_file)
    shutil.copytree(REPO / "pipeline", project / "pipeline")
    bad = "../../../../../tmp/x"
    _edit(params_file, _rename_table_2(bad))
    args = ["--params", str(params_file), "--overrides", str(project / "overrides.yaml"), "--set", "scale=smoke",
            "--data", str(project / "data"), "--runs", str(project / "runs"), "--results", str(project / "results")]
    rc = cli.main(args + ["table", "tolias-thesis", bad])
    assert [p for p in tmp_path.rglob("*") if p.is_file() and project not in p.parents] == []
    assert rc == 2 and f"tables.tolias-thesis: key {bad!r} is not a valid name" in capsys.readouterr().err


def test_a_table_built_from_an_unchecked_name_is_not_written_outside_the_results(tmp_path):
    """The core's own guard, behind the schema: every table file is checked to lie inside the results directory."""
    from nlpbench.results import build
    from nlpbench.family import Paths
    from nlpbench.runtime.io import OutputError
    params = config.load(REPO / "params.yaml", {"scale": "smoke"})
    bad = "../../x"
    params["tables"]["tolias-thesis"][bad] = params["tables"]["tolias-thesis"]["2"]
    project = tmp_path / "project"
    with pytest.raises(OutputError, match="outside"):
        build.table(params, "tolias-thesis", bad, Paths(project / "data", project / "runs", project / "results"))
    assert [p for p in tmp_path.rglob("*") if p.is_file() and project not in p.parents] == []


def test_runs_data_and_results_linked_to_another_disk_are_written_through(tmp_path, monkeypatch, capsys):
    """runs/, data/ and results/ as links to a bigger disk: every command plans and writes through them, while a
    name in a configuration that climbs out with '..' or is an absolute path is still refused."""
    from nlpbench import cli
    from nlpbench.results import build
    from nlpbench.runtime import io
    from nlpbench.family import Paths
    project, disk = tmp_path / "project", tmp_path / "bigger-disk"
    project.mkdir()
    shutil.copy(REPO / "params.yaml", project / "params.yaml")
    shutil.copytree(REPO / "pipeline", project / "pipeline")
    for name in ("data", "runs", "results"):
        (disk / name).mkdir(parents=True)
        (project / name).symlink_to(disk / name)
    monkeypatch.chdir(project)
    assert cli.main(["--set", "scale=smoke", "plan"]) == 0, capsys.readouterr().err
    params = config.load("params.yaml", {"scale": "smoke"})
    planned = plan.make(params)
    step, group = next(iter(planned.data.values())), next(iter(planned.groups.values()))
    for path in (Path(step.output).parent / "probe", Path(group.done).parent / "probe"):     # where they write
        io.write_text(io.inside(project, path), "x")
        assert (disk / path).is_file()
    assert cli.main(["--set", "scale=smoke", "table", "tolias-thesis", "2", "--allow-empty"]) == 0
    assert (disk / "results" / "smoke" / "tolias-thesis" / "2.md").is_file()   # a trial scale: results/<scale>/
    for bad in ("../../x", str(tmp_path / "x")):
        params["tables"]["tolias-thesis"][bad] = params["tables"]["tolias-thesis"]["2"]
        with pytest.raises(OutputError, match=r"it would lie outside results/ \(.*; a name in params.yaml must "
                                              "not lead out"):
            build.table(params, "tolias-thesis", bad, Paths(Path("data"), Path("runs"), Path("results")))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bigger-disk", "project"]


# -- values: YAML errors named, numbers written as text ---------------------------------------------------------

def _cli_params(params_file, overrides=None, sets=()):
    from types import SimpleNamespace

    from nlpbench import cli
    ov = params_file.parent / "overrides.yaml"
    if overrides is not None:
        ov.write_text(overrides)
    return cli._params(SimpleNamespace(params=str(params_file), overrides=str(ov), set=list(sets)))


def test_a_set_value_that_is_not_yaml_is_named_in_one_line(params_file, capsys):
    from nlpbench import cli
    rc = cli.main(["--params", str(params_file), "--overrides", str(params_file.parent / "none.yaml"),
                   "--set", "memnet.train.lr=[1", "check"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("nlpbench: --set memnet.train.lr: not a YAML value: expected ',' or ']'")
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_an_overrides_file_that_is_not_yaml_is_named_with_its_line(params_file, capsys):
    from nlpbench import cli
    ov = params_file.parent / "overrides.yaml"
    ov.write_text("# my overrides\nmemnet:\n  train: {lr: [1\n  seeds: [0]\n")
    rc = cli.main(["--params", str(params_file), "--overrides", str(ov), "check"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(f"nlpbench: {ov}: not valid YAML: ") and "(line 4, column 8" in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("form", ["params.yaml", "overrides.yaml", "--set", "--config", "--config nested"])
def test_a_number_written_as_text_is_read_as_the_number_in_every_override_form(params_file, form):
    """`lr: 1e-2` is text to YAML 1.1 (PyYAML): where the schema wants a number it is read as 0.01, and the
    runs are those of `lr: 0.01`."""
    if form == "params.yaml":
        text = params_file.read_text()
        params_file.write_text(text.replace("\n    lr: 0.01 ", "\n    lr: 1e-2 ", 1))
        params = config.load(params_file)
    elif form == "overrides.yaml":
        params = _cli_params(params_file, "memnet:\n  train:\n    lr: 1e-2   # as a user writes it\n")
    elif form == "--set":
        params = _cli_params(params_file, sets=["memnet.train.lr=1e-2"])
    elif form == "--config":            # Snakemake hands every value over as text
        params = config.load(params_file, {"memnet.train.lr": "1e-2"})
    else:
        params = config.load(params_file, {"memnet": {"train": {"lr": "1e-2"}}})
    assert params["memnet"]["train"]["lr"] == 0.01 and isinstance(params["memnet"]["train"]["lr"], float)
    assert sorted(plan.make(params).groups) == sorted(plan.make(config.load(REPO / "params.yaml")).groups)


def test_only_number_text_becomes_a_number_and_only_where_the_schema_wants_a_number(params_file):
    assert config.load(params_file, {"memnet.train.clip_norm": "4E1"})["memnet"]["train"]["clip_norm"] == 40.0
    for key, text in (("memnet.train.lr", "abc"), ("memnet.train.lr", "1e-2x"), ("memnet.train.lr", "-1e-2"),
                      ("memnet.train.epochs", "1e2")):    # an integer is not guessed from a float's text
        with pytest.raises(config.ConfigError, match=re.escape(key)):
            config.load(params_file, {key: text})
    # text where the schema wants text stays text
    params = config.load(params_file, {"textgen.runs.snli-dae.label": "1e-2"})
    assert params["textgen"]["runs"]["snli-dae"]["label"] == "1e-2"


# -- values too big or too deep to walk: alias bombs, deep nesting ------------------------------------------------

def _check_fails(params_file, capsys, sets=(), overrides="{}\n") -> str:
    from nlpbench import cli
    ov = params_file.parent / "overrides.yaml"
    ov.write_text(overrides)
    args = ["--params", str(params_file), "--overrides", str(ov)]
    for s in sets:
        args += ["--set", s]
    rc = cli.main(args + ["check"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err[:2000]
    return err.strip()


BOMB_SAYS = "more than 100,000 values once its aliases are expanded"


@pytest.mark.parametrize("form", ["overrides.yaml", "--set", "home", "params.yaml"])
def test_an_alias_bomb_is_refused_in_one_line_naming_where_it_is(params_file, capsys, form):
    """Nine anchored lists of nine aliases each: 9**9 values once expanded, refused before anything walks them."""
    home = params_file.parent / "pipeline" / "tables" / "tolias-thesis" / "7.yaml"
    if form == "overrides.yaml":
        err = _check_fails(params_file, capsys, overrides="# my overrides\n" + alias_bomb())
        where = f"{params_file.parent / 'overrides.yaml'}: {BOMB_SAYS} (line 7)"    # l5: 9**6 values
    elif form == "--set":
        err = _check_fails(params_file, capsys, sets=[f"memnet.train.lr={alias_bomb_value()}"])
        where = f"--set memnet.train.lr: {BOMB_SAYS} (line 1)"
    elif form == "home":
        home.write_text(home.read_text() + alias_bomb())
        err = _check_fails(params_file, capsys)
        where = f"{home}: {BOMB_SAYS} (line "
    else:
        params_file.write_text(params_file.read_text() + alias_bomb())
        err = _check_fails(params_file, capsys)
        where = f"{params_file}: {BOMB_SAYS} (line "
    assert err.startswith(f"nlpbench: {where}"), err


def test_an_alias_bomb_that_snakemake_read_is_refused_naming_the_option(params_file):
    """Snakemake reads --config itself (aliases become shared lists, whole, or as a string it could not read): the
    loader counts a shared list each time it occurs, and reads such a string under the same bound."""
    as_read = yaml.load(alias_bomb_value(), Loader=yaml.BaseLoader)
    for given in (as_read, {"train": {"lr": as_read}}, {"train": {"lr": alias_bomb_value()}}):
        with pytest.raises(config.ConfigError, match=rf"^--config memnet(\.train\.lr)?: {BOMB_SAYS}"):
            config.load(params_file, {"memnet": given}, overrides_from="--config")


def test_a_value_nested_too_deep_is_refused_in_one_line(params_file, capsys):
    """10,000 nested lists: a one-line message, not a RecursionError, in every form a user can write them."""
    assert _check_fails(params_file, capsys, sets=[f"memnet.train.lr={DEEP}"]) == \
        "nlpbench: --set memnet.train.lr: nested more than 50 levels deep (line 1)"
    assert _check_fails(params_file, capsys, overrides=f"memnet:\n  train:\n    lr: {DEEP}\n") == \
        f"nlpbench: {params_file.parent / 'overrides.yaml'}: nested more than 50 levels deep (line 3)"
    nested = []
    for _ in range(10_000):
        nested = [nested]
    for given in (nested, DEEP):              # as Snakemake hands it over: read, or left as the text it could not read
        with pytest.raises(config.ConfigError, match=r"^--config memnet(\.train\.lr)?: nested more than 50 levels"):
            config.load(params_file, {"memnet": {"train": {"lr": given}}}, overrides_from="--config")


def test_a_value_that_holds_itself_is_refused(params_file, capsys):
    assert _check_fails(params_file, capsys, sets=["memnet.train.lr=&a [1, *a]"]) == \
        "nlpbench: --set memnet.train.lr: the alias *a (line 1) lies inside its own anchor: a value that holds itself"


def test_aliases_of_a_reasonable_size_still_work(params_file):
    """params.yaml shares its defaults through anchors; a user's overrides may use them too."""
    params = _cli_params(params_file, "memnet:\n  train:\n    lr: &same 0.02\n    clip_norm: *same\n")
    assert params["memnet"]["train"]["lr"] == params["memnet"]["train"]["clip_norm"] == 0.02


def test_an_invalid_value_is_shown_short(params_file):
    """A long value of the wrong type: its error line shows its start, not the whole value."""
    with pytest.raises(config.ConfigError) as e:
        config.load(params_file, {"memnet.train.lr": [["x" * 1000] * 1000] * 90})
    (line,) = str(e.value).splitlines()[1:]
    assert line.startswith("  memnet.train.lr: [[") and line.endswith("is not of type 'number'") and len(line) < 300


# -- the families' config dataclasses ------------------------------------------------------------------------

# (family, "module:dataclass", the params.yaml section whose keys are its fields); textgen's corpora share the
# `snli` block (`&model_defaults`), which the others merge and change a key or two of
CONFIG_DATACLASSES = [
    ("memnet", "nlpbench.memnet.model:MemNetConfig", "memnet.model"),
    ("memnet", "nlpbench.memnet.train:TrainConfig", "memnet.train"),
    ("memnet", "nlpbench.memnet.train:BayesConfig", "memnet.bayes"),
    ("dmn", "nlpbench.dmn.model:DMNConfig", "dmn.model"),
    ("dmn", "nlpbench.dmn.train:DMNTrainConfig", "dmn.train"),
    ("squad", "nlpbench.squad.model:ModelConfig", "squad.model"),
    ("squad", "nlpbench.squad.train:TrainConfig", "squad.train"),
    ("acvi", "nlpbench.acvi.model:ModelConfig", "acvi.model"),
    ("acvi", "nlpbench.acvi.train:TrainConfig", "acvi.train"),
    ("textgen", "nlpbench.textgen.model:Seq2SeqConfig", "textgen.settings.snli.model"),
]


def _as_yaml(value):
    return [_as_yaml(v) for v in value] if isinstance(value, (list, tuple)) else value


@pytest.mark.parametrize("family", sorted({f for f, _, _ in CONFIG_DATACLASSES}))
def test_every_config_dataclass_default_is_the_value_params_yaml_sets(family):
    """A family's config dataclasses default to what params.yaml sets at the paper scale (its text, no scale's
    overrides), so that a config built in code or a test means the pipeline's reading, not a superseded one."""
    import dataclasses
    import importlib
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    differ, compared = [], 0
    for _, name, section in [c for c in CONFIG_DATACLASSES if c[0] == family]:
        module, attr = name.split(":")
        cls = getattr(importlib.import_module(module), attr)
        values = raw
        for key in section.split("."):
            values = values[key]
        for f in dataclasses.fields(cls):
            if f.name not in values:
                continue
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                continue               # no default: every caller names it
            compared += 1
            if _as_yaml(default) != _as_yaml(values[f.name]):
                differ.append(f"{section}.{f.name}: {attr} default {default!r}, params.yaml {values[f.name]!r}")
    assert compared >= 5
    assert not differ, "; ".join(differ)


# -- one home per table --------------------------------------------------------------------------------------

def test_every_declaration_has_one_home_and_every_printed_table_its_numbers_beside_it():
    assert not {"tables", "outputs"} & set(yaml.safe_load((REPO / "params.yaml").read_text()))
    homes = {(f.parent.parent.name, f.parent.name, f.stem) for f in (REPO / "pipeline").glob("*/*/*.yaml")}
    params = config.load(REPO / "params.yaml", {"scale": "paper"})
    assert homes == {(d.section, d.source, d.name) for s in config.SECTIONS for d in config.declared(params, s)}
    for r in paper.reference_index():      # each table the documents printed: its home and its numbers together
        assert (REPO / "pipeline" / "tables" / r["source"] / f"{r['table']}.yaml").is_file()
        assert paper.paper_file(r["source"], r["table"]).is_file()


def test_a_bad_home_is_named_by_its_file(params_file):
    home = params_file.parent / "pipeline" / "tables" / "tolias-thesis" / "7.yaml"
    home.write_text(home.read_text().replace("variant: en", "varient: en"))
    with pytest.raises(config.ConfigError, match="(?s)" + re.escape(str(home)) + r".*varient"):
        config.load(params_file)
    home.write_text("rows: [1, 2\n")
    with pytest.raises(config.ConfigError, match=re.escape(str(home)) + ".*line"):
        config.load(params_file)


def _home(params_file, source, name, section="tables"):
    return params_file.parent / "pipeline" / section / source / f"{name}.yaml"


def _replace_in(file, old, new):
    text = file.read_text()
    assert old in text
    file.write_text(text.replace(old, new, 1))


def test_a_key_maps_to_the_file_that_sets_it_and_the_key_inside_it(params_file):
    params = config.load(params_file, {"scale": "cpu"})
    table_42 = _home(params_file, "bahuleyan-thesis", "4.2")
    assert config.home_and_key(params, "tables.bahuleyan-thesis.4.2.notes.0") == (str(table_42), "notes.0")
    assert config.home_and_key(params, "outputs.bahuleyan-thesis.fig4.7.smooth") == \
        (str(_home(params_file, "bahuleyan-thesis", "fig4.7", "outputs")), "smooth")
    assert config.home_and_key(params, "tables.bahuleyan-thesis.4.2") == (str(table_42), "")
    assert config.where(params, "tables.bahuleyan-thesis.4.2") == str(table_42)
    assert config.where(params, "tables.bahuleyan-thesis.4.2.claims.0.a") == f"{table_42}: claims.0.a"
    assert config.where(params, "squad.train.lr") == f"{params_file}: squad.train.lr"      # params.yaml's own
    d = config.declaration(params, "tables", "bahuleyan-thesis", "4.2")
    assert d.at("claims") == f"{table_42}: claims" and d.at() == str(table_42)
    # a declaration written in params.yaml lies there, under its whole key
    _edit(params_file, lambda data: None)            # the homes put inline
    inline = config.load(params_file, {"scale": "cpu"})
    assert config.where(inline, "tables.bahuleyan-thesis.4.2.claims.0.a") == \
        f"{params_file}: tables.bahuleyan-thesis.4.2.claims.0.a"


def test_a_schema_error_in_a_home_names_the_home_and_the_key_inside_it(params_file):
    home = _home(params_file, "tolias-thesis", "2")
    _replace_in(home, "variant: en", "variant: english")
    with pytest.raises(config.ConfigError) as e:
        config.load(params_file)
    assert str(e.value).startswith(f"{home}: invalid parameters\n  variant: 'english' is not one of")
    # errors in two files: each line names its file
    _replace_in(_home(params_file, "tolias-thesis", "7"), "variant: en", "variant: english")
    with pytest.raises(config.ConfigError) as e:
        config.load(params_file)
    assert str(e.value).startswith(f"{params_file}: invalid parameters\n  {home}: variant: 'english'")
    assert f"\n  {_home(params_file, 'tolias-thesis', '7')}: variant: 'english'" in str(e.value)


def test_a_claim_typo_in_a_home_names_the_home_and_the_claims_key(params_file):
    home = _home(params_file, "tolias-thesis", "2")
    _replace_in(home, 'a: "t-MEM-NN / 10 samples", b: "Baseline', 'a: "t-MEM-NN / 11 samples", b: "Baseline')
    with pytest.raises(config.ConfigError) as e:
        registry.load(params_file, {"scale": "cpu"})
    assert str(e.value).startswith(f"{home}: claims.0.a: Table 2 has no column 't-MEM-NN / 11 samples'")
    _edit(params_file, lambda data: None)            # the same declaration written in params.yaml: named there
    with pytest.raises(config.ConfigError) as e:
        registry.load(params_file, {"scale": "cpu"})
    assert str(e.value).startswith(f"{params_file}: tables.tolias-thesis.2.claims.0.a: Table 2 has no column")


def test_a_family_check_names_the_home_and_key_of_what_it_refuses(params_file):
    home = _home(params_file, "bahuleyan-thesis", "4.2")
    _replace_in(home, "{run: snli-tanh-3000,", "{run: snli-tanh-300,")
    with pytest.raises(config.ConfigError) as e:
        registry.load(params_file, {"scale": "cpu"})
    assert str(e.value) == (f"{home}: rows.ADAM-tanh-3000.run: unknown run 'snli-tanh-300' "
                            f"(not in {params_file}: textgen.runs)")


def test_a_homes_by_scale_keys_apply_at_that_scale_only(params_file):
    home = params_file.parent / "pipeline" / "tables" / "tolias-thesis" / "pilot-task15.yaml"
    assert "by_scale:" in home.read_text()
    decl = lambda scale: config.load(params_file, {"scale": scale})["tables"]["tolias-thesis"]["pilot-task15"]
    assert decl("smoke")["rows"] == [1, 20] and decl("smoke")["seeds"] == [0]
    assert decl("cpu")["rows"] != [1, 20] and decl("cpu")["rows"] == decl("paper")["rows"]
    assert "by_scale" not in decl("cpu")
    home.write_text(home.read_text() + "  tiny: {rows: [1]}\n")
    with pytest.raises(config.ConfigError, match=re.escape(str(home)) + r".*by_scale.*unknown scale 'tiny'"):
        config.load(params_file, {"scale": "smoke"})


def test_a_declaration_in_two_places_is_refused(params_file):
    text = params_file.read_text() + "tables:\n  tolias-thesis:\n    '7': {family: memnet}\n"
    params_file.write_text(text)
    with pytest.raises(config.ConfigError, match=r"7\.yaml.*also declared in .*params\.yaml"):
        config.load(params_file)


def test_rule_all_builds_the_documents_and_studies_the_rest():
    params = config.load(REPO / "params.yaml", {"scale": "cpu"})
    p = plan.make(params)
    documents, studies = p.part(study=False), p.part(study=True)
    printed = {(r["source"], r["table"]) for r in paper.reference_index()}
    tables = [t for t in p.targets.values() if t.section == "tables"]
    assert {(t.source, t.name) for t in tables if t in documents} == printed      # every printed table, nothing else
    assert {t.key for t in studies} >= {"tolias-thesis/pilot-task15", "tolias-thesis/task3-seeds"}
    assert not [t for t in documents + studies if t.on_demand]                     # benchmarks only when named
    snakefile = (REPO / "Snakefile").read_text()
    assert "PLAN.part(study=False)" in snakefile.split("rule all:")[1].split("rule ")[0]
    assert "PLAN.part(study=True)" in snakefile.split("rule studies:")[1].split("rule ")[0]
    index = (REPO / "pipeline" / "targets.smk").read_text().split("rule index:")[1]
    assert "PLAN.part(study=False)" in index.split("output:")[0]        # `all` needs the index: documents only


def test_a_trial_scale_writes_beside_the_committed_results_and_ignores_itself(tmp_path, monkeypatch):
    """results/ holds the committed scale's tables; any other scale's go to results/<scale>/, a folder git ignores
    by a .gitignore of its own, so a smoke or paper-scale trial never rewrites a committed file."""
    cpu = config.load(REPO / "params.yaml", {"scale": "cpu"})
    smoke = config.load(REPO / "params.yaml", {"scale": "smoke"})
    assert cpu["committed_scale"] == "cpu" and config.results_dir(cpu) == Path("results")
    assert config.results_dir(smoke) == Path("results/smoke")
    assert plan.make(smoke).result_path("tolias-thesis/2.md") == "results/smoke/tolias-thesis/2.md"
    assert plan.make(cpu).result_path("tolias-thesis/2.md") == "results/tolias-thesis/2.md"
    monkeypatch.chdir(tmp_path)
    config.make_results_dir(config.results_dir(smoke))
    config.make_results_dir(config.results_dir(cpu))
    assert (tmp_path / "results/smoke/.gitignore").read_text().splitlines()[-1] == "*"
    assert not (tmp_path / "results/.gitignore").exists()            # the committed folder stays in git


def test_only_a_command_that_writes_results_makes_a_trial_scales_folder(tmp_path, monkeypatch):
    """`nlpbench data` and `nlpbench train` at a trial scale make no results/<scale>/ where they run (a test run
    from the checkout made one there); `table` and `output` make it, with its .gitignore."""
    from nlpbench import cli
    smoke = config.load(REPO / "params.yaml", {"scale": "smoke"})
    args = types.SimpleNamespace(results=None, data="data", runs="runs")      # no --results
    monkeypatch.chdir(tmp_path)
    assert cli._paths(args, smoke).results == Path("results/smoke")
    assert not (tmp_path / "results").exists()
    cli._paths(args, smoke, writes_results=True)
    assert (tmp_path / "results/smoke/.gitignore").is_file()


def test_an_unknown_committed_scale_is_named_with_its_file_and_key(tmp_path):
    for item in ("params.yaml", "pipeline"):
        (shutil.copytree if (REPO / item).is_dir() else shutil.copy)(REPO / item, tmp_path / item)
    text = (tmp_path / "params.yaml").read_text()
    (tmp_path / "params.yaml").write_text(text.replace("committed_scale: cpu ", "committed_scale: cpux", 1))
    with pytest.raises(config.ConfigError, match=r"params.yaml: committed_scale: unknown scale 'cpux'"):
        config.load(tmp_path / "params.yaml", {"scale": "smoke"})


def test_a_row_judged_at_budget_that_the_table_lacks_is_named_with_its_home(params_file):
    home = params_file.parent / "pipeline" / "tables" / "bahuleyan-thesis" / "4.2.yaml"
    home.write_text(home.read_text().replace("      SGD-tanh-3000: \"it trains", "      SGD-tanh-300: \"it trains", 1))
    said = r"bahuleyan-thesis/4\.2\.yaml: judged_at_budget: 'SGD-tanh-300' is no row of the table"
    with pytest.raises(config.ConfigError, match=said):
        registry.load(params_file, {"scale": "cpu"})
