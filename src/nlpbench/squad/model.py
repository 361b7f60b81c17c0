"""The baseline reading-comprehension model of Figure 3.7 (thesis §3.2).

  e^p_t, e^q_t   frozen word vectors (GloVe; OOV = 0)                               §3.2.1
  w_t = FNN(e_t) adjustment layer v -> 100, shared by passage and question            §3.2.1, Fig. 3.8(b)
  H = biLSTM(w^p), U = biLSTM(w^q)   one shared biLSTM, 100 per direction, D = 200    (3.1), (3.2), (3.8)
  S = [phi(h_i, u_j)]                pluggable similarity (similarity.py)             (3.9)
  O = f(H, U~, H~)                   pluggable output formation (output.py)           (3.10)-(3.15), ch. 5
  Z = biLSTM(O), G = biLSTM(Z)                                                        (3.16), (3.19)
  P_s = softmax(w_Ps [Z; H] + b_Ps), P_e = softmax(w_Pe [G; H] + b_Pe)                (3.17), (3.18)
  L = -(1/K) sum_k (log p_s(y_s) + log p_e(y_e))                                      (3.20)

Dropout 0.2 on the input of every RNN and linear layer except the answer predictor's linear layers (§3.3.2):
here the adjustment FNN, the three biLSTMs and the RIG_6/revised FNN. The similarity functions' own weights get
no dropout [D: their inputs H and U are shared with the output formation, which the thesis does not drop].
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nlpbench.squad.configs import ModelConfig
from nlpbench.squad.output import NEG, OutputFormation
from nlpbench.squad.similarity import make_similarity


def reverse_padded(x: Tensor, lengths: Tensor) -> Tensor:
    """Reverse each sequence within its own length; padding positions stay where they are. (Rows picked with
    index_select over the flattened (B*T, D) tensor: the same values as a gather over (B, T, D), about a third
    cheaper forward and backward on CPU.)"""
    B, T = x.shape[:2]
    t = torch.arange(T, device=x.device)[None, :]
    L = lengths.to(x.device)[:, None]
    index = torch.where(t < L, L - 1 - t, t) + T * torch.arange(B, device=x.device)[:, None]
    return x.reshape(B * T, *x.shape[2:]).index_select(0, index.reshape(-1)).view(x.shape)


class BiLSTM(nn.Module):
    """One bidirectional LSTM layer (3.3)-(3.8) over right-padded sequences: the backward LSTM reads each
    sequence reversed within its length, so padding never enters it. (Two plain LSTMs instead of a packed
    sequence: the packed backward pass on CPU costs time quadratic in the length.) Padded outputs are zero."""

    def __init__(self, input_size: int, hidden: int, dropout: float):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.forward_lstm = nn.LSTM(input_size, hidden, batch_first=True)
        self.backward_lstm = nn.LSTM(input_size, hidden, batch_first=True)

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        x = self.dropout(x)
        h_fwd, _ = self.forward_lstm(x)
        h_bwd, _ = self.backward_lstm(reverse_padded(x, lengths))
        h = torch.cat([h_fwd, reverse_padded(h_bwd, lengths)], dim=-1)  # (3.8) [h^forward; h^backward]
        mask = torch.arange(x.shape[1], device=x.device)[None, :] < lengths.to(x.device)[:, None]
        return h * mask[:, :, None]


class WordInput(nn.Module):
    """The input every squad model shares (§3.2.1): frozen word vectors e_t, then the adjustment FNN
    w_t = FNN(e_t) (v -> embed_adjust, linear or ReLU), dropout on its input. `embed` is never stored in
    checkpoints (train._weights)."""

    def __init__(self, embeddings: Tensor, embed_adjust: int, adjust_activation: str, dropout: float):
        super().__init__()
        self.embed = nn.Embedding.from_pretrained(embeddings, freeze=True, padding_idx=0)
        self.adjust = nn.Linear(embeddings.shape[1], embed_adjust)
        self.drop = nn.Dropout(dropout)
        self.adjust_activation = adjust_activation

    def word_vectors(self, ids: Tensor) -> Tensor:
        w = self.adjust(self.drop(self.embed(ids)))
        return F.relu(w) if self.adjust_activation == "relu" else w

    def embed_words(self, ids: Tensor) -> Tensor:
        """[w_t; char-CNN(t)] where the model has a `chars` module (BiDAF, QANet), else w_t."""
        w = self.word_vectors(ids)
        chars = getattr(self, "chars", None)
        return w if chars is None else torch.cat([w, chars(ids)], dim=-1)


class CharCNN(nn.Module):
    """Character-level word vectors (Kim 2014), as BiDAF (§2.1) and QANet (§2.2) use: each word's first
    `max_chars` characters embedded (char_dim), one convolution of `filters` filters of width `width`, ReLU,
    max-pooled over the characters. The characters of every word come from the vocabulary, so batches stay
    word ids: `word_chars` (|V| x max_chars, 0 = none) is rebuilt from the vocabulary, never stored; the
    character table (1 = a character not in the vocabulary's words) is sorted, so the same vocabulary gives the
    same weights' meaning."""

    def __init__(self, vocab: list[str], char_dim: int, filters: int, width: int, max_chars: int = 16,
                 dropout: float = 0.0):
        super().__init__()
        chars = sorted({c for w in vocab[1:] for c in w})
        index = {c: i + 2 for i, c in enumerate(chars)}
        table = torch.zeros(len(vocab), max_chars, dtype=torch.long)
        for k, w in enumerate(vocab[1:], start=1):
            ids = [index.get(c, 1) for c in w[:max_chars]]
            table[k, : len(ids)] = torch.tensor(ids)
        self.register_buffer("word_chars", table, persistent=False)
        self.embed = nn.Embedding(len(chars) + 2, char_dim, padding_idx=0)
        self.conv = nn.Conv1d(char_dim, filters, width, padding=width // 2)
        self.dropout = nn.Dropout(dropout)
        self.out_dim = filters

    def forward(self, ids: Tensor) -> Tensor:  # (B, T) word ids -> (B, T, filters)
        B, T = ids.shape
        c = self.dropout(self.embed(self.word_chars[ids].flatten(0, 1)))  # (B*T, L, char_dim)
        h = F.relu(self.conv(c.transpose(1, 2))).max(dim=2).values
        return h.view(B, T, -1)


class Highway(nn.Module):
    """A highway network (Srivastava et al. 2015), as BiDAF and QANet put over their embeddings:
    y = t * ReLU(W_H x) + (1 - t) * x, t = sigmoid(W_T x), per layer."""

    def __init__(self, size: int, layers: int, dropout: float = 0.0):
        super().__init__()
        self.H = nn.ModuleList(nn.Linear(size, size) for _ in range(layers))
        self.T = nn.ModuleList(nn.Linear(size, size) for _ in range(layers))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        for H, T in zip(self.H, self.T):
            t = torch.sigmoid(T(x))
            x = t * self.dropout(F.relu(H(x))) + (1 - t) * x
        return x


class BaselineModel(WordInput):
    def __init__(self, embeddings: Tensor, cfg: ModelConfig):
        super().__init__(embeddings, cfg.embed_adjust, cfg.adjust_activation, cfg.dropout)
        self.cfg = cfg
        D = 2 * cfg.hidden
        self.encoder = BiLSTM(cfg.embed_adjust, cfg.hidden, cfg.dropout)  # shared by passage and question
        self.phi = make_similarity(cfg.similarity, D)
        self.rig = OutputFormation(cfg.output, D, cfg.passage_summary, cfg.revised_dim, cfg.dropout)
        self.start_rnn = BiLSTM(self.rig.out_dim, cfg.hidden, cfg.dropout)  # Z
        self.end_rnn = BiLSTM(D, cfg.hidden, cfg.dropout)  # G
        self.w_Ps = nn.Linear(2 * D, 1)  # [Z; H] in R^{4d}
        self.w_Pe = nn.Linear(2 * D, 1)  # [G; H]

    def forward(self, passage: Tensor, question: Tensor) -> dict[str, Tensor]:
        """passage (B, M), question (B, N) token ids, 0 = padding. Returns start/end logits (B, M) and S, A."""
        p_mask, q_mask = passage != 0, question != 0
        p_len, q_len = p_mask.sum(1), q_mask.sum(1)
        H = self.encoder(self.word_vectors(passage), p_len)  # (3.1)
        U = self.encoder(self.word_vectors(question), q_len)  # (3.2)
        S = self.phi(H, U)  # (3.9)
        O, A = self.rig(H, U, S, p_mask, q_mask)
        Z = self.start_rnn(O, p_len)  # (3.16)
        G = self.end_rnn(Z, p_len)  # (3.19)
        start = self.w_Ps(torch.cat([Z, H], -1)).squeeze(-1).masked_fill(~p_mask, NEG)  # (3.17) logits
        end = self.w_Pe(torch.cat([G, H], -1)).squeeze(-1).masked_fill(~p_mask, NEG)  # (3.18) logits
        return {"start": start, "end": end, "S": S, "A": A}


def span_loss(out: dict[str, Tensor], y_start: Tensor, y_end: Tensor) -> Tensor:
    """(3.20): start and end cross-entropies summed, averaged over the batch. A model that points several times
    (DCN's dynamic decoder) returns every iteration's logits as "start_iters"/"end_iters": their losses add up."""
    starts, ends = out.get("start_iters", [out["start"]]), out.get("end_iters", [out["end"]])
    return sum(F.cross_entropy(s, y_start) + F.cross_entropy(e, y_end) for s, e in zip(starts, ends))


def decode(start_logits: Tensor, end_logits: Tensor, mode: str = "independent", max_len: int = 15) -> Tensor:
    """(B, 2) token spans. "independent": argmax P_s and argmax P_e separately (Eqs. 3.21-3.22; end < start gives
    an empty answer). "span": argmax of p_s(i) p_e(j) over i <= j < i + max_len."""
    if mode == "independent":
        return torch.stack([start_logits.argmax(1), end_logits.argmax(1)], dim=1)
    if mode == "span":
        log_ps, log_pe = start_logits.log_softmax(1), end_logits.log_softmax(1)
        M = start_logits.shape[1]
        i, j = torch.arange(M)[:, None], torch.arange(M)[None, :]
        allowed = (j >= i) & (j < i + max_len)
        scores = (log_ps[:, :, None] + log_pe[:, None, :]).masked_fill(~allowed.to(start_logits.device), NEG)
        flat = scores.flatten(1).argmax(1)
        return torch.stack([flat // M, flat % M], dim=1)
    raise ValueError(f"decode mode must be 'independent' or 'span', not {mode!r}")
