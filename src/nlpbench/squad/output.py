"""Relevant information generation: from H, U and S to the attention output O (Eqs. 3.10-3.15, chapter 5, app. A).

Query summary (Eqs. 3.10-3.12 = 5.1): A = row softmax of S over question words, U~ = A U.
Passage summary H~ (§5.1.1.2):
  first-order (5.2-5.4): b_i = max_j s_ij, beta = softmax_i(b) (over the M passage words; the printed N is a
    typo), h~ = sum_i beta_i h_i, tiled M times;
  second-order (5.5-5.7): A^H = column softmax of S over passage words, H~ = A (A^H)^T H.
Output formations o_i (Eq. 5.8, Table 5.1; Eqs. 5.9-5.10; Table A.1), D = dim(h_i):
  O_1 = RIG_1 = [h; u~]                         O_2 = RIG_3 = [h; u~; h o u~]
  RIG_2 = [h; u~; h~]                            RIG_4 = [h; u~; h o u~; h o h~]
  RIG_5 = [h; u~; h o u~; h~ o u~]               RIG_6 = FNN_ReLU(RIG_5), output 4D [D]
  proposed (5.9) = [h; u~; h o u~; h~ o u~; |h - u~|; |h~ - u~|]
  revised (5.10) = ReLU(W b_i + b), W: 6D -> d* (d* = 6D by default; Table 5.5 varies it)
  A1-O_1 = [h; h~], A1-O_2 = [h; h~; h o h~] (appendix A; passage summary first- or second-order)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nlpbench.squad.configs import OUTPUT_TERMS, OUTPUTS

NEG = -1e30  # masked logits (finite, so an all-masked row still gives a defined softmax)


def masked_softmax(scores: Tensor, mask: Tensor, dim: int) -> Tensor:
    return torch.softmax(scores.masked_fill(~mask, NEG), dim=dim)


def query_summary(S: Tensor, U: Tensor, q_mask: Tensor) -> tuple[Tensor, Tensor]:
    """(A, U~): Eq. 3.10 row softmax over question words, Eq. 3.12 U~ = A U."""
    A = masked_softmax(S, q_mask[:, None, :], dim=2)
    return A, A @ U


def passage_summary(S: Tensor, H: Tensor, A: Tensor, p_mask: Tensor, q_mask: Tensor, order: str) -> Tensor:
    """H~ (B, M, D) by the first- or second-order method."""
    if order == "first":
        b = S.masked_fill(~q_mask[:, None, :], NEG).max(dim=2).values  # (5.2) b_i = max_j s_ij
        beta = masked_softmax(b, p_mask, dim=1)  # (5.3) over passage positions
        h_tilde = (beta[:, :, None] * H).sum(dim=1)  # (5.4)
        return h_tilde[:, None, :].expand_as(H)
    if order == "second":
        A_H = masked_softmax(S, p_mask[:, :, None], dim=1)  # (5.5) column softmax over passage words
        H_q = A_H.transpose(1, 2) @ H  # (5.6) h~_j = sum_i a^H_ij h_i, (B, N, D)
        return A @ H_q  # (5.7) h~_i = sum_j a^U_ij h~_j
    raise ValueError(f"passage summary order must be 'first' or 'second', not {order!r}")




def _term(name: str, h: Tensor, u: Tensor, ht: Tensor | None) -> Tensor:
    return {
        "h": lambda: h,
        "u": lambda: u,
        "ht": lambda: ht,
        "hu": lambda: h * u,
        "hht": lambda: h * ht,
        "htu": lambda: ht * u,
        "|h-u|": lambda: (h - u).abs(),
        "|ht-u|": lambda: (ht - u).abs(),
    }[name]()


class OutputFormation(nn.Module):
    """o_i = f(h_i, u~_i, h~_i) for one named method; `out_dim` is d_O."""

    def __init__(self, name: str, D: int, passage_order: str = "second", revised_dim: int | None = None,
                 dropout: float = 0.0):
        super().__init__()
        if name not in OUTPUT_TERMS:
            raise ValueError(f"unknown output formation {name!r}; known: {', '.join(OUTPUTS)}")
        terms, self.needs_passage = OUTPUT_TERMS[name]
        self.name, self.terms, self.passage_order = name, terms.split(), passage_order
        concat_dim = len(self.terms) * D
        self.fnn = None
        if name == "RIG_6":
            self.fnn = nn.Linear(concat_dim, 4 * D)  # FNN_ReLU, output size = input size 4D [D]
        elif name == "revised":
            self.fnn = nn.Linear(concat_dim, revised_dim or concat_dim)  # (5.10), d* = 6D unless given
        self.dropout = nn.Dropout(dropout)
        self.out_dim = self.fnn.out_features if self.fnn is not None else concat_dim

    def forward(self, H: Tensor, U: Tensor, S: Tensor, p_mask: Tensor, q_mask: Tensor) -> tuple[Tensor, Tensor]:
        """(O (B, M, d_O), A (B, M, N))."""
        A, U_tilde = query_summary(S, U, q_mask)
        H_tilde = passage_summary(S, H, A, p_mask, q_mask, self.passage_order) if self.needs_passage else None
        O = torch.cat([_term(t, H, U_tilde, H_tilde) for t in self.terms], dim=-1)
        if self.fnn is not None:
            O = F.relu(self.fnn(self.dropout(O)))
        return O, A
