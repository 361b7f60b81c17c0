"""Where the text corpora come from (thesis §4.5.2, ch. 6): official URLs, mirror paths, the packaged
checksum manifest text_manifest.tsv, verification, and readers of the raw files.

A mirror directory ($NLPBENCH_MIRROR) has the layout of the manifest paths; whatever it lacks is downloaded from
the official URL (if allowed) to a downloads/ folder, and every file is verified before use.
"""

from __future__ import annotations

import csv
import gzip
import os
import io
import json
import re
import warnings
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Mapping, NamedTuple

from nlpbench.data import catalog, tsv
from nlpbench.data.fetch import (
    STATUS_FILE,
    ChecksumError,
    DownloadError,
    FetchError,
    download,
    git_blob_sha1,
    sha256_file,
)

# --- Official sources ------------------------------------------------------------------------------------------
# SNLI 1.0 (Bowman et al. 2015); URL, sha256 and mirror path from nlpbench.data.catalog.
SNLI_URL = catalog.get("snli").url
SNLI_ZIP_SHA256 = catalog.get("snli").sha256
SNLI_ZIP = catalog.get("snli").mirror  # where a mirror directory may hold the official archive
SNLI_MEMBERS = tuple(f"snli_1.0/snli_1.0_{s}.jsonl" for s in ("train", "dev", "test"))
# The authors' 5,000-sentence SNLI sample (HareeshBahuleyan/probabilistic_nlg, MIT); the mirror holds it.
_PNLG = "https://raw.githubusercontent.com/HareeshBahuleyan/probabilistic_nlg/master/"
_PNLG_DIR = "vae_sentences/HareeshBahuleyan-probabilistic_nlg/"
SNLI_SAMPLE = _PNLG_DIR + "snli/data/snli_sentences_1000.txt"
SNLI_SAMPLE_URL = _PNLG + "snli/data/snli_sentences_1000.txt"

# Cornell Movie-Dialogs (Danescu-Niculescu-Mizil & Lee 2011); URL, sha256 and mirror path from the catalogue.
CORNELL_URL = catalog.get("cornell").url
CORNELL_ZIP_SHA256 = catalog.get("cornell").sha256
CORNELL_ZIP = catalog.get("cornell").mirror
_CORNELL_TOP = "cornell movie-dialogs corpus/"
_CORNELL_SEP = " +++$+++ "

# The Du et al. (2017) QG split as the thesis authors' CSVs (HareeshBahuleyan/tf-var-attention, MIT).
_TFVA = "https://raw.githubusercontent.com/HareeshBahuleyan/tf-var-attention/master/"
_TFVA_DIR = "vae_sentences/HareeshBahuleyan-tf-var-attention/"


class SourceFile(NamedTuple):
    """One file of an official split: its path relative to a mirror root (the manifest key) and its URL."""

    split: str
    path: str
    url: str


QG_FILES = tuple(
    SourceFile(split, f"{_TFVA_DIR}data/df_qgen_{name}.csv", f"{_TFVA}data/df_qgen_{name}.csv")
    for split, name in (("train", "train"), ("valid", "val"), ("test", "test"))
)
DIALOG_FILES = tuple(
    SourceFile(split, f"{_PNLG_DIR}dialog/data/CornellMovieDialog/df_movie_{name}.csv",
               f"{_PNLG}dialog/data/CornellMovieDialog/df_movie_{name}.csv")
    for split, name in (("train", "train"), ("valid", "valid"), ("test", "test"))
)
# The SQuAD v1.1 dev set: the articles of the Du et al. dev split's pairs (that split is SQuAD's dev set), which
# the mirror version of QG needs to re-split its pairs by article. The official file, else the data mirror's rebuild
# of it from the official explorer pages (the same questions and titles).
SQUAD_DEV = SourceFile("articles", catalog.get("squad-dev").mirror, catalog.get("squad-dev").url)
SQUAD_DEV_REBUILT = "squad/dev-v1.1.reconstructed.json.gz"
# CSV columns (source, target) of the authors' files: QG `answer` holds the source sentence.
QG_COLUMNS = ("answer", "question")
DIALOG_COLUMNS = ("line", "reply")
DIALOG_GROUP = "movie_id"   # the authors' dialog CSVs name each pair's film: the groups of the mirror's re-split


# --- Manifest and verification ---------------------------------------------------------------------------------
MANIFEST_NAME = "text_manifest.tsv"
_MANIFEST_HEADER = ["path", "bytes", "sha256", "git_sha1", "origin"]


@dataclass(frozen=True)
class TextManifestEntry:
    """Expected size/checksums of one file; git_sha1 may be abbreviated (as published); all empty = unknown."""

    path: str
    bytes: int | None
    sha256: str
    git_sha1: str
    origin: str


def parse_text_manifest(text: str, where: str = MANIFEST_NAME) -> dict[str, TextManifestEntry]:
    entries: dict[str, TextManifestEntry] = {}
    for lineno, row in tsv.records(text, where, header=_MANIFEST_HEADER):
        path, size, sha256, sha1, origin = (row[c] for c in _MANIFEST_HEADER)
        if size and not size.isdigit():
            raise ValueError(f"{where}:{lineno}: bad byte count {size!r}")
        if not re.fullmatch(r"([0-9a-f]{64})?", sha256) or not re.fullmatch(r"([0-9a-f]{8,40})?", sha1):
            raise ValueError(f"{where}:{lineno}: bad checksum for {path!r}")
        if path in entries:
            raise ValueError(f"{where}:{lineno}: duplicate path {path!r}")
        entries[path] = TextManifestEntry(path, int(size) if size else None, sha256, sha1, origin)
    return entries


def load_text_manifest() -> dict[str, TextManifestEntry]:
    """The packaged nlpbench/textgen/text_manifest.tsv."""
    text = resources.files("nlpbench.textgen").joinpath(MANIFEST_NAME).read_text(encoding="utf-8")
    return parse_text_manifest(text, f"nlpbench/textgen/{MANIFEST_NAME}")


def verify_file(path: Path, entry: TextManifestEntry, remedy: str = "replace it with the recorded file") -> dict:
    """Check `path` against its manifest entry; return {"sha256", "verified_by"}; raise ChecksumError naming it
    and ending with `remedy` (what the user can do about it)."""
    where = f"{path} (manifest entry {entry.path}, nlpbench/textgen/{MANIFEST_NAME})"
    size = path.stat().st_size
    if entry.bytes is not None and size != entry.bytes:
        raise ChecksumError(f"{where}: size {size} bytes, expected {entry.bytes}; the copy is damaged or not "
                            f"the recorded file; {remedy}")
    sha256 = sha256_file(path)
    if entry.sha256:
        if sha256 != entry.sha256:
            raise ChecksumError(f"{where}: sha256 mismatch: expected {entry.sha256}, got {sha256}; the copy is "
                                f"damaged or not the recorded file; {remedy}")
        return {"sha256": sha256, "verified_by": "sha256"}
    if entry.git_sha1:
        blob = git_blob_sha1(path)
        if not blob.startswith(entry.git_sha1):
            raise ChecksumError(f"{where}: git blob SHA-1 {blob} does not match the recorded {entry.git_sha1}; "
                                f"the copy is damaged or not the recorded file; {remedy}")
        kind = "git_sha1" if len(entry.git_sha1) == 40 else f"git_sha1 prefix ({len(entry.git_sha1)} hex)"
        return {"sha256": sha256, "verified_by": kind}
    warnings.warn(f"{path}: no published checksum for {entry.path}; accepted unverified "
                  f"(its sha256 {sha256} is recorded in {STATUS_FILE})", stacklevel=3)
    return {"sha256": sha256, "verified_by": "none (no published checksum)"}


class SourceFetcher:
    """Finds each file in the mirror or downloads it, verifies it, and records sources and missing files."""

    def __init__(self, mirror: Path | None, downloads: Path, allow_download: bool,
                 manifest: Mapping[str, TextManifestEntry], urls: Mapping[str, str]):
        if mirror is not None and not mirror.is_dir():
            raise FetchError(f"mirror directory {mirror} (argument or $NLPBENCH_MIRROR) does not exist")
        self.mirror, self.downloads, self.allow_download = mirror, downloads, allow_download
        self.manifest, self.urls = manifest, urls
        self.sources: list[dict] = []
        self.missing_files: list[dict] = []

    def get(self, key: str, url: str, split: str) -> Path | None:
        """The verified file for manifest key `key`, or None (recorded as missing) if it cannot be had."""
        if key not in self.manifest:
            raise FetchError(f"{key} has no entry in nlpbench/textgen/{MANIFEST_NAME}")
        entry, url = self.manifest[key], self.urls.get(key, url)
        path, origin = None, ""
        download_remedy = "it was deleted, so the next run downloads it again"
        if self.mirror is not None and (self.mirror / key).is_file():
            path, origin = self.mirror / key, str(self.mirror / key)
        elif self.allow_download:
            dest = self.downloads / Path(key).name
            if not dest.is_file():
                def check(part: Path) -> None:       # a recorded checksum, before the file is kept under its name
                    if entry.sha256 or entry.git_sha1:
                        verify_file(part, entry, download_remedy)
                try:
                    download(url, dest, verify=check)
                except DownloadError as e:
                    self.missing_files.append({"split": split, "path": key, "url": url, "reason": str(e)})
                    return None
            path, origin = dest, url
        else:
            where = f"not in mirror {self.mirror}" if self.mirror else "no mirror"
            self.missing_files.append({"split": split, "path": key, "url": url,
                                       "reason": f"{where}, and downloads are disabled"})
            return None
        downloaded = path.parent == self.downloads
        remedy = (download_remedy if downloaded else
                  f"the mirror's file is corrupt or not the official one: replace it with the official file ({url}), "
                  "or use another mirror (--mirror or $NLPBENCH_MIRROR)")
        try:
            checked = verify_file(path, entry, remedy)
        except ChecksumError:
            if downloaded:
                path.unlink()  # a bad download is not kept: the next run fetches it again
            raise
        record = {"split": split, "path": key, "from": origin, **checked}
        self.sources.append(record)
        return path


# --- Readers ---------------------------------------------------------------------------------------------------
def read_csv_pairs(path: Path, columns: tuple[str, str]) -> list[tuple[str, str]]:
    """(source, target) strings from one of the authors' CSV files; FetchError naming the file if malformed."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None or not set(columns) <= set(reader.fieldnames):
            raise FetchError(f"{path}: expected CSV columns {columns}, found {reader.fieldnames}")
        pairs = [(row[columns[0]] or "", row[columns[1]] or "") for row in reader]
    if not pairs:
        raise FetchError(f"{path}: no rows")
    return pairs


def read_csv_column(path: Path, column: str) -> list[str]:
    """One column of one of the authors' CSV files, row by row; FetchError naming the file if it lacks it."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None or column not in reader.fieldnames:
            raise FetchError(f"{path}: expected a CSV column {column!r}, found {reader.fieldnames}")
        return [row[column] or "" for row in reader]


def question_key(question: str) -> str:
    """A question as the article lookup compares it: lower case, letters and digits only (the authors' CSVs hold
    SQuAD's questions tokenised and lower-cased)."""
    return re.sub(r"[^0-9a-z]", "", question.lower())


def read_squad_question_articles(path: Path) -> dict[str, str]:
    """question_key(question) -> article title, for every question of a SQuAD v1.1 JSON file (plain or gzipped);
    FetchError naming the file if it is not one, or if one question stands in two articles."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            articles = json.load(f)["data"]
        titles: dict[str, str] = {}
        for article in articles:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    key = question_key(qa["question"])
                    if titles.setdefault(key, article["title"]) != article["title"]:
                        raise FetchError(f"{path}: the question {qa['question']!r} stands in two articles "
                                         f"({titles[key]!r}, {article['title']!r}), so it names no one article")
    except (OSError, EOFError, json.JSONDecodeError, KeyError, TypeError) as e:
        raise FetchError(f"{path}: not a readable SQuAD v1.1 JSON file ({e!r})") from e
    if not titles:
        raise FetchError(f"{path}: no questions")
    return titles


def read_snli_zip(path: Path) -> list[str]:
    """sentence1 and sentence2 of every pair of snli_1.0_{train,dev,test}.jsonl, in file order."""
    sentences = []
    try:
        with zipfile.ZipFile(path) as zf:
            for member in SNLI_MEMBERS:
                with zf.open(member) as f:
                    for line in io.TextIOWrapper(f, encoding="utf-8"):
                        if line.strip():
                            pair = json.loads(line)
                            sentences += [pair["sentence1"], pair["sentence2"]]
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError) as e:
        raise FetchError(f"{path}: not a readable SNLI 1.0 archive ({e!r}); replace it with the official file "
                         f"({SNLI_URL}): in the mirror, or, if downloaded, by deleting it and running the data step "
                         "again") from e
    return sentences


def read_cornell_zip(path: Path) -> list[tuple[str, str]]:
    """(line, reply) for every two consecutive utterances of every conversation (thesis ch. 6), in file order."""
    try:
        with zipfile.ZipFile(path) as zf:
            lines_text = zf.read(_CORNELL_TOP + "movie_lines.txt").decode("iso-8859-1")
            convs_text = zf.read(_CORNELL_TOP + "movie_conversations.txt").decode("iso-8859-1")
    except (zipfile.BadZipFile, KeyError) as e:
        raise FetchError(f"{path}: not a readable Cornell Movie-Dialogs archive ({e!r})") from e
    utterances = {}
    for line in lines_text.splitlines():
        fields = line.split(_CORNELL_SEP)
        if len(fields) == 5:
            utterances[fields[0].strip()] = fields[4]
    pairs = []
    for line in convs_text.splitlines():
        fields = line.split(_CORNELL_SEP)
        if len(fields) != 4:
            continue
        ids = re.findall(r"L\d+", fields[3])
        pairs += [(utterances[a], utterances[b]) for a, b in zip(ids, ids[1:]) if a in utterances and b in utterances]
    if not pairs:
        raise FetchError(f"{path}: no conversation pairs found")
    return pairs


# --- Manifest generation ---------------------------------------------------------------------------------------
# Files that no mirror holds: official archives and the authors' training CSVs (checksums as published).
_EXTRA_MANIFEST_ROWS = (
    (SNLI_ZIP, "", SNLI_ZIP_SHA256, "", "official snli_1.0.zip; sha256 as recorded by ParlAI and Julia DataDeps"),
    (CORNELL_ZIP, "", CORNELL_ZIP_SHA256, "", "official corpus zip; sha256 as recorded by Julia DataDeps"),
    (DIALOG_FILES[0].path, "", "", catalog.get("dialog-train").git_sha1,
     "not in the mirror; git blob SHA-1 from the repository's tree"),
    (QG_FILES[0].path, "", "", catalog.get("qg-train").git_sha1,
     "not in the mirror; git blob SHA-1 from the repository's tree"),
    (SQUAD_DEV.path, "", "", catalog.get("squad-dev").git_sha1,
     "official SQuAD v1.1 dev set (the articles of the QG dev pairs); git blob SHA-1 from the repository's tree"),
)


def manifest_text_from_mirror(mirror: str | os.PathLike) -> str:
    """text_manifest.tsv rebuilt from the mirror's MANIFEST.tsv files plus the rows for files it lacks."""
    mirror = Path(mirror)
    wanted = [SNLI_SAMPLE, SQUAD_DEV_REBUILT] + [f.path for f in QG_FILES + DIALOG_FILES]
    rows = []
    for folder in sorted({w.split("/")[0] for w in wanted}):
        with open(mirror / folder / "MANIFEST.tsv", encoding="utf-8") as f:
            for rec in csv.DictReader(f, delimiter="\t"):
                key = f"{folder}/{rec['path']}"
                if key in wanted:
                    rows.append((key, rec["bytes"], rec["sha256"], "", f"mirror {folder}/MANIFEST.tsv"))
    rows += list(_EXTRA_MANIFEST_ROWS)
    lines = [
        "# Expected files of the text corpora (seed 001). Generated by",
        "#   python -m nlpbench.textgen.sources MIRROR_DIR > src/nlpbench/textgen/text_manifest.tsv",
        "# path: relative to a mirror root. git_sha1: git blob SHA-1, possibly abbreviated as published.",
        "# A row with neither checksum is accepted unverified, with a warning, and its sha256 goes to STATUS.json.",
        "\t".join(_MANIFEST_HEADER),
    ]
    lines += ["\t".join(r) for r in sorted(rows)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m nlpbench.textgen.sources MIRROR_DIR > src/nlpbench/textgen/text_manifest.tsv")
    sys.stdout.write(manifest_text_from_mirror(sys.argv[1]))
