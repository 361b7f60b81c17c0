"""Pointer-generator internals: copy through p_gen and the extended vocabulary, coverage, attentions, KL terms."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from nlpbench.acvi.attention import ATTENTIONS, ACVIPaper, ACVIThesis, StructuredAttention, make_attention
from nlpbench.acvi.batching import make_batch
from nlpbench.acvi.beam import beam_search
from nlpbench.acvi.model import ModelConfig, PointerGenerator, coverage_loss
from nlpbench.acvi.vocab import Vocab


def tiny_model(attention="asa", **kw):
    torch.manual_seed(0)
    return PointerGenerator(ModelConfig(vocab_size=10, emb_dim=8, hidden_dim=6, attn_dim=5, attention=attention,
                                        **kw))


def test_vocab_extended_ids():
    v = Vocab(["a", "b"])                                   # ids: 4 specials, a=4, b=5; len 6
    ids, ext, oovs = v.source_ids(["a", "zeta", "b", "zeta", "eta"])
    assert ids == [4, 1, 5, 1, 1] and ext == [4, 6, 5, 6, 7] and oovs == ["zeta", "eta"]
    inp, tgt = v.target_ids(["eta", "a", "unseen"], oovs)
    assert inp == [2, 1, 4, 1] and tgt == [7, 4, 1, 3]
    assert v.words([4, 7, 6], oovs) == ["a", "eta", "zeta"]


def test_copy_gives_source_oov_probability_by_hand():
    """Hand-built: P_vocab uniform (V' = 0), attention uniform (v = 0), p_gen = sigmoid(0) = 1/2. Then (eq. 68)
    P(OOV) = 1/2 * (its count in the source) / N, P(in-vocab source word) = 1/2 * 1/V + 1/2 * count / N."""
    m = tiny_model()
    vocab = Vocab(["w4", "w5", "w6", "w7", "w8", "w9"])      # exactly 10 ids
    with torch.no_grad():
        m.V_out.weight.zero_(); m.V_out.bias.zero_()
        m.scores.v.weight.zero_()
        m.w_gen.weight.zero_(); m.w_gen.bias.zero_()
    batch = make_batch([(["w4", "zz", "w5", "zz"], ["zz"])], vocab, 10, 10)
    h, mask, state = m.encode(batch["src"], batch["src_len"])
    mem = m.memory(h, mask)
    P, *_ = m.step(batch["dec_in"][:, 0], state, h.new_zeros(1, 12), None, mem, batch["src_ext"], batch["n_oov"],
                   coverage=False, sample=False)
    assert P.shape == (1, 11)                                # 10 words + 1 article OOV
    assert P[0, 10].item() == pytest.approx(0.5 * 2 / 4)     # "zz" appears twice in 4 source tokens
    assert P[0, 4].item() == pytest.approx(0.5 / 10 + 0.5 / 4)
    assert P[0, 9].item() == pytest.approx(0.5 / 10)         # not in the source: generation only
    assert P.sum().item() == pytest.approx(1.0)
    assert batch["target"][0, 0].item() == 10                # the target "zz" is its extended id


def test_without_pointer_an_oov_gets_nothing():
    m = tiny_model(pointer=False)
    vocab = Vocab([f"w{i}" for i in range(4, 10)])
    batch = make_batch([(["w4", "zz"], ["zz"])], vocab, 10, 10)
    assert batch["target"][0, 0].item() == 10                # the batch marks the copyable OOV ...
    out = m(batch, sample=False)                             # ... a plain seq2seq scores it as [UNK]
    assert torch.isfinite(out["loss"])
    h, mask, state = m.encode(batch["src"], batch["src_len"])
    P, *_ = m.step(batch["dec_in"][:, 0], state, h.new_zeros(1, 12), None, m.memory(h, mask), batch["src_ext"],
                   batch["n_oov"], coverage=False, sample=False)
    assert P.shape == (1, 10)                                # no extended vocabulary at all


def test_coverage_loss_is_sum_of_min():
    a = torch.tensor([[0.5, 0.3, 0.2]])
    k = torch.tensor([[0.1, 0.9, 0.2]])
    assert coverage_loss(a, k).item() == pytest.approx(0.1 + 0.3 + 0.2)
    assert coverage_loss(a, torch.zeros_like(a)).item() == 0.0   # k_0 = 0: no penalty at the first step


def test_coverage_term_in_loss_only_when_on():
    m = tiny_model()
    vocab = Vocab([f"w{i}" for i in range(4, 10)])
    batch = make_batch([(["w4", "w5", "w6"], ["w4", "w5", "w6"])], vocab, 10, 10)
    off = m(batch, coverage=False, sample=False)
    on = m(batch, coverage=True, sample=False)
    assert off["loss"].item() == pytest.approx(off["nll"].item())
    assert on["coverage"].item() > 0
    assert on["loss"].item() == pytest.approx(on["nll"].item() + on["coverage"].item(), rel=1e-6)


@pytest.mark.parametrize("kind", ATTENTIONS)
@pytest.mark.parametrize("sample", [False, True])
def test_attention_weights_sum_to_one_and_ignore_padding(kind, sample):
    torch.manual_seed(1)
    att = make_attention(kind, enc_dim=4)
    e = torch.randn(3, 5)
    h = torch.randn(3, 5, 4)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    c, a, kl = att(e, h, mask, sample=sample, gumbel=sample)
    assert torch.allclose(a.sum(-1), torch.ones(3), atol=1e-6)
    assert (a[~mask] == 0).all() and (a >= 0).all()
    assert c.shape == (3, 4) and kl.shape == (3,)
    assert torch.isfinite(c).all() and torch.isfinite(kl).all()


def test_acvi_thesis_kl_closed_form_tiny_case():
    """a = (1/4, 3/4), one dimension: m = sum a mu, v = sum a^2 sigma^2, KL = (v + m^2 - 1 - log v) / 2, which is
    minus the printed eq. 84."""
    att = ACVIThesis(enc_dim=1)
    mu = torch.tensor([[[1.0], [-2.0]]])
    log_var = torch.log(torch.tensor([[[4.0], [0.5]]]))
    e = torch.log(torch.tensor([[1.0, 3.0]]))
    _, a, kl = att(e, None, torch.ones(1, 2, dtype=torch.bool), sample=False, comps=(mu, log_var))
    m = 0.25 * 1.0 + 0.75 * -2.0                             # -1.25
    v = 0.25 ** 2 * 4.0 + 0.75 ** 2 * 0.5                    # 0.53125
    assert kl.item() == pytest.approx(0.5 * (v + m * m - 1 - math.log(v)), rel=1e-6)
    printed_eq84 = -0.5 * m * m + 0.5 * (1 + math.log(v) - v)
    assert kl.item() == pytest.approx(-printed_eq84, rel=1e-6)
    ref = torch.distributions.kl_divergence(torch.distributions.Normal(m, math.sqrt(v)),
                                            torch.distributions.Normal(0.0, 1.0))
    assert kl.item() == pytest.approx(ref.item(), rel=1e-6)


def test_acvi_thesis_sample_has_the_moment_matched_law():
    att = ACVIThesis(enc_dim=1)
    mu = torch.tensor([[[1.0], [-2.0]]]).expand(20000, 2, 1)
    log_var = torch.log(torch.tensor([[[4.0], [0.5]]])).expand(20000, 2, 1)
    e = torch.log(torch.tensor([[1.0, 3.0]])).expand(20000, 2)
    torch.manual_seed(0)
    c, _, _ = att(e, None, torch.ones(20000, 2, dtype=torch.bool), sample=True, comps=(mu, log_var))
    assert c.mean().item() == pytest.approx(-1.25, abs=0.03)
    assert c.var().item() == pytest.approx(0.53125, rel=0.05)


def test_acvi_paper_components_and_mc_kl():
    att = ACVIPaper(enc_dim=3)
    h = torch.randn(1, 2, 3)
    mu, log_var = att.components(h)
    assert torch.equal(mu, h) and (log_var >= 0).all()      # P-eq. 17: ReLU log-variance, sigma^2 >= 1
    # One live component: the MC KL is log N(c; h_1, sigma_1^2) - log N(c; 0, I) exactly.
    a = torch.tensor([[1.0, 0.0]])
    c = torch.randn(1, 3)
    kl = ACVIPaper.mc_kl(c, a, mu, log_var, torch.tensor([[True, False]]))
    q = torch.distributions.Normal(mu[0, 0], (0.5 * log_var[0, 0]).exp()).log_prob(c[0]).sum()
    p = torch.distributions.Normal(0.0, 1.0).log_prob(c[0]).sum()
    assert kl.item() == pytest.approx((q - p).item(), rel=1e-5, abs=1e-5)


def test_structured_marginals_equal_brute_force():
    torch.manual_seed(0)
    att = StructuredAttention()
    with torch.no_grad():
        att.transition.copy_(torch.tensor([[0.3, -0.7], [0.2, 0.9]]))
    e = torch.randn(1, 4)
    marg = att.marginals(e, torch.ones(1, 4, dtype=torch.bool))
    weights, on = 0.0, torch.zeros(4)
    for z in itertools.product([0, 1], repeat=4):
        score = sum(e[0, i].item() * z[i] for i in range(4))
        score += sum(att.transition[z[i], z[i + 1]].item() for i in range(3))
        w = math.exp(score)
        weights += w
        on += w * torch.tensor(z, dtype=torch.float)
    assert torch.allclose(marg[0], on / weights, atol=1e-5)


def test_acvi_decoding_averages_k_samples_to_a_distribution():
    m = tiny_model("acvi_thesis")
    vocab = Vocab([f"w{i}" for i in range(4, 10)])
    batch = make_batch([(["w4", "zz", "w6"], ["w4"])], vocab, 10, 10)
    h, mask, state = m.encode(batch["src"], batch["src_len"])
    P, *_ = m.step(batch["dec_in"][:, 0], state, h.new_zeros(1, 12), None, m.memory(h, mask), batch["src_ext"],
                   batch["n_oov"], coverage=False, sample=True, n_samples=10)
    assert P.sum().item() == pytest.approx(1.0, abs=1e-5)
    ids = beam_search(m, batch, 0, width=5, max_steps=6, n_samples=10)
    assert 0 < len(ids) <= 6 and all(0 <= i < 11 for i in ids)


def test_structured_forward_backward_trains():
    m = tiny_model("structured")
    vocab = Vocab([f"w{i}" for i in range(4, 10)])
    batch = make_batch([(["w4", "w5", "w6"], ["w5", "w6"])], vocab, 10, 10)
    m(batch)["loss"].backward()
    assert m.attention.transition.grad is not None and m.attention.transition.grad.abs().sum() > 0


@pytest.mark.parametrize("kind", ["asa", "acvi_thesis", "acvi_paper", "variational"])
def test_video_captioner_learns_synthetic_captions(kind):
    """SYNTHETIC features (data.synthetic_video_features): two clips, two captions; the captioner must learn to
    tell them apart through the attention context."""
    from nlpbench.acvi.data import synthetic_video_features
    from nlpbench.acvi.video import VideoCaptioner, make_video_batch

    feats = synthetic_video_features(2, frames=6, dim=16, seed=0)["features"]
    caps = [["a", "man", "is", "firing", "a", "gun"], ["a", "woman", "is", "riding", "a", "horse"]]
    vocab = Vocab.build(caps, 100)
    torch.manual_seed(0)
    m = VideoCaptioner(ModelConfig(vocab_size=len(vocab), emb_dim=8, hidden_dim=16, attn_dim=8, attention=kind,
                                   kl_weight=1.0 if kind == "variational" else 0.0), feat_dim=16, dropout=0.0)
    batch = make_video_batch(feats, caps, vocab)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    for _ in range(150 if kind != "variational" else 250):
        loss = m(batch, sample=kind == "variational")["loss"]        # variational: trained through its ELBO
        opt.zero_grad(); loss.backward(); opt.step()
    m.eval()
    K = 10 if kind == "variational" else 1                           # sampled alignments at decoding
    outs = [vocab.words(beam_search(m, batch, i, width=3, max_steps=10, n_samples=K)) for i in range(2)]
    assert outs == caps


def test_video_batch_lies_on_the_features_device():
    """A video batch is built where its features are: on a GPU, the evaluation batch's lengths were left on the
    CPU and the captioner's encoder failed (found on an H100). The meta device stands in for the GPU here."""
    from nlpbench.acvi.video import make_video_batch

    caps = [["a", "man", "is", "firing", "a", "gun"], ["a", "woman"]]
    batch = make_video_batch(torch.zeros(2, 6, 16, device="meta"), caps, Vocab.build(caps, 100))
    assert {k: v.device.type for k, v in batch.items()} == {k: "meta" for k in batch}
    assert batch["dec_in"].shape == batch["target"].shape == (2, 7)


def test_variational_attention_elbo_terms_and_reinforce_gradient():
    torch.manual_seed(0)
    m = tiny_model("variational")
    vocab = Vocab([f"w{i}" for i in range(4, 10)])
    batch = make_batch([(["w4", "zz", "w6", "w7"], ["w6", "zz"]), (["w5", "w8"], ["w8"])], vocab, 10, 10)
    out = m(batch, sample=True)
    assert out["kl"].item() >= 0                      # the surrogate adds 0 to the value: only KL(q || p) shows
    out["loss"].backward()
    assert m.attention.W_qy.weight.grad.abs().sum() > 0      # the posterior network learns (KL + REINFORCE)
    # The copy weights of a sampled alignment are one-hot; K = 50 prior samples average towards a_t.
    h, mask, state = m.encode_batch(batch, slice(0, 1))
    P, _, _, a, _ = m.step(batch["dec_in"][:1, 0], state, h.new_zeros(1, 12), None, m.memory(h, mask),
                           batch["src_ext"][:1, :4], batch["n_oov"], coverage=False, sample=True, n_samples=50)
    assert P.sum().item() == pytest.approx(1.0, abs=1e-5) and a.sum().item() == pytest.approx(1.0)


@pytest.mark.parametrize("kind", ATTENTIONS)
def test_beam_search_decodes_with_every_attention(kind):
    m = tiny_model(kind).eval()
    vocab = Vocab([f"w{i}" for i in range(4, 10)])
    batch = make_batch([(["w4", "zz", "w6", "w7"], ["w4"]), (["w5"], ["w5"])], vocab, 10, 10)
    for i, K in ((0, 1), (1, 4)):
        ids = beam_search(m, batch, i, width=5, min_steps=1, max_steps=5, coverage=True, n_samples=K)
        assert 0 < len(ids) <= 5 and all(0 <= t < 10 + batch["n_oov"] for t in ids)
