"""BiDAF (Seo, Kembhavi, Farhadi, Hajishirzi, ICLR 2017), the first model of Table 4.4 (thesis §4.3).

  word input        [frozen GloVe -> adjustment FNN (model.WordInput, shared with the baseline); char-CNN
                    (model.CharCNN, 8-d characters, 100 filters of width 5; char_dim 0 = none)] -> highway  §2.1-2.2
  H, U              contextual biLSTM, shared by context and query, d per direction (2d = D)              §2.3
  S_tj = phi(h_t, u_j)  the paper's alpha(h, u) = w_(S)^T [h; u; h o u] ("trilinear"), or T-trilinear   (1)
  C2Q  a_t = softmax(S_t:), u~_t = sum_j a_tj u_j                                                       §2.4
  Q2C  b = softmax_t(max_j S_tj), h~ = sum_t b_t h_t, tiled T times       (output.passage_summary "first")
  G = beta(H, U~, H~) = [h; u~; h o u~; h o h~]  (8d)                     (2) = output.py's RIG_4, first order
  M = 2-layer biLSTM(G)                                                   modelling layer §2.5
  p1 = softmax(w_p1^T [G; M]), M2 = biLSTM(M), p2 = softmax(w_p2^T [G; M2])                            (3), (4)
  L = -(1/N) sum_i log p1(y1_i) + log p2(y2_i)                            (5) = model.span_loss
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from nlpbench.squad.configs import BiDAFConfig
from nlpbench.squad.model import BiLSTM, CharCNN, Highway, WordInput
from nlpbench.squad.output import NEG, OutputFormation
from nlpbench.squad.similarity import make_similarity


class BiDAF(WordInput):
    def __init__(self, embeddings: Tensor, cfg: BiDAFConfig, vocab: list[str] | None = None):
        super().__init__(embeddings, cfg.embed_adjust, cfg.adjust_activation, cfg.dropout)
        self.cfg = cfg
        d, D = cfg.hidden, 2 * cfg.hidden
        self.chars = CharCNN(vocab, cfg.char_dim, cfg.char_filters, cfg.char_width, dropout=cfg.dropout) \
            if cfg.char_dim else None
        size = cfg.embed_adjust + (self.chars.out_dim if self.chars else 0)
        self.highway = Highway(size, cfg.highway_layers)
        self.contextual = BiLSTM(size, d, cfg.dropout)
        self.phi = make_similarity(cfg.similarity, D)
        self.attention_flow = OutputFormation("RIG_4", D, passage_order="first")  # G, 4D = 8d
        self.modelling = nn.ModuleList(BiLSTM(4 * D if k == 0 else D, d, cfg.dropout)
                                       for k in range(cfg.modelling_layers))
        self.end_rnn = BiLSTM(D, d, cfg.dropout)  # M2
        self.w_p1 = nn.Linear(5 * D, 1)  # [G; M] in R^{10d}
        self.w_p2 = nn.Linear(5 * D, 1)

    def forward(self, passage: Tensor, question: Tensor) -> dict[str, Tensor]:
        p_mask, q_mask = passage != 0, question != 0
        p_len, q_len = p_mask.sum(1), q_mask.sum(1)
        H = self.contextual(self.highway(self.embed_words(passage)), p_len)
        U = self.contextual(self.highway(self.embed_words(question)), q_len)
        S = self.phi(H, U)  # (1)
        G, A = self.attention_flow(H, U, S, p_mask, q_mask)  # C2Q, Q2C, (2)
        M = G
        for layer in self.modelling:
            M = layer(M, p_len)
        M2 = self.end_rnn(M, p_len)
        start = self.w_p1(torch.cat([G, M], -1)).squeeze(-1).masked_fill(~p_mask, NEG)  # (3)
        end = self.w_p2(torch.cat([G, M2], -1)).squeeze(-1).masked_fill(~p_mask, NEG)  # (4)
        return {"start": start, "end": end, "S": S, "A": A}
