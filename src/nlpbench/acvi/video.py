"""Video captioning seq2seq (thesis §7.2.2 / §7.4.2, paper §4.2): BiLSTM over frame features, LSTM decoder,
P = softmax(V' tanh(V [s_t; c_t] + b) + b') (eq. 66 without pointer or coverage), any attention of attention.py.

Paper settings (spec §4.4): 24 frames x 1024-d GoogLeNet pool5 features, 1000-d LSTMs (per direction: reading C-2),
attention projection 100, 256-d word embeddings, dropout 0.5 on the non-recurrent connections (Zaremba et al.),
at most 20 decoding steps. The real features are not available offline: tests use data.synthetic_video_features.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import torch
from torch import nn

from .model import ModelConfig, PointerGenerator
from .vocab import Vocab

VIDEO_DEFAULTS = dict(emb_dim=256, hidden_dim=1000, attn_dim=100)


class VideoCaptioner(PointerGenerator):
    def __init__(self, cfg: ModelConfig, feat_dim: int = 1024, dropout: float = 0.5):
        super().__init__(replace(cfg, pointer=False))
        self.encoder = nn.LSTM(feat_dim, cfg.hidden_dim, batch_first=True, bidirectional=True)
        self.drop = nn.Dropout(dropout)

    def encode_batch(self, batch: dict, rows: slice = slice(None)):
        feats, lengths = batch["features"][rows], batch["feat_len"][rows]
        feats = self.drop(feats[:, : int(lengths.max())])
        out, (h_n, c_n) = self.encoder(feats)  # every video has all its frames: no packing needed when equal
        h = self.drop(out)
        mask = torch.arange(feats.shape[1], device=feats.device)[None, :] < lengths[:, None]
        h0 = torch.relu(self.reduce_h(torch.cat([h_n[0], h_n[1]], -1)))
        c0 = torch.relu(self.reduce_c(torch.cat([c_n[0], c_n[1]], -1)))
        return h, mask, (h0, c0)


def make_video_batch(features: torch.Tensor, captions: Sequence[Sequence[str]], vocab: Vocab,
                     max_dec: int = 20) -> dict:
    """features (B, F, D) with one caption each; [STOP] appended unless the caption is cut at max_dec."""
    B = len(captions)
    dec_in, target = [], []
    for cap in captions:
        inp, tgt = vocab.target_ids(list(cap), [])
        if len(inp) > max_dec:
            inp, tgt = inp[:max_dec], tgt[:max_dec]
        dec_in.append(inp)
        target.append(tgt)
    T = max(len(t) for t in target)
    out = {"features": features, "feat_len": torch.full((B,), features.shape[1]),
           "dec_in": torch.zeros(B, T, dtype=torch.long), "target": torch.zeros(B, T, dtype=torch.long),
           "dec_len": torch.tensor([len(t) for t in target])}
    for b in range(B):
        out["dec_in"][b, : len(dec_in[b])] = torch.tensor(dec_in[b])
        out["target"][b, : len(target[b])] = torch.tensor(target[b])
    return out
