"""Pointer-generator network with coverage (See et al. 2017; thesis eqs. 63-71, paper eqs. 1-9), any attention.

Notation of the thesis: h_i encoder states (BiLSTM, dim 2 x hidden), s_t decoder state, e_t scores, a_t attention,
c_t context vector, P_vocab, p_gen, P_t over the extended vocabulary, k_t coverage.
Details the documents leave open follow See et al.'s code [ext]: input feeding x_t = Linear([emb(y);
c_{t-1}]), initial decoder state ReLU(Linear([h_fwd_N; h_bwd_1])), s_t = [h_dec; c_dec] in attention and p_gen.

VED (Bahuleyan et al. 2018; paper §4, "VED"), on when latent_dim > 0: deterministic attention plus one latent
xi per source sequence, prior N(0, I), posterior N(mu, diag sigma^2) from dense layers over the final BiLSTM state
[h_fwd_N; h_bwd_1]; "both the context vector c and the latent xi are fed to the final softmax layer": eq. 66 becomes
V [s_t; c_t; xi] + b. Two readings the documents leave open are config keys (latent_kl_scale, latent_test).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from nlpbench.nn.gaussian import GaussianHead, kl_normal, reparameterize

from .attention import AdditiveScores, VariationalAttention, categorical_kl, make_attention, masked_softmax


UNK_ID = 1  # vocab.Vocab's [UNK]


@dataclass
class ModelConfig:
    vocab_size: int = 50_000
    emb_dim: int = 128
    hidden_dim: int = 256       # LSTM state; h_i is 2 x hidden_dim
    attn_dim: int = 256         # W_h, W_s output size
    attention: str = "asa"      # asa | acvi_thesis | acvi_paper | structured | variational
    pointer: bool = True        # False: plain seq2seq with attention (Table 20's seq2seq rows)
    gumbel_tau: float = 0.5
    kl_weight: float = 1.0      # also scales variational attention's REINFORCE term (exact ELBO gradient at 1)
    cov_lambda: float = 1.0     # eq. 71
    latent_dim: int = 0         # VED's xi (128 summarization, 100 video captioning [P]); 0 = no latent
    latent_kl_scale: str = "per_step"   # per_step: KL(q(xi|x) || N(0, I)) / target length, against the per-step NLL
                                        # (the ratio of a summed-over-tokens ELBO); per_sequence: the whole KL
    latent_test: str = "mean"   # xi when not training: mean (posterior mean, deterministic) | prior (a N(0, I) draw)

    def __post_init__(self):
        if self.latent_dim < 0:
            raise ValueError(f"acvi.model.latent_dim must be >= 0, got {self.latent_dim}")
        if self.latent_kl_scale not in LATENT_KL_SCALES:
            raise ValueError(f"acvi.model.latent_kl_scale must be one of {LATENT_KL_SCALES}, got {self.latent_kl_scale!r}")
        if self.latent_test not in LATENT_TEST:
            raise ValueError(f"acvi.model.latent_test must be one of {LATENT_TEST}, got {self.latent_test!r}")


LATENT_KL_SCALES = ("per_step", "per_sequence")
LATENT_TEST = ("mean", "prior")


class PointerGenerator(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        H, E, D = cfg.hidden_dim, cfg.emb_dim, 2 * cfg.hidden_dim
        self.embedding = nn.Embedding(cfg.vocab_size, E, padding_idx=0)      # shared by encoder and decoder
        self.encoder = nn.LSTM(E, H, batch_first=True, bidirectional=True)
        self.reduce_h = nn.Linear(D, H)
        self.reduce_c = nn.Linear(D, H)
        self.input_feed = nn.Linear(E + D, E)
        self.decoder = nn.LSTMCell(E, H)
        self.scores = AdditiveScores(D, 2 * H, cfg.attn_dim)
        self.attention = make_attention(cfg.attention, D, cfg.gumbel_tau, emb_dim=E, attn_dim=cfg.attn_dim)
        self.V = nn.Linear(H + D + cfg.latent_dim, H)                          # eq. 66: V [s_t; c_t (; xi)] + b
        self.V_out = nn.Linear(H, cfg.vocab_size)                               # V' . + b'
        self.w_gen = nn.Linear(D + 2 * H + E, 1)                                # eq. 67: w_c, w_s, w_x, b_ptr
        self.drop = nn.Identity()                                               # no regularization (T §7.4.1)
        # VED: dense layers over the final BiLSTM state -> posterior mean and log sigma (created last, so a model
        # without a latent initialises exactly as before)
        self.posterior = GaussianHead(D, cfg.latent_dim) if cfg.latent_dim > 0 else None

    # ---------------------------------------------------------------------------------------------- encoder
    def encode(self, src: torch.Tensor, src_len: torch.Tensor):
        """h (B, N, 2H), mask (B, N), initial decoder state."""
        emb = self.embedding(src)
        packed = nn.utils.rnn.pack_padded_sequence(emb, src_len.cpu(), batch_first=True, enforce_sorted=False)
        out, (h_n, c_n) = self.encoder(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        mask = torch.arange(src.shape[1], device=src.device)[None, :] < src_len[:, None]
        h0 = F.relu(self.reduce_h(torch.cat([h_n[0], h_n[1]], -1)))
        c0 = F.relu(self.reduce_c(torch.cat([c_n[0], c_n[1]], -1)))
        return h, mask, (h0, c0)

    def encode_batch(self, batch: dict, rows: slice = slice(None)):
        """encode() on the batch's rows (the video captioner encodes frame features instead)."""
        src_len = batch["src_len"][rows]
        return self.encode(batch["src"][rows][:, : int(src_len.max())], src_len)

    def memory(self, h, mask, sample: bool = False):
        """Everything per source sequence that decoding steps reuse. With a latent (VED): xi (B, latent_dim), drawn
        from q(xi | x) when `sample` (training), else by cfg.latent_test; latent_kl (B,) = KL(q || N(0, I))."""
        comps = self.attention.components(h) if hasattr(self.attention, "components") else None
        mem = {"h": h, "mask": mask, "Wh_h": self.scores.W_h(h), "comps": comps, "xi": None, "latent_kl": None}
        if self.posterior is not None:
            mu, log_sigma = self.posterior(final_state(h, mask))
            mem["latent_kl"] = kl_normal(mu, log_sigma).sum(-1)                    # prior N(0, I)
            if sample:
                mem["xi"] = reparameterize(mu, log_sigma)
            elif self.cfg.latent_test == "prior":
                mem["xi"] = torch.randn_like(mu)
            else:
                mem["xi"] = mu
        return mem

    # ------------------------------------------------------------------------------------------- one step
    def output_distribution(self, h_dec, s_t, x_t, c_t, copy_weights, src_ext, n_oov: int, xi=None) -> torch.Tensor:
        """P_t over the extended vocabulary (eqs. 66-68); copy_weights is a_t (or a one-hot alignment); xi the VED
        latent (B, latent_dim) or None."""
        feats = [self.drop(h_dec), c_t] + ([xi] if xi is not None else [])
        P_vocab = torch.softmax(self.V_out(torch.tanh(self.V(torch.cat(feats, -1)))), -1)          # eq. 66
        if not self.cfg.pointer:
            return P_vocab
        p_gen = torch.sigmoid(self.w_gen(torch.cat([c_t, s_t, x_t], -1)))                          # eq. 67
        P_t = p_gen * P_vocab
        if n_oov > 0:
            P_t = torch.cat([P_t, P_t.new_zeros(P_t.shape[0], n_oov)], -1)
        return P_t.scatter_add(1, src_ext, (1 - p_gen) * copy_weights)                             # eq. 68

    def step(self, y_prev, state, c_prev, k_t, mem, src_ext, n_oov: int, *, coverage: bool, sample: bool,
             gumbel: bool = False, n_samples: int = 1, y_target=None):
        """One decoder step. Returns (P_t over the extended vocabulary (B, V + n_oov), new state, c_t, a_t, kl_t).

        n_samples > 1 (ACVI decoding, thesis eq. 88): P_t and a_t are averaged over K sampled context vectors;
        the state fed forward uses their mean. y_target (training) is needed by variational attention only."""
        x_t = self.input_feed(torch.cat([self.embedding(y_prev), c_prev], -1))
        h_dec, c_dec = self.decoder(x_t, state)
        s_t = torch.cat([h_dec, c_dec], -1)
        e_t = self.scores(mem["Wh_h"], s_t, k_t if coverage else None)                        # eq. 63 / 70
        if isinstance(self.attention, VariationalAttention) and y_target is not None and sample:
            P_t, c_t, a_t, kl_t = self.variational_step(e_t, mem, h_dec, s_t, x_t, src_ext, n_oov, y_target)
            return P_t, (h_dec, c_dec), c_t, a_t, kl_t
        kw = {"comps": mem["comps"]} if mem["comps"] is not None else {}
        P_sum, c_sum, a_sum, kl_sum = 0.0, 0.0, 0.0, 0.0
        for _ in range(n_samples):
            c_t, a_t, kl_t = self.attention(e_t, mem["h"], mem["mask"], sample=sample, gumbel=gumbel, **kw)
            P_t = self.output_distribution(h_dec, s_t, x_t, c_t, a_t, src_ext, n_oov, mem["xi"])
            P_sum, c_sum, a_sum, kl_sum = P_sum + P_t, c_sum + c_t, a_sum + a_t, kl_sum + kl_t
        K = n_samples
        return P_sum / K, (h_dec, c_dec), c_sum / K, a_sum / K, kl_sum / K

    def variational_step(self, e_t, mem, h_dec, s_t, x_t, src_ext, n_oov, y_target):
        """Training step of variational attention: z ~ q, P(y | z), KL(q || p) and a REINFORCE surrogate whose
        value is 0 and whose gradient is (nll_z - baseline) grad log q(z); baseline = nll of the soft context
        under q. Returns (P_t, c_t, prior a_t for coverage, kl_t)."""
        h, mask = mem["h"], mem["mask"]
        a_p = masked_softmax(e_t, mask)                                                            # prior
        y_in = y_target.masked_fill(y_target >= self.cfg.vocab_size, UNK_ID)
        q = self.attention.posterior(e_t, h, mask, self.embedding(y_in))
        z = torch.multinomial(q.detach(), 1)                                                       # (B, 1)
        one = torch.zeros_like(q).scatter_(1, z, 1.0)
        c_z = torch.bmm(one.unsqueeze(1), h).squeeze(1)
        P_z = self.output_distribution(h_dec, s_t, x_t, c_z, one, src_ext, n_oov, mem["xi"])
        gold = (y_target if self.cfg.pointer else y_in)[:, None]
        with torch.no_grad():
            c_soft = torch.bmm(q.unsqueeze(1), h).squeeze(1)
            P_soft = self.output_distribution(h_dec, s_t, x_t, c_soft, q, src_ext, n_oov, mem["xi"])
            advantage = (torch.log(P_soft.gather(1, gold) + 1e-12)
                         - torch.log(P_z.gather(1, gold) + 1e-12)).squeeze(1)                 # nll_z - nll_soft
        log_qz = torch.log(q.gather(1, z).squeeze(1).clamp_min(1e-20))
        surrogate = advantage * (log_qz - log_qz.detach())
        return P_z, c_z, a_p, categorical_kl(q, a_p) + surrogate

    # -------------------------------------------------------------------------------------------- training
    def forward(self, batch: dict, *, coverage: bool = False, sample: bool = True, gumbel: bool = False) -> dict:
        """Teacher-forced loss: mean over steps and examples of -log P_t(w_t*) (+ lambda cov_t) (+ KL_t), plus for VED
        kl_weight x KL(q(xi|x) || N(0, I)) scaled by cfg.latent_kl_scale (reported as latent_kl)."""
        h, mask, state = self.encode_batch(batch)
        mem = self.memory(h, mask, sample=sample)
        B, T = batch["dec_in"].shape
        c_t = h.new_zeros(B, h.shape[-1])
        k_t = h.new_zeros(B, h.shape[1])
        nll, cov, kl = [], [], []
        for t in range(T):
            P_t, state, c_t, a_t, kl_t = self.step(batch["dec_in"][:, t], state, c_t, k_t, mem, batch.get("src_ext"),
                                                   batch.get("n_oov", 0), coverage=coverage, sample=sample,
                                                   gumbel=gumbel, y_target=batch["target"][:, t])
            gold = batch["target"][:, t]
            if not self.cfg.pointer:                    # plain seq2seq: a copied OOV target is just [UNK]
                gold = gold.masked_fill(gold >= self.cfg.vocab_size, UNK_ID)
            nll.append(-torch.log(P_t.gather(1, gold[:, None]).squeeze(1) + 1e-12))
            cov.append(coverage_loss(a_t, k_t))                                                    # eq. 71
            kl.append(kl_t)
            k_t = k_t + a_t                                                                          # eq. 69
        step_mask = (torch.arange(T, device=h.device)[None, :] < batch["dec_len"][:, None]).float()
        n = step_mask.sum(1)

        def avg(xs):
            return ((torch.stack(xs, 1) * step_mask).sum(1) / n).mean()

        out = {"nll": avg(nll), "coverage": avg(cov), "kl": avg(kl)}
        loss = out["nll"] + self.cfg.kl_weight * out["kl"]
        if mem["latent_kl"] is not None:
            per = mem["latent_kl"] / n if self.cfg.latent_kl_scale == "per_step" else mem["latent_kl"]
            out["latent_kl"] = per.mean()
            loss = loss + self.cfg.kl_weight * out["latent_kl"]
        if coverage:
            loss = loss + self.cfg.cov_lambda * out["coverage"]
        out["loss"] = loss
        return out


def final_state(h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The final BiLSTM state vector [h_fwd_N; h_bwd_1] (B, 2H), read from the outputs h (B, N, 2H): the forward
    half at each sequence's last real position, the backward half at position 0 (equal to the LSTM's h_n)."""
    H = h.shape[-1] // 2
    last = (mask.sum(1) - 1).clamp_min(0)
    fwd = h[torch.arange(h.shape[0], device=h.device), last, :H]
    return torch.cat([fwd, h[:, 0, H:]], -1)


def expand_memory(mem: dict, rows: int) -> dict:
    """A one-source memory repeated for `rows` beam hypotheses (they share h, the attention components and xi)."""
    def grow(x):
        if x is None:
            return None
        if isinstance(x, (tuple, list)):
            return type(x)(grow(v) for v in x)
        return x.expand(rows, *x.shape[1:])
    return {k: grow(v) for k, v in mem.items()}


def coverage_loss(a_t: torch.Tensor, k_t: torch.Tensor) -> torch.Tensor:
    """covloss_t = sum_i min(a_t^i, k_t^i) (thesis eq. 71 with c = the coverage k; reading B-8), (B,)."""
    return torch.minimum(a_t, k_t).sum(-1)
