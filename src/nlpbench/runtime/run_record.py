"""What a finished run recorded of its files, and the check of them before they are read or taken over.

A run ends with `finish`: it records the size and sha256 of each of its files, its metrics.json (the accuracies
its tables print) among them, in FILES.json, and only then moves metrics.json (the run's "done") into place, so a
run that is done has its record. `verify` checks a run's files against that record with the check every prepared
file gets (nlpbench.data.prepared.verify_prepared): a file edited, truncated or deleted after its run wrote it
raises PreparedDataChanged naming the file, what changed and the remedy. Reading a run's own metrics goes through
`read_metrics`, and a run another group finished is taken over only once it passes the same check.

A run finished by an older nlpbench has no FILES.json: its own group still reads it (unverified, as before), but
nothing is taken over from it, since nothing says its files are the ones its run wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from nlpbench.data.prepared import PreparedDataChanged, file_records, sha256_file, verify_prepared
from nlpbench.runtime import io

RECORD = "FILES.json"
METRICS = "metrics.json"
WRITTEN = "its run wrote it"       # who wrote a run's files, in the check's messages


def remedy_for(run_dir: str | Path) -> str:
    """What to do about a run whose files fail the check: train it again."""
    return f"delete {run_dir} and train it again"


def finish(run_dir: str | Path, files: Iterable[str], metrics: dict) -> None:
    """End a run: record the size and sha256 of `files` (already written, relative to `run_dir`) and of the
    metrics.json holding `metrics` in FILES.json, then move metrics.json into place (last)."""
    run_dir = Path(run_dir)
    with io.atomic_path(run_dir / METRICS) as tmp:
        io.write_json(tmp, metrics)
        records = {**file_records(run_dir, files), METRICS: {"bytes": tmp.stat().st_size, "sha256": sha256_file(tmp)}}
        io.write_json(run_dir / RECORD, {"files": records})


def read_record(run_dir: str | Path, remedy: str | None = None) -> dict | None:
    """The FILES.json of a run; None where it has none (a run finished by an older nlpbench, or not finished);
    PreparedDataChanged where it is not the JSON object `finish` wrote."""
    path = Path(run_dir) / RECORD
    if not path.is_file():
        return None
    try:
        record = io.read_json(path)
    except (ValueError, UnicodeDecodeError) as e:
        record = e
    if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
        raise PreparedDataChanged(f"{path} is not the record of its run's files that nlpbench wrote ({record}); "
                                  f"{remedy or remedy_for(run_dir)}")
    return record


def verify(run_dir: str | Path, files: Iterable[str] = (), remedy: str | None = None) -> bool:
    """Check every file the run recorded, and each of `files` (which the record must list), metrics.json always,
    against their recorded sizes and sha256: PreparedDataChanged naming the first that fails. False where the run
    has no record (read_record), True where every file passed."""
    run_dir = Path(run_dir)
    remedy = remedy or remedy_for(run_dir)
    record = read_record(run_dir, remedy)
    if record is None:
        return False
    names = list(dict.fromkeys([*record["files"], *files, METRICS]))
    verify_prepared(run_dir, run_dir.name, names, status=record, status_file=RECORD, remedy=remedy, written=WRITTEN)
    return True


def read_metrics(run_dir: str | Path, remedy: str | None = None) -> dict:
    """A run's metrics.json, once its files pass `verify` (a run without a record is read as it is);
    PreparedDataChanged where it is not a JSON object."""
    run_dir = Path(run_dir)
    remedy = remedy or remedy_for(run_dir)
    verify(run_dir, remedy=remedy)
    path = run_dir / METRICS
    try:
        metrics = io.read_json(path)
    except (ValueError, UnicodeDecodeError) as e:
        metrics = e
    if not isinstance(metrics, dict):
        raise PreparedDataChanged(f"{path} is not the JSON object its run wrote ({metrics}); {remedy}")
    return metrics


def read_json_or_none(path: str | Path) -> dict | None:
    """The JSON object in `path`, or None where the file is missing or holds none: a file read before its run's
    files are checked (to see whether the run is worth checking)."""
    try:
        value = io.read_json(path)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None
