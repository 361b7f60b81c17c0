"""Progress of a long loop, for the training logs: 'epoch k/N, elapsed 3m05s, remaining ~9m10s'."""

from __future__ import annotations

import time


def duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


class Progress:
    """Counts units of work (epochs) done in this process against a total and projects the rest from their
    mean time. `start` is how many units were done before this process (a resumed run)."""

    def __init__(self, total: int, start: int = 0, unit: str = "epoch"):
        self.total, self.start, self.unit = total, start, unit
        self.t0 = time.perf_counter()

    def line(self, done: int, at_most: bool = False) -> str:
        """`done` units of `total` finished; `at_most` when the total is an upper bound (early stopping)."""
        elapsed = time.perf_counter() - self.t0
        here = done - self.start
        remaining = elapsed / here * (self.total - done) if here > 0 else float("nan")
        eta = "?" if remaining != remaining else f"{'at most ' if at_most else '~'}{duration(remaining)}"
        return f"{self.unit} {done}/{self.total}, elapsed {duration(elapsed)}, remaining {eta}"
