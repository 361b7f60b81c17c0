"""Training runs: the tiny copy task is learnt, the schedule follows Table 19, resume and reseeding reproduce."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nlpbench.acvi.model import ModelConfig
from nlpbench.acvi.train import THESIS_PHASES, TrainConfig, run

SRC = str(Path(__file__).resolve().parents[1] / "src")


def copy_cfg(attention="asa", steps=120, **kw):
    base = dict(task="copy", model=ModelConfig(emb_dim=32, hidden_dim=32, attn_dim=32, attention=attention),
                batch_size=16, phases=[[steps, 20, 20]], coverage_iters=0, checkpoint_every=10_000, log_every=20,
                beam_width=3, n_samples=3, min_dec_steps=0, max_dec_steps=12, eval_meteor=False, lr=3e-3,
                copy_task={"n_train": 2000, "n_eval": 20, "length": [4, 8], "n_words": 30, "n_oov_words": 20})
    base.update(kw)
    return TrainConfig(**base)


def test_schedule_is_table_19():
    cfg = TrainConfig(model=ModelConfig(attention="acvi_paper"))
    assert cfg.phases == [list(p) for p in THESIS_PHASES]
    assert cfg.lengths_at(0) == (10, 10) and cfg.lengths_at(70_999) == (10, 10) and cfg.lengths_at(71_000) == (50, 50)
    assert cfg.lengths_at(183_999) == (100, 50) and cfg.lengths_at(249_999) == (400, 100)
    assert cfg.total_iters == 253_000
    assert not cfg.coverage_at(249_999) and cfg.coverage_at(250_000)
    assert not cfg.gumbel_at(227_699) and cfg.gumbel_at(227_700)       # last 10% of 253k
    assert not TrainConfig(model=ModelConfig(attention="acvi_thesis")).gumbel_at(252_000)


def test_pointer_generator_learns_to_copy_including_oovs(tmp_path):
    """Every evaluation source holds one word never seen in training: only copying can reproduce it."""
    m = run(copy_cfg(), tmp_path)
    assert m["synthetic"] is True
    assert m["exact_match"] >= 90.0
    assert m["oov_adoption_rate"] > 5.0
    hist = json.loads((tmp_path / "history.json").read_text())
    assert hist[-1]["nll"] < 0.2 * hist[0]["nll"]


def test_seq2seq_without_pointer_cannot_copy_oovs(tmp_path):
    cfg = copy_cfg(steps=60)
    cfg.model.pointer = False
    m = run(cfg, tmp_path)
    assert m["exact_match"] == 0.0 and m["oov_adoption_rate"] == 0.0


def test_acvi_training_lowers_the_nll(tmp_path):
    m = run(copy_cfg("acvi_thesis", steps=60), tmp_path)
    hist = json.loads((tmp_path / "history.json").read_text())
    assert hist[-1]["nll"] < 0.8 * hist[0]["nll"] and hist[-1]["kl"] >= 0
    assert m["n_samples"] == 3


def test_resume_after_kill_gives_identical_numbers(tmp_path):
    """acvi_paper with Gumbel-Softmax in the last 10% and a coverage phase: exercises every schedule switch and
    the sampling RNG across the interruption."""
    cfg = lambda: copy_cfg("acvi_paper", steps=16, coverage_iters=4, checkpoint_every=5, log_every=2,  # noqa: E731
                           copy_task={"n_train": 200, "n_eval": 5, "length": [3, 5], "n_words": 10, "n_oov_words": 5})
    full = run(cfg(), tmp_path / "full")
    assert full["before_coverage"]["steps"] == 16 and "bleu4" in full
    assert run(cfg(), tmp_path / "killed", stop_after=11) is None        # killed in the main phase
    assert run(cfg(), tmp_path / "killed", stop_after=18) is None        # again, after the pre-coverage eval
    assert not (tmp_path / "killed" / "metrics.json").exists()
    resumed = run(cfg(), tmp_path / "killed")
    drop = lambda m: {k: v for k, v in m.items() if k != "train_seconds_this_process"}  # noqa: E731
    assert drop(resumed) == drop(full)
    assert (tmp_path / "full" / "history.json").read_text() == (tmp_path / "killed" / "history.json").read_text()
    a = torch.load(tmp_path / "full" / "model.pt", weights_only=False)["model"]
    b = torch.load(tmp_path / "killed" / "model.pt", weights_only=False)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_same_seed_same_numbers_in_a_new_process(tmp_path):
    code = (
        "import sys, json; sys.path.insert(0, %r)\n"
        "from nlpbench.acvi.train import TrainConfig, run\n"
        "from nlpbench.acvi.model import ModelConfig\n"
        "cfg = TrainConfig(task='copy', model=ModelConfig(emb_dim=16, hidden_dim=16, attn_dim=16,"
        " attention='acvi_thesis'), batch_size=8, phases=[[10, 10, 10]], coverage_iters=2, log_every=1,"
        " beam_width=2, n_samples=2, min_dec_steps=0, max_dec_steps=6, eval_meteor=False,"
        " copy_task={'n_train': 100, 'n_eval': 4, 'length': [3, 5], 'n_words': 10, 'n_oov_words': 5})\n"
        "run(cfg, sys.argv[1])\n" % SRC)
    # two fresh processes with different hash seeds and the same thread count (float sums depend on threads)
    for name, hash_seed in (("a", "1"), ("b", "2")):
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": hash_seed}
        subprocess.run([sys.executable, "-c", code, str(tmp_path / name)], check=True, env=env)
    assert (tmp_path / "a" / "history.json").read_text() == (tmp_path / "b" / "history.json").read_text()
    ma = json.loads((tmp_path / "a" / "metrics.json").read_text())
    mb = json.loads((tmp_path / "b" / "metrics.json").read_text())
    ma.pop("train_seconds_this_process"), mb.pop("train_seconds_this_process")
    assert ma == mb


def test_cnndm_training_names_the_missing_data(tmp_path):
    with pytest.raises(FileNotFoundError, match="needs data"):
        run(TrainConfig(task="cnndm"), tmp_path)
