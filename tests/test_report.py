"""The HTML report (`nlpbench report`, `snakemake report`): its Markdown converter, its pages and figures, and the
index linking every figure the pipeline drew."""

from __future__ import annotations

import csv
import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nlpbench.cli import main
from nlpbench.results.paper import reference_cells
from nlpbench.results.report import markdown_to_html, render
from nlpbench.results.results_index import register_output, write_index
from nlpbench.results.tables import TableSpec, build_table, write_table
from project_repo import inline_declarations

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^()\s]+)\)")
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16          # the bytes are embedded as they are: no need for a real image


# -- the Markdown converter -----------------------------------------------------------------------------------

def test_markdown_headings_paragraphs_lists_and_inline_marks():
    out = markdown_to_html("# Table 2: *accuracy*\n\nStatus: **differs** (see `memnet.train`)\nsecond line\n\n"
                           "- one [csv](2.csv)\n- two\n  continued\n\n3. third\n4. fourth\n")
    assert "<h1>Table 2: <em>accuracy</em></h1>" in out
    assert "<p>Status: <strong>differs</strong> (see <code>memnet.train</code>)\nsecond line</p>" in out
    assert '<ul>\n<li>one <a href="2.csv">csv</a></li>\n<li>two\ncontinued</li>\n</ul>' in out
    assert '<ol start="3">\n<li>third</li>\n<li>fourth</li>\n</ol>' in out
    # what is not a mark stays text: stars of a transcript, a lone star, underscores in names
    assert "<p>**** TESTING MODEL STARTS ****</p>" in markdown_to_html("**** TESTING MODEL STARTS ****")
    assert "<li>daniel travelled to the office *</li>" in markdown_to_html("1. daniel travelled to the office *")
    assert "<p>min_num and O_1</p>" in markdown_to_html("min_num and O_1")


def test_markdown_pipe_tables_with_escaped_pipes_and_alignment():
    out = markdown_to_html("| Table | Mean \\|Δ\\| | Files |\n|---|---:|:---:|\n"
                           "| 2 | 2.55 | [md](tolias-thesis/2.md) |\n| 6 | 14.43 |\n")
    assert ('<tr>\n<th>Table</th>\n<th style="text-align:right">Mean |Δ|</th>\n'
            '<th style="text-align:center">Files</th>\n</tr>') in out
    assert ('<tr>\n<td>2</td>\n<td style="text-align:right">2.55</td>\n'
            '<td style="text-align:center"><a href="tolias-thesis/2.md">md</a></td>\n</tr>') in out
    assert ('<tr>\n<td>6</td>\n<td style="text-align:right">14.43</td>\n<td style="text-align:center"></td>\n'
            '</tr>') in out
    assert out.count("<table>") == 1 and out.count("<tr>") == 3


@pytest.mark.parametrize("markdown", [
    "<script>alert(1)</script>",
    "# <script>alert(1)</script>",
    "- <script>alert(1)</script>",
    "| a |\n|---|\n| <script>alert(1)</script> |",
    "[<script>alert(1)</script>](x.md)",
    "**<script>alert(1)</script>**",
    "`<script>alert(1)</script>`",
    "```\n<script>alert(1)</script>\n```",
])
def test_markdown_escapes_markup_wherever_it_stands(markdown):
    out = markdown_to_html(markdown)
    assert "<script" not in out and "&lt;script&gt;alert(1)&lt;/script&gt;" in out


def test_markdown_drops_addresses_that_could_run_code():
    out = markdown_to_html("[click](javascript:evil) [data](data:text/html;base64,PHNjcmlwdD4=) "
                           "[case](JavaScript:evil) ![x](javascript:evil) ![y](data:image/svg+xml;base64,PHN2Zz4=) "
                           '[q](x"onmouseover="evil) [web](https://example.org/a) [top](#index)')
    assert "href=\"javascript" not in out.lower() and "data:" not in out and "<img" not in out
    assert "<p>click data case x y " in out                               # their text stays
    assert '<a href="x&quot;onmouseover=&quot;evil">q</a>' in out          # quotes cannot end the attribute
    assert '<a href="https://example.org/a">web</a>' in out and '<a href="#index">top</a>' in out


# -- the report of a hand-built results directory ---------------------------------------------------------

def _results(root: Path) -> Path:
    (root / "doc").mkdir(parents=True)
    (root / "README.md").write_text(
        "# Results\n\n| Table | Title | Files |\n|---|---|---|\n"
        "| 1 | First | [md](doc/1.md) · [csv](doc/1.csv) · [png](doc/fig1.png) |\n"
        "| fig2 | Curves | [png](doc/fig2.png) |\n| 3 | Third | [md](doc/3.md) |\n"
        "| again | The same figure | [png](doc/fig1.png) |\n", encoding="utf-8")
    (root / "doc" / "1.md").write_text("# Table 1 <script>x()</script>\n\nSee [table 3](3.md) and [csv](1.csv).\n")
    (root / "doc" / "3.md").write_text("# Table 3\n\n![inline](fig2.png)\n")
    (root / "doc" / "1.csv").write_text("row,column\n")
    (root / "doc" / "fig1.png").write_bytes(PNG + b"1")
    (root / "doc" / "fig2.png").write_bytes(PNG + b"2")
    (root / "doc" / "unused.md").write_text("# not linked\n")
    return root


def _uri(data: bytes) -> str:
    import base64
    return "data:image/png;base64," + base64.b64encode(data).decode()


def test_report_pages_follow_the_index_and_its_links_jump_inside_the_page(tmp_path):
    results = _results(tmp_path / "results")
    page = render(results, results / "report.html")
    assert page.index('<section id="index">') < page.index('id="doc/1"') < page.index('id="doc/fig2"') \
        < page.index('id="doc/3"')
    assert '<a href="#doc/1">md</a>' in page and '<a href="doc/1.csv">csv</a>' in page       # csv: the file
    assert '<a href="#doc/fig1.png">png</a>' in page and '<a href="#doc/fig2">png</a>' in page
    assert '<a href="#doc/3">table 3</a>' in page                 # a page's own link to another page
    # a figure is embedded once, on the page of the line that links it first
    section1 = page[page.index('id="doc/1"'):page.index('id="doc/fig2"')]
    assert f'<figure id="doc/fig1.png"><img src="{_uri(PNG + b"1")}"' in section1
    assert page.count(_uri(PNG + b"1")) == 1
    section_fig2 = page[page.index('id="doc/fig2"'):page.index('id="doc/3"')]
    assert "<h1>fig2 — Curves</h1>" in section_fig2 and _uri(PNG + b"2") in section_fig2
    assert f'<img src="{_uri(PNG + b"2")}" alt="inline" />' in page[page.index('id="doc/3"'):]
    assert "not linked" not in page and "<script" not in page and "&lt;script&gt;x()&lt;/script&gt;" in page


def test_report_written_elsewhere_links_the_files_from_there(tmp_path):
    results = _results(tmp_path / "results")
    out = tmp_path / "site" / "report.html"
    assert main(["--results", str(results), "report", "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert '<a href="../results/doc/1.csv">csv</a>' in page and '<a href="#doc/1">md</a>' in page
    assert not list(out.parent.glob("*.tmp"))


def test_report_without_an_index_names_the_file_and_the_remedy(tmp_path, capsys):
    assert main(["--results", str(tmp_path), "report"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nlpbench: ") and str(tmp_path / "README.md") in err
    assert "snakemake" in err and "nlpbench index" in err and "Traceback" not in err
    assert not (tmp_path / "report.html").exists()


def test_report_reads_nothing_outside_results(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (tmp_path / "secret.md").write_text("# secret page\n")
    (tmp_path / "secret.png").write_bytes(PNG + b"secret")
    (results / "README.md").write_text("[md](../secret.md) [png](../secret.png) ![i](../secret.png)\n")
    page = render(results, results / "report.html")
    assert "secret page" not in page and _uri(PNG + b"secret") not in page
    assert '<a href="../secret.md">md</a>' in page          # a link to it stays a link


# -- every figure linked, and the report of the committed results ------------------------------------------

def _spec(source: str, table: str) -> TableSpec:
    cells = reference_cells(source, table)
    return TableSpec(source=source, table=table, title=table, rows=list(dict.fromkeys(c["row"] for c in cells)),
                     columns=list(dict.fromkeys(c["column"] for c in cells)))


def test_index_links_a_tables_declared_figure_and_a_figure_no_output_registered(tmp_path):
    write_table(build_table(_spec("shen-thesis", "4.2"), [], {}, []), tmp_path)     # its home: figure "4.1"
    write_table(build_table(_spec("shen-thesis", "4.4"), [], {}, []), tmp_path)     # declares no figure
    for name in ("fig4.1.png", "fig4.6.png", "fig4.2.png"):
        (tmp_path / "shen-thesis" / name).write_bytes(PNG)
    register_output(tmp_path, "shen-thesis", "fig4.2", "Figure 4.2", "figure", ["fig4.2.png"], "generated", "smoke")
    write_index(tmp_path)
    rows = {line.split("|")[1].strip(): line for line in (tmp_path / "README.md").read_text().splitlines()
            if line.startswith("| ")}
    assert rows["4.2"].endswith("· [png](shen-thesis/fig4.1.png) |")
    assert "png" not in rows["4.4"]
    assert rows["fig4.2"].endswith("| [png](shen-thesis/fig4.2.png) |")
    assert rows["fig4.6"].endswith("| [png](shen-thesis/fig4.6.png) |")      # listed, though nothing registered it
    assert sum("fig4.2.png" in line for line in rows.values()) == 1


def _linked(results: Path) -> set[Path]:
    """Every file linked from results/README.md or from a page it links."""
    readme = results / "README.md"
    found = {(results / t).resolve() for t in LINK.findall(readme.read_text(encoding="utf-8"))}
    for page in [p for p in found if p.suffix == ".md" and p.is_file()]:
        found |= {(page.parent / t).resolve() for t in LINK.findall(page.read_text(encoding="utf-8"))}
    return found


def test_every_committed_figure_is_linked_from_the_index():
    figures = sorted(RESULTS.rglob("*.png"))
    assert len(figures) >= 19
    unlinked = [str(p.relative_to(RESULTS)) for p in figures if p.resolve() not in _linked(RESULTS)]
    assert not unlinked, f"results/README.md links no page to {unlinked}: run `nlpbench index`"


def _index_rows(results: Path) -> list[dict]:
    with open(results / "index.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_report_of_the_committed_results_holds_every_table_and_figure(tmp_path):
    out = tmp_path / "report.html"
    assert main(["--results", str(RESULTS), "report", "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    built = [r for r in _index_rows(RESULTS) if r["path"]]
    assert len(built) >= 30
    for row in built:
        anchor = row["path"].removesuffix(".csv")
        section = page[page.index(f'<section class="page" id="{anchor}">'):]
        section = section[:section.index("</section>")]
        assert html.escape(row["title"], quote=False) in section, anchor
        assert f'href="#{anchor}"' in page                      # the index's link jumps to it
    for png in RESULTS.rglob("*.png"):
        rel = png.relative_to(RESULTS).as_posix()
        # once: in its own figure block, or in place on a page that shows it itself (an anchor marks it)
        assert page.count(f'<figure id="{rel}">') + page.count(f'<a id="{rel}"></a>') == 1, rel
        assert page.count(_uri(png.read_bytes())) == 1, rel


# -- at the smoke scale, through Snakemake --------------------------------------------------------------------

@pytest.mark.slow
def test_snakemake_report_at_the_smoke_scale_holds_each_table(tmp_path, mirror_dir):
    for item in ("Snakefile", "params.yaml", "overrides.yaml", "pipeline", "envs"):
        (shutil.copytree if (REPO / item).is_dir() else shutil.copy)(REPO / item, tmp_path / item)
    params = inline_declarations(tmp_path)          # the homes as one mapping, cut to one table of one task
    table2 = params["tables"]["tolias-thesis"]["2"]
    table2["columns"] = {"Baseline / MemN2N": table2["columns"]["Baseline / MemN2N"]}
    table2["claims"], table2["notes"] = [], []       # they compare the columns left out
    params["tables"], params["outputs"] = {"tolias-thesis": {"2": table2}}, {}
    for scale in params["scales"].values():         # a scale's keys for what was left out would name nothing
        for key in [k for k in scale if k.startswith(("tables.", "outputs."))
                    and not k.startswith("tables.tolias-thesis.2.")]:
            del scale[key]
    params["scales"]["smoke"].update({"task_subset": [1], "memnet.train.epochs": 1})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {**os.environ, "NLPBENCH_MIRROR": str(mirror_dir),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([sys.executable, "-m", "snakemake", "report", "--cores", "2", "--config", "scale=smoke"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]

    results = tmp_path / "results" / "smoke"             # a trial scale's folder (params.yaml committed_scale)
    page = (results / "report.html").read_text(encoding="utf-8")
    assert page.index('<section id="index">') < page.index('<section class="page" id="tolias-thesis/2">')
    built = [r for r in _index_rows(results) if r["path"]]
    assert [r["table"] for r in built] == ["2"]
    for row in built:
        anchor = row["path"].removesuffix(".csv")
        assert f'<section class="page" id="{anchor}">' in page and f'href="#{anchor}"' in page
    assert "**scale**: smoke" in (results / "tolias-thesis" / "2.md").read_text()
    assert "<strong>scale</strong>: smoke" in page
