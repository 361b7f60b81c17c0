"""One self-contained HTML page of everything under results/: `nlpbench report` (or `snakemake report`).

The page opens with the index (results/README.md, whole and in order), then every table and output page the
index links (results/<source>/<name>.md), in the index's order, each under an anchor the index's links jump to.
A figure the index links (results/<source>/*.png) is embedded, as a data URI, on the page of the table or output
whose line links it (a figure-only output gets a page of its own); links to other files (CSVs) stay links to the
files, relative to where the page is written.

The Markdown of those files is converted by markdown-it-py (CommonMark with GitHub's pipe tables) with raw HTML
off: every character from a results file is HTML-escaped, and a link or image whose address names a scheme other
than http(s) or mailto is dropped (its text kept), so nothing a results file holds can inject markup or script
into the page.
"""

from __future__ import annotations

import base64
import html
import os
import posixpath
import re
from pathlib import Path
from typing import Callable
from urllib.parse import quote

from markdown_it import MarkdownIt
from markdown_it.token import Token

from nlpbench.runtime.io import write_text

INDEX = "README.md"
IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif"}
SAFE_SCHEMES = ("http", "https", "mailto")


class ReportError(ValueError):
    """The report cannot be built from this results directory (the message names the file and the remedy)."""


# -- Markdown -> HTML ---------------------------------------------------------------------------------------

def safe_href(href: str) -> str | None:
    """`href` when following it cannot run anything: relative paths, #anchors, http(s) and mailto; else None."""
    scheme = re.match(r"\s*([A-Za-z][A-Za-z0-9+.-]*):", href)
    if scheme and scheme.group(1).lower() not in SAFE_SCHEMES:
        return None
    return href


def _attr(value: str) -> str:
    return html.escape(value, quote=True)


def _parser() -> MarkdownIt:
    """CommonMark with GitHub's pipe tables. Raw HTML is text (escaped); every address is kept as written (the
    parser's own check and percent-encoding are off), for the caller's `href` and `src` to judge and rewrite."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    md.validateLink = lambda url: True
    md.normalizeLink = lambda url: url
    return md


_MD = _parser()


def _with_addresses(tokens: list[Token], href: Callable[[str], str | None],
                    src: Callable[[str], str | None]) -> list[Token]:
    """Inline tokens with each link's and image's address mapped by `href` / `src`; where that gives None, the
    link is dropped (its text kept) and the image becomes its alt text."""
    out: list[Token] = []
    dropped: list[bool] = []            # per open link: whether it is dropped
    for token in tokens:
        if token.type == "link_open":
            target = href(str(token.attrGet("href") or ""))
            dropped.append(target is None)
            if target is None:
                continue
            token.attrSet("href", target)
        elif token.type == "link_close":
            if dropped.pop():
                continue
        elif token.type == "image":
            target = src(str(token.attrGet("src") or ""))
            if target is None:
                alt = Token("text", "", 0)
                alt.content = _MD.renderer.renderInlineAsText(token.children or [], _MD.options, {})
                out.append(alt)
                continue
            token.attrSet("src", target)
        out.append(token)
    return out


def inline_html(text: str, href: Callable[[str], str | None] = safe_href,
                src: Callable[[str], str | None] = safe_href) -> str:
    """One line (or paragraph) of Markdown text as HTML; `href` and `src` map a link's or an image's address
    to the one written (None: the link is dropped, its text kept)."""
    tokens = _MD.parseInline(text)
    for token in tokens:
        token.children = _with_addresses(token.children or [], href, src)
    return _MD.renderer.render(tokens, _MD.options, {})


def markdown_to_html(text: str, href: Callable[[str], str | None] = safe_href,
                     src: Callable[[str], str | None] = safe_href) -> str:
    """Markdown (CommonMark and pipe tables) as an HTML fragment; `href` and `src` as in `inline_html`."""
    tokens = _MD.parse(text)
    for token in tokens:
        if token.type == "inline":
            token.children = _with_addresses(token.children or [], href, src)
    return _MD.renderer.render(tokens, _MD.options, {})


_PIPE = re.compile(r"(?<!\\)\|")


def split_row(line: str) -> list[str]:
    """The cells of a pipe-table row of the index: split at the pipes that are not escaped."""
    row = line.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return [cell.strip() for cell in _PIPE.split(row)]


# -- the report ------------------------------------------------------------------------------------------

_LINK = re.compile(r"(?<!!)\[(?:\\.|[^\]\\])*\]\(([^()\s]*)\)")

STYLE = """\
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 80em; padding: 0 1em; line-height: 1.4;
       color: #1b1b1b; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; display: block; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; vertical-align: top; }
th { background: #f3f3f3; }
code { background: #f3f3f3; padding: 0 0.2em; }
section.page { border-top: 3px solid #888; margin-top: 3em; }
p.where { font-size: 0.85em; color: #555; }
figure { margin: 1em 0; }
figure img, p img { max-width: 100%; }
figcaption { font-size: 0.85em; color: #555; }
"""


def _relative(href: str) -> bool:
    return not re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", href) and not href.startswith(("/", "#"))


class _Report:
    """The pages and figures the index links, in its order, and the rewriting of their links."""

    def __init__(self, results_dir: Path, out: Path):
        self.root, self.out = results_dir.resolve(), out
        self.order: list[str] = []                    # the pages, in the index's order
        self.figures: dict[str, list[str]] = {}       # page -> the figures shown on it
        self.headings: dict[str, tuple[str, str]] = {}    # a figure-only page -> (heading, what its line says)
        self.figure_page: dict[str, str] = {}         # figure -> the page that shows it

    def _file(self, rel: str) -> Path | None:
        """results/<rel> when it is a file inside results/ (nothing outside it is read)."""
        path = (self.root / rel).resolve()
        return path if path.is_relative_to(self.root) and path.is_file() else None

    def _page(self, rel: str) -> None:
        if rel not in self.figures:
            self.order.append(rel)
            self.figures[rel] = []

    def collect(self, index_text: str) -> None:
        """Every page the index links (a .md under results/), and every figure, on the page of its line: the
        first page its line links, else a page of its own headed by the line's first cells."""
        for line in index_text.splitlines():
            targets = [posixpath.normpath(t) for t in _LINK.findall(line) if _relative(t)]
            pages = [t for t in targets if t.endswith(".md") and self._file(t)]
            figures = [t for t in dict.fromkeys(targets) if Path(t).suffix.lower() in IMAGE_TYPES
                       and t not in self.figure_page and self._file(t)]
            for page in pages:
                self._page(page)
            if figures and not pages:
                cells = split_row(line) if line.lstrip().startswith("|") else [figures[0]]
                plain = [c for c in cells if not _LINK.search(c)]
                self.headings[figures[0]] = (" — ".join(plain[:2]), " · ".join(plain[2:]))
                self._page(figures[0])
            for figure in figures:
                home = pages[0] if pages else figures[0]
                self.figure_page[figure] = home
                self.figures[home].append(figure)

    @staticmethod
    def anchor(page: str) -> str:
        """The id of a page's section: its path without the suffix (tolias-thesis/2)."""
        return posixpath.splitext(page)[0]

    def file_href(self, rel: str) -> str:
        """results/<rel> relative to the folder the report is written to."""
        return quote(Path(os.path.relpath(self.root / rel, self.out.parent.resolve())).as_posix())

    def href(self, base: str) -> Callable[[str], str | None]:
        """Links of a file in results/<base>/: a page or figure of the report -> its anchor; another relative
        file -> relative to the report's own folder; anything else as safe_href."""
        def rewrite(target: str) -> str | None:
            if not _relative(target):
                return safe_href(target)
            path, _, fragment = target.partition("#")
            rel = posixpath.normpath(posixpath.join(base, path))
            if rel in self.figures:
                return "#" + self.anchor(rel)
            if rel in self.figure_page:
                return "#" + rel
            return self.file_href(rel) + (f"#{fragment}" if fragment else "")
        return rewrite

    def src(self, base: str) -> Callable[[str], str | None]:
        """Images of a file in results/<base>/: a local one is embedded; a remote one kept; anything else dropped."""
        def embed(target: str) -> str | None:
            if not _relative(target):
                return target if re.match(r"https?:", target, re.IGNORECASE) else None
            path = self._file(posixpath.normpath(posixpath.join(base, target)))
            return _data_uri(path) if path and path.suffix.lower() in IMAGE_TYPES else None
        return embed

    def read(self, rel: str) -> str:
        try:
            return (self.root / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ReportError(f"{self.root / rel}: unreadable ({e}); rebuild it (`snakemake`)") from None

    def section(self, page: str) -> str:
        base = posixpath.dirname(page)
        parts = [f'<section class="page" id="{_attr(self.anchor(page))}">',
                 f'<p class="where"><a href="#index">index</a> · {html.escape(page)}</p>']
        if page in self.headings:                   # a figure-only output
            heading, rest = self.headings[page]
            parts.append(f"<h1>{inline_html(heading, self.href(''), self.src(''))}</h1>")
            if rest:
                parts.append(f"<p>{inline_html(rest, self.href(''), self.src(''))}</p>")
        else:
            text = self.read(page)
            for figure in self.figures[page]:           # a page that shows its figure itself keeps it in place
                if f"]({posixpath.relpath(figure, base or '.')})" in text:
                    parts.append(f'<a id="{_attr(figure)}"></a>')
            parts.append(markdown_to_html(text, self.href(base), self.src(base)).rstrip("\n"))
        for figure in self.figures[page]:
            if f'<a id="{_attr(figure)}"></a>' in parts:
                continue
            parts.append(f'<figure id="{_attr(figure)}"><img src="{_data_uri(self.root / figure)}" '
                         f'alt="{_attr(figure)}"><figcaption><a href="{_attr(self.file_href(figure))}">'
                         f"{html.escape(figure)}</a></figcaption></figure>")
        parts.append("</section>")
        return "\n".join(parts)


def _data_uri(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ReportError(f"{path}: unreadable ({e.strerror or e})") from None
    return f"data:{IMAGE_TYPES[path.suffix.lower()]};base64," + base64.b64encode(data).decode("ascii")


def render(results_dir: Path, out: Path) -> str:
    """The report of `results_dir` as one HTML page, its file links written relative to `out`."""
    index = Path(results_dir) / INDEX
    if not index.is_file():
        raise ReportError(f"{index}: no results index to build the report from; build the tables and the index "
                          "with `snakemake`, or index the tables already there with `nlpbench index`")
    report = _Report(Path(results_dir), Path(out))
    text = report.read(INDEX)
    report.collect(text)
    title = next((line.lstrip("#").strip() for line in text.splitlines() if line.startswith("# ")), "Results")
    body = [f'<section id="index">\n{markdown_to_html(text, report.href(""), report.src(""))}</section>']
    body += [report.section(page) for page in report.order]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


def write_report(results_dir: Path, out: Path) -> Path:
    """Write the report of `results_dir` to `out` atomically; returns `out`."""
    write_text(out, render(results_dir, out))
    return Path(out)
