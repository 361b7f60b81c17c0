"""Weight matrices of K runs stacked on a leading axis: each run owns only some rows (its vocabulary)."""

from __future__ import annotations

import torch


def flat_row_index(rows: list[torch.Tensor], V: int) -> torch.Tensor:
    """Row ids of every run's own rows in the flattened (K * V) matrix, run after run."""
    return torch.cat([r + k * V for k, r in enumerate(rows)])


def run_of_rows(rows: list[int], device=None) -> torch.Tensor:
    """The run of every row of per-run blocks stacked run after run (run k has rows[k] rows)."""
    return torch.repeat_interleave(torch.arange(len(rows), device=device), torch.tensor(rows, device=device))


def scatter_rows(noise: torch.Tensor, flat_rows: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Per-run noise, stacked run after run (sum_k rows_k, d), placed at each run's own rows of a zero
    (K, V, d) tensor in one differentiable index_put (a run's noise comes from its own generator, so
    grouping never changes it)."""
    K, V, d = shape
    flat = torch.zeros(K * V, d, device=flat_rows.device, dtype=noise.dtype)
    return flat.index_put((flat_rows,), noise).view(K, V, d)


def draws_index(rows: list[torch.Tensor], V: int, n: int) -> torch.Tensor:
    """Row ids in the flattened (n * K * V) stack of n draws of every run's own rows, in the order of noise
    drawn run after run with each run's n draws one after another (one generator call per run fills them).
    n = 1 is flat_row_index."""
    K = len(rows)
    draws = torch.arange(n).view(n, 1) * (K * V)
    return torch.cat([(draws + (r + k * V).view(1, -1)).reshape(-1) for k, r in enumerate(rows)])


def as_slots(x: torch.Tensor) -> torch.Tensor:
    """Matrices stacked on any leading axes (runs, or runs x matrices), lead + (V, d), as (slots, V, d)."""
    return x.reshape((-1,) + tuple(x.shape[-2:]))
