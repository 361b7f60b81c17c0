"""The three corpora of the thesis (chs. 4-6, §4.5.2): SNLI sentences, SQuAD question generation
(Du et al. 2017 split, as the authors' CSVs) and Cornell Movie-Dialogs pairs.

Each preparation takes its files from a mirror directory or the official URL, verifies them against
text_manifest.tsv, preprocesses them (textgen.prep), and writes `out_dir/` atomically:

    train.tsv valid.tsv test.tsv   columns src, tgt, ref: space-joined tokens. src/tgt are the model's words
                                   (length-limited, out-of-vocabulary -> <unk>); ref is the untruncated target
                                   without <unk> (the BLEU reference of the authors' QG/dialog evaluation)
    vocab.tsv                      token<TAB>training count, id = line number, specials first
    STATUS.json                    version full | mirror, present / missing splits, sources and checksums

A missing file is not an error while a training split can be made: STATUS.json lists it, `version` says `mirror`
(cpu/smoke scale only: the splits are stand-ins made from what the mirror has) and `needs_data()` tells the table
code what is lacking. With no training data at all the preparation fails (FetchError naming the missing files and
where they were looked for) and writes nothing. A file that is present but fails its checksum raises ChecksumError
naming the file.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence

from nlpbench.data.fetch import FetchError, partial_dir, publish_partial, remove_stale_partials, resolve_mirror
from nlpbench.data.prepared import STATUS_FILE, file_records, verify_prepared
from nlpbench.textgen.prep import SPECIALS, TextRules, Vocab, normalize, tokenize
from nlpbench.textgen.sources import (
    CORNELL_URL,
    CORNELL_ZIP,
    DIALOG_COLUMNS,
    DIALOG_FILES,
    DIALOG_GROUP,
    QG_COLUMNS,
    QG_FILES,
    SNLI_SAMPLE,
    SQUAD_DEV,
    SQUAD_DEV_REBUILT,
    SNLI_SAMPLE_URL,
    SNLI_URL,
    SNLI_ZIP,
    SourceFetcher,
    SourceFile,
    TextManifestEntry,
    load_text_manifest,
    question_key,
    read_cornell_zip,
    read_csv_column,
    read_csv_pairs,
    read_snli_zip,
    read_squad_question_articles,
)
from nlpbench.runtime.io import read_json, write_json

SPLITS = ("train", "valid", "test")


# --- Configuration ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CorpusConfig:
    """Preprocessing and split settings of one corpus (defaults: thesis §4.5.2, §4.6.3 and §6.5)."""

    corpus: str
    vocab_size: int  # including the 4 special tokens (= softmax width |V|)
    max_src_words: int
    max_tgt_words: int
    eos_within_limit: bool  # True: </s> counts against the limit (SNLI, thesis §4.5.2 steps 5 then 8)
    keep_punct: str
    intraword_hyphen: bool = False
    seed: int = 0
    subset_size: int = 0  # SNLI: sentences sampled from the official pool
    split_sizes: tuple[int, ...] = ()  # full version (train, valid[, test]); dialog zip: test = the rest
    mirror_split_sizes: tuple[int, ...] = ()  # SNLI mirror sample (train, valid, test)
    mirror_valid_fraction: float = 0.1  # QG/dialog mirror version: share of official valid kept as valid
    max_pairs: int | None = None  # QG/dialog: keep the first N pairs of each file (the smoke scale); None = all
    # QG/dialog mirror version without a training file: "valid" (the official validation pairs train, but for
    # mirror_valid_fraction of them; the official test pairs test) | "grouped" (the official validation and test
    # pairs pooled and split by group, so that no group is in two splits: dialog's movie_id; QG's article, the Du
    # et al. test articles always training)
    mirror_split: str = "valid"
    mirror_split_fractions: tuple[float, ...] = (0.8, 0.1, 0.1)   # grouped: train, valid, test shares of the pairs

    @property
    def rules(self) -> TextRules:
        return TextRules(self.keep_punct, self.intraword_hyphen)


SNLI_CONFIG = CorpusConfig("snli", vocab_size=20_000, max_src_words=10, max_tgt_words=10, eos_within_limit=True,
                           keep_punct=",.", intraword_hyphen=True, subset_size=80_000,
                           split_sizes=(78_000, 1_000, 1_000), mirror_split_sizes=(3_500, 500, 1_000))
QG_CONFIG = CorpusConfig("qg", vocab_size=40_000, max_src_words=30, max_tgt_words=20, eos_within_limit=False,
                         keep_punct="?")
DIALOG_CONFIG = CorpusConfig("dialog", vocab_size=30_000, max_src_words=20, max_tgt_words=20,
                             eos_within_limit=False, keep_punct=".,?", split_sizes=(180_000, 10_000))
CONFIGS: dict[str, CorpusConfig] = {c.corpus: c for c in (SNLI_CONFIG, QG_CONFIG, DIALOG_CONFIG)}


# --- Preparation -----------------------------------------------------------------------------------------------
class Example(NamedTuple):
    src: tuple[str, ...]
    tgt: tuple[str, ...]
    ref: tuple[str, ...]


def permutation(n: int, seed: int) -> list[int]:
    """Fisher-Yates permutation from random.Random(seed).random(), which Python keeps stable across versions."""
    rng, order = random.Random(seed), list(range(n))
    for i in range(n - 1, 0, -1):
        j = int(rng.random() * (i + 1))
        order[i], order[j] = order[j], order[i]
    return order


def _tokenized_each(pairs: Iterable[tuple[str, str]], config: CorpusConfig) -> Iterator[tuple | None]:
    """Each pair preprocessed to (src words, tgt words), or None when a side is empty after normalisation."""
    rules, cache = config.rules, {}

    def words(text: str) -> list[str]:  # QG source sentences recur once per question
        if text not in cache:
            cache[text] = tokenize(normalize(text, rules))
        return cache[text]

    for src, tgt in pairs:
        s, t = words(src), words(tgt)
        yield (s, t) if s and t else None


def _tokenized_pairs(pairs: Iterable[tuple[str, str]], config: CorpusConfig) -> tuple[list[tuple], int]:
    """Preprocessed (src words, tgt words); pairs with an empty side after normalisation are dropped (counted)."""
    out = list(_tokenized_each(pairs, config))
    kept = [pair for pair in out if pair is not None]
    return kept, len(out) - len(kept)


def split_by_group(pairs: Sequence, groups: Sequence[str], fractions: Sequence[float], seed: int,
                   always_train: Iterable[str] = ()) -> tuple[dict[str, list], dict[str, list[str]]]:
    """Whole groups, in a seeded order, fill the validation split and then the test split until each holds its
    share of all the pairs (`fractions`: train, valid, test); the other groups, and those in `always_train`, train.
    No group is in two splits. Returns the pairs of each split and the groups each split holds."""
    by_group: dict[str, list] = {}
    for pair, group in zip(pairs, groups, strict=True):
        by_group.setdefault(group, []).append(pair)
    fixed = set(always_train)
    names = sorted(g for g in by_group if g not in fixed)
    targets = {"valid": round(fractions[1] * len(pairs)), "test": round(fractions[2] * len(pairs))}
    splits: dict[str, list] = {"train": [], "valid": [], "test": []}
    members: dict[str, list[str]] = {"train": [], "valid": [], "test": []}
    for name in sorted(g for g in by_group if g in fixed):
        splits["train"] += by_group[name]
        members["train"].append(name)
    for i in permutation(len(names), seed):
        split = next((s for s in ("valid", "test") if len(splits[s]) < targets[s]), "train")
        splits[split] += by_group[names[i]]
        members[split].append(names[i])
    return splits, members


def _unique_sentences(texts: Iterable[str], rules: TextRules) -> list[str]:
    """Normalised, non-empty, deduplicated (first occurrence kept) sentences."""
    seen: dict[str, None] = {}
    for text in texts:
        norm = normalize(text, rules)
        if norm:
            seen.setdefault(norm, None)
    return list(seen)


def _cut(items: Sequence, sizes: Sequence[int], names: Sequence[str] = SPLITS) -> dict[str, list]:
    out, start = {}, 0
    for name, size in zip(names, sizes):
        out[name], start = list(items[start:start + size]), start + size
    return out


def _prepare_snli(fetch: SourceFetcher, config: CorpusConfig) -> dict:
    rules = config.rules
    archive = fetch.get(SNLI_ZIP, SNLI_URL, "all")
    if archive is not None:
        pool = _unique_sentences(read_snli_zip(archive), rules)
        if len(pool) < config.subset_size or sum(config.split_sizes) != config.subset_size:
            raise FetchError(f"{archive}: {len(pool)} distinct sentences; cannot draw {config.subset_size} and "
                             f"split them {config.split_sizes}")
        order = permutation(len(pool), config.seed)[: config.subset_size]
        chosen = [tokenize(pool[i]) for i in order]
        splits = _cut([(s, s) for s in chosen], config.split_sizes)
        origin = (f"{config.subset_size:,} of {len(pool):,} distinct normalised SNLI 1.0 sentences (sentence1 and "
                  f"sentence2 of train/dev/test), seeded draw (seed {config.seed}), split {config.split_sizes}")
        return {"version": "full", "splits": splits, "origin": {s: origin for s in splits}, "dropped_empty": 0,
                "present": list(SPLITS)}
    sample = fetch.get(SNLI_SAMPLE, SNLI_SAMPLE_URL, "all")
    if sample is None:
        return {"version": "none", "splits": {}, "origin": {}, "dropped_empty": 0, "present": []}
    pool = _unique_sentences(sample.read_text(encoding="utf-8").splitlines(), rules)
    sizes = config.mirror_split_sizes
    if len(pool) < sum(sizes):
        raise FetchError(f"{sample}: {len(pool)} distinct sentences, fewer than the split {sizes} needs")
    chosen = [tokenize(pool[i]) for i in permutation(len(pool), config.seed)[: sum(sizes)]]
    splits = _cut([(s, s) for s in chosen], sizes)
    origin = (f"stand-in: the mirror's {len(pool):,}-sentence SNLI sample ({Path(SNLI_SAMPLE).name}), seeded "
              f"shuffle (seed {config.seed}), split {sizes}")
    return {"version": "mirror", "splits": splits, "origin": {s: origin for s in splits}, "dropped_empty": 0,
            "present": []}


class PairGroups(NamedTuple):
    """How a paired corpus's mirror version re-splits by group (mirror_split: grouped): the group of each pair of an
    official split (None: the pair cannot be placed, so it is left out and counted), the groups that always train,
    and what a group is, for the splits' origin."""

    of_split: Callable[[str, Path, int], list[str | None]]   # (split, its file, its pair count) -> group per pair
    always_train: tuple[str, ...]
    what: str


def _movie_groups() -> PairGroups:
    """Dialog: the authors' CSVs name each pair's film (movie_id)."""
    def of_split(split: str, path: Path, n: int) -> list[str | None]:
        return list(read_csv_column(path, DIALOG_GROUP)[:n])
    return PairGroups(of_split, (), DIALOG_GROUP)


DU_TEST_ARTICLES = "the Du et al. test articles"


def _article_groups(fetch: SourceFetcher, config: CorpusConfig) -> PairGroups:
    """QG: a Du et al. dev pair's article is its question's article in the SQuAD v1.1 dev set (Du et al.'s dev split
    is SQuAD's dev set, thesis §6.5.1); their test pairs come from other articles (SQuAD train, whose file the mirror
    lacks), so they train together. Training, validation and test thus share no article."""
    mirror_has = lambda key: fetch.mirror is not None and (fetch.mirror / key).is_file()
    if not mirror_has(SQUAD_DEV.path) and mirror_has(SQUAD_DEV_REBUILT):
        path = fetch.get(SQUAD_DEV_REBUILT, SQUAD_DEV.url, SQUAD_DEV.split)
    else:
        path = fetch.get(SQUAD_DEV.path, SQUAD_DEV.url, SQUAD_DEV.split)
    if path is None:
        raise FetchError(f"{config.corpus}: mirror_split grouped needs each pair's article from the SQuAD v1.1 dev "
                         f"set, which was not found ({fetch.missing_files[-1]['reason']}); put "
                         f"{SQUAD_DEV.path} or {SQUAD_DEV_REBUILT} in the mirror, or use mirror_split: valid")
    titles = read_squad_question_articles(path)

    def of_split(split: str, source: Path, n: int) -> list[str | None]:
        if split == "test":
            return [DU_TEST_ARTICLES] * n
        questions = read_csv_column(source, QG_COLUMNS[1])[:n]
        return [titles.get(question_key(q)) for q in questions]
    return PairGroups(of_split, (DU_TEST_ARTICLES,), "article")


def _prepare_paired(fetch: SourceFetcher, config: CorpusConfig, files: Sequence[SourceFile],
                    columns: tuple[str, str], fallback: Callable[[], dict | None] | None = None,
                    pair_groups: Callable[[], PairGroups] | None = None) -> dict:
    raw: dict[str, list[tuple[str, str]]] = {}
    paths: dict[str, Path] = {}
    for source in files:
        path = fetch.get(source.path, source.url, source.split)
        if path is not None:
            raw[source.split] = read_csv_pairs(path, columns)[: config.max_pairs]
            paths[source.split] = path
    if "train" not in raw and fallback is not None:
        result = fallback()
        if result is not None:
            return result
    if "train" not in raw and config.mirror_split == "grouped" and {"valid", "test"} <= set(raw):
        groups = pair_groups()
        return _grouped_stand_in(raw, {s: groups.of_split(s, paths[s], len(raw[s])) for s in ("valid", "test")},
                                 config, groups)
    splits, dropped = {}, 0
    for split, pairs in raw.items():
        splits[split], n = _tokenized_pairs(pairs, config)
        dropped += n
    origin = {s: f"official {s} split (authors' CSV)" for s in splits}
    present = sorted(splits, key=SPLITS.index)
    if "train" in splits:
        return {"version": "full", "splits": splits, "origin": origin, "dropped_empty": dropped, "present": present}
    if "valid" not in splits:
        return {"version": "none", "splits": splits, "origin": origin, "dropped_empty": dropped, "present": present}
    valid = splits["valid"]
    order = permutation(len(valid), config.seed)
    n_valid = max(1, round(len(valid) * config.mirror_valid_fraction))
    splits["valid"] = [valid[i] for i in order[:n_valid]]
    splits["train"] = [valid[i] for i in order[n_valid:]]
    origin["valid"] = (f"stand-in: {n_valid:,} of the {len(valid):,} official validation pairs "
                       f"(seeded shuffle, seed {config.seed})")
    origin["train"] = f"stand-in: the other {len(order) - n_valid:,} official validation pairs"
    return {"version": "mirror", "splits": splits, "origin": origin, "dropped_empty": dropped, "present": present}


def _grouped_stand_in(raw: dict[str, list], groups: dict[str, list[str | None]], config: CorpusConfig,
                      pair_groups: PairGroups) -> dict:
    """The mirror version of a paired corpus without its training file: the official validation and test pairs
    pooled and split by group (split_by_group), so training, validation and test share no group. Pairs without a
    group are left out (counted in the origin)."""
    pairs, kept_groups, dropped, unplaced = [], [], 0, 0
    for split in ("valid", "test"):
        for pair, group in zip(_tokenized_each(raw[split], config), groups[split], strict=True):
            if pair is None:
                dropped += 1
            elif group is None:
                unplaced += 1
            else:
                pairs.append(pair)
                kept_groups.append(group)
    splits, members = split_by_group(pairs, kept_groups, config.mirror_split_fractions, config.seed,
                                     pair_groups.always_train)
    what, n_groups = pair_groups.what, len(set(kept_groups))
    fixed = "".join(f"; {g} always train" for g in pair_groups.always_train)
    left_out = f"; {unplaced:,} pairs without a known {what} left out" if unplaced else ""
    origin = {s: (f"stand-in: {len(splits[s]):,} of the {len(pairs):,} official validation and test pairs pooled, "
                  f"the pairs of {len(members[s]):,} of the {n_groups:,} groups by {what} (seeded, seed "
                  f"{config.seed}; no {what} in two splits{fixed}{left_out})") for s in splits}
    return {"version": "mirror", "splits": splits, "origin": origin, "dropped_empty": dropped,
            "present": ["valid", "test"]}


def _cornell_fallback(fetch: SourceFetcher, config: CorpusConfig) -> dict | None:
    """Thesis split (180k / 10k / rest, reading A3) of the official corpus, when the authors' train CSV is
    unavailable but the official archive is."""
    archive = fetch.get(CORNELL_ZIP, CORNELL_URL, "all")
    if archive is None:
        return None
    fetch.sources = [s for s in fetch.sources if s["path"] == CORNELL_ZIP]  # the authors' CSVs go unused
    pairs, dropped = _tokenized_pairs(read_cornell_zip(archive), config)
    n_train, n_valid = config.split_sizes[:2]
    if len(pairs) <= n_train + n_valid:
        raise FetchError(f"{archive}: {len(pairs)} pairs, too few for the split {n_train}/{n_valid}/rest")
    pairs = [pairs[i] for i in permutation(len(pairs), config.seed)]
    splits = _cut(pairs, (n_train, n_valid, len(pairs) - n_train - n_valid))
    origin = (f"thesis split of the official corpus's consecutive-utterance pairs: {n_train:,} / {n_valid:,} / "
              f"rest, seeded shuffle (seed {config.seed}); not the authors' CSV split")
    return {"version": "full", "splits": splits, "origin": {s: origin for s in splits}, "dropped_empty": dropped,
            "present": list(SPLITS)}


def _write(tmp: Path, result: dict, config: CorpusConfig, fetch: SourceFetcher) -> dict:
    # Without a training split there is no vocabulary, hence nothing usable to write (version "none").
    splits = result["splits"] if "train" in result["splits"] else {}
    vocab = Vocab.build(((*s, *t) for s, t in splits["train"]), config.vocab_size) if splits else None
    outputs = {}
    for split in SPLITS:
        if split not in splits:
            continue
        rows = ["src\ttgt\tref"]
        for src, tgt in splits[split]:
            rows.append("\t".join((" ".join(vocab.known(src[: config.max_src_words])),
                                   " ".join(vocab.known(tgt[: config.max_tgt_words])), " ".join(tgt))))
        (tmp / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
        outputs[split] = {"file": f"{split}.tsv", "examples": len(splits[split]), "origin": result["origin"][split]}
    if vocab is not None:
        vocab.save(tmp / "vocab.tsv")
    version = result["version"]
    present = result["present"]
    status = {
        "corpus": config.corpus,
        "version": version,
        "scales": {"full": ["paper", "cpu", "smoke"], "mirror": ["cpu", "smoke"], "none": []}[version],
        "present": present,
        "missing": [s for s in SPLITS if s not in present],
        "missing_files": fetch.missing_files,
        "sources": fetch.sources,
        "splits": outputs,
        "dropped_empty_pairs": result["dropped_empty"],
        "vocab": None if vocab is None else {"file": "vocab.tsv", "size": len(vocab), "limit": config.vocab_size,
                                             "fit_on": "train", "specials": list(SPECIALS)},
        "config": _config_json(config),
        "files": file_records(tmp, [o["file"] for o in outputs.values()] + (["vocab.tsv"] if vocab else [])),
    }
    write_json(tmp / STATUS_FILE, status)
    return status


def _no_training_data(corpus: str, fetch: SourceFetcher) -> str:
    files = "; ".join(f"{m['path']} ({m['split']}): {m['reason']}" for m in fetch.missing_files)
    where = f"mirror {fetch.mirror}" if fetch.mirror else "no mirror (--mirror or $NLPBENCH_MIRROR)"
    how, fix = (("downloads allowed", "connect to the network") if fetch.allow_download else
                ("downloads disabled", "allow downloads"))
    return (f"{corpus}: no training data found ({where}; {how}), so nothing was prepared. Missing: {files}. "
            f"Put the files in the mirror or {fix}, then run the data step again.")


# Settings added after corpora were prepared: left out of STATUS.json's record while at these values, so that an
# earlier preparation with the same settings is still recognised.
NEUTRAL_SETTINGS = {"mirror_split": "valid", "mirror_split_fractions": (0.8, 0.1, 0.1)}


def _config_json(config: CorpusConfig) -> dict:
    record = {k: v for k, v in asdict(config).items() if not (k in NEUTRAL_SETTINGS and v == NEUTRAL_SETTINGS[k])}
    return json.loads(json.dumps(record))  # tuples -> lists, as read back from STATUS.json


def prepare_corpus(corpus: str, out_dir: str | os.PathLike, mirror: str | os.PathLike | None = None, *,
                   config: CorpusConfig | None = None, allow_download: bool = True,
                   urls: Mapping[str, str] | None = None,
                   manifest: Mapping[str, TextManifestEntry] | None = None) -> dict:
    """Prepare `corpus` ("snli", "qg" or "dialog") into `out_dir`; return its STATUS.json.

    Files come from `mirror` (else $NLPBENCH_MIRROR) or, if `allow_download`, their official URL (`urls` maps a
    manifest path to another URL). `out_dir` appears complete or not at all; a finished one with the same config
    is returned as is. Raises ChecksumError for a file that fails verification, never for a missing one.
    """
    if corpus not in CONFIGS:
        raise KeyError(f"unknown corpus {corpus!r}; expected one of {sorted(CONFIGS)}")
    config = config or CONFIGS[corpus]
    if config.corpus != corpus:
        raise ValueError(f"config is for {config.corpus!r}, not {corpus!r}")
    out_dir = Path(out_dir)
    existing = _finished_status(out_dir)
    if existing is not None:
        if existing.get("config") != _config_json(config):
            raise FetchError(f"{out_dir} was prepared with another configuration ({existing.get('config')}); "
                             "remove it to prepare it again")
        return existing
    remove_stale_partials(out_dir)
    fetch = SourceFetcher(resolve_mirror(mirror), out_dir.parent / "downloads", allow_download,
                     manifest if manifest is not None else load_text_manifest(), urls or {})
    if corpus == "snli":
        result = _prepare_snli(fetch, config)
    elif corpus == "qg":
        result = _prepare_paired(fetch, config, QG_FILES, QG_COLUMNS,
                                 pair_groups=lambda: _article_groups(fetch, config))
    else:
        result = _prepare_paired(fetch, config, DIALOG_FILES, DIALOG_COLUMNS,
                                 fallback=lambda: _cornell_fallback(fetch, config),
                                 pair_groups=_movie_groups)
    if "train" not in result["splits"]:
        raise FetchError(_no_training_data(corpus, fetch))
    tmp = partial_dir(out_dir)
    try:
        status = _write(tmp, result, config, fetch)
        return publish_partial(tmp, out_dir, status, _finished_status)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def prepare_snli(out_dir: str | os.PathLike, mirror: str | os.PathLike | None = None, **kwargs) -> dict:
    """SNLI sentences: the 80k subset split 78k/1k/1k (thesis §4.5), else the mirror's 5,000-sentence sample."""
    return prepare_corpus("snli", out_dir, mirror, **kwargs)


def prepare_qg(out_dir: str | os.PathLike, mirror: str | os.PathLike | None = None, **kwargs) -> dict:
    """Du et al. (2017) question-generation split (thesis §6.5.1), from the authors' CSVs."""
    return prepare_corpus("qg", out_dir, mirror, **kwargs)


def prepare_dialog(out_dir: str | os.PathLike, mirror: str | os.PathLike | None = None, **kwargs) -> dict:
    """Cornell Movie-Dialogs (line, reply) pairs: authors' CSV split, else the thesis split of the official zip."""
    return prepare_corpus("dialog", out_dir, mirror, **kwargs)


def _finished_status(out_dir: Path) -> dict | None:
    if not out_dir.exists():
        return None
    if out_dir.is_dir() and not any(out_dir.iterdir()):
        out_dir.rmdir()  # an empty folder made by a workflow engine counts as absent
        return None
    path = out_dir / STATUS_FILE
    if not path.is_file():
        raise FetchError(f"{out_dir} exists but has no {STATUS_FILE}; it is not a finished preparation: remove it")
    status = read_json(path)
    if not isinstance(status, dict) or not {"corpus", "version", "splits", "config"} <= status.keys():
        raise FetchError(f"{path}: not a text-corpus status file")
    if "train" not in status["splits"]:     # written before an empty preparation became an error
        raise FetchError(f"{out_dir} holds no training data (prepared when its files could not be found); delete "
                         f"{out_dir} and run the data step again")
    files = [split["file"] for split in status["splits"].values()] + (["vocab.tsv"] if status.get("vocab") else [])
    return verify_prepared(out_dir, status["corpus"], files, status=status)     # edited since? (sizes, sha256)


# --- Reading a prepared corpus ---------------------------------------------------------------------------------
@dataclass
class PreparedCorpus:
    """A prepared corpus read back: STATUS.json, vocabulary and the examples of each present split."""

    root: Path
    status: dict
    vocab: Vocab | None
    splits: dict[str, list[Example]]

    @property
    def config(self) -> CorpusConfig:
        cfg = dict(self.status["config"])
        for key in ("split_sizes", "mirror_split_sizes", "mirror_split_fractions"):
            if key in cfg:
                cfg[key] = tuple(cfg[key])
        return CorpusConfig(**cfg)

    def encode(self, words: Sequence[str], side: str, pad: bool = True) -> list[int]:
        """Ids of one `side` ("src" or "tgt") with </s>, limited as the corpus config says, padded to the limit."""
        if self.vocab is None:
            raise FetchError(f"{self.root}: no vocabulary (no training split)")
        cfg = self.config
        limit = {"src": cfg.max_src_words, "tgt": cfg.max_tgt_words}[side]
        width = limit if cfg.eos_within_limit else limit + 1
        return self.vocab.encode(words, limit, eos_within_limit=cfg.eos_within_limit, pad_to=width if pad else None)


def load_prepared(out_dir: str | os.PathLike) -> PreparedCorpus:
    """Read a folder written by prepare_corpus()."""
    out_dir = Path(out_dir)
    status = _finished_status(out_dir)
    if status is None:
        raise FetchError(f"{out_dir} does not exist; run the data step first")
    vocab = Vocab.load(out_dir / "vocab.tsv") if status.get("vocab") else None
    splits = {}
    for split, info in status["splits"].items():
        lines = (out_dir / info["file"]).read_text(encoding="utf-8").splitlines()
        if not lines or lines[0] != "src\ttgt\tref":
            raise FetchError(f"{out_dir / info['file']}: missing the header src<TAB>tgt<TAB>ref")
        examples = []
        for line in lines[1:]:
            src, tgt, ref = line.split("\t")
            examples.append(Example(tuple(src.split()), tuple(tgt.split()), tuple(ref.split())))
        if len(examples) != info["examples"]:
            raise FetchError(f"{out_dir / info['file']}: {len(examples)} rows, {STATUS_FILE} says {info['examples']}")
        splits[split] = examples
    return PreparedCorpus(out_dir, status, vocab, splits)


def needs_data(status: Mapping, scale: str) -> list[str]:
    """What a run at `scale` ("paper", "cpu", "smoke") lacks from this preparation; [] = ready.

    Table cells computed from a non-empty answer say "needs data".
    """
    if scale not in ("paper", "cpu", "smoke"):
        raise KeyError(f"unknown scale {scale!r}; expected paper, cpu or smoke")
    if scale == "paper" and status["version"] != "full":
        files = [f"{m['path']} ({m['split']})" for m in status.get("missing_files", [])]
        return [f"{status['corpus']}: official {', '.join(status['missing'])} split(s) missing"
                + (f": {'; '.join(files)}" if files else "")]
    lacking = [s for s in SPLITS if s not in status["splits"]]
    return [f"{status['corpus']}: no {s} split" for s in lacking]
