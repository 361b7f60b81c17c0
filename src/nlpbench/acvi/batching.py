"""Padding a list of (source tokens, target tokens) pairs into the tensors the pointer-generator reads."""

from __future__ import annotations

from typing import Sequence

import torch

from .vocab import Vocab


def make_batch(pairs: Sequence[tuple[Sequence[str], Sequence[str]]], vocab: Vocab, max_enc: int, max_dec: int) -> dict:
    """Source truncated to max_enc tokens, target to max_dec (then [STOP] is appended only if the target was not
    cut, as See et al. do). Keys: src, src_ext, src_len, dec_in, target, dec_len, n_oov, oovs."""
    srcs, exts, oov_lists, dec_ins, targets = [], [], [], [], []
    for src, tgt in pairs:
        src = list(src)[:max_enc] or [vocab.itos[vocab.unk]]
        ids, ext, oovs = vocab.source_ids(src)
        inp, target = vocab.target_ids(list(tgt), oovs)
        if len(inp) > max_dec:                                   # truncated: no [STOP] to predict
            inp, target = inp[:max_dec], target[:max_dec]
        srcs.append(ids)
        exts.append(ext)
        oov_lists.append(oovs)
        dec_ins.append(inp)
        targets.append(target)
    B = len(pairs)
    N = max(len(s) for s in srcs)
    T = max(len(t) for t in targets)
    out = {
        "src": torch.zeros(B, N, dtype=torch.long), "src_ext": torch.zeros(B, N, dtype=torch.long),
        "dec_in": torch.zeros(B, T, dtype=torch.long), "target": torch.zeros(B, T, dtype=torch.long),
        "src_len": torch.tensor([len(s) for s in srcs]), "dec_len": torch.tensor([len(t) for t in targets]),
        "n_oov": max(len(o) for o in oov_lists), "oovs": oov_lists,
    }
    for b in range(B):
        out["src"][b, : len(srcs[b])] = torch.tensor(srcs[b])
        out["src_ext"][b, : len(exts[b])] = torch.tensor(exts[b])
        out["dec_in"][b, : len(dec_ins[b])] = torch.tensor(dec_ins[b])
        out["target"][b, : len(targets[b])] = torch.tensor(targets[b])
    return out


def to_device(batch: dict, device) -> dict:
    """The batch with every tensor moved to `device` (other values as they are)."""
    return {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}
