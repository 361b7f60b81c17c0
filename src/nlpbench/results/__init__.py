"""The results wing: a table from its home to its files.

A family hands in cells (`family.TableParts`) and output descriptions (`family.OutputPage`); this wing does the
rest, the same way for every family:

    paper.py          the numbers the documents printed, read from each table's home
    tables.py         one table: our cells beside the paper's, as CSV, Markdown and JSON
    judging.py        is a cell within our noise, is a table reproduced (one rule)
    cells.py          a reference to a table's cell, and the cells a table's notes and claims read
    notes.py          a table's notes with our numbers filled in
    claims.py         the documents' claims about a table, each judged in one sentence
    build.py          from a family's answers to the files under results/, sidecars included
    results_index.py  results/index.csv and results/README.md
    rejudge.py        judge committed tables again from their stored cells (`nlpbench judge`)
    report.py         one HTML page of everything under results/ (`nlpbench report`)
    json_shape.py     the check of a sidecar read back
"""
