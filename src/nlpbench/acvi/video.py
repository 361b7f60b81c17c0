"""Video captioning seq2seq (thesis §7.2.2 / §7.4.2, paper §4.2): BiLSTM over frame features, LSTM decoder,
P = softmax(V' tanh(V [s_t; c_t] + b) + b') (eq. 66 without pointer or coverage), any attention of attention.py.

Paper settings (paper §4.2): 24 frames x 1024-d GoogLeNet pool5 features, 1000-d LSTMs (per direction: reading C-2),
attention projection 100, 256-d word embeddings, dropout 0.5 on the non-recurrent connections (Zaremba et al.),
at most 20 decoding steps. The real features are not available offline: a user-supplied MSVD copy is prepared by
data.prepare_msvd (data step acvi-msvd); smoke runs and tests otherwise use the synthetic stand-in.
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
    """features (B, F, D) with one caption each; [STOP] appended unless the caption is cut at max_dec. Every
    tensor of the batch lies on the features' device."""
    B = len(captions)
    dec_in, target = [], []
    for cap in captions:
        inp, tgt = vocab.target_ids(list(cap), [])
        if len(inp) > max_dec:
            inp, tgt = inp[:max_dec], tgt[:max_dec]
        dec_in.append(inp)
        target.append(tgt)
    T = max(len(t) for t in target)
    dec_in_ids, target_ids = torch.zeros(B, T, dtype=torch.long), torch.zeros(B, T, dtype=torch.long)
    for b in range(B):
        dec_in_ids[b, : len(dec_in[b])] = torch.tensor(dec_in[b])
        target_ids[b, : len(target[b])] = torch.tensor(target[b])
    on = features.device
    return {"features": features, "feat_len": torch.full((B,), features.shape[1], device=on),
            "dec_in": dec_in_ids.to(on), "target": target_ids.to(on),
            "dec_len": torch.tensor([len(t) for t in target], device=on)}


# --------------------------------------------------------------------------- stand-in data and one training run
SUBJECTS = ("a man", "a woman", "a dog", "a cat", "a boy", "a girl")
ACTIONS = ("is riding a horse", "is playing a guitar", "is cutting an onion", "is swimming in a pool",
           "is slicing a tomato", "is dancing on a stage", "is eating a banana")


def synthetic_captioning(n_videos: int, *, n_classes: int = 8, frames: int = 24, feat_dim: int = 1024,
                         seed: int = 0) -> tuple[torch.Tensor, list[list[list[str]]]]:
    """SYNTHETIC stand-in for MSVD (smoke scale only): each clip belongs to one of n_classes (subject, action)
    pairs; its features are that class's random direction plus noise (data.synthetic_video_features' shape and
    sign), its two reference captions name the pair. Captions depend on the features only through the class."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.rand(n_classes, 1, feat_dim, generator=g)
    classes = torch.randint(n_classes, (n_videos,), generator=g)
    feats = (centres[classes] + 0.1 * torch.randn(n_videos, frames, feat_dim, generator=g)).clamp_min(0.0)
    caps = []
    for c in classes.tolist():
        subj, act = SUBJECTS[c % len(SUBJECTS)], ACTIONS[(c // len(SUBJECTS) + c) % len(ACTIONS)]
        caps.append([f"{subj} {act}".split(), f"{subj} {act.replace('is ', 'is happily ', 1)}".split()])
    return feats, caps


def synthetic_splits(settings: dict) -> dict:
    """{split: (features, captions per clip)} of the synthetic stand-in, sized as acvi.tasks.video.video."""
    t, v = settings["train"], settings["video"]
    sizes = {"train": v["n_train"], "valid": v["n_valid"], "test": v["n_test"]}
    feats, caps = synthetic_captioning(sum(sizes.values()), n_classes=v["n_classes"], frames=v["frames"],
                                       feat_dim=v["feat_dim"], seed=t["seed"])
    splits, start = {}, 0
    for name, n in sizes.items():
        splits[name] = (feats[start:start + n], caps[start:start + n])
        start += n
    return splits


def train_video(settings: dict, out_dir, device: str = "cpu", log=print, splits: dict | None = None,
                data_label: str | None = None) -> dict:
    """One captioning run (settings: model / train / video of acvi.config) on `splits` ({"train", "valid",
    "test": (features (n, frames, dim), reference token lists per clip)}: prepared MSVD, data.read_msvd_split)
    or, when None, on the synthetic stand-in: Adam, the phases' total iterations, each step one reference of
    each sampled clip in turn, beam search (K samples for ACVI), coco ROUGE-L and CIDEr on valid and test.
    metrics.json last; it says which data trained the run."""
    import time
    from pathlib import Path

    from nlpbench.runtime.io import write_json
    from nlpbench.metrics.rouge import caption_metrics

    from .beam import beam_search
    from .data import SYNTHETIC_LABEL

    out = Path(out_dir)
    if (out / "metrics.json").is_file():
        from nlpbench.runtime.io import read_json
        return read_json(out / "metrics.json")
    m, t, v = settings["model"], settings["train"], settings["video"]
    torch.manual_seed(t["seed"])
    synthetic = splits is None
    if synthetic:
        splits, data_label = synthetic_splits(settings), SYNTHETIC_LABEL
    vocab = Vocab.build((c for cs in splits["train"][1] for c in cs), t["vocab_size"])
    cfg = ModelConfig(**{**m, "vocab_size": len(vocab)})
    model = VideoCaptioner(cfg, feat_dim=v["feat_dim"], dropout=v["dropout"]).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=t["lr"])
    steps = int(t["phases"][-1][0]) + int(t["coverage_iters"])
    n_train = len(splits["train"][1])
    g = torch.Generator().manual_seed(t["seed"])
    t0 = time.perf_counter()
    history = []
    model.train()
    for step in range(steps):
        idx = torch.randint(n_train, (t["batch_size"],), generator=g).tolist()
        captions = [splits["train"][1][i][step % len(splits["train"][1][i])] for i in idx]  # references in turn
        batch = make_video_batch(splits["train"][0][idx].to(device), captions, vocab, t["max_dec_steps"])
        losses = model(batch, sample=True)
        opt.zero_grad()
        losses["loss"].backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), t["max_grad_norm"])
        opt.step()
        if (step + 1) % t["log_every"] == 0 or step + 1 == steps:
            history.append({"step": step + 1, **{k: float(x.detach()) for k, x in losses.items()}})
            log(f"step {step + 1}/{steps} loss {history[-1]['loss']:.4f}")
    train_seconds = time.perf_counter() - t0
    model.eval()
    K = t["n_samples"] if m["attention"].startswith("acvi") or m["attention"] == "variational" else 1
    metrics = {"task": "video", "attention": m["attention"], "data": data_label, "synthetic": synthetic,
               "steps": steps, "train_seconds_this_process": train_seconds, "vocab_size": len(vocab)}
    for name in ("valid", "test"):
        f, refs = splits[name]
        dummy = make_video_batch(f.to(device), [r[0] for r in refs], vocab, t["max_dec_steps"])
        hyps = [" ".join(vocab.words(beam_search(model, dummy, i, width=t["beam_width"],
                                                 max_steps=t["max_dec_steps"], n_samples=K)))
                for i in range(len(refs))]
        scores = caption_metrics(hyps, [[" ".join(r) for r in rs] for rs in refs], with_meteor=t["eval_meteor"])
        metrics[name] = {"coco_rougeL": scores.pop("rougeL"), **scores, "n": len(refs), "examples": hyps[:3]}
    write_json(out / "history.json", history)
    write_json(out / "metrics.json", metrics)
    return metrics
