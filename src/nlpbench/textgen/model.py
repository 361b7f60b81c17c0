"""The LSTM sequence-to-sequence core of the Bahuleyan thesis (seed 001, chs. 3-6), one module for every model.

Which model it is follows from four config values (params.yaml `textgen.settings.<corpus>.model`):

* ``latent``: a Gaussian sentence latent z ~ q(z|x) = N(mu, diag sigma^2), mu and log sigma linear in the
  encoder's final hidden state (§6.4.1), concatenated to the decoder input at every step (Eq. 6.2);
* ``hidden_init``: the decoder starts from the encoder's final (h, c) (Eqs. 3.2; the "bypass" of ch. 5, and DED);
  otherwise from zeros;
* ``attention``: none | deterministic (Luong multiplicative, Eqs. 6.3-6.8) | variational (§6.4: c_j ~ N(c_j^det,
  sigma_cj^2), sigma_cj from a tanh layer and a linear layer on c_j^det, prior N(0, I) or N(h_bar, I));
* ``deterministic_latent``: z = mu with no sigma (the other reading of the deterministic AE, reading A5).

So: the VAEs of ch. 4 = latent; the bypass VAE = latent + hidden_init; DED = hidden_init; DED+DAttn =
hidden_init + deterministic attention; VED+DAttn = latent + deterministic; VED+VAttn = latent + variational.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nlpbench.nn.gaussian import GaussianHead, kl_normal, reparameterize

ATTENTIONS = ("none", "deterministic", "variational")
ATTENTION_PRIORS = ("zero", "hbar")


@dataclass
class Seq2SeqConfig:
    vocab_size: int
    emb_dim: int = 300
    hidden: int = 100                 # LSTM units of the encoder (per direction) and decoder (§4.6.3, §6.5.2)
    latent_dim: int = 100
    latent: bool = True
    deterministic_latent: bool = False
    hidden_init: bool = False
    attention: str = "none"
    attention_prior: str = "hbar"
    input_feeding: bool = False       # A13: Eq. 6.2 feeds y_{j-1} and z only (thesis); True: a_{j-1} too ([C])
    attention_tanh: bool = True       # a_j = tanh(W_c [c_j; h_j]) (Eq. 6.7); False: linear, as [C]
    bidirectional: bool = False       # reading A4
    input_dropout: float = 0.0        # dropout on the LSTM inputs ([C]: keep 0.8)
    trainable_embeddings: bool = False
    pad_id: int = 0
    bos_id: int = 2
    eos_id: int = 3

    def __post_init__(self) -> None:
        if self.attention not in ATTENTIONS:
            raise ValueError(f"model.attention: {self.attention!r} is not one of {ATTENTIONS}")
        if self.attention_prior not in ATTENTION_PRIORS:
            raise ValueError(f"model.attention_prior: {self.attention_prior!r} is not one of {ATTENTION_PRIORS}")


@dataclass
class Encoded:
    outputs: torch.Tensor      # h_i^(src), (B, S, E)
    h: torch.Tensor            # final hidden state (B, E)
    c: torch.Tensor            # final cell state (B, E)
    mask: torch.Tensor         # (B, S) True at real source positions
    h_bar: torch.Tensor        # mean of the source hidden states (B, E), the N(h_bar, I) prior's mean (§6.4.1)


class TextSeq2Seq(nn.Module):
    """Encoder LSTM, optional latent z, decoder LSTM with optional (variational) attention, softmax output."""

    def __init__(self, cfg: Seq2SeqConfig, embeddings: torch.Tensor | None = None):
        super().__init__()
        self.cfg = cfg
        V, E, H = cfg.vocab_size, cfg.emb_dim, cfg.hidden
        # separate encoder and decoder embedding matrices, both initialised from the same word2vec ([C], §3.4)
        self.enc_emb = nn.Embedding(V, E, padding_idx=cfg.pad_id)
        self.dec_emb = nn.Embedding(V, E, padding_idx=cfg.pad_id)
        if embeddings is not None:
            if tuple(embeddings.shape) != (V, E):
                raise ValueError(f"embeddings of shape {tuple(embeddings.shape)}, expected {(V, E)}")
            with torch.no_grad():
                self.enc_emb.weight.copy_(embeddings)
                self.dec_emb.weight.copy_(embeddings)
        for emb in (self.enc_emb, self.dec_emb):
            emb.weight.requires_grad_(cfg.trainable_embeddings)
        self.drop = nn.Dropout(cfg.input_dropout)
        self.encoder = nn.LSTM(E, H, batch_first=True, bidirectional=cfg.bidirectional)   # Eqs. 2.3-2.8
        self.enc_dim = H * (2 if cfg.bidirectional else 1)
        self.dec_dim = self.enc_dim            # so that hidden-state initialisation fits (a 200-d decoder when bi)
        if cfg.latent:
            self.z_head = GaussianHead(self.enc_dim, cfg.latent_dim)                      # mu_z, log sigma_z
        dec_in = E + (cfg.latent_dim if cfg.latent else 0)
        if cfg.attention != "none":
            if cfg.input_feeding:
                dec_in += self.dec_dim
            self.W = nn.Linear(self.enc_dim, self.dec_dim, bias=False)                   # Eq. 6.4
            if cfg.attention == "variational":
                self.c_head = GaussianHead(self.enc_dim, self.enc_dim, mean="identity", sigma_hidden=self.enc_dim)
            self.W_c = nn.Linear(self.enc_dim + self.dec_dim, self.dec_dim, bias=False)  # Eq. 6.7
        self.decoder = nn.LSTM(dec_in, self.dec_dim, batch_first=True)
        self.W_out = nn.Linear(self.dec_dim, V)                                          # Eqs. 3.3, 6.8

    # -- encoder and latent ------------------------------------------------------------------------------------
    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> Encoded:
        emb = self.drop(self.enc_emb(src))
        packed = pack_padded_sequence(emb, src_len.cpu(), batch_first=True, enforce_sorted=False)
        out, (h, c) = self.encoder(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        if self.cfg.bidirectional:
            h, c = torch.cat([h[0], h[1]], dim=-1), torch.cat([c[0], c[1]], dim=-1)
        else:
            h, c = h[0], c[0]
        mask = torch.arange(src.shape[1], device=src.device)[None, :] < src_len.to(src.device)[:, None]
        h_bar = (out * mask[..., None]).sum(1) / src_len.to(out.device, out.dtype)[:, None]
        return Encoded(out, h, c, mask, h_bar)

    def posterior(self, enc: Encoded) -> tuple[torch.Tensor, torch.Tensor]:
        """mu_z and log sigma_z of q(z|x) (Fig. 4.4); sigma ~ 0 for the deterministic-bottleneck AE (A5)."""
        mu, log_sigma = self.z_head(enc.h)
        if self.cfg.deterministic_latent:
            log_sigma = torch.full_like(mu, -30.0)   # sigma ~ 1e-13: z = mu
        return mu, log_sigma

    def sample_z(self, mu: torch.Tensor, log_sigma: torch.Tensor, scale: float,
                 generator: torch.Generator | None) -> torch.Tensor:
        """z = mu + scale * sigma * eps (Eq. 4.14): scale 0 = MAP, 1 = posterior sample, 3 = neighbourhood."""
        return reparameterize(mu, log_sigma, generator, scale)

    # -- decoder ----------------------------------------------------------------------------------------------
    def _init_state(self, enc: Encoded | None, batch: int, device) -> tuple[torch.Tensor, torch.Tensor]:
        if self.cfg.hidden_init:
            return enc.h[None].contiguous(), enc.c[None].contiguous()                    # h_1^(tar) = h^(src)
        zeros = torch.zeros(1, batch, self.dec_dim, device=device)
        return zeros, zeros

    def _attend(self, h: torch.Tensor, enc: Encoded, attention_on: bool, scale: float,
                generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention vectors a_j (B, T, D) for decoder outputs h (B, T, D), and the context KL per step (B, T)."""
        B, T, _ = h.shape
        kl = torch.zeros(B, T, device=h.device)
        if not attention_on:   # 2-stage training, phase 1: the context is masked, c_j = 0 (reading A14)
            c = torch.zeros(B, T, self.enc_dim, device=h.device)
        else:
            scores = torch.bmm(h, self.W(enc.outputs).transpose(1, 2))                  # Eq. 6.4: h_j^T W h_i
            scores = scores.masked_fill(~enc.mask[:, None, :], float("-inf"))
            alpha = torch.softmax(scores, dim=-1)                                        # Eq. 6.3
            c = torch.bmm(alpha, enc.outputs)                                            # Eq. 6.6, c_j^det
            if self.cfg.attention == "variational":
                mu_c, log_sigma_c = self.c_head(c)                                       # mu_cj = c_j^det
                prior_mu = enc.h_bar[:, None, :] if self.cfg.attention_prior == "hbar" else 0.0
                kl = kl_normal(mu_c, log_sigma_c, prior_mu, 0.0).sum(-1)                 # KL(q(c_j|x) || p(c_j))
                c = reparameterize(mu_c, log_sigma_c, generator, scale)
        a = self.W_c(torch.cat([c, h], dim=-1))
        return (torch.tanh(a) if self.cfg.attention_tanh else a), kl                     # Eq. 6.7

    def decode(self, enc: Encoded | None, z: torch.Tensor | None, dec_inputs: torch.Tensor,
               attention_on: bool = True, attn_scale: float = 1.0, generator: torch.Generator | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced decoding of dec_inputs (B, T) = <s> y_1 .. y_{T-1}: the vectors W_out reads (h_j, or a_j
        with attention; (B, T, D)) and the context KL per step (B, T)."""
        B, T = dec_inputs.shape
        emb = self.drop(self.dec_emb(dec_inputs))
        if z is not None:
            emb = torch.cat([emb, z[:, None, :].expand(B, T, z.shape[-1])], dim=-1)      # Eq. 6.2: z every step
        state = self._init_state(enc, B, dec_inputs.device)
        if self.cfg.attention == "none":
            h, _ = self.decoder(emb, state)
            return h, torch.zeros(B, T, device=h.device)
        if not self.cfg.input_feeding:
            h, _ = self.decoder(emb, state)
            return self._attend(h, enc, attention_on, attn_scale, generator)
        a_prev = torch.zeros(B, 1, self.dec_dim, device=emb.device)
        vectors, kls = [], []
        for j in range(T):
            h, state = self.decoder(torch.cat([emb[:, j:j + 1], a_prev], dim=-1), state)
            a_prev, kl = self._attend(h, enc, attention_on, attn_scale, generator)
            vectors.append(a_prev)
            kls.append(kl)
        return torch.cat(vectors, 1), torch.cat(kls, 1)

    def forward(self, src: torch.Tensor, src_len: torch.Tensor, dec_inputs: torch.Tensor,
                attention_on: bool = True, z_scale: float = 1.0, attn_scale: float = 1.0,
                generator: torch.Generator | None = None, targets: torch.Tensor | None = None) -> dict:
        """Training pass: logits (B, T, V), KL(q(z|x) || N(0, I)) per sentence (B,), context KL per step (B, T).

        With `targets`, the softmax is computed at the non-padded target positions only (the same loss, less
        work): the result then has "rec" = J_rec per sentence (summed cross entropy) and "n_tokens" instead of
        "logits"."""
        enc = self.encode(src, src_len)
        z, kl_z = None, torch.zeros(src.shape[0], device=src.device)
        if self.cfg.latent:
            mu, log_sigma = self.posterior(enc)
            z = self.sample_z(mu, log_sigma, z_scale, generator)
            if not self.cfg.deterministic_latent:
                kl_z = kl_normal(mu, log_sigma).sum(-1)     # -1/2 sum_d (1 + log sigma^2 - mu^2 - sigma^2), Eq. 4.13
        vectors, kl_c = self.decode(enc, z, dec_inputs, attention_on, attn_scale, generator)
        if targets is None:
            return {"logits": self.W_out(vectors), "kl_z": kl_z, "kl_c": kl_c}
        mask = targets != self.cfg.pad_id
        ce = nn.functional.cross_entropy(self.W_out(vectors[mask]), targets[mask], reduction="none")
        rows = torch.arange(targets.shape[0], device=targets.device)[:, None].expand_as(targets)[mask]
        rec = torch.zeros(targets.shape[0], device=ce.device, dtype=ce.dtype).index_add(0, rows, ce)
        return {"rec": rec, "n_tokens": mask.sum(1), "kl_z": kl_z, "kl_c": kl_c}

    # -- greedy generation (§1.11: argmax at every step, no beam) --------------------------------------------------
    @torch.no_grad()
    def generate(self, max_len: int, src: torch.Tensor | None = None, src_len: torch.Tensor | None = None,
                 z: torch.Tensor | None = None, z_scale: float = 0.0, attn_scale: float = 0.0,
                 attention_on: bool = True, generator: torch.Generator | None = None) -> torch.Tensor:
        """Greedy decoding, (B, max_len) ids. z is taken from q(z|x) at `z_scale` (0 = MAP) unless given
        (prior samples, interpolation); the encoder is skipped when nothing needs it."""
        needs_enc = self.cfg.hidden_init or self.cfg.attention != "none" or (self.cfg.latent and z is None)
        enc = self.encode(src, src_len) if needs_enc else None
        if self.cfg.latent and z is None:
            mu, log_sigma = self.posterior(enc)
            z = self.sample_z(mu, log_sigma, z_scale, generator)
        B = z.shape[0] if z is not None else src.shape[0]
        device = next(self.parameters()).device
        state = self._init_state(enc, B, device)
        y = torch.full((B, 1), self.cfg.bos_id, dtype=torch.long, device=device)
        a_prev = torch.zeros(B, 1, self.dec_dim, device=device)
        out = torch.full((B, max_len), self.cfg.pad_id, dtype=torch.long, device=device)
        done = torch.zeros(B, dtype=torch.bool, device=device)
        for j in range(max_len):
            x = self.dec_emb(y)
            if z is not None:
                x = torch.cat([x, z[:, None, :]], dim=-1)
            if self.cfg.attention != "none" and self.cfg.input_feeding:
                x = torch.cat([x, a_prev], dim=-1)
            h, state = self.decoder(x, state)
            if self.cfg.attention != "none":
                a_prev, _ = self._attend(h, enc, attention_on, attn_scale, generator)
                logits = self.W_out(a_prev)
            else:
                logits = self.W_out(h)
            y = logits.argmax(-1)
            out[:, j] = torch.where(done, torch.full_like(y[:, 0], self.cfg.pad_id), y[:, 0])
            done |= y[:, 0] == self.cfg.eos_id
            if bool(done.all()):
                break
        return out
