"""Similarity functions phi(h_i, u_j) -> s_ij (Eq. 3.9): Table 4.1 and T-trilinear (§4.3, Eqs. 4.1-4.3).

Every module maps H (B, M, D) and U (B, N, D) to S (B, M, N). h_i, u_j in R^D (D = 200 at paper scale, the
biLSTM output). Lower-case w are trainable vectors, upper-case W trainable matrices, f = ReLU. Internal sizes
the thesis leaves open (D_a, D') are D [D]. No biases unless the thesis writes one.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def _vector(D: int) -> nn.Parameter:
    """A trainable vector w in R^D, initialised like nn.Linear(D, 1)."""
    bound = 1.0 / math.sqrt(D)
    return nn.Parameter(torch.empty(D).uniform_(-bound, bound))


def _matrix(rows: int, cols: int) -> nn.Linear:
    return nn.Linear(cols, rows, bias=False)


def _trilinear(h: Tensor, u: Tensor, w_p: Tensor, w_q: Tensor, w_pq: Tensor) -> Tensor:
    # w_p.h_i + w_q.u_j + w_pq.(h_i o u_j)
    return (h @ w_p)[:, :, None] + (u @ w_q)[:, None, :] + (h * w_pq) @ u.transpose(1, 2)


class Trilinear(nn.Module):
    """#1 trilinear: w_p.h_i + w_q.u_j + w_pq.(h_i o u_j) (BiDAF, QANet, DocQA)."""

    def __init__(self, D: int):
        super().__init__()
        self.w_p, self.w_q, self.w_pq = _vector(D), _vector(D), _vector(D)

    def forward(self, h: Tensor, u: Tensor) -> Tensor:
        return _trilinear(h, u, self.w_p, self.w_q, self.w_pq)


class FNN(nn.Module):
    """#2 FNN: w_phi . tanh(W_p h_i + W_q u_j). Materialises (B, M, N, D_a)."""

    def __init__(self, D: int):
        super().__init__()
        self.W_p, self.W_q, self.w_phi = _matrix(D, D), _matrix(D, D), _vector(D)

    def forward(self, h: Tensor, u: Tensor) -> Tensor:
        return torch.tanh(self.W_p(h)[:, :, None, :] + self.W_q(u)[:, None, :, :]) @ self.w_phi


class ConcatFNN(nn.Module):
    """#3 concat-FNN (Bahdanau): w_phi . tanh(W_p [h_i; u_j]), the pairs concatenated explicitly (B, M, N, 2D)."""

    def __init__(self, D: int):
        super().__init__()
        self.W_p, self.w_phi = _matrix(D, 2 * D), _vector(D)

    def forward(self, h: Tensor, u: Tensor) -> Tensor:
        M, N = h.shape[1], u.shape[1]
        pairs = torch.cat([h[:, :, None, :].expand(-1, -1, N, -1), u[:, None, :, :].expand(-1, M, -1, -1)], dim=-1)
        return torch.tanh(self.W_p(pairs)) @ self.w_phi


class Bilinear(nn.Module):
    """#4 bilinear*: w_p.h_i + w_q.u_j (no interaction term; its h-part cancels in the row softmax)."""

    def __init__(self, D: int):
        super().__init__()
        self.w_p, self.w_q = _vector(D), _vector(D)

    def forward(self, h: Tensor, u: Tensor) -> Tensor:
        return (h @ self.w_p)[:, :, None] + (u @ self.w_q)[:, None, :]


class DotProduct(nn.Module):
    """#5 dot-product: h_i^T u_j."""

    def __init__(self, D: int):
        super().__init__()

    def forward(self, h: Tensor, u: Tensor) -> Tensor:
        return h @ u.transpose(1, 2)


class Cosine(nn.Module):
    """#6 cosine: h_i^T u_j / (||h_i|| ||u_j||), eps on the norms [D]."""

    def __init__(self, D: int, eps: float = 1e-8):
        super().__init__()
        self.eps = eps

    def forward(self, h: Tensor, u: Tensor) -> Tensor:
        return F.normalize(h, dim=-1, eps=self.eps) @ F.normalize(u, dim=-1, eps=self.eps).transpose(1, 2)


class ScaledDotProduct(nn.Module):
    """#7 scaled dot-product: h_i^T u_j / sqrt(d), d = D [D]."""

    def __init__(self, D: int):
        super().__init__()
        self.scale = 1.0 / math.sqrt(D)

    def forward(self, h: Tensor, u: Tensor) -> Tensor:
        return (h @ u.transpose(1, 2)) * self.scale


class General1(nn.Module):
    """#8 general-1: h_i^T W u_j."""

    def __init__(self, D: int):
        super().__init__()
        self.W = _matrix(D, D)

    def forward(self, h: Tensor, u: Tensor) -> Tensor:
        return h @ self.W(u).transpose(1, 2)


class General2(nn.Module):
    """#9 general-2: (W_1 h_i)^T (W_2 u_j)."""

    def __init__(self, D: int):
        super().__init__()
        self.W_1, self.W_2 = _matrix(D, D), _matrix(D, D)

    def forward(self, h: Tensor, u: Tensor) -> Tensor:
        return self.W_1(h) @ self.W_2(u).transpose(1, 2)


class General3(General2):
    """#10 general-3 (SAN): <f(W_1 h_i), f(W_2 u_j)>, f = ReLU."""

    def forward(self, h: Tensor, u: Tensor) -> Tensor:
        return F.relu(self.W_1(h)) @ F.relu(self.W_2(u)).transpose(1, 2)


class Hadamard(nn.Module):
    """#11 Hadamard: w^T (h_i o u_j)."""

    def __init__(self, D: int):
        super().__init__()
        self.w = _vector(D)

    def forward(self, h: Tensor, u: Tensor) -> Tensor:
        return (h * self.w) @ u.transpose(1, 2)


class TTrilinear(nn.Module):
    """#12 T-trilinear: h^t_i = ReLU(W_1 h_i + b_1) (4.1), u^t_j = ReLU(W_2 u_j + b_2) (4.2, u_i read as u_j),
    s_ij = w_p.h^t_i + w_q.u^t_j + w_pq.(h^t_i o u^t_j) (4.3). The transformed vectors serve only S."""

    def __init__(self, D: int):
        super().__init__()
        self.W_1, self.W_2 = nn.Linear(D, D), nn.Linear(D, D)
        self.w_p, self.w_q, self.w_pq = _vector(D), _vector(D), _vector(D)

    def forward(self, h: Tensor, u: Tensor) -> Tensor:
        h_t, u_t = F.relu(self.W_1(h)), F.relu(self.W_2(u))
        return _trilinear(h_t, u_t, self.w_p, self.w_q, self.w_pq)


SIMILARITIES: dict[str, type[nn.Module]] = {
    "trilinear": Trilinear,
    "FNN": FNN,
    "concat-FNN": ConcatFNN,
    "bilinear": Bilinear,
    "dot-product": DotProduct,
    "cosine": Cosine,
    "scaled dot-product": ScaledDotProduct,
    "general-1": General1,
    "general-2": General2,
    "general-3": General3,
    "Hadamard": Hadamard,
    "T-trilinear": TTrilinear,
}
# Table 4.1's grouping (Table 4.2 rows in this order).
ADDITIVE = ("bilinear", "trilinear", "FNN", "concat-FNN")
MULTIPLICATIVE = ("dot-product", "cosine", "scaled dot-product", "general-1", "general-2", "general-3", "Hadamard")


def make_similarity(name: str, D: int) -> nn.Module:
    if name not in SIMILARITIES:
        raise ValueError(f"unknown similarity {name!r}; known: {', '.join(SIMILARITIES)}")
    return SIMILARITIES[name](D)
