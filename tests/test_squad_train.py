"""Training runs on a tiny synthetic task: it learns, a killed run resumes to the same numbers, and the same
seed gives the same numbers in a new process."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from squad_synthetic import marker_task  # noqa: E402

from nlpbench.squad.model import ModelConfig  # noqa: E402
from nlpbench.squad.train import TrainConfig, run  # noqa: E402

torch.set_num_threads(1)
REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"


def small_config(epochs: int, seed: int = 0, dropout: float = 0.2) -> TrainConfig:
    # the thesis's optimiser settings (Adadelta lr 0.5, EMA 0.999), a tiny network
    return TrainConfig(model=ModelConfig(hidden=16, embed_adjust=16, similarity="trilinear", output="O_2",
                                         dropout=dropout),
                       epochs=epochs, batch_size=30, seed=seed)


def comparable(metrics: dict) -> dict:
    return {k: metrics[k] for k in ("em", "f1", "by_decode", "per_epoch", "n_train", "n_test", "seed")}


def ema_weights(run_dir: Path) -> dict:
    return torch.load(run_dir / "model.pt", weights_only=False)["ema_weights"]


SUBPROCESS = """
import sys, json
sys.path.insert(0, {tests!r})
import torch
torch.set_num_threads(1)
from squad_synthetic import marker_task
from nlpbench.squad.train import TrainConfig, run
cfg = TrainConfig.from_dict(json.loads({cfg!r}))
train, test, emb, vocab = marker_task({n_train}, 60, seed=0)
run(cfg, train, test, emb, vocab, {run_dir!r}, log=lambda s: print(s, flush=True))
"""


def start_subprocess(cfg: TrainConfig, run_dir: Path, n_train: int) -> subprocess.Popen:
    code = SUBPROCESS.format(tests=str(Path(__file__).parent), cfg=json.dumps(cfg.to_dict()), n_train=n_train,
                             run_dir=str(run_dir))
    env = dict(os.environ, PYTHONPATH=f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def test_learns_the_marker_task(tmp_path):
    train, test, emb, vocab = marker_task(600, 100, seed=0)
    lines = []
    metrics = run(small_config(epochs=5, dropout=0.0), train, test, emb, vocab, tmp_path / "run", log=lines.append)
    assert metrics["em"] >= 90.0 and metrics["f1"] >= 90.0
    assert metrics["per_epoch"][0]["em"] < metrics["em"]  # it was learned, not given
    assert [ln.split(",")[0] for ln in lines] == [f"epoch {k}/5" for k in range(1, 6)]
    assert all("elapsed" in ln and "remaining" in ln for ln in lines)
    for name in ("model.pt", "history.json", "metrics.json", "checkpoint.pt"):
        assert (tmp_path / "run" / name).is_file()
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    assert [r["epoch"] for r in history["epochs"]] == [1, 2, 3, 4, 5]
    # a finished run is not trained again
    assert run(small_config(epochs=5, dropout=0.0), train, test, emb, vocab, tmp_path / "run") == metrics
    # model.pt holds the EMA weights that produced metrics.json
    from nlpbench.squad.train import encode, evaluate, load_trained

    model, saved_vocab = load_trained(tmp_path / "run", emb)
    assert saved_vocab == vocab
    cfg = small_config(epochs=5, dropout=0.0)
    items = encode(test, {w: i for i, w in enumerate(vocab)}, cfg.eval_max_passage_len, 10**9, False)
    again = evaluate(model, items, test, cfg, "cpu")
    assert (again["em"], again["f1"]) == (metrics["em"], metrics["f1"])


def test_resume_after_kill_gives_identical_numbers(tmp_path):
    n_train = 400
    cfg = small_config(epochs=4)
    train, test, emb, vocab = marker_task(n_train, 60, seed=0)
    reference = run(cfg, train, test, emb, vocab, tmp_path / "straight", log=lambda s: None)

    killed = tmp_path / "killed"
    proc = start_subprocess(cfg, killed, n_train)
    deadline = time.monotonic() + 25
    while not (killed / "checkpoint.pt").is_file() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (killed / "checkpoint.pt").is_file(), proc.stdout.read()
    assert not (killed / "metrics.json").exists(), "the run finished before it could be killed"

    lines = []
    resumed = run(cfg, train, test, emb, vocab, killed, log=lines.append)
    assert lines[0].startswith("resuming from")
    assert comparable(resumed) == comparable(reference)
    straight, again = ema_weights(tmp_path / "straight"), ema_weights(killed)
    assert all(torch.equal(straight[k], again[k]) for k in straight)


def test_same_seed_same_numbers_in_a_new_process(tmp_path):
    n_train = 300
    cfg = small_config(epochs=2, seed=3)
    proc = start_subprocess(cfg, tmp_path / "child", n_train)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    train, test, emb, vocab = marker_task(n_train, 60, seed=0)
    here = run(cfg, train, test, emb, vocab, tmp_path / "here", log=lambda s: None)
    child = json.loads((tmp_path / "child" / "metrics.json").read_text())
    assert comparable(child) == comparable(here)
    other_seed = run(small_config(epochs=2, seed=4), train, test, emb, vocab, tmp_path / "other", log=lambda s: None)
    assert other_seed["per_epoch"] != here["per_epoch"]


def test_config_round_trip_and_unknown_keys():
    cfg = small_config(epochs=3)
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown"):
        TrainConfig.from_dict({"epoch": 3})


def test_resume_refuses_a_different_config(tmp_path):
    train, test, emb, vocab = marker_task(60, 20, seed=0)
    cfg = small_config(epochs=1)
    run(cfg, train, test, emb, vocab, tmp_path / "r", log=lambda s: None)
    (tmp_path / "r" / "metrics.json").unlink()
    with pytest.raises(ValueError, match="different config"):
        run(small_config(epochs=2, seed=9), train, test, emb, vocab, tmp_path / "r", log=lambda s: None)


def test_run_on_prepared_mirror_data(tmp_path):
    """End to end on real text: prepare a small article split from the mirror, train a tiny model one epoch."""
    from nlpbench.squad import data
    from nlpbench.squad.train import run_prepared

    mirror = Path(os.environ.get("NLPBENCH_MIRROR") or REPO.parent / "shared" / "data")
    if not (mirror / data.MIRROR_RECONSTRUCTED_DEV).is_file():
        pytest.skip(f"no SQuAD dev set in mirror {mirror}")
    prepared = tmp_path / "squad"
    status = data.prepare(prepared, scale="smoke", mirror=mirror, n_train_articles=2, n_test_articles=1,
                          allow_download=False)
    vectors = {w: np.full(4, float(i % 7) - 3, dtype=np.float32) for i, w in enumerate(["the", "of", "in", "what"])}
    cfg = TrainConfig(model=ModelConfig(hidden=4, embed_adjust=4), epochs=1, max_passage_len=200, seed=0)
    lines = []
    metrics = run_prepared(cfg, prepared, vectors, tmp_path / "run", log=lines.append)
    assert metrics["n_test"] == status["counts"]["test"]["questions"]
    assert 0.0 <= metrics["em"] <= metrics["f1"] <= 100.0
    assert set(metrics["by_decode"]) == {"independent", "span"}
    assert lines[0].startswith("vocabulary") and lines[-1].startswith("epoch 1/1")


def test_epoch_batches_cover_every_item_once_and_are_seeded():
    from nlpbench.squad.train import epoch_batches

    items = [{"passage": [1] * (i % 17 + 1), "i": i} for i in range(95)]
    batches = epoch_batches(items, 10, 3, torch.Generator().manual_seed(5))
    assert sorted(x["i"] for b in batches for x in b) == list(range(95))
    assert all(len(b) <= 10 for b in batches)
    again = epoch_batches(items, 10, 3, torch.Generator().manual_seed(5))
    assert [[x["i"] for x in b] for b in batches] == [[x["i"] for x in b] for b in again]


def test_ema_follows_the_weights_with_warm_up_decay():
    from nlpbench.squad.train import EMA

    layer = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        layer.weight.fill_(0.0)
    ema = EMA(layer, decay=0.999)
    with torch.no_grad():
        layer.weight.fill_(1.0)
    ema.update(layer)  # step 1: decay min(0.999, 2/11)
    assert ema.shadow["weight"].item() == pytest.approx(1 - 2 / 11)
    averaged = ema.averaged(layer)
    assert averaged.weight.item() == pytest.approx(1 - 2 / 11) and layer.weight.item() == 1.0


def test_hold_out_articles_splits_by_article_and_keeps_each_question_with_its_passage():
    from nlpbench.squad.data import hold_out_articles

    train, _, _, _ = marker_task(90, 10, seed=1, train_articles=3)
    rest, held = hold_out_articles(train, 1)
    assert {c["title"] for c in held["contexts"]} == {"train2"}
    assert {c["title"] for c in rest["contexts"]} == {"train0", "train1"}
    assert len(rest["examples"]) + len(held["examples"]) == len(train["examples"]) == 90
    for part in (rest, held):
        for ex in part["examples"]:
            ctx = part["contexts"][ex["context"]]
            assert ctx["text"][ex["answer_start_char"]:].startswith(ex["answers"][0]) and ex["id"].startswith(ctx["title"])
    with pytest.raises(ValueError, match="cannot hold out 3 of 3 training articles"):
        hold_out_articles(train, 3)


class Interrupt(Exception):
    pass


def test_the_epoch_is_chosen_by_validation_and_the_test_set_is_scored_once(tmp_path):
    """valid_articles: every epoch is scored on the held-out training articles, the test set only once, with the
    EMA weights of the epoch of highest validation EM; a run stopped after an epoch resumes to the same numbers."""
    from nlpbench.squad.train import encode, evaluate, load_trained

    train, test, emb, vocab = marker_task(240, 60, seed=0, train_articles=4)
    cfg = TrainConfig(model=ModelConfig(hidden=8, embed_adjust=8, similarity="trilinear", output="O_2", dropout=0.2),
                      epochs=4, batch_size=30, optimizer="adam", lr=0.01, seed=0, valid_articles=1,
                      eval_every_epoch=True)
    metrics = run(cfg, train, test, emb, vocab, tmp_path / "straight", log=lambda s: None)
    history = json.loads((tmp_path / "straight" / "history.json").read_text())
    assert all("valid" in r and "dev" not in r for r in history["epochs"])      # the test set chose nothing
    assert history["n_valid"] == metrics["n_valid"] == 60 and history["n_train"] <= 180
    valid_em = [r["em"] for r in metrics["valid"]]
    assert metrics["selected_by"] == "validation EM" and metrics["epoch"] == 1 + valid_em.index(max(valid_em))
    model, _ = load_trained(tmp_path / "straight", emb)                          # model.pt = the chosen weights
    items = encode(test, {w: i for i, w in enumerate(vocab)}, cfg.eval_max_passage_len, 10**9, False)
    assert evaluate(model, items, test, cfg, "cpu")["em"] == metrics["em"]

    def stop_at_epoch_3(line: str) -> None:
        if line.startswith("epoch 3/"):
            raise Interrupt
    with pytest.raises(Interrupt):
        run(cfg, train, test, emb, vocab, tmp_path / "stopped", log=stop_at_epoch_3)
    assert not (tmp_path / "stopped" / "metrics.json").exists()
    resumed = run(cfg, train, test, emb, vocab, tmp_path / "stopped", log=lambda s: None)
    keys = ("em", "f1", "epoch", "valid", "n_train", "n_valid")
    assert {k: resumed[k] for k in keys} == {k: metrics[k] for k in keys}


def test_patience_stops_a_run_once_validation_em_stops_rising(tmp_path, monkeypatch):
    """patience 3: validation EM (scripted) peaks at epoch 2, so the run trains epochs 3-5, stops before epoch 6 of
    its 8, and tests the weights of epoch 2; a run killed in epoch 4 resumes to the same stop and numbers; a run
    without patience, or one that may not stop before epoch 6, trains all 8 epochs."""
    import nlpbench.squad.train as train_module

    train, test, emb, vocab = marker_task(240, 60, seed=0, train_articles=4)
    script = [10.0, 30.0, 20.0, 25.0, 29.0, 50.0, 60.0, 70.0]   # a run that trained on would pick epoch 8
    real = train_module.evaluate

    def scripted(model, items, built, cfg, device):
        out = real(model, items, built, cfg, device)
        if built is not test:                                # a validation pass: the next scripted EM
            scripted.calls += 1
            out = {**out, "em": script[scripted.calls - 1]}
        return out
    monkeypatch.setattr(train_module, "evaluate", scripted)
    cfg = TrainConfig(model=ModelConfig(hidden=8, embed_adjust=8, similarity="trilinear", output="O_2", dropout=0.2),
                      epochs=8, batch_size=30, optimizer="adam", lr=0.01, seed=0, valid_articles=1, patience=3)
    scripted.calls = 0
    metrics = run(cfg, train, test, emb, vocab, tmp_path / "straight", log=lambda s: None)
    assert (metrics["epoch"], metrics["epochs_trained"], metrics["stopped_early"]) == (2, 5, True)
    assert [r["em"] for r in metrics["valid"]] == script[:5]

    def kill_after_epoch_4(line: str) -> None:
        if line.startswith("epoch 4/"):
            raise Interrupt
    scripted.calls = 0
    with pytest.raises(Interrupt):
        run(cfg, train, test, emb, vocab, tmp_path / "killed", log=kill_after_epoch_4)
    scripted.calls = 3                 # killed before epoch 4's checkpoint: the resumed run validates epoch 4 again
    resumed = run(cfg, train, test, emb, vocab, tmp_path / "killed", log=lambda s: None)
    keys = ("em", "f1", "epoch", "epochs_trained", "valid")
    assert {k: resumed[k] for k in keys} == {k: metrics[k] for k in keys}

    scripted.calls = 0
    unstopped = run(dataclasses.replace(cfg, patience=None), train, test, emb, vocab, tmp_path / "no-patience",
                    log=lambda s: None)
    assert (unstopped["epoch"], unstopped["epochs_trained"], unstopped["stopped_early"]) == (8, 8, False)

    scripted.calls = 0           # min_epochs 6: the flat epochs 3-5 of a slow start do not stop it, epoch 6 rises
    delayed = run(dataclasses.replace(cfg, min_epochs=6), train, test, emb, vocab, tmp_path / "min-epochs",
                  log=lambda s: None)
    assert (delayed["epoch"], delayed["epochs_trained"], delayed["stopped_early"]) == (8, 8, False)


def test_patience_needs_validation_articles_and_a_whole_number():
    model = ModelConfig(hidden=8, embed_adjust=8)
    with pytest.raises(ValueError, match="valid_articles"):
        TrainConfig(model=model, patience=3)
    with pytest.raises(ValueError, match="patience"):
        TrainConfig(model=model, patience=0, valid_articles=1)
    assert TrainConfig.from_dict(TrainConfig(model=model, patience=2, valid_articles=1).to_dict()).patience == 2
    with pytest.raises(ValueError, match="min_epochs needs squad.train.patience"):
        TrainConfig(model=model, min_epochs=5, valid_articles=1)
