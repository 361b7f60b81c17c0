"""From a family's answers to files under results/: one table (its cells rendered beside the paper's numbers)
or one other output; then the index. The one place that writes a table, whatever its family."""

from __future__ import annotations

from pathlib import Path

from nlpbench import paper, registry, results_index, tables
from nlpbench.family import Paths


SMOKE_NOTE = ("Scale `smoke`: every rule of the pipeline on a few examples for an epoch or two. These numbers test "
              "the pipeline and mean nothing about the models; the differences from the paper are not results.")


def table(params: dict, source: str, name: str, paths: Paths) -> dict[str, Path]:
    """Write results/<source>/<name>.{csv,md,json} (and any figure drawn from the CSV); returns the paths."""
    from nlpbench import config
    d = config.declaration(params, "tables", source, name)
    parts = registry.get(d.family).table(source, name, params, paths)
    notes = ([SMOKE_NOTE] if params["scale"] == "smoke" else []) + parts.notes
    result = tables.build_table(parts.spec, parts.cells, parts.provenance, notes)
    out = tables.write_table(result, paths.results)
    for i, draw in enumerate(parts.after):
        out[f"figure{i or ''}"] = draw(paths.results)
    if (source, name) not in {(r["source"], r["table"]) for r in paper.reference_index()}:
        # an addition the documents never ran: listed in the index as such
        results_index.register_output(paths.results, source, name, d.decl.get("title", name), "addition",
                                      [out["md"].name, out["csv"].name],
                                      f"{result.count('ok')} of {len(result.lines)} cells run", params["scale"])
    results_index.write_index(paths.results)
    return out


def output(params: dict, source: str, name: str, paths: Paths) -> list[Path]:
    from nlpbench import config
    d = config.declaration(params, "outputs", source, name)
    written = registry.get(d.family).output(source, name, params, paths)
    results_index.write_index(paths.results)
    return written
