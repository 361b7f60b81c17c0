"""A training job's time over all of its attempts.

Snakemake's benchmark file times one call of a job. A job that was killed and then resumed from its checkpoints
also spent the earlier calls' time, so its benchmark alone says too little (a four-minute job resumed in its
last seconds would be recorded as seconds). `nlpbench train` keeps the job's running total beside its benchmark
file, logs/train/<job>.clock.json (clock_path; the rule's command stays as it was, so Snakemake sees no change in
the jobs it ran before): it reads what the earlier, unfinished attempts spent, and rewrites the total every
`every` seconds while it trains (a killed attempt loses at most that much) and once more when it stops. A
finished job's clock starts again from zero, so a job trained again from the start is timed afresh. A job that
took finished runs over from another group instead of training them (a family's `train` returns their training
seconds) records them as `taken_over_s`: a fresh clone trains them, so they are part of the group's cost. A job's
measured time is the larger of the benchmark and the clock's total (nlpbench.status.job_measurement).

A clock is checked whenever it is read: each duration a finite number of seconds from 0 to LONGEST_JOB, `finished`
true or false. A clock that is not one (hand-edited, damaged, from another tool) is named in one warning line and
counts as no time spent: the next attempt starts it again, and `nlpbench costs` takes the job's benchmark instead.
"""

from __future__ import annotations

import math
import threading
import time
import warnings
from pathlib import Path
from typing import NamedTuple

from nlpbench.runtime import io

TRAIN_LOGS = Path("logs") / "train"      # the training rules' logs and `benchmark:` files (pipeline/train.smk)
LONGEST_JOB = 366 * 24 * 3600.0        # a year: no job's attempts add up to more, so a clock that says more is wrong


def clock_path(logs: Path, job: str) -> Path:
    """Where a training job keeps its clock: beside its benchmark file."""
    return Path(logs) / f"{job}.clock.json"


class Recorded(NamedTuple):
    """What a job's clock holds."""
    seconds: float          # wall time of its attempts
    finished: bool
    taken_over: float       # training seconds of the finished runs it took over instead of training them

    @property
    def total(self) -> float:
        """The job's cost: what it spent plus what a fresh clone would spend on the runs it took over."""
        return self.seconds + self.taken_over


def duration_problem(value) -> str | None:
    """Why `value` is not a job's seconds (a finite int or float from 0 to LONGEST_JOB, not a bool); None if it is."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return f"{value!r} is not a number"
    if not math.isfinite(value) or not 0 <= value <= LONGEST_JOB:
        return f"{value!r} is not from 0 to {LONGEST_JOB:.0f} seconds (a year)"
    return None


def recorded(path: Path) -> Recorded | None:
    """The clock in `path` (finished or not), None where there is none; a one-line ValueError naming the file and
    the key of a clock that is not one (see the module's text)."""
    path = Path(path)
    if not path.exists():
        return None

    def bad(reason: str) -> ValueError:
        return ValueError(f"{path}: not a job clock ({reason}; expected "
                          '{"seconds": number, "finished": true or false})')
    try:
        state = io.read_json(path)
    except (ValueError, OSError) as e:           # not JSON (io.InputError names the file: once is enough), or unreadable
        raise bad(f"unreadable: {str(e).removeprefix(f'{path}: ')}") from None
    if not isinstance(state, dict):
        raise bad(f"a JSON {type(state).__name__}, not an object")
    for key in ("seconds", "finished"):
        if key not in state:
            raise bad(f"no {key!r}")
    if type(state["finished"]) is not bool:
        raise bad(f"'finished' is {state['finished']!r}, not true or false")
    for key in ("seconds", "taken_over_s"):
        if key in state and (problem := duration_problem(state[key])):
            raise bad(f"{key!r} {problem}")
    return Recorded(float(state["seconds"]), state["finished"], float(state.get("taken_over_s", 0.0)))


def readable(path: Path, otherwise: str) -> Recorded | None:
    """recorded(path), or None where the clock is not one, which a warning names (one line: the file, the key and
    `otherwise`, what happens instead)."""
    try:
        return recorded(path)
    except ValueError as e:
        warnings.warn(f"{e}; {otherwise}", stacklevel=2)
        return None


def spent_before(path: Path) -> float:
    """Seconds the unfinished earlier attempts recorded in `path`; 0 where there is none, the job finished, or the
    clock is not one (said in a warning: the clock starts again)."""
    state = readable(path, "the clock starts again from zero")
    return 0.0 if state is None or state.finished else state.seconds


class JobClock:
    """with JobClock(path) as clock: ...  keeps path's total while the block runs; finished when it ends without
    error. clock.take_over(seconds) records the training of runs the job took over instead of training them."""

    def __init__(self, path: Path, every: float = 30.0):
        self.path, self.every = Path(path), every
        self.taken_over = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def take_over(self, seconds: float | None) -> None:
        """Count `seconds` of training of runs taken over; a value that is no duration (a family read it from a
        damaged record) is named in a warning and not counted."""
        if seconds is None:
            return
        if problem := duration_problem(seconds) or duration_problem(self.taken_over + seconds):
            warnings.warn(f"{self.path}: taken-over training seconds not counted: {problem}", stacklevel=2)
            return
        self.taken_over += float(seconds)

    def _write(self, finished: bool) -> None:
        seconds = min(self.before + time.monotonic() - self.start, LONGEST_JOB)
        state = {"seconds": round(seconds, 1), "finished": finished}
        if self.taken_over:
            state["taken_over_s"] = round(self.taken_over, 1)
        with self._lock:
            io.write_json(self.path, state, allow_nan=False)

    def _tick(self) -> None:
        while not self._stop.wait(self.every):
            self._write(finished=False)

    def __enter__(self) -> "JobClock":
        self.before = spent_before(self.path)
        self.start = time.monotonic()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._write(finished=False)
        self._thread = threading.Thread(target=self._tick, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._stop.set()
        self._thread.join()
        self._write(finished=exc_type is None)
