"""The grouped DMN pass (nlpbench.dmn.grouped, nlpbench.dmn.group_train) against the readable model and trainer."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from nlpbench.data.babi import load_task, train_val_split
from nlpbench.dmn.group_train import GroupTrainer
from nlpbench.dmn.grouped import GroupAdam, GroupedDMN, collate
from nlpbench.dmn.model import DMN, VARIANTS, DMNConfig
from nlpbench.dmn.train import DMNTrainConfig, DMNTrainer, batch_of, build_data, generator

torch.set_num_threads(1)
READINGS = [(v, {}) for v in VARIANTS] + [
    ("ff-dmn", {"ffn_layers": 2, "ffn_activation": "tanh", "share_ffn": True, "question_in_update": False}),
    ("dmn+", {"tie_update": True, "answer_bias": True, "pe_index": "zero_based"})]
UNTIMED = ("seconds", "ms_per_batch", "runs_in_pass")
# eq. 6.10's softmax is blind to b^(2): its gradient is rounding noise, which Adam scales to full steps, so its value
# follows the summation order and the function does not depend on it
SHIFT_ONLY = "gate.W2.bias"


def _data(babi_root, task: int, n_train: int = 300):
    train, test = load_task(babi_root, "en", task)
    train, val = train_val_split(train, 60, 0)
    return build_data({"train": train[:n_train], "val": val, "test": test[:50]})


@pytest.fixture(scope="module")
def tasks(babi_root):
    """Three tasks with different vocabularies, answer sets and story lengths (2: up to dozens of facts)."""
    return {t: _data(babi_root, t) for t in (1, 2, 17)}


def _models(datas, variant, readings, dim=12):
    return [DMN(DMNConfig(len(d.vocab), len(d.answers), variant=variant, dim=dim, **readings), generator(s, "init"))
            for s, d in enumerate(datas)]


@pytest.mark.parametrize("variant, readings", READINGS)
@pytest.mark.parametrize("task_of_run", [(1, 1, 1), (2, 1, 17)])
def test_each_member_of_a_group_computes_the_readable_model(tasks, variant, readings, task_of_run):
    """Logits (training mode: the same dropout masks from each run's generator; and evaluation mode), losses and
    gradients of every member equal the readable DMN's on the member's own batch, for runs of one task and of
    tasks with different vocabularies, answer sets, batch sizes and story lengths; classes past a run's own
    answer set get logit -inf."""
    datas = [tasks[t] for t in task_of_run]
    models = _models(datas, variant, readings)
    batches = [batch_of(d.splits["train"], torch.randperm(d.size("train"), generator=torch.Generator().manual_seed(r))
                        [:17 + 5 * r]) for r, d in enumerate(datas)]
    engine = GroupedDMN(models)
    batch = collate(batches)
    for training in (True, False):
        gens = [generator(r, "dropout") for r in range(3)]
        logits = engine.forward(batch, gens, training=training)
        loss = (engine.losses(logits, batch) + 0.001 * engine.l2_terms()).sum()
        for p in engine.params.values():
            p.grad = None
        loss.backward()
        engine.zero_pad_grads()
        for r, (model, b, d) in enumerate(zip(models, batches, datas)):
            model.train(training)
            model.zero_grad()
            alone = model(b["stories"], b["n_facts"], b["queries"], generator=generator(r, "dropout"))
            n, A = alone.shape
            assert torch.allclose(logits[r, :n, :A], alone, atol=2e-5), (r, (logits[r, :n, :A] - alone).abs().max())
            assert torch.isinf(logits[r, :, A:]).all()
            (F.cross_entropy(alone, b["answers"]) + 0.001 * sum(p.pow(2).sum() for p in model.parameters()
                                                                 if p.dim() > 1)).backward()
            for name, p in model.named_parameters():
                grouped = engine.unpad(r, name, engine.params[name].grad[r])
                assert torch.allclose(grouped, p.grad, atol=2e-6), (r, name)
            assert torch.count_nonzero(engine.params["embedding.weight"].grad[r, len(d.vocab):]) == 0


def test_group_adam_is_torch_adam_per_run_and_leaves_a_run_that_does_not_step():
    g = torch.Generator().manual_seed(0)
    weights = [torch.randn(4, 3, generator=g) for _ in range(2)]
    torch_params = [w.clone().requires_grad_(True) for w in weights]
    opts = [torch.optim.Adam([p], lr=0.01) for p in torch_params]
    stacked = {"w": torch.stack(weights).requires_grad_(True)}
    adam = GroupAdam(stacked, lr=0.01)
    for step in range(5):
        grads = torch.randn(2, 4, 3, generator=g)
        stepping = [True, step % 2 == 0]              # run 1 sits out every other step
        for r in range(2):
            if stepping[r]:
                torch_params[r].grad = grads[r].clone()
                opts[r].step()
        stacked["w"].grad = grads.clone()
        adam.step(stepping)
    for r in range(2):
        assert torch.allclose(stacked["w"][r], torch_params[r], atol=1e-7)
    assert adam.steps == [5, 3]


def _trainers(datas, seeds, tcfg, variant="dmn+", dim=12):
    return [DMNTrainer(DMNConfig(0, 0, variant=variant, dim=dim), tcfg, d, s, log=lambda _: None)
            for d, s in zip(datas, seeds)]


def _strip(history):
    return [{k: v for k, v in h.items() if k not in UNTIMED} for h in history]


@pytest.mark.parametrize("variant", VARIANTS)
def test_runs_trained_in_a_group_follow_their_alone_runs(tasks, variant):
    """Three seeds of one task trained together for three epochs: each run's history (training loss, validation
    loss and accuracy), selected epoch and final weights match the same run trained alone, within float tolerance
    (the pass sums in another order)."""
    tcfg = DMNTrainConfig(batch_size=64, max_epochs=3, patience=5)
    data = tasks[1]
    alone = _trainers([data] * 3, (0, 1, 2), tcfg, variant)
    for t in alone:
        t.fit()
    together = _trainers([data] * 3, (0, 1, 2), tcfg, variant)
    assert GroupTrainer(together, log=lambda _: None).fit() == [True] * 3
    for a, b in zip(alone, together):
        assert [h["epoch"] for h in a.history] == [h["epoch"] for h in b.history]
        for ha, hb in zip(_strip(a.history), _strip(b.history)):
            for key in ("train_ce", "val_loss", "val_acc"):
                assert ha[key] == pytest.approx(hb[key], rel=1e-3, abs=1e-4), (key, ha, hb)
        assert a.best["epoch"] == b.best["epoch"]
        for name, p in a.model.state_dict().items():
            if name != SHIFT_ONLY:
                assert torch.allclose(p, b.model.state_dict()[name], atol=1e-4), name
        assert b.history[0]["runs_in_pass"] == 3


def test_a_group_of_one_is_the_run_alone_bit_for_bit(tasks):
    tcfg = DMNTrainConfig(batch_size=64, max_epochs=2)
    alone, = _trainers([tasks[1]], (4,), tcfg)
    alone.fit()
    one, = group = _trainers([tasks[1]], (4,), tcfg)
    GroupTrainer(group, log=lambda _: None).fit()
    assert _strip(alone.history) == _strip(one.history)
    for name, p in alone.model.state_dict().items():
        assert torch.equal(p, one.model.state_dict()[name])


def test_early_stopping_per_run_inside_a_group(tasks):
    """Runs with different stopping in one pass (patience 1, an epoch bound of 2, patience 6): each stops at its own
    epoch, leaves the pass, and the runs that carry on match their alone runs (tasks of different sizes, so the pass
    also steps runs whose epoch has ended)."""
    datas = [tasks[1], _data_small(tasks[17]), tasks[2]]
    tcfgs = [DMNTrainConfig(batch_size=64, max_epochs=e, patience=p) for e, p in ((6, 1), (2, 6), (6, 6))]
    alone = [DMNTrainer(DMNConfig(0, 0, variant="modmn+", dim=12), c, d, s, log=lambda _: None)
             for c, d, s in zip(tcfgs, datas, (0, 1, 2))]
    for t in alone:
        t.fit()
    together = [DMNTrainer(DMNConfig(0, 0, variant="modmn+", dim=12), c, d, s, log=lambda _: None)
                for c, d, s in zip(tcfgs, datas, (0, 1, 2))]
    GroupTrainer(together, log=lambda _: None).fit()
    assert [t.epoch for t in together] == [t.epoch for t in alone]
    assert together[1].epoch == 2 and together[2].epoch == 6
    for a, b in zip(alone, together):
        for ha, hb in zip(_strip(a.history), _strip(b.history)):
            assert ha["val_loss"] == pytest.approx(hb["val_loss"], rel=1e-3, abs=1e-4)
        assert a.best["epoch"] == b.best["epoch"]
    assert together[1].history[-1]["runs_in_pass"] == 3 and together[2].history[-1]["runs_in_pass"] < 3


def _data_small(data):
    """The same task with a smaller training set (fewer batches an epoch)."""
    import dataclasses
    splits = dict(data.splits)
    splits["train"] = {k: v[:150] for k, v in data.splits["train"].items()}
    return dataclasses.replace(data, splits=splits)


def test_a_killed_group_resumes_to_the_same_numbers(tasks, tmp_path):
    """Two epochs, the process gone, then the rest from the runs' checkpoints: the same histories and weights as
    an uninterrupted group; a checkpoint written in a group resumes alone too (the same format)."""
    tcfg = DMNTrainConfig(batch_size=64, max_epochs=4, patience=10)
    straight = _trainers([tasks[1]] * 2, (0, 1), tcfg)
    GroupTrainer(straight, log=lambda _: None).fit()
    paths = [tmp_path / f"seed{s}.pt" for s in (0, 1)]
    first = _trainers([tasks[1]] * 2, (0, 1), tcfg)
    assert GroupTrainer(first, log=lambda _: None).fit(paths, max_new_epochs=2) == [False, False]
    resumed = _trainers([tasks[1]] * 2, (0, 1), tcfg)
    assert GroupTrainer(resumed, log=lambda _: None).fit(paths) == [True, True]
    for a, b in zip(straight, resumed):
        assert _strip(a.history) == _strip(b.history)
        for name, p in a.model.state_dict().items():
            assert torch.equal(p, b.model.state_dict()[name]), name
    # the group's checkpoint goes on alone
    first = _trainers([tasks[1]] * 2, (0, 1), tcfg)
    paths = [tmp_path / f"again{s}.pt" for s in (0, 1)]
    GroupTrainer(first, log=lambda _: None).fit(paths, max_new_epochs=2)
    solo, = _trainers([tasks[1]], (1,), tcfg)
    assert solo.fit(paths[1]) is True and solo.epoch == 4
    for ha, hb in zip(_strip(straight[1].history), _strip(solo.history)):
        assert ha["val_loss"] == pytest.approx(hb["val_loss"], rel=1e-3, abs=1e-4)


def test_runs_of_different_models_or_learning_rates_are_refused(tasks):
    a = DMNTrainer(DMNConfig(0, 0, variant="dmn+", dim=8), DMNTrainConfig(), tasks[1], 0, log=lambda _: None)
    b = DMNTrainer(DMNConfig(0, 0, variant="ff-dmn", dim=8), DMNTrainConfig(), tasks[1], 1, log=lambda _: None)
    with pytest.raises(ValueError, match="share one model config"):
        GroupTrainer([a, b], log=lambda _: None).fit()
    c = DMNTrainer(DMNConfig(0, 0, variant="dmn+", dim=8), DMNTrainConfig(lr=0.01), tasks[1], 1, log=lambda _: None)
    with pytest.raises(ValueError, match="train.lr"):
        GroupTrainer([a, c], log=lambda _: None)
