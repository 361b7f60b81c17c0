"""SQuAD v1.1: fetch (official URL or mirror, verified), tokenise with character offsets, split, prepare.

Tokeniser [D]: a word is a run of letters/digits/underscore; every other non-space character is a
token by itself (so "Levi's" -> Levi ' s, "7,000" -> 7 , 000). Each token keeps its (start, end) character
offsets, so an answer's character span maps to the first and last token it overlaps, and a predicted token
span maps back to the passage text between the start token's start and the end token's end.

Training labels use the first gold answer [D]. The offline mirror holds only a dev set rebuilt from the
explorer pages, whose answer_start is the FIRST occurrence of the answer text in the passage (the official offset
may point at a later occurrence); on that file the training label is that first occurrence. EM/F1 use only the
answer texts, so evaluation is unaffected. STATUS.json records which file was used.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
from dataclasses import dataclass
from pathlib import Path

from nlpbench.data import catalog
from nlpbench.data.fetch import (
    ChecksumError,
    DownloadError,
    FetchError,
    download,
    git_blob_sha1,
    resolve_mirror,
    sha256_file,
)
from nlpbench.data.prepared import STATUS_FILE, file_records, read_status as _read_status, verify_prepared
from nlpbench.runtime.io import read_json, write_json

URLS = {split: catalog.get(f"squad-{split}").url for split in ("train", "dev")}
# git blob SHA-1s of the official files (nlpbench.data.catalog; `git hash-object FILE`).
OFFICIAL_GIT_SHA1 = {split: catalog.get(f"squad-{split}").git_sha1 for split in ("train", "dev")}
# Offline mirror: the dev set rebuilt from the official explorer pages (answer_start = first occurrence).
MIRROR_RECONSTRUCTED_DEV = "squad/dev-v1.1.reconstructed.json.gz"
MIRROR_RECONSTRUCTED_DEV_SHA256 = "7dbb3dab2cb66e088a9242e3dd97d76a64718e6b3c4dd2741ba79725e8d904c3"
STEPS = "squad squad-vectors"      # the data steps that write a prepared folder

_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokenize(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Tokens of `text` and their (start, end) character offsets (end exclusive)."""
    tokens, offsets = [], []
    for m in _TOKEN.finditer(text):
        tokens.append(m.group())
        offsets.append((m.start(), m.end()))
    return tokens, offsets


def char_span_to_tokens(offsets: list[tuple[int, int]], start: int, end: int) -> tuple[int, int]:
    """(first, last) token index overlapping the character span [start, end)."""
    inside = [k for k, (a, b) in enumerate(offsets) if a < end and b > start]
    if not inside:
        raise ValueError(f"character span [{start}, {end}) covers no token")
    return inside[0], inside[-1]


def token_span_text(context: str, offsets: list[tuple[int, int]], first: int, last: int) -> str:
    """The passage text a predicted token span covers (empty when last < first)."""
    if last < first:
        return ""
    return context[offsets[first][0] : offsets[last][1]]


# ---------------------------------------------------------------- fetching


@dataclass(frozen=True)
class Source:
    path: Path
    description: str  # where it came from
    version: str  # "official" or "reconstructed-from-explorer-pages"
    checksum: str  # "git-sha1:..." or "sha256:..."


def _verify_official(path: Path, split: str, remedy: str) -> str:
    actual = git_blob_sha1(path)
    if actual != OFFICIAL_GIT_SHA1[split]:
        raise ChecksumError(f"{path}: git blob SHA-1 {actual} is not the official {split}-v1.1.json "
                            f"({OFFICIAL_GIT_SHA1[split]}); {remedy}")
    return f"git-sha1:{actual}"


def _mirror_remedy(what: str) -> str:
    return (f"the mirror's copy is damaged or not {what}: restore it, or use another mirror "
            "($NLPBENCH_MIRROR or the params key mirror)")


def fetch_split(split: str, downloads: str | os.PathLike, mirror: str | os.PathLike | None = None,
                allow_download: bool = True) -> Source:
    """The SQuAD v1.1 `split` file: mirror's official copy, else a (cached) download, else the mirror's
    reconstructed dev set (dev only). Raises FetchError naming every place looked at."""
    if split not in URLS:
        raise ValueError(f"unknown SQuAD split {split!r} (train or dev)")
    name = f"{split}-v1.1.json"
    mirror_dir = resolve_mirror(mirror)
    tried = []
    if mirror_dir is not None:
        candidate = mirror_dir / "squad" / name
        tried.append(str(candidate))
        if candidate.is_file():
            return Source(candidate, str(candidate), "official",
                          _verify_official(candidate, split, _mirror_remedy(f"the official file ({URLS[split]})")))
    cached = Path(downloads) / name
    tried.append(str(cached))
    remedy = "the download was deleted; run the data step again to download it anew"
    if not cached.is_file() and allow_download:
        try:
            download(URLS[split], cached, verify=lambda part: _verify_official(part, split, remedy))
        except DownloadError as e:
            tried.append(f"{URLS[split]} ({e})")
    if cached.is_file():
        try:
            return Source(cached, URLS[split], "official", _verify_official(cached, split, remedy))
        except ChecksumError:
            cached.unlink()
            raise
    if split == "dev" and mirror_dir is not None:
        candidate = mirror_dir / MIRROR_RECONSTRUCTED_DEV
        tried.append(str(candidate))
        if candidate.is_file():
            actual = sha256_file(candidate)
            if actual != MIRROR_RECONSTRUCTED_DEV_SHA256:
                raise ChecksumError(f"{candidate}: sha256 {actual}, expected {MIRROR_RECONSTRUCTED_DEV_SHA256}; "
                                    + _mirror_remedy("the data mirror's reconstructed dev set"))
            return Source(candidate, str(candidate), "reconstructed-from-explorer-pages", f"sha256:{actual}")
    raise FetchError(f"SQuAD v1.1 {name} not found; looked at: " + "; ".join(tried) +
                     ". Connect to the network or set $NLPBENCH_MIRROR to a directory holding squad/" + name)


def load_articles(path: str | os.PathLike) -> list[dict]:
    """The `data` list (articles) of a SQuAD v1.1 JSON file, plain or gzipped."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    articles = doc.get("data") if isinstance(doc, dict) else None
    if not articles:
        raise FetchError(f"{path}: no articles (expected a SQuAD v1.1 JSON with a non-empty 'data' list)")
    return articles


# ---------------------------------------------------------------- examples


def build_examples(articles: list[dict]) -> dict:
    """Tokenise every paragraph once; one example per question with the first gold answer's token span.

    Returns {"contexts": [{"title", "text", "tokens", "offsets"}], "examples": [{"id", "context", "question",
    "question_tokens", "answers", "answer_start_char", "span": [first, last]}]}."""
    contexts, examples = [], []
    for article in articles:
        for paragraph in article["paragraphs"]:
            text = paragraph["context"]
            tokens, offsets = tokenize(text)
            cid = len(contexts)
            contexts.append({"title": article["title"], "text": text, "tokens": tokens, "offsets": offsets})
            for qa in paragraph["qas"]:
                first = qa["answers"][0]
                start = first["answer_start"]
                end = start + len(first["text"])
                if text[start:end] != first["text"]:
                    raise FetchError(f"question {qa['id']}: answer_start {start} does not point at {first['text']!r}")
                examples.append({
                    "id": qa["id"],
                    "context": cid,
                    "question": qa["question"],
                    "question_tokens": tokenize(qa["question"])[0],
                    "answers": [a["text"] for a in qa["answers"]],
                    "answer_start_char": start,
                    "span": list(char_span_to_tokens(offsets, start, end)),
                })
    return {"contexts": contexts, "examples": examples}


def split_articles(titles: list[str], n_train: int, n_test: int, seed: int) -> tuple[list[str], list[str]]:
    """A seeded, article-level split: disjoint title lists (order of `titles` fixes the result)."""
    if len(set(titles)) != len(titles):
        raise ValueError("article titles must be unique")
    if n_train + n_test > len(titles):
        raise ValueError(f"cannot take {n_train}+{n_test} articles from {len(titles)}")
    order = list(titles)
    random.Random(seed).shuffle(order)
    return order[:n_train], order[n_train : n_train + n_test]


def hold_out_articles(built: dict, n_articles: int) -> tuple[dict, dict]:
    """(the rest, the last `n_articles` articles) of a build_examples output, split by article title in the
    order the articles appear (a seeded order already, where split_articles chose them): a validation set that
    shares no passage with the training part."""
    titles = list(dict.fromkeys(c["title"] for c in built["contexts"]))
    if not 0 < n_articles < len(titles):
        raise ValueError(f"cannot hold out {n_articles} of {len(titles)} training articles for validation")
    held = set(titles[-n_articles:])
    parts = ({"contexts": [], "examples": []}, {"contexts": [], "examples": []})
    new_id = {}
    for cid, c in enumerate(built["contexts"]):
        part = parts[c["title"] in held]
        new_id[cid] = (part, len(part["contexts"]))
        part["contexts"].append(c)
    for ex in built["examples"]:
        part, cid = new_id[ex["context"]]
        part["examples"].append({**ex, "context": cid})
    return parts


def _subset(articles: list[dict], titles: list[str]) -> list[dict]:
    by_title = {a["title"]: a for a in articles}
    return [by_title[t] for t in titles]


# ---------------------------------------------------------------- preparation


def read_status(out_dir: str | os.PathLike) -> dict | None:
    """STATUS.json of a finished preparation, its files verified (sizes and sha256); None when `out_dir` has none."""
    if not (Path(out_dir) / STATUS_FILE).is_file():
        return None
    return verify_prepared(out_dir, "squad", status=_read_status(out_dir, "squad"), remedy=_remedy(out_dir))


def _remedy(out_dir: str | os.PathLike) -> str:
    return f"delete {out_dir} and run the data steps again (nlpbench data {STEPS})"


def prepare(out_dir: str | os.PathLike, scale: str = "cpu", mirror: str | os.PathLike | None = None,
            n_train_articles: int = 40, n_test_articles: int = 8, split_seed: int = 0,
            allow_download: bool = True) -> dict:
    """Write train.json and test.json (build_examples output) and STATUS.json (last) into `out_dir`.

    scale "paper": train = train-v1.1, test = dev-v1.1. scale "cpu"/"smoke": both from the dev set, split by
    article (split_articles). Idempotent: a finished preparation is left alone."""
    out_dir = Path(out_dir)
    done = read_status(out_dir)
    if done is not None:
        return done
    downloads = out_dir.parent / "downloads"
    dev = fetch_split("dev", downloads, mirror, allow_download)
    dev_articles = load_articles(dev.path)
    sources = {"dev": dev}
    if scale == "paper":
        train = fetch_split("train", downloads, mirror, allow_download)
        sources["train"] = train
        parts = {"train": load_articles(train.path), "test": dev_articles}
        split = {"kind": "official", "train": "train-v1.1", "test": "dev-v1.1"}
    elif scale in ("cpu", "smoke"):
        titles = [a["title"] for a in dev_articles]
        train_titles, test_titles = split_articles(titles, n_train_articles, n_test_articles, split_seed)
        parts = {"train": _subset(dev_articles, train_titles), "test": _subset(dev_articles, test_titles)}
        split = {"kind": "dev-articles", "seed": split_seed, "train_titles": train_titles, "test_titles": test_titles}
    else:
        raise ValueError(f"unknown scale {scale!r} (paper, cpu, smoke)")
    counts = {}
    for name, articles in parts.items():
        built = build_examples(articles)
        if not built["examples"]:
            raise FetchError(f"{name}: no questions in the selected articles; nothing written")
        write_json(out_dir / f"{name}.json", built)
        counts[name] = {"articles": len(articles), "paragraphs": len(built["contexts"]),
                        "questions": len(built["examples"])}
    status = {
        "files": file_records(out_dir, ["train.json", "test.json"]),
        "scale": scale,
        "split": split,
        "counts": counts,
        "sources": {k: {"from": s.description, "version": s.version, "checksum": s.checksum}
                    for k, s in sources.items()},
        "tokenizer": "regex \\w+|[^\\w\\s] with character offsets",
        "training_label": "first gold answer; its answer_start as given in the source file",
        "answer_start": ("official offsets" if all(s.version == "official" for s in sources.values()) else
                         "reconstructed dev set: answer_start = first occurrence of the answer text in the passage "
                         "(the official offset may be a later occurrence); training labels use that first occurrence"),
    }
    write_json(out_dir / STATUS_FILE, status)
    return status


def load_prepared(out_dir: str | os.PathLike, part: str) -> dict:
    """train.json or test.json of a finished preparation, verified against its STATUS.json; a clear error if the
    preparation is not there or the file changed since."""
    if not (Path(out_dir) / STATUS_FILE).is_file():
        raise FetchError(f"{Path(out_dir) / STATUS_FILE} not found: run SQuAD preparation into {out_dir} first "
                         f"(nlpbench data squad)")
    verify_prepared(out_dir, "squad", [f"{part}.json"], remedy=_remedy(out_dir))
    return read_json(Path(out_dir) / f"{part}.json")
