"""Tab-separated listings the pipeline reads: its packaged checksum manifests and a data mirror's MANIFEST.tsv.

One reader for all of them, so that a malformed file is reported the same way everywhere: by its name and line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Sequence

from nlpbench.data.prepared import FetchError


def records(text: str, where: str, header: Sequence[str] | None = None,
            required: Sequence[str] = ()) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, {column: field}) for each row of `text` after its header; blank lines and lines starting
    with '#' are skipped. The header is exactly `header` when given, else any header holding the `required`
    columns. A bad header or a row with another number of fields raises ValueError naming `where` and the line."""
    columns: list[str] | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if columns is None:
            if header is not None and fields != list(header):
                raise ValueError(f"{where}:{lineno}: expected the header {'<TAB>'.join(header)!r}, got {line!r}")
            missing = [c for c in required if c not in fields]
            if missing:
                raise ValueError(f"{where}:{lineno}: the header lacks the column(s) {', '.join(missing)}: {line!r}")
            columns = fields
            continue
        if len(fields) != len(columns):
            raise ValueError(f"{where}:{lineno}: expected {len(columns)} tab-separated fields, got {len(fields)}: "
                             f"{line!r}")
        yield lineno, dict(zip(columns, fields))
    if columns is None and (header is not None or required):
        raise ValueError(f"{where}: empty (no header line)")


def mirror_checksums(path: Path) -> dict[str, str]:
    """{path: lower-case sha256} from a data mirror's MANIFEST.tsv (columns path and sha256, and any others); a
    malformed one is a FetchError naming its file and line."""
    try:
        return {row["path"]: row["sha256"].lower()
                for _, row in records(path.read_text(encoding="utf-8"), str(path), required=("path", "sha256"))}
    except ValueError as e:
        raise FetchError(f"the data mirror's manifest is malformed: {e}") from None
