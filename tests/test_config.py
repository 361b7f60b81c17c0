"""params.yaml: schema validation with errors that name the key, scales as overrides, run groups."""

import shutil
from pathlib import Path

import pytest
import yaml

from nlpbench import config

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def params_file(tmp_path):
    path = tmp_path / "params.yaml"
    shutil.copy(REPO / "params.yaml", path)
    return path


def _edit(path, fn):
    data = yaml.safe_load(path.read_text())
    fn(data)
    path.write_text(yaml.safe_dump(data))


def test_the_shipped_params_are_valid_at_every_scale():
    for scale in ("paper", "cpu", "smoke"):
        params = config.load(REPO / "params.yaml", {"scale": scale})
        assert params["scale"] == scale and config.all_groups(params)


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


def test_scales_change_the_runs_not_the_code():
    paper = config.load(REPO / "params.yaml")
    smoke = config.load(REPO / "params.yaml", {"scale": "smoke"})
    gp, gs = config.experiment_groups(paper, "tolias-2"), config.experiment_groups(smoke, "tolias-2")
    assert set(gp) == set(gs) == {"memn2n", "tmemnn"}
    assert gp["memn2n"].group_id != gs["memn2n"].group_id          # different settings, different runs
    assert len(gp["memn2n"].tasks) == 20 and gs["memn2n"].tasks == (1, 20)
    assert gs["tmemnn"].settings["train"]["epochs"] == 2
    assert "bayes" not in gp["memn2n"].settings and "bayes" in gp["tmemnn"].settings


def test_group_ids_are_stable_and_follow_the_settings():
    a = config.experiment_groups(config.load(REPO / "params.yaml"), "tolias-2")
    b = config.experiment_groups(config.load(REPO / "params.yaml"), "tolias-2")
    c = config.experiment_groups(config.load(REPO / "params.yaml", {"memnet.model.hops": 1}), "tolias-2")
    assert a["tmemnn"].group_id == b["tmemnn"].group_id != c["tmemnn"].group_id
    assert c["tmemnn"].group_id.startswith("tmemnn-en-h1-d20-")


def test_notes_never_change_run_ids(params_file):
    from nlpbench.memnet.game import game_groups
    from nlpbench.dmn.experiments import groups_by_id

    def ids(path):
        params = config.load(path, {"scale": "cpu"})
        return sorted(config.all_groups(params)), sorted(game_groups(params)), sorted(groups_by_id(params))

    before = ids(params_file)

    def add_notes(data):
        data["game"]["notes"] = {"16": ["a new explanation"]}
        data["experiments"]["tolias-2"]["notes"] = ["another"]
        data["dmn"]["notes"] = {"6.2": ["and another"]}
    _edit(params_file, add_notes)
    assert ids(params_file) == before


def test_experiment_overrides_are_checked(params_file):
    _edit(params_file, lambda d: d["experiments"]["tolias-2"].update(overrides={"model.hopz": 1}))
    with pytest.raises(config.ConfigError, match="model.hopz"):
        config.load(params_file)
