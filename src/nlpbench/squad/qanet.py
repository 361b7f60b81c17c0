"""QANet (Yu, Dohan, Luong, Zhao, Chen, Norouzi, Le, ICLR 2018), the third model of Table 4.4 (thesis §4.3):
"a recurrency-free version of BiDAF" (thesis §4.3). Section numbers are the paper's §2.2.

  1. input embedding    [frozen GloVe -> adjustment FNN (model.WordInput, shared with the baseline); char-CNN
                        (model.CharCNN: 200-d characters, 200 filters, max-pooled; char_dim 0 = none)] -> highway
  2. embedding encoder  one encoder block, shared by context and question: [conv x #]-self-attention-feed-forward,
                        each sublayer f: x + f(layernorm(x)), positional encoding at the block's input,
                        depthwise-separable convolutions; a 1x1 projection to d_model first
  3. context-query attention  S = phi(c, q): the paper's f(q, c) = W_0 [q; c; q o c] ("trilinear") or
                        T-trilinear; A = S_ Q^T (row softmax), B = S_ S__^T C^T (S__ = column softmax);
                        output [c; a; c o a; c o b] = output.py's RIG_4, second order
  4. model encoder      a 1x1 projection 4d -> d, then model_blocks blocks (model_convs convolutions each), run three
                        times with shared weights: M0, M1, M2
  5. output             p1 = softmax(W_1 [M0; M1]), p2 = softmax(W_2 [M0; M2]); loss = model.span_loss
Stochastic depth (layer dropout): sublayer l of L in a stack survives training with 1 - (l/L)(1 - p_L).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nlpbench.squad.configs import QANetConfig
from nlpbench.squad.model import CharCNN, Highway, WordInput
from nlpbench.squad.output import NEG, OutputFormation
from nlpbench.squad.similarity import make_similarity


def positional_encoding(length: int, d: int, device: torch.device) -> Tensor:
    """The sinusoids of Vaswani et al. (2017), (length, d)."""
    pos = torch.arange(length, device=device, dtype=torch.float32)[:, None]
    i = torch.arange(0, d, 2, device=device, dtype=torch.float32)
    angle = pos * torch.exp(-math.log(10000.0) * i / d)
    pe = torch.zeros(length, d, device=device)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d // 2])
    return pe


class DepthwiseSeparableConv(nn.Module):
    def __init__(self, d: int, kernel: int):
        super().__init__()
        self.depthwise = nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=d, bias=False)
        self.pointwise = nn.Conv1d(d, d, 1)

    def forward(self, x: Tensor) -> Tensor:  # (B, T, d)
        return F.relu(self.pointwise(self.depthwise(x.transpose(1, 2)))).transpose(1, 2)


class EncoderBlock(nn.Module):
    """[conv x n] - self-attention - feed-forward, each inside a residual block with layer normalisation."""

    def __init__(self, d: int, convs: int, kernel: int, heads: int, dropout: float):
        super().__init__()
        self.convs = nn.ModuleList(DepthwiseSeparableConv(d, kernel) for _ in range(convs))
        self.conv_norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(convs))
        self.attn_norm, self.attention = nn.LayerNorm(d), nn.MultiheadAttention(d, heads, batch_first=True)
        self.ffn_norm, self.ffn = nn.LayerNorm(d), nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))
        self.dropout = nn.Dropout(dropout)
        self.sublayers = convs + 2

    def forward(self, x: Tensor, mask: Tensor, first: int, total: int, survival: float) -> Tensor:
        """`first`: this block's first sublayer's number among `total` in its stack (for stochastic depth)."""
        keep = mask[:, :, None].to(x.dtype)
        x = (x + positional_encoding(x.shape[1], x.shape[2], x.device)) * keep
        attend = lambda y: self.attention(y, y, y, key_padding_mask=~mask, need_weights=False)[0]  # noqa: E731
        layers = [(norm, conv) for norm, conv in zip(self.conv_norms, self.convs)] + \
                 [(self.attn_norm, attend), (self.ffn_norm, self.ffn)]
        for k, (norm, f) in enumerate(layers):
            p_survive = 1 - (first + k + 1) / total * (1 - survival)
            if self.training and torch.rand(()) > p_survive:
                continue  # stochastic depth: the sublayer is skipped, the residual kept
            x = (x + self.dropout(f(norm(x)))) * keep
        return x


class QANet(WordInput):
    def __init__(self, embeddings: Tensor, cfg: QANetConfig, vocab: list[str] | None = None):
        super().__init__(embeddings, cfg.embed_adjust, cfg.adjust_activation, cfg.dropout)
        self.cfg = cfg
        d = cfg.d_model
        self.chars = CharCNN(vocab, cfg.char_dim, cfg.char_filters, cfg.char_width, dropout=cfg.dropout / 2) \
            if cfg.char_dim else None  # characters dropped at half the rate (0.05 against 0.1)
        size = cfg.embed_adjust + (self.chars.out_dim if self.chars else 0)
        self.highway = Highway(size, cfg.highway_layers, cfg.dropout)
        self.input_proj = nn.Linear(size, d, bias=False)
        self.embedding_encoder = nn.ModuleList(EncoderBlock(d, cfg.embed_convs, cfg.embed_kernel, cfg.heads,
                                                            cfg.dropout) for _ in range(cfg.embed_blocks))
        self.phi = make_similarity(cfg.similarity, d)
        self.cq_attention = OutputFormation("RIG_4", d, passage_order="second")  # [c; a; c o a; c o b]
        self.model_proj = nn.Linear(4 * d, d, bias=False)
        self.model_encoder = nn.ModuleList(EncoderBlock(d, cfg.model_convs, cfg.model_kernel, cfg.heads, cfg.dropout)
                                           for _ in range(cfg.model_blocks))
        self.W_1, self.W_2 = nn.Linear(2 * d, 1), nn.Linear(2 * d, 1)

    @staticmethod
    def _stack(blocks: nn.ModuleList, x: Tensor, mask: Tensor, survival: float) -> Tensor:
        total, first = sum(b.sublayers for b in blocks), 0
        for block in blocks:
            x = block(x, mask, first, total, survival)
            first += block.sublayers
        return x

    def forward(self, passage: Tensor, question: Tensor) -> dict[str, Tensor]:
        p_mask, q_mask = passage != 0, question != 0
        c = self.input_proj(self.highway(self.embed_words(passage)))
        q = self.input_proj(self.highway(self.embed_words(question)))
        C = self._stack(self.embedding_encoder, c, p_mask, self.cfg.survival)
        Q = self._stack(self.embedding_encoder, q, q_mask, self.cfg.survival)
        S = self.phi(C, Q)
        G, A = self.cq_attention(C, Q, S, p_mask, q_mask)
        M0 = self._stack(self.model_encoder, self.model_proj(self.drop(G)), p_mask, self.cfg.survival)
        M1 = self._stack(self.model_encoder, M0, p_mask, self.cfg.survival)
        M2 = self._stack(self.model_encoder, M1, p_mask, self.cfg.survival)
        start = self.W_1(torch.cat([M0, M1], -1)).squeeze(-1).masked_fill(~p_mask, NEG)
        end = self.W_2(torch.cat([M0, M2], -1)).squeeze(-1).masked_fill(~p_mask, NEG)
        return {"start": start, "end": end, "S": S, "A": A}
