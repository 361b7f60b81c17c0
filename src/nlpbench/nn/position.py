"""Position encoding of a sentence's words (MemN2N, shared by the memory networks and DMN+)."""

from __future__ import annotations

import torch


def position_weights(lengths: torch.Tensor, L: int, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Position encoding l_kj = (1 - j/J) - (k/d)(1 - 2j/J) (thesis ch. 3), split as l_kj = a_j + (k/d) b_j.

    `lengths` holds J (the sentence's own word count) for each sentence; returns a, b shaped lengths + (L,),
    zero on padding, so that sum_j l_j * A x_j = EB_a(A) + (k/d) * EB_b(A).
    """
    j = torch.arange(1, L + 1, device=lengths.device, dtype=torch.float32)
    J = lengths.unsqueeze(-1).clamp_min(1).to(torch.float32)
    present = j <= J
    a = torch.where(present, 1 - j / J, 0.0)
    b = torch.where(present, 2 * j / J - 1, 0.0)
    return a, b


def position_weights_code(widths: torch.Tensor, L: int, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The position encoding of the MemN2N code the Tolias thesis built on (its footnote 5):
    l_kj = 1 + 4 (k - (d+1)/2) (j - (J+1)/2) / ((d+1)(J+1)), with J the data's padded sentence length (`widths`,
    one per sentence) instead of the sentence's own; that is 2 (1 - j/J') - 2 (k/d')(1 - 2j/J') with J' = J + 1,
    d' = d + 1. Split as l_kj = a_j + (k/d) b_j, shaped widths + (L,), zero past J.

    (This is the form an earlier reading derived; the code as published divides by d J and counts the time-word
    slot in J: `position_weights_code_published`.)"""
    j = torch.arange(1, L + 1, device=widths.device, dtype=torch.float32)
    J = widths.unsqueeze(-1).clamp_min(1).to(torch.float32)
    present = j <= J
    a = torch.where(present, 2 - 2 * j / (J + 1), 0.0)
    b = torch.where(present, (2 * d / (d + 1)) * (2 * j / (J + 1) - 1), 0.0)
    return a, b


def position_weights_code_published(widths: torch.Tensor, L: int, d: int, time_slot: bool
                                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """The footnoted MemN2N code's position encoding as published:
    l_kj = 1 + 4 (k - (d+1)/2) (j - (J+1)/2) / (d J), k = 1..d, j = 1..J, where J is the padded sentence length
    (`widths`) plus one slot for the time word when `time_slot` (the code appends it to every sentence and gives
    it weight 1; our time rows are added apart, so only J carries the slot). Split as l_kj = a_j + (k/d) b_j:
    a_j = 1 - (2(d+1)/d)(j - c)/J and b_j = 4 (j - c)/J with c = (J+1)/2; shaped widths + (L,), zero past the
    padded length."""
    j = torch.arange(1, L + 1, device=widths.device, dtype=torch.float32)
    width = widths.unsqueeze(-1).clamp_min(1).to(torch.float32)
    J = width + 1 if time_slot else width
    c = (J + 1) / 2
    present = j <= width
    a = torch.where(present, 1 - (2 * (d + 1) / d) * (j - c) / J, 0.0)
    b = torch.where(present, 4 * (j - c) / J, 0.0)
    return a, b
