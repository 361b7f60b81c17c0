"""KL-weight annealing (thesis §4.6.1, §4.6.4, Eqs. 4.15-4.18) and word-dropout (thesis
§4.6.2) schedules, as pure functions of the training iteration, chosen by config strings.

KL weight λ_i, i = minibatch updates counted from 1 across epochs (λ_0 is defined too):
    const-<λ>       λ_i = λ  (alias none-<λ>)      (ADAM-NoAnneal-1.0λ: const-1.0, -0.001λ: const-0.001, DAE: const-0)
    tanh-<stop>     λ_i = (tanh((min(i, stop) - 4500) / 1000) + 1) / 2      Eq. 4.17, held after `stop`
    linear-<stop>   λ_i = min(i, stop) / 200000                              Eq. 4.18, held after `stop`
    tanh, linear    the same, never held (linear capped at 1): the "annealing not stopped" run S7
Word-dropout rate p (decoder inputs -> <unk>), e = 1-indexed epoch of iteration i:
    none            p = 0                          (NoAnneal variants, DAE, evaluation)
    const-<p>       p constant                     (the authors' code: const-0.25)
    epoch-<s>-<m>   p_e = min(s (e - 1), m)        thesis: epoch-0.05-0.5 (alias "thesis")
    iter-<n>-<s>-<m>  the same with an "epoch" of n iterations, whatever the data size: iter-2438-0.05-0.5 is the
                    thesis's p as a function of the iteration (78k sentences / 32 = 2,438 iterations per epoch),
                    for runs on less data that keep the thesis's number of updates
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch

TANH_CENTER, TANH_SCALE = 4500.0, 1000.0  # Eq. 4.17
LINEAR_DENOMINATOR = 200_000.0  # Eq. 4.18

_NUMBER = r"(\d+(?:\.\d*)?(?:e-?\d+)?)"
_KL_FORMS = "const-<λ> (or none-<λ>), tanh-<stop>, linear-<stop>, tanh or linear (e.g. tanh-3000)"
_WD_FORMS = "none, const-<p>, epoch-<step>-<max>, iter-<n>-<step>-<max> or thesis (= epoch-0.05-0.5)"


class ScheduleError(ValueError):
    """A schedule string that names no known schedule, or has out-of-range values."""


def _check_iteration(iteration: int) -> None:
    if iteration < 0:
        raise ValueError(f"iteration must be >= 0, got {iteration}")


@dataclass(frozen=True)
class KLSchedule:
    """λ as a function of the iteration; `kind` is const, tanh or linear; `stop` None = never held."""

    kind: str
    value: float = 0.0
    stop: int | None = None

    def __call__(self, iteration: int) -> float:
        _check_iteration(iteration)
        if self.kind == "const":
            return self.value
        i = iteration if self.stop is None else min(iteration, self.stop)
        if self.kind == "tanh":
            return (math.tanh((i - TANH_CENTER) / TANH_SCALE) + 1.0) / 2.0
        return min(i / LINEAR_DENOMINATOR, 1.0)


def kl_schedule(name: str, key: str = "kl_schedule") -> KLSchedule:
    """Parse a KL-annealing config string (see the module doc); ScheduleError names `key` and `name`."""
    spec = name.strip().lower()
    if m := re.fullmatch(rf"(?:const|none)-{_NUMBER}", spec):
        return KLSchedule("const", float(m.group(1)))
    if m := re.fullmatch(r"(tanh|linear)(?:-(\d+))?", spec):
        stop = int(m.group(2)) if m.group(2) else None
        if stop == 0:
            raise ScheduleError(f"{key}: {name!r}: the stop iteration must be positive")
        return KLSchedule(m.group(1), stop=stop)
    raise ScheduleError(f"{key}: unknown KL annealing schedule {name!r}; expected {_KL_FORMS}")


def kl_weight(name: str, iteration: int) -> float:
    """λ at `iteration` under the schedule `name`."""
    return kl_schedule(name)(iteration)


@dataclass(frozen=True)
class WordDropoutSchedule:
    """Word-dropout rate per epoch, and per iteration given the iterations per epoch."""

    step: float = 0.0  # added at the end of every epoch
    start: float = 0.0
    maximum: float = 0.0
    every: int | None = None  # iterations per "epoch" of the schedule; None = the data's epoch

    def rate_for_epoch(self, epoch: int) -> float:
        """p for the 1-indexed `epoch`: min(start + step (epoch - 1), maximum)."""
        if epoch < 1:
            raise ValueError(f"epoch is 1-indexed, got {epoch}")
        return round(min(self.start + self.step * (epoch - 1), self.maximum), 12)

    def __call__(self, iteration: int, iters_per_epoch: int) -> float:
        """p at minibatch `iteration` (1 = first update; 0 counts as the first epoch too)."""
        _check_iteration(iteration)
        if iters_per_epoch < 1:
            raise ValueError(f"iters_per_epoch must be >= 1, got {iters_per_epoch}")
        return self.rate_for_epoch(max(iteration - 1, 0) // (self.every or iters_per_epoch) + 1)


def word_dropout_schedule(name: str, key: str = "word_dropout") -> WordDropoutSchedule:
    """Parse a word-dropout config string (see the module doc); ScheduleError names `key` and `name`."""
    spec = name.strip().lower()
    if spec == "none":
        return WordDropoutSchedule()
    if spec == "thesis":
        spec = "epoch-0.05-0.5"
    if m := re.fullmatch(rf"const-{_NUMBER}", spec):
        p = float(m.group(1))
        schedule = WordDropoutSchedule(0.0, p, p)
    elif m := re.fullmatch(rf"epoch-{_NUMBER}-{_NUMBER}", spec):
        schedule = WordDropoutSchedule(float(m.group(1)), 0.0, float(m.group(2)))
    elif m := re.fullmatch(rf"iter-(\d+)-{_NUMBER}-{_NUMBER}", spec):
        if int(m.group(1)) < 1:
            raise ScheduleError(f"{key}: {name!r}: the iterations per step must be positive")
        schedule = WordDropoutSchedule(float(m.group(2)), 0.0, float(m.group(3)), int(m.group(1)))
    else:
        raise ScheduleError(f"{key}: unknown word-dropout schedule {name!r}; expected {_WD_FORMS}")
    if not 0.0 <= schedule.maximum <= 1.0:
        raise ScheduleError(f"{key}: {name!r}: a dropout rate must lie in [0, 1]")
    return schedule


def apply_word_dropout(inputs: torch.Tensor, p: float, unk_id: int, protected_ids: tuple[int, ...],
                       generator: torch.Generator | None = None) -> torch.Tensor:
    """Replace each decoder-input token by `unk_id` with probability `p` (§4.6.2), never those in
    `protected_ids` (pass <s> and <pad>); the encoder input is never given to this function."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"word-dropout rate must lie in [0, 1], got {p}")
    if p == 0.0:
        return inputs
    draw = torch.rand(inputs.shape, generator=generator, device=inputs.device) < p
    keep = torch.isin(inputs, torch.tensor(protected_ids, dtype=inputs.dtype, device=inputs.device))
    return torch.where(draw & ~keep, torch.full_like(inputs, unk_id), inputs)
