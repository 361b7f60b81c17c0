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
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import NamedTuple

from nlpbench import io

TRAIN_LOGS = Path("logs") / "train"      # the training rules' logs and `benchmark:` files (pipeline/train.smk)


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


def recorded(path: Path) -> Recorded | None:
    """The clock in `path` (finished or not), None where there is none; ValueError naming a malformed one."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        state = io.read_json(path)
        return Recorded(float(state["seconds"]), bool(state["finished"]), float(state.get("taken_over_s", 0.0)))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ValueError(f"{path}: not a job clock (expected {{\"seconds\": number, \"finished\": bool}}); "
                         "delete it to start the clock again") from None


def spent_before(path: Path) -> float:
    """Seconds the unfinished earlier attempts recorded in `path`; 0 where there is none or the job finished."""
    state = recorded(path)
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
        self.taken_over += float(seconds or 0.0)

    def _write(self, finished: bool) -> None:
        state = {"seconds": round(self.before + time.monotonic() - self.start, 1), "finished": finished}
        if self.taken_over:
            state["taken_over_s"] = round(self.taken_over, 1)
        with self._lock:
            io.write_json(self.path, state)

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
