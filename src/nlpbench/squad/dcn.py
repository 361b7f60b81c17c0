"""DCN, the Dynamic Coattention Network (Xiong, Zhong, Socher, ICLR 2017), the second model of Table 4.4 (thesis §4.3).

The paper writes sequences as columns (D in R^{l x (m+1)}); here they are rows, batch first.

  word input   frozen GloVe -> adjustment FNN (model.WordInput, shared with the baseline)
  D = [LSTM(x^D); d_0], Q' = [LSTM(x^Q); q_0]   one LSTM shared by document and question, l units, a trainable
                                                sentinel each [D: put first, so padding stays at the end]   §2.1
  Q = tanh(W^(Q) Q' + b^(Q))                                                                                  §2.1
  L = D^T Q  ->  S = phi(D, Q): "dot-product" is the paper's affinity, T-trilinear the thesis's swap            §2.2
  A^Q = softmax(L) over the document, A^D = softmax(L^T) over the question
  C^Q = D A^Q, C^D = [Q; C^Q] A^D   = [U~; H~] of output.py: query summary and second-order passage summary
  U = biLSTM([D; C^D])  (2l per word; the sentinel's row is dropped)                                          §2.2
  Dynamic pointing decoder (§2.3): for i = 1..iterations
    h_i = LSTM_dec(h_{i-1}, [u_{s_{i-1}}; u_{e_{i-1}}])                                                        (5)
    alpha_t = HMN_start(u_t, h_i, u_{s_{i-1}}, u_{e_{i-1}}), s_i = argmax alpha                              (6), (7)
    beta_t = HMN_end(u_t, h_i, u_{s_i}, u_{e_{i-1}}), e_i = argmax beta
  HMN(u_t, h_i, u_s, u_e) = max(W3 [m1; m2] + b3)                                                             (9)
    r = tanh(W_D [h_i; u_s; u_e]), m1 = max(W1 [u_t; r] + b1), m2 = max(W2 m1 + b2)   (max over the pool p)  (10-12)
  Loss: the cross-entropies of every iteration's alpha and beta, summed (model.span_loss with start/end_iters).
Training runs every iteration and sums their losses (§2.3, "cumulative ... across all iterations"). At
evaluation the decoder "iterates until the estimate no longer changes or a maximum number of iterations is
reached" (§2.3): each example's prediction is the logits of its first iteration i whose (s_i, e_i) equals
(s_{i-1}, e_{i-1}), else of the last (`stop_when_unchanged`; false = always the last iteration, our earlier
reading); s_0 = e_0 = 0 [D]. Decode "independent" takes their argmax; "span" is logged beside it as for every model.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from nlpbench.squad.configs import DCNConfig
from nlpbench.squad.model import BiLSTM, WordInput
from nlpbench.squad.output import NEG, passage_summary, query_summary
from nlpbench.squad.similarity import make_similarity


class HighwayMaxout(nn.Module):
    """HMN, Eqs. (9)-(12); W_D has no bias, as (10)."""

    def __init__(self, l: int, pool: int, dropout: float):
        super().__init__()
        self.l, self.pool = l, pool
        self.W_D = nn.Linear(5 * l, l, bias=False)
        self.W_1 = nn.Linear(3 * l, pool * l)
        self.W_2 = nn.Linear(l, pool * l)
        self.W_3 = nn.Linear(2 * l, pool)
        self.dropout = nn.Dropout(dropout)

    def forward(self, U: Tensor, h: Tensor, u_s: Tensor, u_e: Tensor, mask: Tensor) -> Tensor:
        B, m, _ = U.shape
        r = torch.tanh(self.W_D(torch.cat([h, u_s, u_e], -1)))  # (10)
        x = self.dropout(torch.cat([U, r[:, None, :].expand(B, m, self.l)], -1))
        m1 = self.W_1(x).view(B, m, self.l, self.pool).max(-1).values  # (11)
        m2 = self.W_2(self.dropout(m1)).view(B, m, self.l, self.pool).max(-1).values  # (12)
        return self.W_3(torch.cat([m1, m2], -1)).max(-1).values.masked_fill(~mask, NEG)  # (9)


class DCN(WordInput):
    def __init__(self, embeddings: Tensor, cfg: DCNConfig):
        super().__init__(embeddings, cfg.embed_adjust, cfg.adjust_activation, cfg.dropout)
        self.cfg = cfg
        l = cfg.hidden
        self.encoder = nn.LSTM(cfg.embed_adjust, l, batch_first=True)
        bound = 1.0 / l**0.5
        self.d_sentinel = nn.Parameter(torch.empty(l).uniform_(-bound, bound))
        self.q_sentinel = nn.Parameter(torch.empty(l).uniform_(-bound, bound))
        self.W_Q = nn.Linear(l, l)
        self.phi = make_similarity(cfg.similarity, l)
        self.fusion = BiLSTM(3 * l, l, cfg.dropout)  # U = biLSTM([D; C^D]), [D; C^D] in R^{3l}
        self.decoder = nn.LSTMCell(4 * l, l)
        self.hmn_start = HighwayMaxout(l, cfg.maxout_pool, cfg.dropout)
        self.hmn_end = HighwayMaxout(l, cfg.maxout_pool, cfg.dropout)

    def _encode(self, ids: Tensor, mask: Tensor, sentinel: Tensor) -> tuple[Tensor, Tensor]:
        """[sentinel; LSTM(x)] with padding zeroed, and its mask (the sentinel always present)."""
        x, _ = self.encoder(self.word_vectors(ids))
        x = x * mask[:, :, None]
        x = torch.cat([sentinel.expand(x.shape[0], 1, -1), x], dim=1)
        return x, torch.cat([mask.new_ones(mask.shape[0], 1), mask], dim=1)

    def forward(self, passage: Tensor, question: Tensor) -> dict[str, Tensor]:
        p_mask = passage != 0
        D, d_mask = self._encode(passage, p_mask, self.d_sentinel)  # (B, m+1, l)
        Q_, q_mask = self._encode(question, question != 0, self.q_sentinel)
        Q = torch.tanh(self.W_Q(Q_)) * q_mask[:, :, None]  # question projection
        S = self.phi(D, Q)  # L, (B, m+1, n+1)
        A_D, Q_att = query_summary(S, Q, q_mask)  # A^D and Q A^D
        C_att = passage_summary(S, D, A_D, d_mask, q_mask, "second")  # C^Q A^D, C^Q = D A^Q
        U = self.fusion(torch.cat([D, Q_att, C_att], -1), d_mask.sum(1))[:, 1:]  # (B, m, 2l)
        starts, ends = self._decode(U, p_mask)
        start, end = starts[-1], ends[-1]
        if self.cfg.stop_when_unchanged and not self.training:
            start, end = stopped_estimate(starts, ends)
        return {"start": start, "end": end, "start_iters": starts, "end_iters": ends,
                "S": S[:, 1:, 1:], "A": A_D[:, 1:, 1:]}

    def _decode(self, U: Tensor, mask: Tensor) -> tuple[list[Tensor], list[Tensor]]:
        B, l = U.shape[0], self.cfg.hidden
        rows = torch.arange(B, device=U.device)
        s = e = torch.zeros(B, dtype=torch.long, device=U.device)
        h, c = U.new_zeros(B, l), U.new_zeros(B, l)
        starts, ends = [], []
        for _ in range(self.cfg.decoder_iterations):
            u_s, u_e = U[rows, s], U[rows, e]
            h, c = self.decoder(torch.cat([u_s, u_e], -1), (h, c))  # (5)
            alpha = self.hmn_start(U, h, u_s, u_e, mask)  # (6)
            s = alpha.argmax(1)
            beta = self.hmn_end(U, h, U[rows, s], u_e, mask)  # (7)
            e = beta.argmax(1)
            starts.append(alpha)
            ends.append(beta)
        return starts, ends


def stopped_estimate(starts: list[Tensor], ends: list[Tensor]) -> tuple[Tensor, Tensor]:
    """Per example, the (alpha, beta) of the first iteration whose argmaxes (s_i, e_i) equal the previous
    estimate (s_0 = e_0 = 0 before the first), or of the last iteration if the estimate never repeats (§2.3)."""
    alpha, beta = torch.stack(starts), torch.stack(ends)  # (I, B, m)
    s, e = alpha.argmax(2), beta.argmax(2)  # (I, B)
    s_prev = torch.cat([torch.zeros_like(s[:1]), s[:-1]])
    e_prev = torch.cat([torch.zeros_like(e[:1]), e[:-1]])
    unchanged = (s == s_prev) & (e == e_prev)
    unchanged[-1] = True
    stop = unchanged.long().argmax(0)  # the first iteration that repeats, (B,)
    rows = torch.arange(s.shape[1], device=s.device)
    return alpha[stop, rows], beta[stop, rows]
