"""VED in the acvi family (Bahuleyan et al. 2018): a Gaussian latent xi per source, fed to eq. 66."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from nlpbench.acvi import groups as ag
from nlpbench.acvi.batching import make_batch
from nlpbench.acvi.beam import beam_search
from nlpbench.acvi.model import ModelConfig, PointerGenerator, final_state
from nlpbench.acvi.vocab import Vocab

WORDS = [f"w{i}" for i in range(4, 10)]


def ved(latent_dim=4, seed=0, **kw):
    torch.manual_seed(seed)
    return PointerGenerator(ModelConfig(vocab_size=10, emb_dim=8, hidden_dim=6, attn_dim=5, latent_dim=latent_dim,
                                        **kw))


def copy_batch():
    vocab = Vocab(WORDS)
    pairs = [(["w4", "w7", "w5"], ["w4", "w7", "w5"]), (["w9", "w6"], ["w9", "w6"]),
             (["w8", "w5", "w6", "w4"], ["w8", "w5", "w6", "w4"]), (["w7"], ["w7"])]
    return vocab, pairs, make_batch(pairs, vocab, 10, 10)


def test_final_state_is_the_lstm_final_state_despite_padding():
    m = ved()
    _, _, batch = copy_batch()
    h, mask, _ = m.encode_batch(batch)
    emb = m.embedding(batch["src"][:, : h.shape[1]])
    packed = torch.nn.utils.rnn.pack_padded_sequence(emb, batch["src_len"], batch_first=True, enforce_sorted=False)
    _, (h_n, _) = m.encoder(packed)
    assert torch.allclose(final_state(h, mask), torch.cat([h_n[0], h_n[1]], -1), atol=1e-6)


def test_kl_is_zero_when_the_posterior_is_the_prior_and_positive_otherwise():
    m = ved()
    _, _, batch = copy_batch()
    with torch.no_grad():
        for lin in (m.posterior.mu, m.posterior.log_sigma):
            lin.weight.zero_(); lin.bias.zero_()
    out = m(batch, sample=True)
    assert out["latent_kl"].item() == pytest.approx(0.0, abs=1e-7)
    with torch.no_grad():
        m.posterior.mu.bias.fill_(0.5)                       # KL per example = 4 x 0.5^2 / 2 = 0.5
    h, mask, _ = m.encode_batch(batch)
    assert torch.allclose(m.memory(h, mask)["latent_kl"], torch.full((4,), 0.5))
    out = m(batch, sample=True)
    n = batch["dec_len"].float()                             # per_step: divided by each target's length
    assert out["latent_kl"].item() == pytest.approx((0.5 / n).mean().item(), rel=1e-5)
    assert out["loss"].item() == pytest.approx(out["nll"].item() + out["latent_kl"].item(), rel=1e-5)


def test_kl_scale_per_sequence_is_the_whole_kl():
    _, _, batch = copy_batch()
    a = ved(latent_kl_scale="per_step")(batch, sample=False)
    b = ved(latent_kl_scale="per_sequence")(batch, sample=False)
    assert b["nll"].item() == pytest.approx(a["nll"].item())
    assert b["latent_kl"].item() > a["latent_kl"].item() > 0


def test_xi_reaches_the_output_distribution():
    m = ved()
    _, _, batch = copy_batch()
    h, mask, state = m.encode_batch(batch)
    mem = m.memory(h, mask)
    args = (batch["dec_in"][:, 0], state, h.new_zeros(4, 12), None)
    P1, *_ = m.step(*args, mem, batch["src_ext"], batch["n_oov"], coverage=False, sample=False)
    P2, *_ = m.step(*args, {**mem, "xi": mem["xi"] + 3.0}, batch["src_ext"], batch["n_oov"], coverage=False,
                    sample=False)
    assert (P1 - P2).abs().max() > 1e-3
    assert torch.allclose(P2.sum(-1), torch.ones(4), atol=1e-5)
    m(batch, sample=True)["nll"].backward()                 # the reconstruction term trains the posterior layers
    assert m.posterior.mu.weight.grad.abs().sum() > 0 and m.posterior.log_sigma.weight.grad.abs().sum() > 0


def test_without_a_latent_the_model_is_unchanged():
    torch.manual_seed(0)
    plain = PointerGenerator(ModelConfig(vocab_size=10, emb_dim=8, hidden_dim=6, attn_dim=5))
    none = ved(latent_dim=0)
    assert none.posterior is None
    assert all(torch.equal(a, b) for a, b in zip(plain.state_dict().values(), none.state_dict().values()))
    _, _, batch = copy_batch()
    assert "latent_kl" not in none(batch)


def test_test_time_xi_is_the_posterior_mean_or_a_prior_draw():
    _, _, batch = copy_batch()
    m = ved()
    h, mask, _ = m.encode_batch(batch)
    mu, _ = m.posterior(final_state(h, mask))
    assert torch.equal(m.memory(h, mask)["xi"], mu)
    assert torch.equal(m.memory(h, mask)["xi"], m.memory(h, mask)["xi"])   # deterministic
    p = ved(latent_test="prior")
    assert not torch.equal(p.memory(h, mask)["xi"], p.memory(h, mask)["xi"])
    with pytest.raises(ValueError, match="acvi.model.latent_test"):
        ModelConfig(latent_test="sample")


def train_copy(m, batch, steps=120):
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        out = m(batch, sample=True)
        opt.zero_grad(); out["loss"].backward(); opt.step()
        losses.append(out["nll"].item())
    return losses


def test_ved_learns_a_copy_task_and_beam_equals_greedy():
    vocab, pairs, batch = copy_batch()
    m = ved(pointer=False)                                   # no copy mechanism: the decoder must learn to copy
    losses = train_copy(m, batch, 150)
    assert losses[-1] < 0.2 * losses[0]
    m.eval()
    for i, (_, tgt) in enumerate(pairs):
        greedy = beam_search(m, batch, i, width=1, max_steps=8)
        wide = beam_search(m, batch, i, width=4, max_steps=8)
        assert vocab.words(wide) == tgt and wide == greedy


def test_same_seed_same_numbers():
    _, _, batch = copy_batch()
    runs = []
    for _ in range(2):
        m = ved(seed=3)
        losses = train_copy(m, batch, 5)
        runs.append((losses, [p.detach().clone() for p in m.parameters()]))
    assert runs[0][0] == runs[1][0]
    assert all(torch.equal(a, b) for a, b in zip(runs[0][1], runs[1][1]))


def test_video_ved_learns_synthetic_captions():
    """The captioner carries xi through its own encoder and the beam (dropout on, as in training)."""
    from nlpbench.acvi.data import synthetic_video_features
    from nlpbench.acvi.video import VideoCaptioner, make_video_batch

    feats = synthetic_video_features(2, frames=6, dim=16, seed=0)["features"]
    caps = [["a", "man", "is", "firing", "a", "gun"], ["a", "woman", "is", "riding", "a", "horse"]]
    vocab = Vocab.build(caps, 100)
    torch.manual_seed(0)
    m = VideoCaptioner(ModelConfig(vocab_size=len(vocab), emb_dim=8, hidden_dim=16, attn_dim=8, latent_dim=5),
                       feat_dim=16, dropout=0.1)
    batch = make_video_batch(feats, caps, vocab)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    for _ in range(150):
        loss = m(batch, sample=True)["loss"]
        opt.zero_grad(); loss.backward(); opt.step()
    m.eval()
    assert [vocab.words(beam_search(m, batch, i, width=3, max_steps=10)) for i in range(2)] == caps


def test_latent_keys_stay_out_of_the_ids_of_runs_without_a_latent():
    from nlpbench import config
    params = config.load(Path(__file__).resolve().parents[1] / "params.yaml", {"scale": "paper"})
    old = copy.deepcopy(params)                                   # params as before VED: no latent keys
    for k in ag.LATENT_KEYS:
        del old["acvi"]["model"][k]
    for name in ("cnndm-pg-asa", "qg-pg-acvi-p", "video-var"):
        assert ag.make_run(params, name).run_id == ag.make_run(old, name).run_id
    ved_run = ag.make_run(params, "cnndm-pg-ved")
    assert ved_run.settings["model"]["latent_dim"] == 128
    assert ag.make_run(params, "video-ved").settings["model"]["latent_dim"] == 100
    changed = copy.deepcopy(params)
    changed["acvi"]["model"]["latent_test"] = "prior"              # a latent setting changes a VED run only
    assert ag.make_run(changed, "cnndm-pg-ved").run_id != ved_run.run_id
    assert ag.make_run(changed, "cnndm-pg-asa").run_id == ag.make_run(params, "cnndm-pg-asa").run_id
