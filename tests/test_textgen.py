"""The text seq2seq models of seed 001 (nlpbench.textgen.model) and their trainer (nlpbench.textgen.train):
KL terms against closed forms, the structural switches (bypass, attention, 2-stage), greedy decoding, a short
CPU training that lowers the loss, and one tiny end-to-end run on the mirror's SNLI sample (resumable)."""

from __future__ import annotations

import copy
import csv
import math
import shutil
from pathlib import Path

import pytest
import torch
from torch.distributions import Normal, kl_divergence

from nlpbench import config, registry
from nlpbench.nn.gaussian import GaussianHead, kl_normal, reparameterize
from nlpbench.textgen.model import Seq2SeqConfig, TextSeq2Seq
from nlpbench.textgen.schedules import kl_schedule, word_dropout_schedule
from nlpbench.textgen.train import objective

REPO = Path(__file__).resolve().parents[1]
V, PAD, BOS, EOS = 30, 0, 2, 3


def _model(**kw) -> TextSeq2Seq:
    torch.manual_seed(0)
    cfg = Seq2SeqConfig(vocab_size=V, emb_dim=12, hidden=8, latent_dim=6, trainable_embeddings=True, **kw)
    return TextSeq2Seq(cfg)


def _batch(B: int = 4, S: int = 7, T: int = 6, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (B, S), generator=g)
    src_len = torch.tensor([S, S - 2, 3, 1][:B])
    for i, n in enumerate(src_len.tolist()):
        src[i, n:] = PAD
    tgt = torch.randint(4, V, (B, T), generator=g)
    tgt[:, -1] = EOS
    dec_in = torch.cat([torch.full((B, 1), BOS), tgt[:, :-1]], 1)
    return src, src_len, dec_in, tgt


ARCHS = {
    "vae": {},
    "bypass": {"hidden_init": True},
    "ded": {"latent": False, "hidden_init": True},
    "ded-dattn": {"latent": False, "hidden_init": True, "attention": "deterministic"},
    "ved-dattn": {"attention": "deterministic"},
    "ved-vattn-0": {"attention": "variational", "attention_prior": "zero"},
    "ved-vattn-hbar": {"attention": "variational"},
    "vattn-feeding": {"attention": "variational", "input_feeding": True},      # [C]: a_{j-1} fed back too
}


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_shapes_and_greedy_decoding(arch: str) -> None:
    model = _model(**ARCHS[arch])
    src, src_len, dec_in, tgt = _batch()
    out = model(src, src_len, dec_in, generator=torch.Generator().manual_seed(1))
    assert out["logits"].shape == (4, 6, V) and out["kl_z"].shape == (4,) and out["kl_c"].shape == (4, 6)
    assert (out["kl_z"] > 0).all() == model.cfg.latent
    assert (out["kl_c"] > 0).all() == (model.cfg.attention == "variational")
    ids = model.generate(6, src, src_len)                                   # MAP, greedy
    assert ids.shape == (4, 6) and torch.equal(ids, model.generate(6, src, src_len))
    for row in ids.tolist():          # nothing after the first </s>
        if EOS in row:
            assert set(row[row.index(EOS) + 1:]) <= {PAD}


def test_latent_kl_is_the_closed_form_of_eq_4_13() -> None:
    model = _model()
    src, src_len, dec_in, _ = _batch()
    mu, log_sigma = model.posterior(model.encode(src, src_len))
    out = model(src, src_len, dec_in)
    expected = -0.5 * (1 + 2 * log_sigma - mu ** 2 - torch.exp(2 * log_sigma)).sum(-1)
    torch.testing.assert_close(out["kl_z"], expected)
    q, p = Normal(mu, log_sigma.exp()), Normal(torch.zeros_like(mu), torch.ones_like(mu))
    torch.testing.assert_close(out["kl_z"], kl_divergence(q, p).sum(-1))


@pytest.mark.parametrize("prior", ["zero", "hbar"])
def test_attention_kl_against_its_prior(prior: str) -> None:
    model = _model(attention="variational", attention_prior=prior)
    src, src_len, _, _ = _batch()
    enc = model.encode(src, src_len)
    h = torch.randn(4, 3, model.dec_dim)
    _, kl = model._attend(h, enc, True, 1.0, torch.Generator().manual_seed(0))
    scores = torch.bmm(h, model.W(enc.outputs).transpose(1, 2)).masked_fill(~enc.mask[:, None], float("-inf"))
    c_det = torch.bmm(torch.softmax(scores, -1), enc.outputs)                # Eq. 6.6
    mu_c, log_sigma_c = model.c_head(c_det)
    torch.testing.assert_close(mu_c, c_det)                                   # mu_cj = c_j^det
    h_bar = torch.stack([enc.outputs[i, :n].mean(0) for i, n in enumerate(src_len.tolist())])
    m = h_bar[:, None, :].expand_as(mu_c) if prior == "hbar" else torch.zeros_like(mu_c)
    expected = kl_divergence(Normal(mu_c, log_sigma_c.exp()), Normal(m, torch.ones_like(m))).sum(-1)
    torch.testing.assert_close(kl, expected)


def test_kl_normal_general_prior_and_reparameterize_scale() -> None:
    mu_q, ls_q, mu_p, ls_p = torch.randn(5), torch.randn(5) * 0.3, torch.randn(5), torch.randn(5) * 0.3
    torch.testing.assert_close(kl_normal(mu_q, ls_q, mu_p, ls_p),
                               kl_divergence(Normal(mu_q, ls_q.exp()), Normal(mu_p, ls_p.exp())))
    mu, ls = torch.zeros(20000), torch.full((20000,), math.log(0.5))
    assert torch.equal(reparameterize(mu, ls, scale=0.0), mu)                  # MAP
    z = reparameterize(mu, ls, torch.Generator().manual_seed(0), scale=3.0)     # neighbourhood: 3 sigma
    assert abs(float(z.std()) - 1.5) < 0.05
    head = GaussianHead(4, 4, mean="identity", sigma_hidden=4)
    x = torch.randn(2, 4)
    assert torch.equal(head(x)[0], x)


def test_bypass_starts_the_decoder_from_the_encoder_state() -> None:
    src, src_len, _, _ = _batch()
    for hidden_init in (True, False):
        model = _model(hidden_init=hidden_init)
        enc = model.encode(src, src_len)
        h0, c0 = model._init_state(enc, 4, "cpu")
        if hidden_init:
            assert torch.equal(h0[0], enc.h) and torch.equal(c0[0], enc.c)
        else:
            assert not h0.any() and not c0.any()
    # the encoder's final state is taken at each sentence's true length (packed sequences)
    model = _model()
    enc = model.encode(src, src_len)
    torch.testing.assert_close(enc.h[2], enc.outputs[2, 2])


def test_two_stage_phase_one_masks_the_context() -> None:
    model = _model(attention="deterministic")
    src, src_len, _, _ = _batch()
    enc = model.encode(src, src_len)
    h = torch.randn(4, 2, model.dec_dim)
    a, _ = model._attend(h, enc, False, 0.0, None)
    expected = torch.tanh(model.W_c(torch.cat([torch.zeros(4, 2, model.enc_dim), h], -1)))
    torch.testing.assert_close(a, expected)
    a_on, _ = model._attend(h, enc, True, 0.0, None)
    assert not torch.allclose(a, a_on)


def test_map_is_deterministic_and_sampling_varies() -> None:
    model = _model(attention="variational")
    with torch.no_grad():
        model.z_head.log_sigma.bias.fill_(1.0)           # wide posteriors, so that samples differ
    src, src_len, _, _ = _batch()
    src, src_len = src[:1].expand(20, -1), src_len[:1].expand(20)
    ids = model.generate(6, src, src_len, z_scale=1.0, attn_scale=1.0, generator=torch.Generator().manual_seed(0))
    assert len({tuple(r) for r in ids.tolist()}) > 1
    map_ids = model.generate(6, src, src_len)
    assert len({tuple(r) for r in map_ids.tolist()}) == 1


def test_objective_sum_and_mean_normalisation() -> None:
    logits = torch.zeros(2, 3, V)                        # uniform: CE = ln V per token
    tgt = torch.tensor([[5, 6, EOS], [5, EOS, PAD]])
    out = {"logits": logits, "kl_z": torch.tensor([1.0, 3.0]), "kl_c": torch.ones(2, 3)}
    s = objective(out, tgt, PAD, lam=0.5, gamma_a=0.1, reduction="sum")
    expected = ((3 * math.log(V) + 0.5 * (1 + 0.1 * 3)) + (2 * math.log(V) + 0.5 * (3 + 0.1 * 2))) / 2
    assert float(s["loss"]) == pytest.approx(expected)
    m = objective(out, tgt, PAD, lam=0.5, gamma_a=0.1, reduction="mean")
    assert float(m["loss"]) == pytest.approx(((math.log(V) + 0.5 * 1.1) + (math.log(V) + 0.5 * 3.1)) / 2)


@pytest.mark.parametrize("arch", ["vae", "ved-vattn-hbar"])
def test_short_cpu_training_lowers_the_loss(arch: str) -> None:
    torch.set_num_threads(1)
    model = _model(**ARCHS[arch])
    src, src_len, dec_in, tgt = _batch(B=4, S=7, T=6)
    dec_in = torch.cat([torch.full((4, 1), BOS), src[:, :5]], 1)      # learn to copy the source
    tgt = torch.cat([src[:, :5], torch.full((4, 1), EOS)], 1)
    tgt[tgt == PAD], dec_in[dec_in == PAD] = EOS, EOS
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(0)
    losses = []
    for i in range(60):
        out = model(src, src_len, dec_in, generator=g)
        o = objective(out, tgt, PAD, kl_schedule("tanh-3000")(i + 1), 0.1, "sum")
        opt.zero_grad()
        o["loss"].backward()
        opt.step()
        losses.append(float(o["loss"].detach()))
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5


def test_iteration_word_dropout_follows_the_thesis_per_iteration() -> None:
    wd = word_dropout_schedule("iter-2438-0.05-0.5")
    assert wd(1, 110) == 0.0 and wd(2438, 110) == 0.0 and wd(2439, 110) == 0.05
    assert wd(24380, 110) == 0.45 and wd(10 ** 6, 110) == 0.5
    thesis = word_dropout_schedule("thesis")
    assert all(wd(i, 5) == thesis(i, 2438) for i in (1, 2438, 2439, 9000, 24380))


# -- one tiny run end to end (real mirror data) ----------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(mirror_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    from nlpbench.textgen.corpora import CorpusConfig, prepare_corpus
    from nlpbench.textgen.config import corpus_dir
    from nlpbench.textgen.train import prepare_embeddings

    params = registry.load(REPO / "params.yaml", {"scale": "smoke"})
    root = tmp_path_factory.mktemp("textgen")
    section = dict(params["textgen"]["corpora"]["snli"])
    section = {k: tuple(v) if isinstance(v, list) else v for k, v in section.items()}
    prepare_corpus("snli", corpus_dir(params, "snli", root / "data"), mirror_dir,
                   config=CorpusConfig(corpus="snli", **section), allow_download=False)
    prepare_embeddings(params, "snli", root / "data", root / "runs")
    return params, root


def test_tiny_run_writes_its_files_and_resumes(tiny) -> None:
    from nlpbench.textgen.groups import make_run
    from nlpbench.textgen.train import train_run

    params, root = tiny
    params = copy.deepcopy(params)
    params["textgen"]["settings"]["snli"]["train"]["epochs"] = 1
    run1 = make_run(params, "snli-tanh-3000")
    logs: list[str] = []
    m1 = train_run(run1, params, root / "data", root / "runs", log=logs.append)
    d = run1.run_dir(root / "runs")
    assert {p.name for p in d.iterdir()} == {"model.pt", "config.json", "train_log.csv", "history.json",
                                             "metrics.json"}
    assert m1["status"] == "ok" and m1["corpus_version"] == "mirror" and 0 <= m1["map"]["bleu1"] <= 100
    assert set(m1["sample"]) >= {"entropy", "distinct1", "distinct2", "bleu1", "bleu4"}
    with open(d / "train_log.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == m1["iterations"] == 3                                 # 96 examples / 32
    lam = kl_schedule("tanh-3000")
    for r in rows:
        assert float(r["lambda"]) == pytest.approx(lam(int(r["iteration"])), rel=1e-4)
        assert float(r["lambda_kl"]) == pytest.approx(float(r["lambda"]) * float(r["kl"]), rel=1e-3)



def test_a_killed_run_resumes_to_the_same_numbers(tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    from nlpbench.textgen import train as textgen_train
    from nlpbench.textgen.groups import make_run

    params, root = tiny
    params = copy.deepcopy(params)
    params["textgen"]["settings"]["snli"]["train"]["epochs"] = 2
    run = make_run(params, "snli-bypass")
    straight_root = root / "straight"
    shutil.copytree(root / "runs" / "textgen" / "_embeddings", straight_root / "textgen" / "_embeddings")
    textgen_train.train_run(run, params, root / "data", straight_root, log=lambda s: None)

    real, calls = textgen_train._val_loss, []

    def dies_in_epoch_2(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt("killed")
        return real(*a, **k)

    monkeypatch.setattr(textgen_train, "_val_loss", dies_in_epoch_2)
    with pytest.raises(KeyboardInterrupt):
        textgen_train.train_run(run, params, root / "data", root / "runs", log=lambda s: None)
    d = run.run_dir(root / "runs")
    assert (d / "checkpoint.pt").exists() and not (d / "metrics.json").exists()
    monkeypatch.setattr(textgen_train, "_val_loss", real)
    logs: list[str] = []
    m = textgen_train.train_run(run, params, root / "data", root / "runs", log=logs.append)
    assert any("resuming after epoch 1" in line for line in logs)
    assert (d / "train_log.csv").read_text() == (run.run_dir(straight_root) / "train_log.csv").read_text()
    straight = textgen_train.io.read_json(run.run_dir(straight_root) / "metrics.json")
    assert m["map"] == straight["map"] and m["sample"] == straight["sample"]


def test_early_stopping_ends_a_run_patience_epochs_after_its_best(tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    """With train.patience p a run stops p epochs after its lowest validation loss, reports that epoch with its
    validation loss, records the epochs it trained, and so passes the learning check; one that improves to the
    last epoch is still learning."""
    from nlpbench.results import claims
    from nlpbench.textgen import train as textgen_train
    from nlpbench.textgen.groups import make_run

    params, root = tiny
    params = copy.deepcopy(params)
    train = params["textgen"]["settings"]["snli"]["train"]
    train.update(epochs=10, select="best_val", patience=2)
    losses = iter([5.0, 4.0, 3.0, 3.5, 3.2, 1.0, 0.5])              # best at epoch 3, then two worse epochs
    monkeypatch.setattr(textgen_train, "_val_loss", lambda *a, **k: next(losses))
    m = textgen_train.train_run(make_run(params, "snli-dae"), params, root / "data", root / "runs",
                                log=lambda s: None)
    assert (m["chosen_epoch"], m["epochs"], m["max_epochs"], m["chosen_val_loss"]) == (3, 5, 10, 3.0)
    assert m["iterations"] == 5 * 3 and not claims.still_learning(m["chosen_epoch"], m["epochs"])

    train.update(epochs=3)
    losses = iter([5.0, 4.0, 3.0])
    m = textgen_train.train_run(make_run(params, "snli-noanneal-1"), params, root / "data", root / "runs",
                                log=lambda s: None)
    assert (m["chosen_epoch"], m["epochs"]) == (3, 3) and claims.still_learning(m["chosen_epoch"], m["epochs"])


def test_two_stage_training_chooses_and_stops_among_the_epochs_with_attention(tiny,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """§6.5.3: the 2-stage VED trains 'without attention for 6 epochs, and then the attention mechanism is
    incorporated ... for the rest of the training': the lowest validation loss of the first stage neither is
    reported nor stops the run, however long its plateau."""
    from nlpbench.textgen import train as textgen_train
    from nlpbench.textgen.groups import make_run

    params, root = tiny
    params = copy.deepcopy(params)
    params["textgen"]["settings"]["snli"]["train"].update(epochs=8, select="best_val", patience=2,
                                                          attention_off_epochs=3)
    losses = iter([1.0, 2.0, 2.0, 3.0, 2.5, 2.7, 2.8, 2.9])     # best overall in stage 1; stage 2's best: epoch 5
    monkeypatch.setattr(textgen_train, "_val_loss", lambda *a, **k: next(losses))
    m = textgen_train.train_run(make_run(params, "snli-bypass"), params, root / "data", root / "runs",
                                log=lambda s: None)
    assert (m["chosen_epoch"], m["chosen_val_loss"], m["epochs"]) == (5, 2.5, 7)


def test_patience_needs_selection_by_validation() -> None:
    with pytest.raises(config.ConfigError, match="patience stops on the validation loss"):
        registry.load(REPO / "params.yaml", {"scale": "paper", "textgen.settings.snli.train.patience": 3})


def test_each_run_trains_once_per_seed_and_a_cell_reports_the_seed_validation_chose(tmp_path: Path) -> None:
    """A run trains once per seed of textgen.seeds.<corpus>; a cell shows the seed of lowest validation loss (not
    the best test number), keeps every seed's value for the claims, and names the seeds still learning."""
    from nlpbench.runtime import io
    from nlpbench.textgen.experiments import _cell, selected_run
    from nlpbench.textgen.groups import make_run, run_seeds

    params = registry.load(REPO / "params.yaml", {"scale": "cpu", "textgen.seeds.snli": [0, 1, 2]})
    runs = run_seeds(params, "snli-dae")
    assert [r.seed for r in runs] == [0, 1, 2] and len({r.run_id for r in runs}) == 3
    assert runs[0].run_id == make_run(params, "snli-dae").run_id     # the first seed: the one-seed run's id
    one = registry.load(REPO / "params.yaml", {"scale": "cpu", "textgen.seeds.snli": [0]})
    assert make_run(one, "snli-dae").run_id == runs[0].run_id
    for run, (bleu, val, chosen, trained) in zip(runs, [(30.0, 2.0, 5, 12), (40.0, 3.0, 6, 13), (20.0, 1.5, 9, 9)]):
        io.write_json(run.run_dir(tmp_path) / "metrics.json",
                      {"map": {"bleu1": bleu}, "chosen_val_loss": val, "chosen_epoch": chosen, "epochs": trained})
    cell = _cell("Deterministic AE", "BLEU-1", {"run": "snli-dae", "mode": "map"}, {"metric": "bleu1"}, params,
                 tmp_path)
    assert cell.reproduced == 20.0                                    # seed 2: the lowest validation loss
    assert cell.seeds == {0: 30.0, 1: 40.0, 2: 20.0} and cell.still_learning == (2,)
    assert selected_run(params, "snli-dae", tmp_path).seed == 2


def test_target_positions_only_softmax_is_the_same_loss() -> None:
    model = _model(attention="variational")
    src, src_len, dec_in, tgt = _batch()
    tgt[1, 3:], tgt[3, 1:] = PAD, PAD
    full = model(src, src_len, dec_in, generator=torch.Generator().manual_seed(3))
    fast = model(src, src_len, dec_in, generator=torch.Generator().manual_seed(3), targets=tgt)
    a = objective(full, tgt, PAD, 0.3, 0.1, "sum")
    b = objective(fast, tgt, PAD, 0.3, 0.1, "sum")
    for key in ("loss", "rec", "rec_per_token", "kl", "kl_attention"):
        torch.testing.assert_close(a[key], b[key])


@pytest.mark.parametrize("override, message", [
    ({"train.bogus": 1}, "bogus"),
    ({"train.kl_schedule": "cosine-3000"}, "kl_schedule"),
    ({"model.attention": "additive"}, "attention"),
])
def test_a_bad_run_override_stops_naming_the_key(override: dict, message: str) -> None:
    with pytest.raises(config.ConfigError, match=message):
        registry.load(REPO / "params.yaml", {"textgen.runs.snli-dae.overrides": override})


def test_run_ids_follow_the_settings_and_the_smoke_subset() -> None:
    from nlpbench.textgen.groups import all_runs, make_run

    paper, cpu = registry.load(REPO / "params.yaml", {"scale": "paper"}), registry.load(REPO / "params.yaml", {"scale": "cpu"})
    assert make_run(paper, "snli-tanh-3000").run_id != make_run(cpu, "snli-tanh-3000").run_id
    assert make_run(paper, "qg-ded").run_id == make_run(registry.load(REPO / "params.yaml", {"scale": "paper"}), "qg-ded").run_id
    smoke = registry.load(REPO / "params.yaml", {"scale": "smoke"})
    assert set(all_runs(smoke)) == set(smoke["textgen"]["run_subset"])
    assert "snli-tanh-unstopped" in all_runs(paper) and "snli-tanh-unstopped" not in all_runs(cpu)


_EMBED_IN_A_FRESH_PROCESS = """
import hashlib, sys
from types import SimpleNamespace
from nlpbench.textgen.corpora import Example
from nlpbench.textgen.prep import SPECIALS, Vocab
from nlpbench.textgen.train import train_embeddings
words = "a man plays the guitar on stage while a woman sings and dogs run in the park".split()
examples = [Example(tuple(words[i:i + 5]), (), tuple(words[i + 2:i + 8])) for i in range(0, 12)]
examples.append(Example(("the", "dog"), (), ("the", "dog")))       # src == ref: counted once
corpus = SimpleNamespace(splits={"train": examples}, vocab=Vocab(SPECIALS + tuple(sorted(set(words)))))
emb = {"fit_on": "train", "dim": 8, "window": 2, "sg": 0, "min_count": 1, "epochs": 3}
print(hashlib.sha256(train_embeddings(corpus, emb, seed=3).numpy().tobytes()).hexdigest())
"""


def test_embeddings_do_not_depend_on_the_hash_seed() -> None:
    """The same seed gives the same word2vec vectors in any process, whatever PYTHONHASHSEED (no set orders
    word2vec's input)."""
    import os
    import subprocess
    import sys

    procs = [subprocess.Popen([sys.executable, "-c", _EMBED_IN_A_FRESH_PROCESS], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONHASHSEED": h, "PYTHONPATH": str(REPO / "src")})
             for h in ("1", "2")]                 # two processes at once: most of the time is importing torch
    digests = {p.communicate()[0] for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(digests) == 1, digests


@pytest.mark.parametrize("corpus, split, says", [
    ("dialog", "grouped", "split by film, no film in two splits"),
    ("qg", "grouped", "split by SQuAD article, no article in two splits"),
    ("dialog", "valid", "training on 90% of the authors' validation pairs"),
])
def test_a_tables_data_line_names_the_mirror_split_its_runs_trained_on(corpus, split, says):
    """The provenance's data line follows the corpus's mirror_split: a table of runs re-split by film or article
    never says they trained on 90 % of the validation pairs."""
    from nlpbench.textgen.experiments import _data_line
    params = registry.load(REPO / "params.yaml", {"scale": "cpu", f"textgen.corpora.{corpus}.mirror_split": split})
    metrics = [{"corpus": corpus, "corpus_version": "mirror", "train_examples": 100, "test_examples": 10,
                "vocab_size": 5000, "iterations": 40}]
    line = _data_line(params, metrics)
    assert says in line and line.startswith(f"{corpus}: MIRROR DATA"), line
