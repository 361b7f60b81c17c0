"""Data sets that more than one family reads, prepared by the core (bAbI: memory networks and DMN+)."""

from __future__ import annotations

from pathlib import Path

from nlpbench.family import DataStep

SHARED_STEPS = {
    # bAbI v1.2, every file verified (nlpbench.data.fetch)
    "babi": DataStep("babi", "data/babi/STATUS.json", light=True),
}


def prepare(step: str, data_root: Path, mirror: str | None) -> str:
    from nlpbench.data import fetch
    if step != "babi":
        raise KeyError(step)
    status = fetch.prepare_babi(Path(data_root) / "babi", fetch.resolve_mirror(mirror))
    return (f"bAbI ready in {Path(data_root) / 'babi'}: {len(status['present'])} files, "
            f"{len(status['missing'])} missing ({', '.join(status['missing']) or 'none'})")
