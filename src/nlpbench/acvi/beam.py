"""Beam search for the pointer-generator (thesis §7.3.2 / paper §3: beam width 5; ACVI averages K samples).

Follows See et al.'s decoder [ext] with two changes. The beam holds `width` live hypotheses; each step expands
each by its 2 x width best extended-vocabulary tokens, ranked by average log-probability. A [STOP] candidate is
finished if it ranks within the top `width` (See et al. keep every [STOP] met while filling the beam) and has at
least `min_steps` tokens. The search ends after `max_steps` steps, or once `width` hypotheses are finished and the
best of them scores at least as well as the best live one (See et al. stop at `width` finished; on peaked models
both of their rules let improbable early stops end the search). The result is the finished (else live) hypothesis
with the best average log-probability. A copied OOV (extended id >= V) is fed back as [UNK].
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .model import PointerGenerator, expand_memory


@dataclass
class Hypothesis:
    tokens: list[int]
    log_probs: list[float] = field(default_factory=list)

    @property
    def avg_log_prob(self) -> float:
        return sum(self.log_probs) / max(1, len(self.log_probs))


@torch.no_grad()
def beam_search(model: PointerGenerator, batch: dict, index: int, *, width: int = 5, min_steps: int = 0,
                max_steps: int = 100, coverage: bool = False, n_samples: int = 1, stop_id: int = 3,
                start_id: int = 2, unk_id: int = 1) -> list[int]:
    """Decode example `index` of a batch; returns extended-vocabulary ids without [START]/[STOP].
    n_samples = K (ACVI: sampled context vectors averaged, thesis eq. 88); 1 = the mean context, no sampling."""
    V = model.cfg.vocab_size
    h, mask, state = model.encode_batch(batch, slice(index, index + 1))
    n = h.shape[1]
    src_ext = batch["src_ext"][index:index + 1, :n] if "src_ext" in batch else None
    n_oov = len(batch["oovs"][index]) if "oovs" in batch else 0
    sample = n_samples > 1
    mem1 = model.memory(h, mask)        # once per source: the hypotheses share it (VED: one xi for the beam)

    hyps = [Hypothesis([start_id])]
    states = state
    c_t = h.new_zeros(1, h.shape[-1])
    k_t = h.new_zeros(1, n)
    finished: list[Hypothesis] = []
    for step in range(max_steps):
        L = len(hyps)
        mem = expand_memory(mem1, L)
        y_prev = torch.tensor([hy.tokens[-1] if hy.tokens[-1] < V else unk_id for hy in hyps], device=h.device)
        ext = None if src_ext is None else src_ext.expand(L, -1)
        P_t, new_state, c_new, a_t, _ = model.step(y_prev, states, c_t, k_t, mem, ext, n_oov,
                                                  coverage=coverage, sample=sample, n_samples=n_samples)
        logp = torch.log(P_t + 1e-12)
        top_lp, top_id = logp.topk(min(2 * width, logp.shape[1]), dim=1)
        candidates = []
        for i, hy in enumerate(hyps):
            for lp, tok in zip(top_lp[i].tolist(), top_id[i].tolist()):
                candidates.append(((sum(hy.log_probs) + lp) / (len(hy.log_probs) + 1), i, tok, lp))
        candidates.sort(key=lambda x: -x[0])
        keep, src_rows = [], []
        for rank, (_, i, tok, lp) in enumerate(candidates):
            new = Hypothesis(hyps[i].tokens + [tok], hyps[i].log_probs + [lp])
            if tok == stop_id:
                if step >= min_steps and rank < width:   # only a [STOP] that would have been in the beam
                    finished.append(new)
            else:
                keep.append(new)
                src_rows.append(i)
            if len(keep) == width:
                break
        if not keep or (len(finished) >= width and max(f.avg_log_prob for f in finished)
                                                   >= max(k.avg_log_prob for k in keep)):
            break
        rows = torch.tensor(src_rows, device=h.device)
        hyps = keep
        states = (new_state[0][rows], new_state[1][rows])
        c_t = c_new[rows]
        k_t = (k_t.expand(L, -1) + a_t)[rows]
    pool = finished or hyps
    best = max(pool, key=lambda hy: hy.avg_log_prob)
    return [t for t in best.tokens[1:] if t != stop_id]
