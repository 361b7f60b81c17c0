"""Data of the ACVI family: the CNN/DM mirror subset, Du et al. QG pairs, lead-3, synthetic video features.

CNN/DM (thesis §7.4.1). The full See et al. corpus (287k/13k/11k) is not reachable offline. The mirror holds 250 real
test articles (artidoro/frank), each with the untokenised article lines, the lower-cased tokenised reference
highlights and the outputs of 5 released systems, among them `pgn` = See et al.'s pointer-generator. We load them,
verify each file against the mirror's MANIFEST.tsv sha256, and tokenise the articles as See et al. did
(`tokenize.py`). References and system outputs are already lower-cased PTB tokens; they are re-split into
sentences (for ROUGE-Lsum) by `split_sentences`.

QG (Du et al. 2017, xinyadu/nqg): tokenised sentence -> question pairs, dev (10,570) and test (11,877). A real
copy-heavy seq2seq corpus for the pointer-generator addition table; its train split is not in the mirror, so the
addition table trains on dev and tests on test (pipeline/tables/tolias-thesis/acvi-qg.yaml, its notes).

Video: `synthetic_video_features` makes 24 x 1024 tensors for smoke tests only (GoogLeNet features of MSVD are not
available offline); every output says "synthetic". A user-supplied MSVD copy is read by `prepare_msvd`, DUC 2004
task 1 by `prepare_duc2004` (layouts: docs/acvi.md and the comments above them).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import torch

from nlpbench.data import tsv
from nlpbench.data.fetch import MIRROR_ENV, ChecksumError, FetchError, resolve_mirror
from nlpbench.data.prepared import file_records, prepared_file
from nlpbench.runtime import checkpoints
from nlpbench.runtime.io import write_json, write_text

from .tokenize import fix_missing_period, ptb_tokenize, split_sentences

CNNDM_FOLDER = "cnn_dm"
CNNDM_JSON_DIR = "artidoro-frank/data/articles-wbertscore-json"
CNNDM_SYSTEMS = ("pgn", "s2s", "bus", "bert_sum", "bart")  # keys of the released outputs in each file
QG_FOLDER = "qg_du2017"
QG_DIR = "xinyadu-nqg/data/processed"
STATUS_FILE = "STATUS.json"


def mirror_dir(explicit: str | os.PathLike | None = None) -> Path:
    """The offline data mirror (`explicit`, else $NLPBENCH_MIRROR: nlpbench.data.fetch.resolve_mirror); the
    CNN/DM test subset and the QG pairs exist only there."""
    mirror = resolve_mirror(explicit)
    if mirror is None:
        raise FetchError(f"no data mirror: pass one, or set ${MIRROR_ENV} to a directory holding "
                         f"{CNNDM_FOLDER}/ and {QG_FOLDER}/")
    return mirror


def read_manifest(folder: Path) -> dict[str, str]:
    """{relative path: sha256} from `folder`/MANIFEST.tsv (columns path, bytes, lines, sha256)."""
    path = folder / "MANIFEST.tsv"
    if not path.is_file():
        raise FetchError(f"no manifest {path}: the mirror folder is missing or incomplete "
                         f"(set ${MIRROR_ENV} to the data mirror)")
    return tsv.mirror_checksums(path)


def verified_bytes(folder: Path, rel: str, manifest: dict[str, str]) -> bytes:
    """The bytes of folder/rel after checking them against the manifest's sha256."""
    path = folder / rel
    if rel not in manifest:
        raise FetchError(f"{rel} is not listed in {folder / 'MANIFEST.tsv'}")
    if not path.is_file():
        raise FetchError(f"missing data file {path}")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != manifest[rel]:
        raise ChecksumError(f"{path}: sha256 {digest} differs from the manifest's {manifest[rel]}")
    return data


# ------------------------------------------------------------------------------------------------- CNN/DM
@dataclass
class Article:
    """One CNN/DM test story: tokenised article sentences, reference and released system summaries (sentences)."""

    id: str
    article: list[list[str]]                      # sentences of lower-cased PTB tokens
    reference: list[list[str]]
    systems: dict[str, list[list[str]]] = field(default_factory=dict)

    @property
    def article_tokens(self) -> list[str]:
        return [t for s in self.article for t in s]


def _summary_sentences(text: str) -> list[list[str]]:
    return split_sentences(text.lower().split())


def load_cnndm(mirror: str | os.PathLike | None = None, tokenizer: str = "auto") -> tuple[list[Article], str]:
    """The 250 mirror articles in file-name (hash) order, verified; (articles, tokenizer backend used)."""
    folder = mirror_dir(mirror) / CNNDM_FOLDER
    manifest = read_manifest(folder)
    rels = sorted(r for r in manifest if r.startswith(CNNDM_JSON_DIR + "/") and r.endswith(".json"))
    if not rels:
        raise FetchError(f"{folder / 'MANIFEST.tsv'} lists no file under {CNNDM_JSON_DIR}")
    raws = [json.loads(verified_bytes(folder, rel, manifest)) for rel in rels]
    # One tokenizer call for all article lines (one JVM start).
    lines, owner = [], []
    for k, raw in enumerate(raws):
        for line in raw["article_lines"]:
            if line.strip():
                lines.append(line)
                owner.append(k)
    tokens, backend = ptb_tokenize(lines, tokenizer)
    per_article: list[list[str]] = [[] for _ in raws]
    for k, toks in zip(owner, tokens):
        per_article[k].extend(fix_missing_period(toks))
    articles = []
    for raw, toks in zip(raws, per_article):
        if not toks:
            raise FetchError(f"article {raw['id']} is empty after tokenisation")
        systems = {name: _summary_sentences(raw[name]) for name in CNNDM_SYSTEMS if name in raw}
        articles.append(Article(id=raw["id"], article=split_sentences(toks),
                                reference=_summary_sentences(raw["pgn_reference"]), systems=systems))
    return articles, backend


def lead_k(article: Article, k: int = 3) -> list[list[str]]:
    """The lead-k baseline: the article's first k sentences."""
    return article.article[:k]


def truncate(tokens: Sequence[str], max_len: int) -> list[str]:
    """See et al.: the first max_len tokens (400 article / 100 summary tokens in the last training phase)."""
    return list(tokens[:max_len])


def prepare_cnndm(out_dir: str | os.PathLike, mirror: str | os.PathLike | None = None, *,
                  tokenizer: str = "auto", max_enc_steps: int = 400, max_dec_steps: int = 100) -> dict:
    """Write articles.jsonl (tokenised and untruncated), then STATUS.json last. Returns the status."""
    out = Path(out_dir)
    articles, backend = load_cnndm(mirror, tokenizer)
    lines = [json.dumps(asdict(a), ensure_ascii=False) for a in articles]
    write_text(out / "articles.jsonl", "\n".join(lines) + "\n")
    n_tok = [len(a.article_tokens) for a in articles]
    status = {
        "dataset": "cnn_dm mirror subset (artidoro/frank, See et al. test split)",
        "n_articles": len(articles), "tokenizer": backend,
        "max_enc_steps": max_enc_steps, "max_dec_steps": max_dec_steps,
        "mean_article_tokens": sum(n_tok) / len(n_tok),
        "systems": list(CNNDM_SYSTEMS), "files": file_records(out, ["articles.jsonl"]),
    }
    write_json(out / STATUS_FILE, status)
    return status


def read_qg(out_dir: str | os.PathLike, split: str) -> list[tuple[list[str], list[str]]]:
    """(sentence tokens, question tokens) pairs of a prepared QG split, verified against its STATUS.json."""
    path = prepared_file(out_dir, f"{split}.jsonl", "acvi-qg")
    return [(r["src"], r["tgt"]) for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())]


def read_prepared_cnndm(out_dir: str | os.PathLike) -> list[Article]:
    path = prepared_file(out_dir, "articles.jsonl", "acvi-cnndm-mirror")
    return [Article(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines()]


# ---------------------------------------------------------------------------------------------------- QG
def load_qg(split: str, mirror: str | os.PathLike | None = None) -> list[tuple[list[str], list[str]]]:
    """Du et al. (sentence tokens, question tokens) pairs of split "dev" or "test", verified."""
    if split not in ("dev", "test"):
        raise ValueError(f"QG split {split!r}: the mirror has dev and test only (no train)")
    folder = mirror_dir(mirror) / QG_FOLDER
    manifest = read_manifest(folder)
    src = verified_bytes(folder, f"{QG_DIR}/src-{split}.txt", manifest).decode("utf-8").splitlines()
    tgt = verified_bytes(folder, f"{QG_DIR}/tgt-{split}.txt", manifest).decode("utf-8").splitlines()
    if len(src) != len(tgt):
        raise FetchError(f"QG {split}: {len(src)} sentences but {len(tgt)} questions")
    return [(s.split(), t.split()) for s, t in zip(src, tgt)]


def prepare_qg(out_dir: str | os.PathLike, mirror: str | os.PathLike | None = None) -> dict:
    """Write dev.jsonl and test.jsonl ({"src", "tgt"} token lists per line), then STATUS.json last."""
    out = Path(out_dir)
    counts = {}
    for split in ("dev", "test"):
        pairs = load_qg(split, mirror)
        if not pairs:
            raise FetchError(f"QG {split} is empty")
        write_text(out / f"{split}.jsonl", "\n".join(json.dumps({"src": s, "tgt": t}) for s, t in pairs) + "\n")
        counts[split] = len(pairs)
    status = {"dataset": "Du et al. 2017 QG (xinyadu/nqg processed)", "pairs": counts,
              "files": file_records(out, ["dev.jsonl", "test.jsonl"])}
    write_json(out / STATUS_FILE, status)
    return status


# ------------------------------------------------------------------------------------------------- video
SYNTHETIC_LABEL = "synthetic: random stand-in features, NOT GoogLeNet features of MSVD"


def synthetic_video_features(n_videos: int, frames: int = 24, dim: int = 1024, seed: int = 0) -> dict:
    """{"features": (n, frames, dim) float tensor, "label": SYNTHETIC_LABEL} for smoke tests of the video model.
    Non-negative like ReLU/pool features; each video has its own mean direction so captions can depend on it."""
    g = torch.Generator().manual_seed(seed)
    base = torch.rand(n_videos, 1, dim, generator=g)
    feats = (base + 0.1 * torch.randn(n_videos, frames, dim, generator=g)).clamp_min(0.0)
    return {"features": feats, "label": SYNTHETIC_LABEL}


# ------------------------------------------------------------------------------- CNN/DM full corpus (user-supplied)
# See et al.'s split: stories named by the sha1 of their url, listed in abisee/cnn-dailymail url_lists/all_*.txt.
# The pipeline cannot download them offline; `prepare_cnndm_full` reads a directory the user supplies:
#   <root>/cnn/stories/*.story, <root>/dailymail/stories/*.story, <root>/url_lists/all_{train,val,test}.txt
# (the val and test lists fall back to the mirror's copies).
CNNDM_SPLITS = ("train", "val", "test")
URL_LIST_DIR = "abisee-cnn-dailymail/url_lists"


def story_name(url: str) -> str:
    """The file name of a story: sha1 of its url (utf-8), hex, + ".story" (See et al.'s make_datafiles)."""
    return hashlib.sha1(url.strip().encode("utf-8")).hexdigest() + ".story"


def read_story(text: str) -> tuple[list[str], list[str]]:
    """(article lines, highlight lines) of a .story file: each line after "@highlight" is a highlight."""
    article, highlights, next_is_highlight = [], [], False
    for line in (ln.strip() for ln in text.splitlines()):
        if not line:
            continue
        if line == "@highlight":
            next_is_highlight = True
        elif next_is_highlight:
            highlights.append(line)
            next_is_highlight = False
        else:
            article.append(line)
    return article, highlights


def _url_list(root: Path, split: str, mirror: str | os.PathLike | None) -> list[str]:
    own = root / "url_lists" / f"all_{split}.txt"
    if own.is_file():
        return [u for u in own.read_text(encoding="utf-8").splitlines() if u.strip()]
    if split != "train":
        folder = mirror_dir(mirror) / CNNDM_FOLDER
        manifest = read_manifest(folder)
        data = verified_bytes(folder, f"{URL_LIST_DIR}/all_{split}.txt", manifest).decode("utf-8")
        return [u for u in data.splitlines() if u.strip()]
    raise FetchError(f"{own} is missing: the training url list all_train.txt of "
                     "https://github.com/abisee/cnn-dailymail (url_lists/) is needed")


def prepare_cnndm_full(out_dir: str | os.PathLike, root: str | os.PathLike, mirror: str | os.PathLike | None = None,
                       *, tokenizer: str = "auto") -> dict:
    """Tokenise every story of each split as See et al. (lower-cased PTB tokens, missing periods fixed); write
    <split>.jsonl ({"id", "article": sentences, "reference": sentences}) and STATUS.json last. A story missing
    from `root` is an error that counts them and names the first."""
    root, out = Path(root), Path(out_dir)
    counts = {}
    for split in CNNDM_SPLITS:
        urls = _url_list(root, split, mirror)
        paths, missing = [], []
        for url in urls:
            name = story_name(url)
            found = next((root / d / "stories" / name for d in ("cnn", "dailymail")
                          if (root / d / "stories" / name).is_file()), None)
            (paths if found else missing).append(found or name)
        if missing:
            raise FetchError(f"{root}: {len(missing)} of {len(urls)} {split} stories missing (first: {missing[0]}); "
                             "unpack cnn_stories.tgz and dailymail_stories.tgz from https://cs.nyu.edu/~kcho/DMQA/")
        stories = [read_story(p.read_text(encoding="utf-8")) for p in paths]
        backend = _write_cnndm_split(out, split, [p.stem for p in paths], stories, tokenizer)
        counts[split] = len(stories)
    status = {"dataset": "CNN/DailyMail non-anonymised, See et al. split", "available": True, "stories": counts,
              "tokenizer": backend, "root": str(root), "files": file_records(out, [f"{s}.jsonl" for s in CNNDM_SPLITS])}
    write_json(out / STATUS_FILE, status)
    return status


def _write_cnndm_split(out: Path, split: str, ids: list[str], stories: list[tuple[list[str], list[str]]],
                       tokenizer: str) -> str:
    """Tokenise (article lines, highlight lines) as See et al. (lower-cased PTB tokens, a missing period added to
    each line) and write <split>.jsonl ({"id", "article": sentences, "reference": highlight sentences}); return the
    tokenizer backend used."""
    lines, owner = [], []
    for k, (art, high) in enumerate(stories):
        lines += art + high
        owner += [(k, "a")] * len(art) + [(k, "h")] * len(high)
    tokens, backend = ptb_tokenize(lines, tokenizer)
    arts = [{"id": i, "article": [], "reference": []} for i in ids]
    for (k, part), toks in zip(owner, tokens):
        toks = fix_missing_period(toks)
        if part == "a":
            arts[k]["article"].extend(toks)
        else:
            arts[k]["reference"].append(toks)
    rows = [json.dumps({**a, "article": split_sentences(a["article"])}, ensure_ascii=False) for a in arts]
    write_text(out / f"{split}.jsonl", "\n".join(rows) + "\n")
    return backend


# CNN/DM from the Hugging Face Hub (abisee/cnn_dailymail, config 3.0.0: parquet files with the columns article,
# highlights, id). Made from the DMQA stories with See et al.'s url lists, so the split is theirs (train 287,113 where
# See et al. report 287,226: the Hub's builder leaves out the stories without article text or highlights; validation
# 13,368; test 11,490), and `id` is the sha1 of the story's url, See et al.'s story file name. Text is not tokenised or lower-cased there; each article
# line already ends with a period (the same fix See et al. applied) and the lines are joined with spaces, the
# highlights with newlines. We tokenise as See et al. did (PTB tokenizer, lower case): `_write_cnndm_split`.
CNNDM_HUB_FILES = {"train": ("cnndm-train-00000-of-00003", "cnndm-train-00001-of-00003", "cnndm-train-00002-of-00003"),
                   "val": ("cnndm-validation",), "test": ("cnndm-test",)}
CNNDM_HUB_COLUMNS = ("id", "article", "highlights")


def read_cnndm_parquet(path: Path) -> tuple[list[str], list[tuple[list[str], list[str]]]]:
    """(ids, [(article lines, highlight lines)]) of one parquet file of abisee/cnn_dailymail 3.0.0."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise FetchError(f"{path}: not a readable parquet file ({e}); delete it and run the data step "
                         "acvi-cnndm-full again") from e
    missing = [c for c in CNNDM_HUB_COLUMNS if c not in table.column_names]
    if missing:
        raise FetchError(f"{path}: lacks the column(s) {', '.join(missing)} of abisee/cnn_dailymail 3.0.0 "
                         f"({', '.join(CNNDM_HUB_COLUMNS)}; found {', '.join(table.column_names)})")
    cols = {c: table.column(c).to_pylist() for c in CNNDM_HUB_COLUMNS}
    stories = [([a] if a and a.strip() else [], [h.strip() for h in (hl or "").split("\n") if h.strip()])
               for a, hl in zip(cols["article"], cols["highlights"])]
    return [str(i) for i in cols["id"]], stories


def prepare_cnndm_hub(out_dir: str | os.PathLike, downloads: str | os.PathLike,
                      mirror: str | os.PathLike | None = None, *, tokenizer: str = "auto",
                      allow_download: bool = True) -> dict:
    """Fetch the abisee/cnn_dailymail 3.0.0 parquet files (the mirror's copies under cnn_dm/hf-abisee-cnn_dailymail/,
    else downloaded; each verified by sha256), tokenise them like `prepare_cnndm_full` and write <split>.jsonl, then
    STATUS.json last (which file came from where, with its checksum)."""
    from nlpbench.data import catalog
    from nlpbench.data.fetch import fetch_remote

    out = Path(out_dir)
    counts, sources, backend = {}, [], ""
    for split in CNNDM_SPLITS:
        ids, stories = [], []
        for key in CNNDM_HUB_FILES[split]:
            path, origin, checksum = fetch_remote(catalog.get(key), downloads, mirror, allow_download=allow_download)
            sources.append({"split": split, "file": path.name, "from": origin, "checksum": checksum})
            more_ids, more = read_cnndm_parquet(path)
            ids += more_ids
            stories += more
        if not stories:
            raise FetchError(f"CNN/DM {split}: the parquet files hold no stories")
        backend = _write_cnndm_split(out, split, ids, stories, tokenizer)
        counts[split] = len(stories)
    status = {"dataset": "CNN/DailyMail non-anonymised, See et al. split (Hugging Face abisee/cnn_dailymail 3.0.0)",
              "available": True, "stories": counts, "tokenizer": backend, "sources": sources,
              "files": file_records(out, [f"{s}.jsonl" for s in CNNDM_SPLITS])}
    write_json(out / STATUS_FILE, status)
    return status


def read_cnndm_split(out_dir: str | os.PathLike, split: str) -> list[tuple[list[str], list[str]]]:
    """(article tokens, reference tokens) pairs of a prepared split."""
    rows = prepared_file(out_dir, f"{split}.jsonl", "acvi-cnndm-full").read_text(encoding="utf-8").splitlines()
    return [([t for s in r["article"] for t in s], [t for s in r["reference"] for t in s]) for r in map(json.loads, rows)]


# ------------------------------------------------------------------------------- user-supplied MSVD and DUC 2004
# MSVD (thesis §7.4.2, paper §4.2 and appendix B). The user's directory (acvi.data.msvd_dir):
#   captions/<one>.csv    the Microsoft Research Video Description Corpus ("MSR Video Description Corpus.csv"):
#                         header row with at least VideoID, Start, End, Language, Description; English rows used
#   features/<clip>.npy   float32 (frames, feat_dim) = 24 x 1024 GoogLeNet pool5, <clip> either the YouTube clip id
#                         "<VideoID>_<Start>_<End>" of the split lists or its vidN name (youtube_mapping.txt)
# The split is the mirror's (hobincar/RecNet MSVD metadata {train,valid,test}.list: 1200/100/670 clip ids).
VIDEO_FOLDER = "video_captioning"
MSVD_SPLIT_DIR = "hobincar-RecNet/data/MSVD/metadata"
MSVD_MAPPING = "yaoli-arctic-capgen-vid/youtube_mapping.txt"
MSVD_SPLITS = ("train", "valid", "test")
MSVD_COLUMNS = ("VideoID", "Start", "End", "Language", "Description")


def msvd_split_lists(mirror: str | os.PathLike | None = None) -> tuple[dict[str, list[str]], dict[str, str]]:
    """({split: clip ids in vidN order}, {clip id: vidN}) from the mirror, verified against its manifest. The lists
    are not ordered; their splits are vid1-1200 / vid1201-1300 / vid1301-1970, so each split is put in the standard
    clip order (vidN), where "the first n clips" means the standard split's (a clip without a vidN goes last)."""
    folder = mirror_dir(mirror) / VIDEO_FOLDER
    manifest = read_manifest(folder)
    mapping = dict(line.split()[:2] for line in verified_bytes(folder, MSVD_MAPPING, manifest).decode("utf-8")
                   .splitlines() if line.strip())
    order = lambda clip: int(mapping[clip][3:]) if clip in mapping else float("inf")  # noqa: E731
    splits = {s: sorted(json.loads(verified_bytes(folder, f"{MSVD_SPLIT_DIR}/{s}.list", manifest)), key=order)
              for s in MSVD_SPLITS}
    return splits, mapping


def read_msvd_captions(path: Path) -> dict[str, list[list[str]]]:
    """{clip id: wordpunct-tokenised English descriptions (case kept)} of the MSVD corpus CSV."""
    import csv

    from .tokenize import wordpunct_tokenize
    with open(path, encoding="utf-8", newline="") as f:
        rows = csv.reader(f)
        header = next(rows, None)
        missing = [c for c in MSVD_COLUMNS if header is None or c not in header]
        if missing:
            raise FetchError(f"{path}: header lacks column(s) {', '.join(missing)} (the MSVD corpus CSV has "
                             f"{', '.join(MSVD_COLUMNS)} among its columns)")
        col = {c: header.index(c) for c in MSVD_COLUMNS}
        caps: dict[str, list[list[str]]] = {}
        for n, row in enumerate(rows, 2):
            if len(row) <= max(col.values()):
                raise FetchError(f"{path}, line {n}: {len(row)} fields, fewer than the header's columns")
            if row[col["Language"]].strip() != "English":
                continue
            toks = wordpunct_tokenize(row[col["Description"]])
            if toks:
                clip = f"{row[col['VideoID']].strip()}_{row[col['Start']].strip()}_{row[col['End']].strip()}"
                caps.setdefault(clip, []).append(toks)
    return caps


def prepare_msvd(out_dir: str | os.PathLike, root: str | os.PathLike, mirror: str | os.PathLike | None = None, *,
                 frames: int = 24, feat_dim: int = 1024) -> dict:
    """Write <split>.pt ({"clips", "features": (n, frames, feat_dim) float32, "captions": token lists per clip})
    per mirror split, then STATUS.json (sizes and sha256). A missing caption file, clip feature or caption, or a
    feature of the wrong shape, is an error naming it."""
    import numpy as np

    root, out = Path(root), Path(out_dir)
    csvs = sorted((root / "captions").glob("*.csv"))
    if len(csvs) != 1:
        raise FetchError(f"{root / 'captions'}: expected exactly one MSVD corpus .csv, found "
                         f"{len(csvs)}{': ' + ', '.join(p.name for p in csvs) if csvs else ''}")
    caps = read_msvd_captions(csvs[0])
    splits, mapping = msvd_split_lists(mirror)
    counts, names = {}, []
    for split, clips in splits.items():
        feats = torch.empty(len(clips), frames, feat_dim)
        for i, clip in enumerate(clips):
            if clip not in caps:
                raise FetchError(f"{csvs[0]}: no English description of {split} clip {clip}")
            cands = [root / "features" / f"{c}.npy" for c in (clip, mapping.get(clip)) if c]
            path = next((p for p in cands if p.is_file()), None)
            if path is None:
                raise FetchError(f"missing feature file of {split} clip {clip}: "
                                 f"{' or '.join(str(p) for p in cands)}")
            try:
                arr = np.load(path, allow_pickle=False)
            except (ValueError, OSError) as e:
                raise FetchError(f"{path}: not a readable .npy array ({e})") from e
            if arr.shape != (frames, feat_dim):
                raise FetchError(f"{path}: shape {arr.shape}, expected ({frames}, {feat_dim}) "
                                 "(acvi.tasks.video.video.frames / feat_dim)")
            feats[i] = torch.from_numpy(arr.astype(np.float32))
        checkpoints.save({"clips": list(clips), "features": feats, "captions": [caps[c] for c in clips]},
                         out / f"{split}.pt")
        counts[split] = {"clips": len(clips), "captions": sum(len(caps[c]) for c in clips)}
        names.append(f"{split}.pt")
    status = {"dataset": "MSVD (Chen & Dolan 2011), user-supplied captions and features", "available": True,
              "root": str(root), "captions_file": csvs[0].name, "splits": counts, "tokenizer": "wordpunct, case kept",
              "frames": frames, "feat_dim": feat_dim, "files": file_records(out, names)}
    write_json(out / STATUS_FILE, status)
    return status


def read_msvd_split(out_dir: str | os.PathLike, split: str) -> tuple[torch.Tensor, list[list[list[str]]]]:
    """(features (n, frames, dim), reference token lists per clip) of a prepared MSVD split."""
    d = checkpoints.load(prepared_file(out_dir, f"{split}.pt", "acvi-msvd", hint="acvi.data.msvd_dir"),
                         remedy="delete it and run the data step acvi-msvd again")
    return d["features"], d["captions"]


# DUC 2004 task 1 (paper §4.3), NIST layout under acvi.data.duc2004_dir:
#   docs/<cluster>/<DOCNO>          SGML-ish newswire: <DOC><DOCNO> APW19981016.0240 </DOCNO> ... <TEXT> ... </TEXT>
#   eval/models/1/<name>            task-1 human summaries named <cluster>.<type>.<length>.<T>.<assessor>.<DOCNO>,
#                                   e.g. D30001.P.10.T.A.APW19981016.0240 (four assessors per document)
DUC_MODEL_DIR = "eval/models/1"
_DUC_MODEL = re.compile(r"^(D\d+)\.[A-Z]\.\d+\.[A-Z]\.([A-Z])\.(.+)$")
_TAG = re.compile(r"<[^>]*>")


def read_duc_document(path: Path) -> tuple[str, list[str]]:
    """(DOCNO, text lines) of a DUC document file."""
    text = path.read_text(encoding="utf-8", errors="replace")
    docno = re.search(r"<DOCNO>\s*(.*?)\s*</DOCNO>", text, re.S)
    body = re.search(r"<TEXT>(.*?)</TEXT>", text, re.S)
    if docno is None or body is None:
        raise FetchError(f"{path}: malformed DUC document (no {'<DOCNO>' if docno is None else '<TEXT>'} element)")
    lines = [ln.strip() for ln in _TAG.sub("\n", body.group(1)).splitlines() if ln.strip()]
    if not lines:
        raise FetchError(f"{path}: empty <TEXT>")
    return docno.group(1), lines


def prepare_duc2004(out_dir: str | os.PathLike, root: str | os.PathLike, *, tokenizer: str = "auto") -> dict:
    """Tokenise the task-1 documents like the CNN/DM test articles (lower-cased PTB tokens, missing periods fixed,
    sentences) and their human summaries likewise; write articles.jsonl ({"id", "cluster", "article": sentences,
    "references": [sentences per assessor]}) and STATUS.json last."""
    root, out = Path(root), Path(out_dir)
    docs = sorted(p for p in (root / "docs").rglob("*") if p.is_file())
    if not docs:
        raise FetchError(f"{root / 'docs'}: no document files")
    models = sorted(p for p in (root / DUC_MODEL_DIR).glob("*") if p.is_file()) \
        if (root / DUC_MODEL_DIR).is_dir() else []
    if not models:
        raise FetchError(f"{root / DUC_MODEL_DIR}: no task-1 model summaries")
    refs: dict[str, list[tuple[str, str]]] = {}
    for p in models:
        m = _DUC_MODEL.match(p.name)
        if m is None:
            raise FetchError(f"{p}: name not <cluster>.<type>.<length>.T.<assessor>.<DOCNO> "
                             "(e.g. D30001.P.10.T.A.APW19981016.0240)")
        refs.setdefault(m.group(3), []).append((m.group(2), " ".join(p.read_text(encoding="utf-8",
                                                                                  errors="replace").split())))
    items = []
    for p in docs:
        docno, lines = read_duc_document(p)
        if docno not in refs:
            raise FetchError(f"{p}: no model summary of {docno} in {root / DUC_MODEL_DIR}")
        items.append((docno, p.parent.name, lines, [t for _, t in sorted(refs[docno])]))
    lines, owner = [], []
    for k, (_, _, doc_lines, ref_texts) in enumerate(items):
        lines += doc_lines + ref_texts
        owner += [(k, "a")] * len(doc_lines) + [(k, r) for r in range(len(ref_texts))]
    tokens, backend = ptb_tokenize(lines, tokenizer)
    rows = [{"id": d, "cluster": c, "article": [], "references": [[] for _ in r]} for d, c, _, r in items]
    for (k, part), toks in zip(owner, tokens):
        toks = fix_missing_period(toks)
        if part == "a":
            rows[k]["article"].extend(toks)
        else:
            rows[k]["references"][part].extend(toks)
    for r in rows:
        r["article"] = split_sentences(r["article"])
        r["references"] = [split_sentences(t) for t in r["references"]]
    write_text(out / "articles.jsonl", "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    status = {"dataset": "DUC 2004 task 1 (NIST), user-supplied", "available": True, "root": str(root),
              "documents": len(rows), "references": sum(len(r["references"]) for r in rows),
              "tokenizer": backend, "files": file_records(out, ["articles.jsonl"])}
    write_json(out / STATUS_FILE, status)
    return status


def read_duc2004(out_dir: str | os.PathLike) -> list[dict]:
    path = prepared_file(out_dir, "articles.jsonl", "acvi-duc2004", hint="acvi.data.duc2004_dir")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
