"""MemN2N / t-MEM-NN: the equations, learning on real bAbI data, and group training == training alone."""

import dataclasses
import math
from pathlib import Path

import pytest
import torch

from nlpbench.memnet.data import load_task_tensors
from nlpbench.memnet.model import MemNetConfig, position_weights
from nlpbench.memnet.train import BayesConfig, GroupTrainer, Run, TrainConfig, learning_rate


# The readings these tests train under, where a test does not name its own: MemNetConfig's and TrainConfig's
# defaults before those became params.yaml's (Adagrad at lr 0.1 learns in two epochs, where SGD at that rate
# diverges; eager kernels compile nothing), so that each test keeps the configuration it was written for.
TEST_MODEL = {"tying": "layerwise", "memory_slots": "fixed", "position_form": "paper", "t_sampler": "gamma",
              "memory_read": "gather", "posterior_kernels": "eager"}
TEST_TRAIN = {"optimizer": "adagrad", "grad_noise_std": 0.0}


def _model_config(**kw) -> MemNetConfig:
    return MemNetConfig(**{"n_words": 0, **TEST_MODEL, **kw})


def _train_config(**kw) -> TrainConfig:
    return TrainConfig(**{**TEST_TRAIN, **kw})


def test_position_encoding_is_the_papers_formula():
    J, L, d = 4, 6, 5
    a, b = position_weights(torch.tensor([J]), L, d)
    for j in range(1, L + 1):
        for k in range(1, d + 1):
            expected = (1 - j / J) - (k / d) * (1 - 2 * j / J) if j <= J else 0.0
            assert (a[0, j - 1] + (k / d) * b[0, j - 1]).item() == pytest.approx(expected)


def test_unique_rows_is_numpys_unique_by_row():
    import numpy as np
    from nlpbench.memnet.data import unique_rows
    rng = np.random.default_rng(0)
    x = rng.integers(0, 300, size=(5000, 7))
    x[rng.random(5000) < 0.6] = rng.integers(0, 3, size=7)       # many repeated rows, and a zero row
    x[::11] = 0
    table, inverse = unique_rows(x)
    expected, expected_inverse = np.unique(x, axis=0, return_inverse=True)
    assert np.array_equal(table, expected) and np.array_equal(inverse, expected_inverse.reshape(-1))


def test_learning_rate_is_halved_every_25_epochs():
    cfg = TrainConfig(lr=0.01, lr_halve_every=25)
    assert [learning_rate(cfg, e) for e in (1, 25, 26, 51, 100)] == [0.01, 0.01, 0.005, 0.0025, 0.00125]


@pytest.fixture(scope="module")
def tasks_1_4(babi_root):
    return [load_task_tensors(babi_root, "en", [t], 50, 100, 0) for t in (1, 4)]


def _trainer(datasets, runs, bayesian, epochs=2, samples=(1, 3), tying="layerwise", t_sampler="gamma",
             kernels="eager", hop_kernels="eager", **train):
    cfg = _model_config(bayesian=bayesian, tying=tying, t_sampler=t_sampler, posterior_kernels=kernels,
                        hop_kernels=hop_kernels)
    return GroupTrainer(runs, datasets, cfg, _train_config(epochs=epochs, lr=0.1, **train),
                        BayesConfig(test_samples=samples) if bayesian else None, log=lambda s: None)


_COMPILER = pytest.mark.skipif(not __import__("nlpbench.nn.kernels", fromlist=["x"]).compiler_works("cpu"),
                               reason="torch.compile cannot build CPU kernels here (no C++ compiler)")


@pytest.mark.parametrize("bayesian,tying,t_sampler,noise,kernels", [
    (False, "layerwise", "gamma", 0.0, "eager"), (True, "layerwise", "gamma", 0.0, "eager"),
    (True, "adjacent", "gamma", 0.0, "eager"), (True, "adjacent", "polar", 0.0, "eager"),
    (False, "adjacent", "gamma", 1e-3, "eager"), (True, "adjacent", "polar", 1e-3, "eager"),
    pytest.param(True, "adjacent", "polar", 1e-3, "compiled", marks=_COMPILER),
    pytest.param(False, "adjacent", "gamma", 1e-3, "compiled hops", marks=_COMPILER)])
def test_group_training_gives_the_same_runs_as_training_alone(tasks_1_4, bayesian, tying, t_sampler, noise, kernels):
    hops = "compiled" if kernels == "compiled hops" else "eager"
    kernels = "eager" if kernels == "compiled hops" else kernels
    group = _trainer(tasks_1_4, [Run("t1", 0, 7), Run("t4", 1, 3)], bayesian, tying=tying, t_sampler=t_sampler,
                     grad_noise_std=noise, kernels=kernels, hop_kernels=hops)
    group.fit()
    together = group.evaluate()
    for k, (data, seed) in enumerate([(tasks_1_4[0], 7), (tasks_1_4[1], 3)]):
        alone = _trainer([data], [Run("x", 0, seed)], bayesian, tying=tying, t_sampler=t_sampler,
                         grad_noise_std=noise, kernels=kernels, hop_kernels=hops)
        alone.fit()
        result = alone.evaluate()[0]
        # float summation order differs in a group (padded rows, batched reductions), which can flip the
        # argmax of a near-tie: at most one question of the 100 validation / 1,000 test questions
        for split, one in (("val_acc", 1 / 100), ("test_acc", 1 / 1000)):
            for key, value in result[split].items():
                assert together[k][split][key] == pytest.approx(value, abs=one + 1e-6), (k, split, key)
        assert together[k]["final_train_loss"] == pytest.approx(result["final_train_loss"], rel=1e-3)
        # the same weights, up to float summation order (rows past the run's vocabulary are padding)
        n, g_state, a_state = data.n_words, group.run_state(k), alone.run_state(0)
        if bayesian:                                                    # (n matrices, V, d): the first, A or E_0
            g_mu, a_mu = g_state["posterior.mu"][0], a_state["posterior.mu"][0]
        else:
            name = "params.A" if tying == "layerwise" else "params.E1"
            g_mu, a_mu = g_state[name], a_state[name]
        assert torch.allclose(g_mu[:n], a_mu[:n], atol=1e-4)


def test_gradient_noise_is_each_runs_own_at_the_set_scale_on_its_own_rows_only(tasks_1_4):
    tr = _trainer(tasks_1_4, [Run("t1", 0, 7), Run("t4", 1, 3)], True, tying="adjacent", t_sampler="polar")
    for p in tr.params:
        p.grad = torch.zeros_like(p)
    tr.add_gradient_noise(0.5)
    mu = tr.model.posterior.mu.grad[:, 1]                               # E_1 (2, V, d): V covers the larger vocabulary
    for k, data in enumerate(tasks_1_4):
        own = tr.model.rows[k]                                          # nil + the run's words + the time rows
        padding = torch.ones(mu.shape[1], dtype=torch.bool)
        padding[own] = False
        assert float(mu[k, own].std()) == pytest.approx(0.5, rel=0.1)
        assert not mu[k, padding].any()                                 # rows past its vocabulary draw nothing
    assert tr.model.posterior.log_nu.grad.ne(0).all()                   # scalars too (every run's every nu)
    assert tr.model.posterior.log_sigma.grad[:, 3].std() > 0.4           # and the last matrix's scales
    noise = torch.stack([mu[k, tr.model.rows[k][:10]].reshape(-1) for k in range(2)])
    assert abs(float(torch.corrcoef(noise)[0, 1])) < 0.2                 # each run from its own generator


@pytest.mark.parametrize("bayesian", [False, True])
def test_gradient_noise_adds_exactly_what_a_scatter_of_the_runs_draws_adds(tasks_1_4, bayesian):
    """add_gradient_noise places the draws with one gather per parameter; the numbers must be those of adding
    std x noise at each run's own elements (index_add_), bit for bit: the committed tables were trained so."""
    tr = _trainer(tasks_1_4, [Run("t1", 0, 7), Run("t4", 1, 3)], bayesian, tying="adjacent", t_sampler="polar")
    gen = torch.Generator().manual_seed(0)
    for p in tr.params:
        p.grad = torch.randn(p.shape, generator=gen) * 10
    expected = [p.grad.clone() for p in tr.params]
    states = [g.get_state() for g in tr.gens["noise"]]
    sizes, targets = tr._gradient_noise_layout()
    noise = torch.cat([torch.randn(n, generator=g) for n, g in zip(sizes, tr.gens["noise"])])
    for e, (at, picks) in zip(expected, targets):
        e.view(-1).index_add_(0, at, noise[picks], alpha=1e-3)
    for g, st in zip(tr.gens["noise"], states):
        g.set_state(st)
    tr.add_gradient_noise(1e-3)
    for p, e in zip(tr.params, expected):
        assert torch.equal(p.grad, e)


def test_gather_reads_each_runs_own_questions():
    from nlpbench.memnet.data import gather
    gen = torch.Generator().manual_seed(0)
    split = {"story_ids": torch.randint(0, 50, (3, 40, 6), generator=gen),
             "query_ids": torch.randint(0, 50, (3, 40), generator=gen), "size": torch.tensor([40, 31, 12])}
    data_of_run = torch.tensor([2, 0, 2, 1])
    idx = torch.stack([torch.randperm(12, generator=gen)[:5] for _ in range(4)])
    batch = gather(split, data_of_run, idx)
    assert set(batch) == {"story_ids", "query_ids"}
    for k in range(4):
        for b in range(5):
            assert torch.equal(batch["story_ids"][k, b], split["story_ids"][data_of_run[k], idx[k, b]])
            assert batch["query_ids"][k, b] == split["query_ids"][data_of_run[k], idx[k, b]]


@pytest.mark.parametrize("tying", ["layerwise", "adjacent"])
def test_weight_draws_side_by_side_give_the_sequential_averages(tasks_1_4, monkeypatch, tying):
    """Evaluation puts several weight draws through the model in one pass (pseudo-runs); the draws
    are the sequential passes' draws, so every S-sample average is the same, in every bucket of runs."""
    import nlpbench.memnet.train as train
    tr = _trainer(tasks_1_4, [Run("t1", 0, 7), Run("t4", 1, 3)], True, epochs=1, tying=tying)
    tr.fit()
    assert len(tr.buckets) == 2                                  # tasks 1 and 4: short and long stories apart
    eval_state = [g.get_state() for g in tr.gens["eval"]]

    def averages(draw_runs):
        monkeypatch.setattr(train, "DRAW_RUNS", draw_runs)
        for g, st in zip(tr.gens["eval"], eval_state):
            g.set_state(st)
        return [(s, p.clone()) for s, p, _ in tr.predictive("val", 5, "posterior")]

    one_by_one, side_by_side = averages(1), averages(32)        # 1 draw per pass; 5 draws x 2 runs per pass
    assert [s for s, _ in side_by_side] == [1, 2, 3, 4, 5]
    for (_, a), (_, b) in zip(one_by_one, side_by_side):
        assert torch.allclose(a, b, atol=1e-6) and torch.equal(a.argmax(-1), b.argmax(-1))
    assert not torch.allclose(one_by_one[0][1], one_by_one[4][1], atol=1e-4)   # the draws do differ
    # batched draws (bayes.test_draws): other numbers from the same posterior, so nearly the same answers
    tr.bcfg = dataclasses.replace(tr.bcfg, test_draws="batched")
    batched = averages(32)
    assert not torch.allclose(batched[4][1], side_by_side[4][1], atol=1e-6)
    agree = (batched[4][1].argmax(-1) == side_by_side[4][1].argmax(-1)).float().mean()
    assert agree > 0.9, agree                                   # 1 epoch: an uncertain model


@pytest.mark.parametrize("bayesian,over", [(False, {}), (True, {"tying": "adjacent"}), (True, {"nil_row": "learned"}),
                                           (True, {"position_encoding": False}),
                                           (True, {"memory_slots": "longest_story", "tying": "adjacent"}),
                                           (False, {"position_form": "code_published", "tying": "adjacent"})])
def test_a_few_questions_embedding_their_own_sentences_get_the_whole_tables_answers(tasks_1_4, bayesian, over):
    """Answering one question at a time embeds only its own story and query, not the task's whole
    table of distinct sentences: the same logits up to float summation order, for one and several draws side
    by side, in every bucket of runs."""
    from nlpbench.memnet.data import gather
    tr = GroupTrainer([Run("t1", 0, 7), Run("t4", 1, 3)], tasks_1_4, _model_config(bayesian=bayesian, **over),
                      _train_config(), BayesConfig() if bayesian else None, log=lambda s: None)
    assert len(tr.buckets) == 2
    with torch.no_grad():
        for n in (1, 3):
            weights = tr.model.draws(tr.gens["eval"], "posterior" if bayesian else "mean", n, batched=True)
            for questions in ([[0], [5]], [[0, 1, 2], [6, 7, 8]]):
                batch = gather(tr.split["test"], tr.data_of_run, torch.tensor(questions))
                whole = tr.forward_draws(batch, weights, n)
                own = tr.forward_draws(batch, weights, n, own_sentences=True)
                assert whole.shape == own.shape == (n, 2, len(questions[0]), tr.model_cfg.n_words)
                assert torch.equal(torch.isfinite(whole), torch.isfinite(own))      # the same -inf rows
                real = torch.isfinite(whole)
                assert torch.allclose(whole[real], own[real], atol=1e-5)
                assert whole[real].abs().max() > 1e-3                              # not trivially zero


def test_a_saved_run_answers_with_its_draws_side_by_side(tasks_1_4, babi_root, tmp_path):
    """RunPredictor (Tables 3-5, 16-18) averages S draws computed in one pass: the same as S passes."""
    from nlpbench.data import babi
    from nlpbench.memnet.data import TaskTensors, stack_sentences, stack_split
    from nlpbench.memnet.experiments import save_run
    from nlpbench.memnet.predict import RunPredictor
    tr = _trainer(tasks_1_4[:1], [Run("t1", 0, 7)], True, epochs=1, tying="adjacent")
    tr.fit()
    save_run(tr, 0, tmp_path, tasks_1_4[0], {}, {})
    p = RunPredictor(tmp_path)
    samples = babi.parse_file(babi.task_file(babi_root, "en", 1, "test"))[:30]
    probs, att = p.predict(samples, S=4, seed=5)
    data = TaskTensors("x", p.vocab, {"x": babi.vectorize(samples, p.vocab, p.cfg.memory_size)})
    batch = {k: v for k, v in stack_split([data], "x", p.device).items() if k != "size"}
    t = stack_sentences([data], p.device)
    sentences = {"bags": p.model.sentence_bags(t["tokens"], t["len"], t["width"])}
    g = torch.Generator().manual_seed(5)
    outs = [p.model(batch, p.model.draw([g], "posterior"), sentences, return_attention=True) for _ in range(4)]
    assert torch.allclose(probs, sum(torch.softmax(o[0], -1) for o in outs)[0] / 4, atol=1e-6)
    assert torch.allclose(att, sum(o[1] for o in outs)[0] / 4, atol=1e-6)
    assert probs.shape == (30, p.cfg.n_words) and torch.allclose(probs.sum(-1), torch.ones(30))


@pytest.mark.slow
def test_memn2n_learns_task_1(babi_root):
    """A MemN2N that cannot learn bAbI task 1 has a bug: >= 95% test accuracy in a short CPU run."""
    data = [load_task_tensors(babi_root, "en", [1], 50, 100, 0)]
    trainer = _trainer(data, [Run("t1", 0, 0)], bayesian=False, epochs=15)
    trainer.fit()
    assert trainer.evaluate()[0]["test_acc"]["point"] >= 0.95


@pytest.mark.slow
def test_tmemnn_learns_task_1_and_fits_its_dofs(babi_root):
    data = [load_task_tensors(babi_root, "en", [1], 50, 100, 0)]
    trainer = _trainer(data, [Run("t1", 0, 0)], bayesian=True, epochs=15, samples=(1, 10))
    trainer.fit()
    m = trainer.evaluate()[0]
    assert m["test_acc"]["S10"] >= 0.95
    assert all(1.0 < nu < 100.0 for nu in m["dof"].values())    # learned: moved from the initial 100


def test_adjacent_tying_and_one_hop_run(tasks_1_4):
    for cfg in (_model_config(tying="adjacent"), _model_config(hops=1)):
        t = GroupTrainer([Run("a", 0, 0)], tasks_1_4[:1], cfg, _train_config(epochs=1), None, log=lambda s: None)
        t.fit()
        assert 0.0 <= t.evaluate()[0]["test_acc"]["point"] <= 1.0


def test_tmemnn_with_adjacent_tying_has_a_student_t_posterior_over_every_e_k(tasks_1_4):
    """Adjacent t-MEM-NN: E_0 .. E_K stochastic (B = E_0 = A^1, A^{k+1} = C^k = E_k, W^T = C^K), the
    divergence summed over all K + 1 of them, a dof fitted for each."""
    t = _trainer(tasks_1_4[:1], [Run("a", 0, 0)], bayesian=True, tying="adjacent", epochs=1)
    assert t.model.posterior.mu.shape[1] == 4 and sorted(t.model.dof()) == ["E0", "E1", "E2", "E3"]
    per_matrix = t.model.posterior.divergence(None)                      # (runs, matrices)
    assert per_matrix.shape == (1, 4) and (per_matrix > -1e-3).all()
    assert torch.allclose(t.model.divergence(None), per_matrix.sum(1))
    t.fit()
    assert set(t.evaluate()[0]["dof"]) == {"E0", "E1", "E2", "E3"}


def test_global_clipping_scales_a_runs_whole_gradient_and_per_tensor_each_tensor():
    from nlpbench.memnet.train import clip_per_run
    g1 = torch.tensor([[3.0, 4.0], [0.3, 0.4]])              # run 0: norm 5; run 1: norm 0.5
    g2 = torch.tensor([[0.0, 0.0, 12.0], [0.0, 0.0, 0.0]])     # run 0: norm 12
    def params():
        ps = [torch.zeros(2, 2, requires_grad=True), torch.zeros(2, 3, requires_grad=True)]
        ps[0].grad, ps[1].grad = g1.clone(), g2.clone()
        return ps
    tensor, whole = params(), params()
    clip_per_run(tensor, 4.0, "tensor")
    clip_per_run(whole, 4.0, "global")
    assert tensor[0].grad[0].norm() == pytest.approx(4.0, rel=1e-5) and tensor[1].grad[0].norm() == pytest.approx(4.0, rel=1e-5)
    assert torch.allclose(whole[0].grad[0], g1[0] * 4 / 13, atol=1e-6)      # joint norm sqrt(25 + 144) = 13
    assert torch.allclose(whole[1].grad[0], g2[0] * 4 / 13, atol=1e-6)
    assert torch.equal(whole[0].grad[1], g1[1]) and torch.equal(tensor[0].grad[1], g1[1])   # run 1 untouched
    with pytest.raises(ValueError, match="clip_scope"):
        clip_per_run(params(), 4.0, "layer")


def test_per_tensor_clipping_clips_each_matrix_of_a_posterior_bank_alone():
    """t-MEM-NN keeps its n matrices in one (K, n, V, d) parameter; per-tensor clipping must still
    clip each matrix of each run by that matrix's own norm, as when every matrix was its own tensor."""
    from nlpbench.memnet.train import clip_per_run
    torch.manual_seed(0)
    grad = torch.randn(2, 3, 4, 5) * torch.tensor([1.0, 10.0, 100.0]).view(1, 3, 1, 1)   # norms ~4, 45, 450
    bank = torch.zeros(2, 3, 4, 5, requires_grad=True)
    bank.lead_dims = 2
    bank.grad = grad.clone()
    apart = [torch.zeros(2, 4, 5, requires_grad=True) for _ in range(3)]
    for m, p in enumerate(apart):
        p.grad = grad[:, m].clone()
    clip_per_run([bank], 40.0, "tensor")
    clip_per_run(apart, 40.0, "tensor")
    assert torch.allclose(bank.grad, torch.stack([p.grad for p in apart], 1))
    assert torch.equal(bank.grad[:, 0], grad[:, 0])                                       # under 40: untouched


@pytest.mark.parametrize("drop_last,steps", [(True, 900 // 32), (False, -(-900 // 32))])
def test_the_last_partial_batch_is_dropped_or_trained_on(tasks_1_4, drop_last, steps, monkeypatch):
    t = _trainer(tasks_1_4[:1], [Run("a", 0, 0)], bayesian=False, epochs=1, drop_last=drop_last)
    sizes = []
    loss = t.loss
    monkeypatch.setattr(t, "loss", lambda batch: (sizes.append(batch["answers"].shape[1]), loss(batch))[1])
    t.train_epoch()
    assert len(sizes) == steps and sum(sizes) == (steps * 32 if drop_last else 900)


def test_resume_from_checkpoint_continues_identically(tasks_1_4, tmp_path):
    straight = _trainer(tasks_1_4[:1], [Run("a", 0, 0)], False, epochs=2)
    straight.fit()
    ckpt = tmp_path / "ckpt.pt"
    first = _trainer(tasks_1_4[:1], [Run("a", 0, 0)], False, epochs=1, checkpoint_every=1)
    first.fit(ckpt)
    resumed = _trainer(tasks_1_4[:1], [Run("a", 0, 0)], False, epochs=2, checkpoint_every=1)
    resumed.fit(ckpt)
    assert resumed.evaluate()[0]["test_acc"] == straight.evaluate()[0]["test_acc"]
    assert torch.equal(resumed.run_state(0)["params.A"], straight.run_state(0)["params.A"])


def test_a_checkpoint_of_these_runs_in_an_older_parameter_layout_restarts_instead_of_failing(tasks_1_4, tmp_path):
    """t-MEM-NN's matrices moved into one posterior bank: a checkpoint of the same runs written by the
    older code (one module per matrix) cannot be loaded; the pass starts afresh and gives the straight numbers
    instead of stopping on load_state_dict's missing keys."""
    straight = _trainer(tasks_1_4[:1], [Run("a", 0, 0)], True, epochs=1)
    straight.fit()
    old = _trainer(tasks_1_4[:1], [Run("a", 0, 0)], True, epochs=1)
    state = old.state()
    state["epoch"] = 1
    state["model"] = {k.replace("posterior.", "matrices.E0."): v for k, v in state["model"].items()}
    ckpt = tmp_path / "ckpt.pt"
    torch.save(state, ckpt)
    logs = []
    again = _trainer(tasks_1_4[:1], [Run("a", 0, 0)], True, epochs=1)
    again.log = logs.append
    again.fit(ckpt)
    assert any("another parameter layout" in line for line in logs) and again.epoch == 1
    assert again.evaluate()[0]["test_acc"] == straight.evaluate()[0]["test_acc"]


def _naive_memn2n(weights, W, data, q, hops, n_words, slots=None):
    """MemN2N for one question of one run, written slot by slot from the equations (all M memory slots,
    empty ones included; PE l_kj = (1 - j/J) - (k/d)(1 - 2j/J); time row of slot i = n_words + age).
    Layer-wise: A, B, C in every hop and W; adjacent (W None): B = E_0, hop k reads A = E_{k-1}, C = E_k,
    and the answer is E_K^T u."""
    if W is None:
        E = [weights[f"E{k}"][0] for k in range(hops + 1)]
        pairs, B, W_out = [(E[k], E[k + 1]) for k in range(hops)], E[0], E[hops][:n_words]
    else:
        A, B, C = (weights[n][0] for n in "ABC")
        pairs, W_out = [(A, C)] * hops, W[0]
    d = B.shape[1]
    k = torch.arange(1, d + 1, dtype=torch.float32)

    def embed(E, tokens):
        words = [t for t in tokens.tolist() if t != 0]
        J = len(words)
        return sum(((1 - j / J) - (k / d) * (1 - 2 * j / J)) * E[w] for j, w in enumerate(words, 1)) \
            if words else torch.zeros(d)

    split = data.splits["test"]
    story, n = split["stories"][q], int(split["n_facts"][q])
    M = slots or story.shape[0]
    def memory(E):
        return [embed(E, torch.as_tensor(story[i])) + E[n_words + n - 1 - i] if i < n else torch.zeros(d)
                for i in range(M)]
    u = embed(B, torch.as_tensor(split["queries"][q]))
    for A, C in pairs:
        mem, out = memory(A), memory(C)
        p = torch.softmax(torch.stack([u @ m_i for m_i in mem]), 0)       # eq. 33 over all M slots
        u = u + sum(p_i * c_i for p_i, c_i in zip(p, out))                # eq. 35, u^{k+1} = u^k + o^k
    return W_out @ u                                                      # eq. 36


@pytest.mark.parametrize("tying", ["layerwise", "adjacent"])
def test_forward_matches_the_equations_slot_by_slot(tasks_1_4, tying):
    """The vectorised forward (sparse sentence table, only the used slots plus one logit for the empty ones)
    equals the equations computed naively over all 50 slots, on real task-1 questions."""
    from nlpbench.memnet.data import gather
    t = _trainer(tasks_1_4[:1], [Run("a", 0, 0)], bayesian=False, tying=tying)
    weights = t.model.draw(None, "mean")
    idx = torch.arange(12).unsqueeze(0)
    logits = t.model(gather(t.split["test"], t.data_of_run, idx), weights, t.sentences)
    n = tasks_1_4[0].n_words
    for q in range(12):
        W = t.model.W if tying == "layerwise" else None
        expected = _naive_memn2n(weights, W, tasks_1_4[0], q, 3, t.model_cfg.n_words)
        assert torch.allclose(logits[0, q, 1:n], expected[1:n], atol=1e-5), q


def test_rows_without_noise_never_reach_the_loss(tasks_1_4):
    """t-MEM-NN draws noise only for the rows a forward pass can read (B's words; A's and C's words and the time
    rows of the run's longest story). Check that premise: the likelihood's gradient is zero on every other row."""
    from torch.nn import functional as F
    from nlpbench.memnet.data import gather
    t = _trainer(tasks_1_4[:1], [Run("a", 0, 0)], bayesian=True)
    names = t.model_cfg.matrix_names()
    q = dict(zip(names, t.model.posterior.rows))                            # the run's slots, one per matrix
    assert len(q["B"]) == tasks_1_4[0].n_words                             # no time rows for B
    weights = {n: t.model.posterior.mu[:, m].detach().clone().requires_grad_(True) for m, n in enumerate(names)}
    N = int(t.split["train"]["size"][0])
    batch = gather(t.split["train"], t.data_of_run, torch.arange(N).unsqueeze(0))
    logits = t.forward(batch, weights)
    F.cross_entropy(logits[0], batch["answers"][0]).backward()
    for name, w in weights.items():
        unread = torch.ones(w.shape[1], dtype=torch.bool)
        unread[q[name]] = False
        assert unread.any() and w.grad[0, unread].abs().max() == 0, name
        assert w.grad[0, q[name]].abs().sum() > 0, name


def test_a_group_killed_between_its_runs_saves_completes_with_the_same_numbers(babi_root, tmp_path, monkeypatch):
    """Killed after one run's metrics.json and before the next's, a group resumes from its checkpoint (which
    holds both runs) to the numbers of an uninterrupted pass; it used to fail on every rerun with a size
    mismatch (the checkpoint's 2 runs loaded into a 1-run model)."""
    import yaml
    from nlpbench.runtime import io
    from nlpbench.memnet import experiments
    from nlpbench.memnet.groups import make_group, memnet_settings

    params = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    settings = memnet_settings(params, {"train.epochs": 2, "train.checkpoint_every": 1}, "test")
    group = make_group("memn2n", "en", (1,), (0, 1), settings)
    quiet = dict(log=lambda s: None)
    experiments.train_group(group, babi_root, tmp_path / "straight", **quiet)

    save_run = experiments.save_run

    def killed_after_the_first(trainer, k, *args):
        if k == 1:
            raise KeyboardInterrupt("killed between two runs' saves")
        save_run(trainer, k, *args)
    monkeypatch.setattr(experiments, "save_run", killed_after_the_first)
    with pytest.raises(KeyboardInterrupt):
        experiments.train_group(group, babi_root, tmp_path / "killed", **quiet)
    monkeypatch.setattr(experiments, "save_run", save_run)
    summary = experiments.train_group(group, babi_root, tmp_path / "killed", **quiet)

    assert summary["runs"] == {"1-0": "ok", "1-1": "ok"}
    for seed in (0, 1):
        straight, resumed = (io.read_json(group.run_dir(tmp_path / root, 1, seed) / "metrics.json")
                             for root in ("straight", "killed"))
        for key in ("val_acc", "test_acc", "final_train_loss", "epochs"):
            assert resumed[key] == straight[key], (seed, key)
    assert not (tmp_path / "killed" / group.group_id / "_checkpoint.pt").exists()


def test_training_a_finished_group_again_retrains_every_run_to_the_same_numbers(babi_root, tmp_path):
    """`nlpbench train GROUP --again` (train_group again=True): a finished group's runs train again, e.g. to record
    a metric added since (val_nll); the same seeds give the same numbers, and the summary's wall time is the new
    training's, not the sum of both."""
    import time
    import yaml
    from nlpbench.runtime import io
    from nlpbench.memnet import experiments
    from nlpbench.memnet.groups import make_group, memnet_settings

    params = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    group = make_group("memn2n", "en", (1,), (0, 1), memnet_settings(params, {"train.epochs": 2}, "test"))
    quiet = dict(log=lambda s: None)
    experiments.train_group(group, babi_root, tmp_path, **quiet)
    paths = [group.run_dir(tmp_path, 1, seed) / "metrics.json" for seed in (0, 1)]
    before = []
    for path in paths:                                         # as a run trained before val_nll was recorded
        m = io.read_json(path)
        del m["val_nll"]
        io.write_json(path, m)
        before.append(m)
    assert experiments.train_group(group, babi_root, tmp_path, **quiet)["trained_now"] == 0
    t0 = time.perf_counter()
    summary = experiments.train_group(group, babi_root, tmp_path, again=True, **quiet)
    assert summary["trained_now"] == 2 and summary["wall_time_s"] <= time.perf_counter() - t0
    for path, old in zip(paths, before):
        new = io.read_json(path)
        assert "val_nll" in new
        for key in ("val_acc", "test_acc", "final_train_loss"):
            assert new[key] == old[key], key


def test_longest_story_memory_matches_the_equations_with_that_many_slots(tasks_1_4):
    """memory_slots: longest_story = a memory of min(M, the run's longest story) slots, the empty ones with
    logit 0, computed naively slot by slot."""
    from nlpbench.memnet.data import gather
    t = _trainer(tasks_1_4[:1], [Run("a", 0, 0)], bayesian=False, tying="adjacent")
    t.model.cfg = dataclasses.replace(t.model.cfg, memory_slots="longest_story")
    slots = int(t.model.slots[0])
    assert slots < 50                                       # task 1's stories are short: fewer slots than M
    weights = t.model.draw(None, "mean")
    logits = t.model(gather(t.split["test"], t.data_of_run, torch.arange(12).unsqueeze(0)), weights, t.sentences)
    n = tasks_1_4[0].n_words
    for q in range(12):
        expected = _naive_memn2n(weights, None, tasks_1_4[0], q, 3, t.model_cfg.n_words, slots=slots)
        assert torch.allclose(logits[0, q, 1:n], expected[1:n], atol=1e-5), q


def test_the_codes_position_encoding_is_its_formula_over_the_padded_length():
    from nlpbench.nn.position import position_weights_code
    J, L, d = 7, 9, 5
    a, b = position_weights_code(torch.tensor([J]), L, d)
    for j in range(1, L + 1):
        for k in range(1, d + 1):
            expected = 1 + 4 * (k - (d + 1) / 2) * (j - (J + 1) / 2) / ((d + 1) * (J + 1)) if j <= J else 0.0
            assert (a[0, j - 1] + (k / d) * b[0, j - 1]).item() == pytest.approx(expected, abs=1e-6)


def test_the_published_codes_position_encoding_is_its_loop_with_the_time_slot():
    """position_form code_published: the footnoted code's matrix, built as that code builds it (a double loop
    over k = 1..d and j = 1..J, J = padded width + the time-word slot, divided by d J), on the word positions."""
    from nlpbench.nn.position import position_weights_code_published
    width, L, d = 7, 9, 5
    for time_slot in (True, False):
        J = width + 1 if time_slot else width
        a, b = position_weights_code_published(torch.tensor([width]), L, d, time_slot)
        for j in range(1, L + 1):
            for k in range(1, d + 1):
                expected = 1 + 4 * (k - (d + 1) / 2) * (j - (J + 1) / 2) / d / J if j <= width else 0.0
                assert (a[0, j - 1] + (k / d) * b[0, j - 1]).item() == pytest.approx(expected, abs=1e-6)


def test_dofs_by_role_under_either_tying():
    from nlpbench.memnet.groups import dof_by_role
    assert dof_by_role({"A": 3.0, "B": 4.0, "C": 15.0}) == {"A": 3.0, "B": 4.0, "C": 15.0}
    # adjacent: E0 = B = A^1, E1 = C^1 = A^2, E2 = C^2 = A^3, E3 = C^3
    assert dof_by_role({"E0": 2.0, "E1": 4.0, "E2": 3.0, "E3": 30.0}) == {"B": 2.0, "A": 4.0, "C": 30.0}


def test_the_timing_benchmark_runs_and_writes_its_ratios(babi_root, tmp_path, monkeypatch):
    """`nlpbench output tolias-thesis timing` end to end on two tasks and a few steps (timings are not
    asserted: the benchmark prints them; this checks that every row it reports is measured)."""
    from nlpbench import config
    from nlpbench.results import build
    from nlpbench.family import Paths
    from nlpbench.timing import memnet as bench
    monkeypatch.setattr(bench, "INFERENCE_REPEATS", 1)
    monkeypatch.setattr(bench, "SINGLE_QUESTIONS", 2)
    params = config.load(Path(__file__).parents[1] / "params.yaml", {"scale": "smoke", "device": "cpu"})
    params["tables"]["tolias-thesis"][bench.DELTA_20]["rows"] = [1, 2, 20]   # the smoke scale's subset keeps 1, 20
    params["memnet"]["seeds"] = [0, 1, 2]        # Table 2's seeds (ten at the cpu scale): a group of its own
    params["outputs"]["tolias-thesis"]["timing"]["steps"] = 2
    written = build.output(params, "tolias-thesis", "timing", Paths(babi_root.parent, tmp_path / "runs",
                                                                    tmp_path / "results"))
    assert [p.name for p in written] == ["timing.md", "timing.csv", "timing.output.json"]
    md = written[0].read_text()
    for quantity in ("S = 10 / S = 1, draws batched", "S = 10 / S = 1, draws shared by the questions",
                     "S = 10 / S = 1, shared draws, whole sentence table", "t-MEM-NN / MemN2N, 2 runs together",
                     "t-MEM-NN (gamma) / MemN2N, 2 runs together", "MemN2N, speed-up over the plain loop",
                     "t-MEM-NN, speed-up over the plain loop", "t-MEM-NN / MemN2N, plain loop",
                     "t-MEM-NN / MemN2N, 10 runs together",           # a vectorised group: 2 tasks x 5 seeds
                     "t-MEM-NN / MemN2N, Table 2's group (en, 2 tasks x 3 seeds = 6 runs)",
                     "t-MEM-NN / MemN2N, Table 13's group (en-10k, 2 tasks x 5 seeds = 10 runs)"):
        row = next(line for line in md.splitlines() if line.startswith(f"| {quantity} |"))
        assert float(row.split("|")[2]) > 0, row
    assert "- data: bAbI en tasks 1, 20, " in md                   # the tasks it timed, as Table 2 trains them
    assert "| not measured yet |" in md               # no end-to-end record in this results/ (nlpbench end-to-end)
    # where t-MEM-NN's extra time per grouped step goes: every part measured for both models (a difference of
    # two timings may have either sign on a noisy machine, so only that it was measured is checked)
    section = md.split("## Where the difference goes")[1].split("\n## ")[0]
    for quantity in ("whole step", "weights of one pass, forward and backward", "of which the draw's uniforms",
                     "t-divergence, forward and backward", "gradient noise", "per-run clipping and the optimiser step",
                     "the rest: memory hops"):
        row = next(line for line in section.splitlines() if line.startswith(f"| {quantity}"))
        assert math.isfinite(float(row.split("|")[2])) and "t-MEM-NN" in row.split("|")[5], row
    assert "t-MEM-NN 0.00" not in section.split("| t-divergence")[1].splitlines()[0]   # t-MEM-NN's was timed


@pytest.mark.parametrize("bayesian", [False, True])
def test_the_timing_benchmark_times_the_trainers_own_step_whatever_the_clipping_scope(tasks_1_4, bayesian):
    """bench.train_ms over one epoch's minibatches leaves the weights train_epoch leaves: the same step, gradient
    noise and clipping scope included (it clipped tensor by tensor whatever memnet.train.clip_scope said)."""
    from nlpbench.timing import memnet as bench
    settings = dict(epochs=1, grad_noise_std=1e-3, clip_norm=0.5, clip_scope="global")   # 0.5: clipping bites
    timed = _trainer(tasks_1_4[:1], [Run("a", 0, 0)], bayesian, **settings)
    trained = _trainer(tasks_1_4[:1], [Run("a", 0, 0)], bayesian, **settings)
    bench.train_ms(timed, timed.n_train // 32 - bench.WARMUP, gradient_noise=True)   # every batch of an epoch
    trained.train_epoch()
    for mine, theirs in zip(timed.params, trained.params):
        assert torch.equal(mine, theirs)


def _one_run_batch(data, split: str, idx) -> dict[str, torch.Tensor]:
    from nlpbench.memnet.data import padded_split
    return {k: v[torch.as_tensor(idx)] for k, v in padded_split(data, split).items()}


def _readable_run(tr: GroupTrainer, k: int):
    """Run k of a group trainer as the readable one-run model (memnet.model.MemN2N), its parameters copied across:
    run k's own rows (nil, its words, the time rows) of every matrix, its W, its posterior's scales and dofs."""
    from nlpbench.memnet.model import MemN2N
    data = tr.datasets[tr.runs[k].data_index]
    longest = max(int(data.splits[s]["n_facts"].max()) for s in ("train", "val", "test"))
    model = MemN2N(tr.model_cfg, data.n_words, longest)
    rows = tr.model.rows[k]
    with torch.no_grad():
        for m, name in enumerate(tr.model_cfg.matrix_names()):
            if tr.model_cfg.bayesian:
                model.mu[name].copy_(tr.model.posterior.mu[k, m][rows])
                model.log_sigma[name].copy_(tr.model.posterior.log_sigma[k, m][rows])
                if tr.model_cfg.posterior == "student_t":
                    model.log_nu[name].copy_(tr.model.posterior.log_nu[k, m])
            else:
                model.mu[name].copy_(tr.model.params[name][k][rows])
        if tr.model_cfg.tying == "layerwise":
            model.W.copy_(tr.model.W[k, : data.n_words])
    return model, data


def _close(engine: torch.Tensor, readable: torch.Tensor, n_words: int) -> None:
    """The engine's scores over its group's vocabulary (padding rows past the run's own: -inf or probability 0)
    equal the readable model's over the run's own, within float32 rounding (RTOL, ATOL)."""
    own, pad = engine[..., :n_words], engine[..., n_words:]
    assert bool((pad == float("-inf")).all()) or bool((pad == 0).all())
    assert torch.equal(torch.isfinite(own), torch.isfinite(readable))
    torch.testing.assert_close(own[torch.isfinite(own)], readable[torch.isfinite(readable)], rtol=RTOL, atol=ATOL)


# The engine sums in other orders than the readable model (one sparse product for a_j and b_j apart, the empty
# slots as one extra logit log(#empty), each run's whole sentence table against u, the closed-form divergence
# sum): float32 rounding, a few ulps of values of order 1-100, apart. 1e-5 bounds it with margin; a perturbed
# equation (a hop, a position weight, a time row, a draw's scale) moves logits by 1e-3 or more.
RTOL, ATOL = 1e-5, 1e-5


@pytest.mark.parametrize("model,settings", [
    ("memn2n", dict(tying="adjacent", hops=3, memory_slots="longest_story", position_form="code_published",
                    memory_read="auto")),                                       # the tables' reading
    ("memn2n", dict(tying="adjacent", hops=1, memory_slots="fixed", position_form="paper", nil_row="learned",
                    memory_read="gather")),                                     # empty slots hold the nil sentence
    ("memn2n", dict(tying="layerwise", hops=3, memory_slots="fixed", position_form="code",
                    memory_read="whole_table")),                                # empty slots: one logit log(#empty)
    ("tmemnn", dict(tying="adjacent", hops=3, memory_slots="longest_story", position_form="code_published",
                    memory_read="auto", t_sampler="polar")),
    ("tmemnn", dict(tying="adjacent", hops=3, memory_slots="longest_story", position_form="code_published",
                    memory_read="auto", t_sampler="polar", tie_prior_dof=False)),   # the prior's own dof
    ("tmemnn", dict(tying="layerwise", hops=1, memory_slots="longest_story", position_form="code",
                    memory_read="gather", t_sampler="gamma")),
    ("gmemnn", dict(tying="adjacent", hops=3, memory_slots="longest_story", position_form="code_published",
                    memory_read="auto")),
])
def test_the_engine_computes_the_readable_models_function(tasks_1_4, model, settings):
    """memnet.engine (two runs of different vocabularies and story lengths in one group, weight draws as
    pseudo-runs) computes memnet.model's function: for the same parameters the same logits under the mean
    weights, the same training loss under the escort draw of a run's noise generator (the divergence included),
    and the same MC prediction over S posterior draws of its evaluation generator."""
    from nlpbench.memnet.data import gather
    from nlpbench.memnet.groups import MODELS
    settings = dict(settings)
    tie_prior_dof = settings.pop("tie_prior_dof", True)
    cfg = _model_config(**MODELS[model], **settings)
    bayes = BayesConfig(test_samples=(3,), tie_prior_dof=tie_prior_dof) if cfg.bayesian else None
    tr = GroupTrainer([Run("a", 0, 0), Run("b", 1, 1)], tasks_1_4, cfg, _train_config(), bayes, log=lambda s: None)
    with torch.no_grad():
        for p in tr.model.parameters():             # away from the initial values, where sigma and nu are uniform
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
        if cfg.bayesian:                            # wide, heavy-tailed posteriors: the draws move the logits
            tr.model.posterior.log_sigma.add_(math.log(20.0))
        if cfg.bayesian and cfg.posterior == "student_t":
            tr.model.posterior.log_nu.sub_(math.log(25.0))
        if tr.prior_log_nu is not None:
            tr.prior_log_nu.fill_(math.log(7.0))
    K, idx = 2, torch.arange(0, 900, 13)
    train = gather(tr.split["train"], tr.data_of_run, idx.expand(K, -1))
    noise = [g.get_state() for g in tr.gens["noise"]]
    evals = [g.get_state() for g in tr.gens["eval"]]
    with torch.no_grad():
        mean = tr.forward_draws(train, tr.model.draws(None, "mean", 2, False), 2)    # 2 pseudo-runs per run
        loss, _ = tr.loss(train)
        *_, (_, probs, _) = tr.predictive("test", 3 if cfg.bayesian else 1, "posterior" if cfg.bayesian else "mean")
    for k in range(K):
        readable, data = _readable_run(tr, k)
        batch = _one_run_batch(data, "train", idx)
        x = (batch["stories"], batch["n_facts"], batch["queries"])
        with torch.no_grad():
            ours = readable(*x, readable.weights("mean"))
            prior = None if tr.prior_log_nu is None or tie_prior_dof else tr.prior_log_nu[k].exp()
            theirs_loss = readable.loss(*x, batch["answers"], tr.n_train, torch.Generator().set_state(noise[k]),
                                        tr.bcfg.divergence_weight if bayes else 0.1, prior)
            test = _one_run_batch(data, "test", torch.arange(1000))
            predicted = readable.predict(test["stories"], test["n_facts"], test["queries"], 3,
                                         torch.Generator().set_state(evals[k]))
        for s in range(2):
            _close(mean[s, k], ours, data.n_words)
        torch.testing.assert_close(loss[k], theirs_loss, rtol=RTOL, atol=ATOL)
        _close(probs[k], predicted, data.n_words)


def test_the_readable_tmemnn_trains_on_its_draws_and_divergence(tasks_1_4):
    """One step of the readable t-MEM-NN (memnet.train.train_step, the timing benchmark's one-run loop) moves
    every mean, scale and dof, and the loss is finite."""
    from nlpbench.memnet.model import MemN2N
    from nlpbench.memnet.train import train_step
    cfg = _model_config(bayesian=True, tying="adjacent", memory_slots="longest_story",
                       position_form="code_published", t_sampler="polar")
    model = MemN2N(cfg, tasks_1_4[0].n_words, 10, torch.Generator().manual_seed(0))
    before = [p.detach().clone() for p in model.parameters()]
    loss = train_step(model, torch.optim.SGD(model.parameters(), lr=0.01),
                      _one_run_batch(tasks_1_4[0], "train", list(range(32))), 900)
    assert torch.isfinite(loss)
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_the_timing_benchmark_reads_each_tables_job_minutes_from_the_pipelines_benchmark_files(tmp_path):
    """Whole-table times come from the `benchmark:` files snakemake writes per training job, else from
    a group's cpu row of costs.tsv (a group trained through `nlpbench train`): each chapter 6 table sums its own
    groups' seconds, the total counts a group shared by tables once."""
    from nlpbench import config, status
    from nlpbench.timing import memnet_jobs as bench
    from nlpbench.memnet.groups import declaration_groups
    cpu = config.load(Path(__file__).parents[1] / "params.yaml", {"scale": "cpu"})
    groups = {name: sorted(g.group_id for g in declaration_groups(
        cpu, config.declaration(cpu, "tables", "tolias-thesis", name)).values()) for name in ("2", "6")}
    shared = set(groups["2"]) & set(groups["6"])
    for i, gid in enumerate(groups["2"]):
        (tmp_path / f"{gid}.benchmark.tsv").write_text(f"s\th:m:s\tmax_rss\n{60 * (i + 1)}.0\t0:01:00\t1.0\n")
    costs = tmp_path / "costs.tsv"
    jobs = bench.pipeline_job_minutes(tmp_path, costs)
    assert jobs["2"] == (sum(range(1, len(groups["2"]) + 1)), len(groups["2"]), len(groups["2"]))
    assert jobs["6"][1:] == (len(shared), len(groups["6"]))
    assert jobs["all"][0] == jobs["2"][0] and jobs["7"][1] <= len(shared)
    only_6 = sorted(set(groups["6"]) - shared)[0]
    row = {"group": only_6, "family": "memnet", "scale": "cpu", "seconds": 120.0, "device": "cpu",
           "measured": "2026-11-26", "source": "training wall time in its group.json"}
    status.write_costs({only_6: row}, costs)
    jobs = bench.pipeline_job_minutes(tmp_path, costs)
    assert jobs["6"][1] == len(shared) + 1 and jobs["all"][0] == jobs["2"][0] + 2


def test_the_five_seed_projection_scales_each_groups_job_time_by_its_training_steps(tmp_path):
    """Chapter 6 at five seeds is projected from the cpu scale's job times: a group the cpu scale trains
    at one seed counts 5 times its time, one at five seeds once (measured, not projected), one at ten (the 1k
    tables, A-10) half. A group's time is its job file, else its cpu row of costs.tsv (a group trained through
    `nlpbench train`); no projection while a group has neither."""
    from nlpbench import config, status
    from nlpbench.timing import memnet_jobs as bench
    from nlpbench.memnet.groups import declaration_groups
    params = Path(__file__).parents[1] / "params.yaml"
    real_cpu, paper = (config.load(params, {"scale": s}) for s in ("cpu", "paper"))
    cpu = config.load(params, {"scale": "cpu", "tables.tolias-thesis.14.seeds": [0]})
    seeds = {}
    for name in bench.CH6_TABLES:
        for g in declaration_groups(cpu, config.declaration(cpu, "tables", "tolias-thesis", name)).values():
            seeds[g.group_id] = len(g.seeds)
    costs = tmp_path / "costs.tsv"
    project = lambda: bench.five_seed_projection(tmp_path, costs, cpu, paper)
    assert project() is None
    first, *rest = seeds
    for gid in rest:
        (tmp_path / f"{gid}.benchmark.tsv").write_text("s\th:m:s\tmax_rss\n60.0\t0:01:00\t1.0\n")
    assert project() is None                                           # one group never timed
    row = {"group": first, "family": "memnet", "scale": "smoke", "seconds": 60.0, "device": "cpu",
           "measured": "2026-11-26", "source": "training wall time in its group.json"}
    status.write_costs({first: row}, costs)
    assert project() is None                                           # another scale's time does not count
    status.write_costs({first: {**row, "scale": "cpu"}}, costs)
    proj = project()
    assert proj["groups"] == len(seeds) and proj["cpu_job_minutes"] == pytest.approx(len(seeds))
    assert proj["job_minutes"] == pytest.approx(sum(5 / n for n in seeds.values()))
    assert sorted(set(seeds.values())) == [1, 5, 10]                   # Table 14 at one seed, 1k at ten, the rest five
    assert proj["projected_groups"] == len(seeds) - list(seeds.values()).count(5)
    assert list(seeds.values()).count(1) == 2
    # params.yaml's own cpu scale: the 10k tables at five (measured), the 1k tables and the joint one at ten (halved)
    for name in bench.CH6_TABLES:
        for g in declaration_groups(real_cpu, config.declaration(real_cpu, "tables", "tolias-thesis", name)).values():
            (tmp_path / f"{g.group_id}.benchmark.tsv").write_text("s\th:m:s\tmax_rss\n60.0\t0:01:00\t1.0\n")
    real = bench.five_seed_projection(tmp_path, costs, real_cpu, paper)
    ten = [g for name in bench.CH6_TABLES
           for g in declaration_groups(real_cpu, config.declaration(real_cpu, "tables", "tolias-thesis", name)).values()
           if len(g.seeds) == 10]
    n_ten = len({g.group_id for g in ten})
    assert n_ten == 12 and real["projected_groups"] == n_ten    # Tables 2, 6-9, 11, 12 and the joint Table 10
    assert real["job_minutes"] == pytest.approx(real["cpu_job_minutes"] - n_ten / 2)


def test_a_learned_prior_dof_is_reported_without_a_pytorch_warning(tasks_1_4):
    """The priors ablation learns the prior's dof; its metrics read it from a detached tensor (PyTorch warned
    on every evaluation, converting a tensor that requires grad)."""
    import warnings
    tr = GroupTrainer([Run("t1", 0, 7)], tasks_1_4[:1], _model_config(bayesian=True),
                      _train_config(epochs=1, lr=0.1), BayesConfig(learn_prior_dof=True, tie_prior_dof=False),
                      log=lambda s: None)
    tr.fit()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        metrics = tr.evaluate()
    assert metrics[0]["prior_dof"] > 0


def test_train_questions_keeps_the_first_n_questions_and_a_tenth_for_validation(babi_root):
    """memnet.data.train_questions (the learning curve of Table hindi-size): the first N questions of the
    training file in file order, split 90/10; the test set is untouched; asking for more than the file holds
    names the key and the file."""
    from nlpbench.data import babi
    from nlpbench.memnet.experiments import _n_val

    settings = {"data": {"n_val_1k": 100, "n_val_10k": 1000, "split_seed": 0, "train_questions": 2000}}
    assert _n_val(settings, "hn-10k") == 200
    assert _n_val({"data": {**settings["data"], "train_questions": None}}, "hn-10k") == 1000
    full = load_task_tensors(babi_root, "hn-10k", [9], 50, 1000, 0)
    part = load_task_tensors(babi_root, "hn-10k", [9], 50, 200, 0, train_questions=2000)
    assert (len(part.splits["train"]["answers"]), len(part.splits["val"]["answers"])) == (1800, 200)
    assert len(part.splits["test"]["answers"]) == len(full.splits["test"]["answers"]) == 1000
    first = babi.parse_file(babi.task_file(babi_root, "hn-10k", 9, "train"))[:2000]
    train, val = babi.train_val_split(first, 200, 0)
    answers = [part.vocab.stoi[s.answer] for s in train]
    assert part.splits["train"]["answers"].tolist() == answers
    with pytest.raises(ValueError, match=r"memnet\.data\.train_questions: 20000 questions asked for, but .*qa9_"):
        load_task_tensors(babi_root, "hn-10k", [9], 50, 2000, 0, train_questions=20000)


def test_answer_forms_rewrite_an_answer_only_where_its_story_holds_that_form():
    """memnet.data.answer_forms (Table hindi-answer-forms): an answer its story does not hold becomes its form
    where the story holds that form; an answer the story holds, one without a form, and one whose form the
    story lacks stay as written."""
    from nlpbench.data.babi import Sample
    from nlpbench.memnet.data import answers_in_story_form

    def q(facts, answer):
        return Sample(tuple(tuple(f.split()) for f in facts), tuple(range(1, len(facts) + 1)), ("kahan",), answer,
                      (1,), "synthetic")
    forms = {"bagicha": "bagichey", "rasoi ghar": "rasoi"}
    samples = [q(["sita bagichey gayi"], "bagicha"),                            # rewritten
               q(["bagicha gusalkhaney ki poorav disha mein hai"], "bagicha"),  # the story holds it: kept
               q(["ram pyasa hai"], "rasoi ghar"),                               # no "rasoi" in the story: kept
               q(["badri rasoi ghar gaya"], "rasoi ghar"),                       # two words, one answer: rewritten
               q(["mohit daftar gaya"], "daftar")]                               # no form: kept
    assert [x.answer for x in answers_in_story_form(samples, forms)] == \
        ["bagichey", "bagicha", "rasoi ghar", "rasoi", "daftar"]
    assert answers_in_story_form(samples, {}) == samples


def test_the_hindi_story_forms_put_every_place_answer_in_its_story(babi_root):
    """The data fact behind Table hindi-answer-forms: Hindi bAbI names a place as an answer in the direct case
    ('bagicha') and in the oblique case in its stories ('sita bagichey gayi'), so 285 of hn task 3's 1,000 test
    answers are words of their stories (English: all). The table's forms, as its column's group loads the data,
    make every answer of the place tasks a word of its story and change nothing in English."""
    from nlpbench import config
    from nlpbench.data import babi
    from nlpbench.memnet.data import answers_in_story_form
    from nlpbench.memnet.experiments import task_tensors
    from nlpbench.memnet.groups import declaration_groups

    params = config.load(Path(__file__).parents[1] / "params.yaml", {"scale": "cpu"})
    d = config.declaration(params, "tables", "tolias-thesis", "hindi-answer-forms")
    groups = declaration_groups(params, d)
    forms = [g.settings["data"]["answer_forms"] for g in groups.values() if g.settings["data"]["answer_forms"]]
    assert len(forms) == 2 and forms[0] == forms[1]     # MemN2N's and t-MEM-NN's story-form columns

    def held(variant, task, forms):
        tests = answers_in_story_form(babi.parse_file(babi.task_file(babi_root, variant, task, "test")), forms)
        return sum(any(x.answer in f for f in x.facts) for x in tests)
    assert (held("hn", 3, {}), held("hn", 3, forms[0])) == (285, 1000)
    for task in (1, 2, 4, 11, 12, 13, 14):
        assert held("hn", task, {}) < 900 and held("hn", task, forms[0]) == 1000
        assert held("en", task, forms[0]) == held("en", task, {}) == 1000
    story_form = next(g for g in groups.values() if g.model == "memn2n" and g.settings["data"]["answer_forms"])
    data = task_tensors(babi_root, "hn", [3], story_form.settings)
    answers = {data.vocab.itos[i] for i in data.splits["test"]["answers"].tolist()}
    assert "bagichey" in answers and "bagicha" not in answers and "rasoi ghar" not in answers


def test_validation_nll_is_the_mean_negative_log_probability_of_the_right_answer(tasks_1_4):
    """metrics.json's val_nll (the tie-break of memnet.tie_break: val_nll): -1/N sum_n log p(a_n | x_n) over the
    run's own validation questions, from the draws its validation accuracy uses; one value per S."""
    t = _trainer(tasks_1_4[:1], [Run("a", 0, 0)], bayesian=False, epochs=1)
    t.fit()
    m = t.evaluate()[0]
    data = t.split["val"]
    n = int(data["size"][0])
    _, probs, _ = next(iter(t.predictive("val", 1, "mean")))
    answers = data["answers"][t.data_of_run][0, :n]
    expected = -probs[0, :n].gather(-1, answers.unsqueeze(-1)).log().mean()
    assert m["val_nll"]["point"] == pytest.approx(float(expected), rel=1e-5)
    assert m["val_nll"]["point"] > 0
    b = _trainer(tasks_1_4[:1], [Run("a", 0, 0)], bayesian=True, epochs=1)
    b.fit()
    assert set(b.evaluate()[0]["val_nll"]) == {"S1", "S3"}


def test_the_validation_tie_break_is_the_lowest_seed_or_the_lowest_validation_nll():
    from nlpbench.memnet.experiments import select_run
    runs = [{"run_id": f"r{s}", "seed": s, "val_acc": {"S10": acc}, "val_nll": {"S10": nll}}
            for s, acc, nll in ((0, 0.90, 0.1), (1, 0.95, 0.5), (2, 0.95, 0.3), (3, 0.95, 0.3))]
    assert select_run(runs, "S10")["seed"] == 1                       # ties at 0.95: the lowest seed
    assert select_run(runs, "S10", "val_nll")["seed"] == 2             # the lowest NLL among them, then the seed
    assert select_run(runs[:1] + runs[1:2], "S10", "val_nll")["seed"] == 1   # accuracy first, NLL only for ties
    old = [{k: v for k, v in r.items() if k != "val_nll"} for r in runs]
    assert select_run(old, "S10")["seed"] == 1
    with pytest.raises(ValueError, match="r1, r2, r3 tie at the best validation accuracy and recorded no"):
        select_run(old, "S10", "val_nll")
    assert select_run(old[:2], "S10", "val_nll")["seed"] == 1          # no tie: no NLL needed
    assert select_run(old[:1], "S10", "val_nll")["seed"] == 0          # one seed
    with pytest.raises(ValueError, match="memnet.tie_break"):
        select_run(runs, "S10", "highest_seed")


def test_train_again_is_refused_by_a_family_that_cannot_retrain(monkeypatch):
    """`--again` reaches only families with a `retrain` (memnet's bAbI groups); others say so instead of training."""
    from nlpbench import cli, config, plan
    params = config.load(Path(__file__).resolve().parents[1] / "params.yaml", {"scale": "smoke"})
    p = plan.make(params)
    dmn = next(g for g in p.groups if p.owner[g] == "dmn")
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    with pytest.raises(SystemExit, match="family dmn cannot retrain"):
        cli.main(["--set", "scale=smoke", "train", dmn, "--again"])


@pytest.mark.parametrize("bayesian,over", [(False, {}), (False, {"tying": "adjacent", "memory_slots": "longest_story"}),
                                           (True, {"tying": "adjacent", "memory_slots": "longest_story"}),
                                           (True, {"nil_row": "learned"}), (False, {"mask_empty_memory": True}),
                                           (False, {"position_encoding": False, "temporal_encoding": False})])
def test_reading_each_runs_whole_table_gives_the_gathered_slots_loss_and_gradients(babi_root, bayesian, over):
    """memory_read "whole_table" (u against every sentence of the run's table, then each slot's score picked;
    o as each sentence's summed weight times its row) computes the same loss and gradients as gathering the
    slots' rows, up to float summation order: on tasks 1 and 2 (stories of 10 and 50 facts, so many empty
    slots) in one bucket, with the same initial weights and draws."""
    from nlpbench.memnet.data import gather
    data = [load_task_tensors(babi_root, "en", [t], 50, 100, 0) for t in (1, 2)]
    runs = [Run("t1", 0, 7), Run("t2", 1, 3)]
    out = {}
    for read in ("gather", "whole_table"):
        cfg = _model_config(bayesian=bayesian, memory_read=read, **over)
        tr = GroupTrainer(runs, data, cfg, _train_config(), BayesConfig() if bayesian else None, log=lambda s: None)
        tr.buckets = [torch.arange(2)]                                  # one pass over both runs
        tr.sentences = tr._bags(tr.buckets[0])
        assert (tr.sentences["bags"]["rows_per_run"] is None) == (read == "gather")
        assert tr.memory_reads == [read] * 2
        batch = gather(tr.split["train"], tr.data_of_run, torch.arange(32).expand(2, 32))
        loss, _ = tr.loss(batch)
        loss.sum().backward()
        out[read] = (loss.detach(), [p.grad.clone() for p in tr.params])
    (loss_g, grads_g), (loss_w, grads_w) = out["gather"], out["whole_table"]
    assert torch.allclose(loss_g, loss_w, rtol=1e-5)
    for g, w in zip(grads_g, grads_w):
        assert torch.allclose(g, w, atol=1e-5, rtol=1e-4)
        assert g.abs().max() > 0


def test_auto_reads_a_bucket_whole_only_where_its_table_is_short_next_to_its_stories():
    from nlpbench.memnet.train import WHOLE_TABLE_RATIO, whole_table_rows
    slots = torch.tensor([50, 10])
    assert whole_table_rows("gather", torch.tensor([300, 100]), slots) is None
    assert whole_table_rows("whole_table", torch.tensor([3000, 100]), slots) == 3000
    assert whole_table_rows("auto", torch.tensor([300, 100]), slots) == 300          # 300 sentences for 50 slots
    assert whole_table_rows("auto", torch.tensor([485]), torch.tensor([10])) is None  # task 13: 485 for 10 slots
    assert whole_table_rows("auto", torch.tensor([int(WHOLE_TABLE_RATIO * 10)]), torch.tensor([10])) is not None
    with pytest.raises(ValueError, match="model.memory_read"):
        whole_table_rows("dense", torch.tensor([1]), slots)


def test_how_the_memory_is_read_leaves_a_groups_id_unchanged():
    """memory_read, posterior_kernels and hop_kernels choose how a run is computed, not what (float rounding only), so they
    stay out of group ids as the device does: runs trained under either stay valid."""
    from nlpbench.memnet.groups import settings_digest
    settings = {"model": {"hops": 3, "memory_read": "auto"}, "train": {"lr": 0.01}}
    gathered = {"model": {"hops": 3, "memory_read": "gather"}, "train": {"lr": 0.01}}
    unset = {"model": {"hops": 3}, "train": {"lr": 0.01}}
    compiled = {"model": {"hops": 3, "memory_read": "auto", "posterior_kernels": "compiled", "hop_kernels": "compiled"},
                "train": {"lr": 0.01}}
    ids = {settings_digest({"model": "memn2n", "settings": s}) for s in (settings, gathered, unset, compiled)}
    assert len(ids) == 1
    assert settings["model"]["memory_read"] == "auto"                  # the caller's settings are left as they were
    other = {"model": {"hops": 2, "memory_read": "auto"}, "train": {"lr": 0.01}}
    assert settings_digest({"model": "memn2n", "settings": other}) not in ids


@pytest.mark.parametrize("bayesian,tying", [(False, "adjacent"), (True, "adjacent"), (False, "layerwise")])
def test_a_joint_batch_embeds_only_the_rows_it_reads_and_gets_the_whole_tables_numbers(babi_root, bayesian,
                                                                                      tying, monkeypatch):
    """A joint model's sentence table holds every task's sentences, of which a minibatch reads a few: the pass
    embeds only those rows (GroupedMemNet._batch_rows). Each embedded row is the same sum in the same order and the
    rows it leaves out would only add zeros to the gradient, so loss and gradients are bit for bit those of
    embedding the whole table."""
    import nlpbench.memnet.engine as model_module
    from nlpbench.memnet.data import gather
    data = [load_task_tensors(babi_root, "en", [1, 2, 3, 4, 5, 6], 50, 100, 0)]
    runs = [Run("s0", 0, 0), Run("s1", 0, 1)]
    out, engaged = {}, {}
    real = model_module.GroupedMemNet._batch_rows
    for share in (0.0, model_module.BATCH_ROWS_SHARE):
        monkeypatch.setattr(model_module, "BATCH_ROWS_SHARE", share)
        monkeypatch.setattr(model_module.GroupedMemNet, "_batch_rows",
                            lambda self, *a, **k: engaged.setdefault(share, []).append(real(self, *a, **k)) or
                            engaged[share][-1])
        cfg = _model_config(bayesian=bayesian, tying=tying, t_sampler="polar",
                           memory_slots="longest_story")
        tr = GroupTrainer(runs, data, cfg, _train_config(grad_noise_std=0.0), BayesConfig() if bayesian else None,
                          log=lambda s: None)
        batch = gather(tr.split["train"], tr.data_of_run, torch.arange(32).expand(2, 32))
        loss, _ = tr.loss(batch)
        loss.sum().backward()
        out[share] = (loss.detach(), [p.grad.clone() for p in tr.params], tr.accuracy("val", [1], "mean")[1])
    assert all(rows is None for rows in engaged[0.0])                    # share 0: the whole table, as before
    reads = [rows for rows in engaged[model_module.BATCH_ROWS_SHARE] if rows is not None]
    assert reads and reads[0][0].numel() < tr.sentences["bags"]["P"].shape[0] / 4   # a few rows of the table
    (loss_all, grads_all, val_all), (loss_few, grads_few, val_few) = out[0.0], out[model_module.BATCH_ROWS_SHARE]
    assert torch.equal(loss_all, loss_few) and torch.equal(val_all, val_few)
    for a, b in zip(grads_all, grads_few):
        assert torch.equal(a, b) and a.abs().max() > 0


@pytest.mark.parametrize("reading", [
    {"tying": "adjacent", "memory_slots": "longest_story", "memory_read": "gather"},
    {"tying": "adjacent", "memory_slots": "longest_story", "memory_read": "whole_table", "bayesian": True},
    {"tying": "layerwise", "memory_slots": "fixed"},
    {"tying": "adjacent", "memory_slots": "fixed", "nil_row": "learned"},
    {"tying": "layerwise", "memory_slots": "fixed", "mask_empty_memory": True, "temporal_encoding": False}])
def test_memory_hops_compiled_compute_the_eager_loss_gradients_and_attention(tasks_1_4, reading):
    """model.hop_kernels runs eqs. 33-35 op by op or compiled: the same formulas, so loss, every gradient,
    the logits and each hop's attention agree to float rounding under every reading of the empty slots; an unknown
    value is an error naming the key."""
    from nlpbench.memnet.data import gather
    from nlpbench.nn import kernels
    with pytest.raises(ValueError, match="model.hop_kernels: unknown value 'fast'"):
        _trainer(tasks_1_4, [Run("t1", 0, 7)], False, hop_kernels="fast")
    if not kernels.compiler_works("cpu"):
        pytest.skip("torch.compile cannot build CPU kernels here (no C++ compiler)")
    out = {}
    for how in ("eager", "compiled"):
        cfg = _model_config(t_sampler="polar", hop_kernels=how, **reading)
        tr = GroupTrainer([Run("t1", 0, 7), Run("t4", 1, 3)], tasks_1_4, cfg, _train_config(grad_noise_std=0.0),
                          BayesConfig() if cfg.bayesian else None, log=lambda s: None)
        assert tr.hop_kernels == how
        batch = gather(tr.split["train"], tr.data_of_run, torch.arange(32).expand(2, 32))
        loss, _ = tr.loss(batch)
        loss.sum().backward()
        logits, attention = tr.forward(batch, tr.model.draw(None, "mean"), attention=True)
        out[how] = [loss.detach(), logits.detach(), attention.detach()] + [p.grad.clone() for p in tr.params]
    for got, want in zip(out["compiled"], out["eager"]):
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("variant,train_questions", [("en", None), ("en", 500), ("en-10k", None), ("en-10k", 2000)])
def test_training_questions_counts_what_task_tensors_trains_on(babi_root, variant, train_questions):
    """The benchmark's step counts (timing.memnet_jobs.run_steps) come from experiments.training_questions, which must agree
    with the questions task_tensors actually splits off for training, `data.train_questions` included (the
    benchmark once counted the whole file whatever that key said)."""
    import yaml
    from nlpbench.memnet.experiments import task_tensors, training_questions
    from nlpbench.memnet.groups import memnet_settings
    params = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    settings = memnet_settings(params, {} if train_questions is None else {"data.train_questions": train_questions},
                               "test")
    data = task_tensors(babi_root, variant, [1], settings)
    assert len(data.splits["train"]["answers"]) == training_questions(settings, variant)


def test_benchmark_step_counts_honour_train_questions():
    """memnet_jobs.run_steps counts each run's minibatches from the questions it trains on: with data.train_questions
    500 a task's run trains on 450 (50 held out for validation), 14 minibatches of 32 an epoch."""
    from nlpbench import config
    from nlpbench.timing.memnet_jobs import run_steps
    from nlpbench.memnet.groups import declaration_groups
    params = config.load(Path(__file__).resolve().parents[1] / "params.yaml",
                         {"scale": "smoke", "memnet.data.train_questions": 500})
    d = config.declaration(params, "tables", "tolias-thesis", "2")
    groups = {g.group_id: g for g in declaration_groups(params, d).values()}
    for gid, steps in run_steps(params, d).items():
        train = groups[gid].settings["train"]
        assert steps == groups[gid].n_runs * train["epochs"] * (450 // train["batch_size"])


def test_timing_benchmark_without_data_says_which_files_it_needs(tmp_path):
    """The timing benchmark loads Table 2's tasks as the table trains them (the scale's task subset, a task without
    data left out); with none at all it stops with an error naming the variant and the directory."""
    from nlpbench import config
    from nlpbench.timing import memnet as bench
    params = config.load(Path(__file__).resolve().parents[1] / "params.yaml", {"scale": "smoke"})
    with pytest.raises(FileNotFoundError, match=f"no bAbI en task files under {tmp_path}"):
        bench.measure(params, tmp_path, 1, "cpu")


def test_a_checkpoint_config_from_before_a_reading_key_loads_with_its_earlier_reading():
    """A run's model.pt holds the MemNetConfig it trained with; one written before a reading key existed ran that
    key's earlier behaviour (the value the group hash leaves out), whatever MemNetConfig's default is now."""
    from nlpbench.memnet.groups import HASH_NEUTRAL
    from nlpbench.memnet.predict import saved_model_config
    before = saved_model_config({"n_words": 30, "tying": "adjacent"})
    assert (before.memory_slots, before.position_form, before.t_sampler, before.nil_row) == \
        ("fixed", "paper", "gamma", "zero")
    assert all(getattr(before, key) == value for (section, key), value in HASH_NEUTRAL.items() if section == "model")
    written = dataclasses.asdict(MemNetConfig(n_words=30, t_sampler="polar", position_form="code"))
    assert saved_model_config(written) == MemNetConfig(**written)          # a complete config loads as written
