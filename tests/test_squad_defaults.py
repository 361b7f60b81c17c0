"""The draft params section: it parses, its model/train keys are config fields, every name it uses exists."""

from importlib import resources

import yaml

from nlpbench.squad.output import OUTPUTS
from nlpbench.squad.similarity import SIMILARITIES
from nlpbench.squad.train import TrainConfig


def load():
    return yaml.safe_load(resources.files("nlpbench.squad").joinpath("defaults.yaml").read_text(encoding="utf-8"))


def test_defaults_build_a_train_config():
    squad = load()["squad"]
    cfg = TrainConfig.from_dict({**squad["train"], "model": squad["model"]})
    assert (cfg.lr, cfg.batch_size, cfg.ema_decay, cfg.model.dropout) == (0.5, 60, 0.999, 0.2)
    assert squad["seeds"] == [0, 1, 2, 3, 4]


def test_every_named_similarity_and_output_exists():
    doc = load()
    grid = doc["squad"]["experiments"]["similarity_grid"]
    assert set(grid["similarities"]) == set(SIMILARITIES)
    assert set(grid["outputs"]) <= set(OUTPUTS)
    tables = doc["tables"]["shen-thesis"]
    assert set(tables) == {"3.1", "4.2", "4.3", "4.4", "5.2", "5.3", "5.4", "5.5", "A.1"}
    assert set(tables["4.2"]["rows"]) | {"T-trilinear"} == set(SIMILARITIES)
    for table in tables.values():
        for col in table["columns"].values():
            assert col.get("output", "O_1") in OUTPUTS
        rows = table["rows"].values() if isinstance(table["rows"], dict) else []
        for row in rows:
            assert row.get("output", "O_1") in OUTPUTS and row.get("similarity", "trilinear") in SIMILARITIES
