"""Model pieces: similarity properties on tiny inputs, passage summaries, output shapes, decoding."""

import math

import pytest
import torch

from nlpbench.squad import configs, output, similarity
from nlpbench.squad.model import BaselineModel, ModelConfig, decode

torch.set_num_threads(1)
D = 4


@pytest.fixture
def hu():
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 5, D, generator=g), torch.randn(2, 3, D, generator=g)


def _pairwise(fn, h, u):
    """Reference: phi applied to every (h_i, u_j) pair one at a time."""
    return torch.tensor([[[fn(h[b, i], u[b, j]) for j in range(u.shape[1])] for i in range(h.shape[1])]
                         for b in range(h.shape[0])])


def test_registry_has_table_4_1_and_t_trilinear():
    assert len(similarity.SIMILARITIES) == 12
    assert tuple(similarity.SIMILARITIES) == configs.SIMILARITY_NAMES        # the names planning checks, torch-free
    assert set(similarity.ADDITIVE) | set(similarity.MULTIPLICATIVE) | {"T-trilinear"} == set(similarity.SIMILARITIES)
    with pytest.raises(ValueError):
        similarity.make_similarity("nope", D)


@pytest.mark.parametrize("name", list(similarity.SIMILARITIES))
def test_every_similarity_gives_M_by_N(name, hu):
    h, u = hu
    assert similarity.make_similarity(name, D)(h, u).shape == (2, 5, 3)


def test_dot_product_hand_computed():
    h = torch.tensor([[[1.0, 2.0], [0.0, -1.0]]])
    u = torch.tensor([[[3.0, 4.0]]])
    assert similarity.DotProduct(2)(h, u).tolist() == [[[11.0], [-4.0]]]
    scaled = similarity.ScaledDotProduct(2)(h, u).flatten().tolist()
    assert scaled == pytest.approx([11 / math.sqrt(2), -4 / math.sqrt(2)])


def test_cosine_is_scale_invariant_and_bounded(hu):
    h, u = hu
    cos = similarity.Cosine(D)
    s = cos(h, u)
    assert s.abs().max() <= 1 + 1e-6
    assert torch.allclose(cos(3 * h, 0.5 * u), s, atol=1e-6)
    assert torch.allclose(cos(h[:, :1], h[:, :1]), torch.ones(2, 1, 1))


def test_trilinear_reduces_to_its_terms(hu):
    h, u = hu
    tri = similarity.Trilinear(D)
    with torch.no_grad():
        ref = _pairwise(lambda a, b: tri.w_p @ a + tri.w_q @ b + tri.w_pq @ (a * b), h, u)
        assert torch.allclose(tri(h, u), ref, atol=1e-5)
        # only w_pq: the Hadamard function with w = w_pq
        tri.w_p.zero_(), tri.w_q.zero_()
        had = similarity.Hadamard(D)
        had.w.copy_(tri.w_pq)
        assert torch.allclose(tri(h, u), had(h, u), atol=1e-6)
        # only w_p, w_q: the bilinear function
        bil = similarity.Bilinear(D)
        tri2 = similarity.Trilinear(D)
        tri2.w_pq.zero_()
        bil.w_p.copy_(tri2.w_p), bil.w_q.copy_(tri2.w_q)
        assert torch.allclose(tri2(h, u), bil(h, u), atol=1e-6)


def test_bilinear_rows_give_identical_attention(hu):
    """Under the row softmax the w_p.h_i term cancels: every passage word attends the same way."""
    h, u = hu
    S = similarity.Bilinear(D)(h, u)
    A = torch.softmax(S, dim=2)
    assert torch.allclose(A, A[:, :1].expand_as(A), atol=1e-6)


def test_general_functions_match_their_formulas(hu):
    h, u = hu
    with torch.no_grad():
        g1 = similarity.General1(D)
        W = g1.W.weight
        assert torch.allclose(g1(h, u), _pairwise(lambda a, b: a @ W @ b, h, u), atol=1e-5)
        g2 = similarity.General2(D)
        W1, W2 = g2.W_1.weight, g2.W_2.weight
        assert torch.allclose(g2(h, u), _pairwise(lambda a, b: (W1 @ a) @ (W2 @ b), h, u), atol=1e-5)
        g3 = similarity.General3(D)
        g3.load_state_dict(g2.state_dict())
        ref = _pairwise(lambda a, b: torch.relu(W1 @ a) @ torch.relu(W2 @ b), h, u)
        assert torch.allclose(g3(h, u), ref, atol=1e-5)
        assert (g3(h, u) >= 0).all()  # a product of two ReLU outputs


def test_fnn_and_concat_fnn_span_the_same_function(hu):
    h, u = hu
    with torch.no_grad():
        c = similarity.ConcatFNN(D)
        f = similarity.FNN(D)
        f.W_p.weight.copy_(c.W_p.weight[:, :D]), f.W_q.weight.copy_(c.W_p.weight[:, D:]), f.w_phi.copy_(c.w_phi)
        ref = _pairwise(lambda a, b: c.w_phi @ torch.tanh(c.W_p.weight @ torch.cat([a, b])), h, u)
        assert torch.allclose(c(h, u), ref, atol=1e-5)
        assert torch.allclose(f(h, u), ref, atol=1e-5)


def test_t_trilinear_is_trilinear_on_relu_transformed_vectors(hu):
    h, u = hu
    with torch.no_grad():
        t = similarity.TTrilinear(D)
        tri = similarity.Trilinear(D)
        tri.w_p.copy_(t.w_p), tri.w_q.copy_(t.w_q), tri.w_pq.copy_(t.w_pq)
        assert torch.allclose(t(h, u), tri(torch.relu(t.W_1(h)), torch.relu(t.W_2(u))), atol=1e-6)
        # identity transform on non-negative inputs: T-trilinear = trilinear
        t.W_1.weight.copy_(torch.eye(D)), t.W_2.weight.copy_(torch.eye(D)), t.W_1.bias.zero_(), t.W_2.bias.zero_()
        assert torch.allclose(t(h.abs(), u.abs()), tri(h.abs(), u.abs()), atol=1e-6)


def test_passage_summaries_and_masks():
    torch.manual_seed(0)
    B, M, N = 2, 5, 3
    H, S = torch.randn(B, M, D), torch.randn(B, M, N)
    p_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)
    q_mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.bool)
    A, _ = output.query_summary(S, torch.randn(B, N, D), q_mask)
    assert torch.allclose(A.sum(2), torch.ones(B, M))  # (3.11)
    assert (A[1, :, 2] == 0).all()  # padded question word gets no weight
    first = output.passage_summary(S, H, A, p_mask, q_mask, "first")
    b = S[1, :3, :2].max(1).values
    assert torch.allclose(first[1, 0], torch.softmax(b, 0) @ H[1, :3], atol=1e-6)  # padding excluded
    assert torch.allclose(first[1], first[1, :1].expand(M, D))  # tiled
    second = output.passage_summary(S, H, A, p_mask, q_mask, "second")
    A_H = torch.softmax(S[1, :3, :2], dim=0)  # column softmax over the 3 real passage words
    ref = A[1, :, :2] @ (A_H.T @ H[1, :3])  # H~ = A (A^H)^T H
    assert torch.allclose(second[1], ref, atol=1e-6)


def test_appendix_a_summaries_on_a_hand_computed_example():
    """Appendix A's two passage summaries (Eqs. 5.2-5.7) and its output formations O_1 = [h; h~], O_2 = [h; h~;
    h o h~] on numbers worked by hand. S = [[ln 3, 0], [0, 0]] (M = 2 passage, N = 2 question words), h_1 = (1, 0),
    h_2 = (0, 1); a third passage word and a third question word are padding with large scores that must not count.
    First-order: b = (ln 3, 0), beta = (3/4, 1/4), h~ = (3/4, 1/4) at every position.
    Second-order: A^H (column softmax over passage words) = [[3/4, 1/2], [1/4, 1/2]], so the query-side summaries
    are h~_1 = (3/4, 1/4), h~_2 = (1/2, 1/2); A^U (row softmax over question words) = [[3/4, 1/4], [1/2, 1/2]], so
    h~_1 = 3/4 (3/4, 1/4) + 1/4 (1/2, 1/2) = (11/16, 5/16) and h~_2 = (5/8, 3/8)."""
    ln3, big = math.log(3.0), 50.0
    S = torch.tensor([[[ln3, 0.0, big], [0.0, 0.0, big], [big, big, big]]])
    H = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [7.0, 7.0]]])
    U = torch.zeros(1, 3, 2)
    p_mask = torch.tensor([[True, True, False]])
    q_mask = torch.tensor([[True, True, False]])
    A, _ = output.query_summary(S, U, q_mask)
    first = output.passage_summary(S, H, A, p_mask, q_mask, "first")
    second = output.passage_summary(S, H, A, p_mask, q_mask, "second")
    assert torch.allclose(first[0, :2], torch.tensor([[0.75, 0.25], [0.75, 0.25]]), atol=1e-6)
    assert torch.allclose(second[0, :2], torch.tensor([[11 / 16, 5 / 16], [5 / 8, 3 / 8]]), atol=1e-6)
    o1, _ = output.OutputFormation("A1-O_1", 2, passage_order="second")(H, U, S, p_mask, q_mask)
    o2, _ = output.OutputFormation("A1-O_2", 2, passage_order="second")(H, U, S, p_mask, q_mask)
    assert torch.allclose(o1[0, 0], torch.tensor([1.0, 0.0, 11 / 16, 5 / 16]), atol=1e-6)
    assert torch.allclose(o2[0, 0], torch.tensor([1.0, 0.0, 11 / 16, 5 / 16, 11 / 16, 0.0]), atol=1e-6)
    o1_first, _ = output.OutputFormation("A1-O_1", 2, passage_order="first")(H, U, S, p_mask, q_mask)
    assert torch.allclose(o1_first[0, 1], torch.tensor([0.0, 1.0, 0.75, 0.25]), atol=1e-6)


@pytest.mark.parametrize("name, factor", [("O_1", 2), ("O_2", 3), ("RIG_2", 3), ("RIG_4", 4), ("RIG_5", 4),
                                          ("RIG_6", 4), ("proposed", 6), ("revised", 6), ("A1-O_1", 2),
                                          ("A1-O_2", 3)])
def test_output_dims(name, factor):
    torch.manual_seed(0)
    form = output.OutputFormation(name, D)
    O, _ = form(torch.randn(2, 5, D), torch.randn(2, 3, D), torch.randn(2, 5, 3), torch.ones(2, 5, dtype=torch.bool),
                torch.ones(2, 3, dtype=torch.bool))
    assert form.out_dim == factor * D and O.shape == (2, 5, factor * D)


def test_output_terms_o2_and_proposed():
    torch.manual_seed(0)
    H, U, S = torch.randn(1, 4, D), torch.randn(1, 2, D), torch.randn(1, 4, 2)
    pm, qm = torch.ones(1, 4, dtype=torch.bool), torch.ones(1, 2, dtype=torch.bool)
    A, Ut = output.query_summary(S, U, qm)
    O2, _ = output.OutputFormation("O_2", D)(H, U, S, pm, qm)
    assert torch.allclose(O2, torch.cat([H, Ut, H * Ut], -1))
    Ht = output.passage_summary(S, H, A, pm, qm, "second")
    P, _ = output.OutputFormation("proposed", D)(H, U, S, pm, qm)
    assert torch.allclose(P, torch.cat([H, Ut, H * Ut, Ht * Ut, (H - Ut).abs(), (Ht - Ut).abs()], -1))
    assert output.OutputFormation("revised", D, revised_dim=D).out_dim == D  # Table 5.5 d*


def test_model_forward_shapes_and_padding():
    torch.manual_seed(0)
    emb = torch.randn(20, 6)
    emb[0] = 0
    model = BaselineModel(emb, ModelConfig(hidden=3, embed_adjust=5, similarity="T-trilinear", output="RIG_4"))
    passage = torch.tensor([[1, 2, 3, 4, 5, 6], [7, 8, 9, 0, 0, 0]])
    question = torch.tensor([[1, 2, 3], [4, 0, 0]])
    out = model(passage, question)
    assert out["start"].shape == (2, 6) and out["end"].shape == (2, 6) and out["S"].shape == (2, 6, 3)
    assert (out["start"][1, 3:] < -1e29).all()  # padded positions can never be chosen
    assert not model.embed.weight.requires_grad  # frozen word vectors


def test_decode_modes():
    start = torch.log(torch.tensor([[0.1, 0.6, 0.3, 0.0 + 1e-9]]))
    end = torch.log(torch.tensor([[0.7, 0.1, 0.2, 1e-9]]))
    assert decode(start, end, "independent").tolist() == [[1, 0]]  # end before start: empty answer
    assert decode(start, end, "span", max_len=15).tolist() == [[1, 2]]  # 0.6 * 0.2 is the best i <= j pair
    assert decode(start, end, "span", max_len=1).tolist() == [[0, 0]]  # 0.1*0.7 > 0.6*0.1


def test_bilstm_matches_packed_bidirectional_lstm():
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    from nlpbench.squad.model import BiLSTM

    torch.manual_seed(0)
    ours = BiLSTM(3, 4, dropout=0.0)
    ref = torch.nn.LSTM(3, 4, batch_first=True, bidirectional=True)
    with torch.no_grad():
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            getattr(ref, name).copy_(getattr(ours.forward_lstm, name))
            getattr(ref, name + "_reverse").copy_(getattr(ours.backward_lstm, name))
    x, lengths = torch.randn(3, 6, 3), torch.tensor([6, 4, 1])
    expected = pad_packed_sequence(ref(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))[0],
                                   batch_first=True, total_length=6)[0]
    assert torch.allclose(ours(x, lengths), expected, atol=1e-6)


@pytest.mark.parametrize("name", list(similarity.SIMILARITIES))
@pytest.mark.parametrize("rig", ["O_2", "RIG_4"])
def test_every_similarity_trains_with_finite_gradients(name, rig):
    from nlpbench.squad.model import span_loss

    torch.manual_seed(0)
    emb = torch.randn(12, 5)
    emb[0] = 0
    model = BaselineModel(emb, ModelConfig(hidden=3, embed_adjust=4, similarity=name, output=rig))
    passage = torch.tensor([[1, 2, 3, 4, 5], [6, 7, 8, 0, 0]])
    question = torch.tensor([[9, 10, 3, 6], [11, 1, 0, 0]])
    loss = span_loss(model(passage, question), torch.tensor([1, 0]), torch.tensor([2, 1]))
    loss.backward()
    assert torch.isfinite(loss)
    for n, p in model.named_parameters():
        if p.requires_grad:
            assert p.grad is not None and torch.isfinite(p.grad).all(), n
    for n, p in model.phi.named_parameters():
        if n == "w_p" and rig == "O_2":
            # w_p.h_i is constant along each row of S, so the row softmax (the only use of S in O_2) ignores it
            assert p.grad.abs().max() < 1e-6
        elif not n.endswith("bias"):
            # it reaches the loss (w_p through the column softmax of RIG_4). T-trilinear's biases are left out:
            # in a model this small a unit often has the same ReLU state for every question word, and then its
            # bias is also constant along the rows of S
            assert p.grad.abs().sum() > 1e-6, n


@pytest.mark.parametrize("name", output.OUTPUTS)
@pytest.mark.parametrize("order", ["first", "second"])
def test_every_output_formation_runs_in_the_model(name, order):
    torch.manual_seed(0)
    emb = torch.randn(12, 5)
    model = BaselineModel(emb, ModelConfig(hidden=3, embed_adjust=4, output=name, passage_summary=order))
    out = model(torch.tensor([[1, 2, 3, 4], [5, 6, 0, 0]]), torch.tensor([[7, 8], [9, 0]]))
    assert torch.isfinite(out["start"][0]).all() and out["start"].shape == (2, 4)


def test_reverse_padded_reverses_within_each_length():
    from nlpbench.squad.model import reverse_padded
    x = torch.arange(2 * 4 * 2, dtype=torch.float32).view(2, 4, 2)
    out = reverse_padded(x, torch.tensor([4, 2]))
    assert out[0].tolist() == x[0].flip(0).tolist()
    assert out[1].tolist() == [x[1, 1].tolist(), x[1, 0].tolist(), x[1, 2].tolist(), x[1, 3].tolist()]
