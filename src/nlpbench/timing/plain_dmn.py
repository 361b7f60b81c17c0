"""DMN+, MoDMN+ and ff-DMN written plainly: the baseline of the DMN timing benchmark.

This is the forward pass a user would write from eqs. 6.1-6.19 with a padded batch (B stories of M facts of L
words): the position encoding as a contraction over every word slot of every fact slot, the attention gate over
every fact slot with the padding masked out of the softmax, and the AttnGRU stepping every story through every
fact slot, the padding kept unchanged by its zero gate. It reads the weights of a `DMN` module and draws the
dropout masks in the same order, so for the same weights and generator state it gives the same logits as
DMN.forward (tested); only the cost differs (DMN.forward computes the real facts alone).
"""

from __future__ import annotations

import torch

from nlpbench.dmn.model import DMN, _last_state, dropout, fact_mask
from nlpbench.nn.position import position_weights


def plain_logits(model: DMN, stories: torch.Tensor, n_facts: torch.Tensor, queries: torch.Tensor,
                 generator: torch.Generator | None = None) -> torch.Tensor:
    """Logits (B, A) of eq. 6.5 for stories (B, M, L), n_facts (B,), queries (B, Lq)."""
    cfg = model.cfg
    B, M, L = stories.shape
    mask = fact_mask(n_facts, M)                                          # (B, M) real facts
    a, b = position_weights((stories != 0).sum(-1), L, cfg.dim)           # l_kj = a_j + (k/d) b_j
    emb = model.embedding(stories)                                        # (B, M, L, d)
    s = torch.einsum("bml,bmld->bmd", a, emb) + model.pe.k_over_d * torch.einsum("bml,bmld->bmd", b, emb)  # eq. 6.1
    s = dropout(s, cfg.input_dropout, model.training, generator)
    if cfg.variant == "ff-dmn":
        f = model.ffn(s) * mask.unsqueeze(-1)                             # f_t = FNN(s_t)
    else:
        out, _ = _last_state(model.fusion, s, n_facts)
        fwd, bwd = out.chunk(2, dim=-1)
        f = fwd + bwd                                                     # eq. 6.19
    q = model.encode_question(queries)
    m = q
    for i in range(cfg.hops):
        gate = model.gate
        qq, mm = q.unsqueeze(1), m.unsqueeze(1)
        z = torch.cat([f * qq, f * mm, (f - qq).abs(), (f - mm).abs()], dim=-1)            # eq. 6.8
        scores = gate.W2(torch.tanh(gate.W1(z))).squeeze(-1)                               # eq. 6.9
        g = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)               # eq. 6.10
        if cfg.variant == "dmn+":
            cell, h = model.attn_gru, f.new_zeros(B, cfg.dim)
            for t in range(M):
                r = torch.sigmoid(cell.Wr(f[:, t]) + cell.Ur(h))                            # eq. 6.12
                h_tilde = torch.tanh(cell.W(f[:, t]) + r * cell.U(h))                       # eq. 6.13
                gt = g[:, t].unsqueeze(-1)
                h = gt * h_tilde + (1 - gt) * h                                             # eq. 6.15
            c = h
        else:
            c = torch.einsum("bm,bmd->bd", g, f)                                            # eq. 6.16
        m = model.memory_update(i, m, c, q)
    x = dropout(torch.cat([q, m], dim=-1), cfg.answer_dropout, model.training, generator)
    return model.answer(x)                                                                  # eq. 6.5
