"""Markdown of measured quantities grouped in sections, as the timing benchmarks write them."""

from __future__ import annotations


def sectioned_markdown(lines: list[str], provenance: dict, header: list[str], rows: list[tuple[str, list[str]]],
                       notes: list[str], numeric: int = 1) -> str:
    """`lines` (title and intro), then the provenance as a list, then one table per section: `rows` are
    (section, cells) in order, a new table starting where the section changes; `header` names the cells (the
    `numeric` columns after the first right-aligned); the notes last."""
    md = list(lines) + [f"- {k}: {v}" for k, v in provenance.items()]
    align = "|" + "|".join(["---"] + ["---:"] * numeric + ["---"] * (len(header) - 1 - numeric)) + "|"
    section = None
    for sec, cells in rows:
        if sec != section:
            md += ["", f"## {sec}", "", "| " + " | ".join(header) + " |", align]
            section = sec
        md.append("| " + " | ".join(cells) + " |")
    md += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    return "\n".join(md) + "\n"
