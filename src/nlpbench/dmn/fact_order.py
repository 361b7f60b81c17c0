"""bAbI task 16 re-ordered into the six fact-order patterns of Table 6.1, and the augmented training set.

Shen (2022) thesis §6.3.3-6.3.4; the readings where it is silent: docs/dmn.md.
F1, F2, F3 are the three supporting facts in annotation order (the order they must be found: F1 = the queried
entity's species, F2 = another entity of that species, F3 = that entity's colour). A pattern is the order in
which F1, F2, F3 stand in the story. Patterns are *constructed*: the three supporting sentences are written
back into their own three line positions p1 < p2 < p3 in the pattern's order; distractors keep their lines.

Everything here is a pure function of its inputs (and a seed); `write_dataset` / `read_dataset` store a derived
data set as bAbI-format text files plus a manifest, atomically, and read it back exactly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from nlpbench.data.babi import Sample, parse_file
from nlpbench.data.fetch import FetchError
from nlpbench.data.prepared import read_status, remedy_for, verify_prepared
from nlpbench.runtime import io

# Table 6.1: pattern -> which fact (0 = F1, 1 = F2, 2 = F3) stands first, second and third in the story.
PATTERNS: dict[int, tuple[int, int, int]] = {
    1: (0, 1, 2),  # F1, F2, F3
    2: (0, 2, 1),  # F1, F3, F2
    3: (1, 0, 2),  # F2, F1, F3
    4: (1, 2, 0),  # F2, F3, F1
    5: (2, 0, 1),  # F3, F1, F2
    6: (2, 1, 0),  # F3, F2, F1
}
PATTERN_SPLITS = ("train", "val", "test")
MANIFEST = "manifest.json"
FORMAT = "nlpbench-babi-derived/1"
_TOKEN = re.compile(r"\w+")
_SUFFIX = " (pattern "


@dataclass(frozen=True)
class PatternConfig:
    """How the six pattern data sets are cut from the 10,000 en-10k task-16 training questions (§6.3.3).

    block_size: questions per pattern [T: 1,666]; 6 x 1,666 = 9,996, the last 4 questions are dropped.
    block_order: "file" cuts consecutive blocks in file order (default); "shuffled" cuts
        them from a seeded permutation.
    test_size: test questions per pattern. None = floor(test_fraction * block_size) = 333, the text's 20 %
        [T]; 300 is the size the reported accuracies' granularity implies.
    val_fraction: share of the rest (1,333) held out for validation, rounded: 133 val, 1,200 train [T: 9:1].
    unique_test_content: the test questions of every pattern are drawn only from questions whose story
        content (the multiset of facts plus question and answer, order ignored) occurs once among all the
        file's questions. The file repeats 155 stories up to order; a re-ordered copy of a test story in some
        pattern's training set would be a leak, so duplicates always go to train/validation. Not in the
        thesis (our reading); False draws test questions from the whole block.
    seed: seeds the splits (numpy Generator([seed, pattern]) per pattern) and the "shuffled" block order.
    distractor_order: "keep" (default: distractors keep their lines) or "shuffle": the two facts
        of every distractor entity (species and colour) swap lines with probability 1/2. In en-10k task 16
        every entity's species fact precedes its colour fact, so in patterns 2, 5 and 6 (F3 before F2) the
        answer entity is the only one in reverse order, a cue an order-aware model can read the answer from;
        "shuffle" removes that cue (our addition; see `order_cue`).
    """

    block_size: int = 1666
    block_order: str = "file"
    test_size: int | None = None
    test_fraction: float = 0.2
    val_fraction: float = 0.1
    unique_test_content: bool = True
    seed: int = 0
    distractor_order: str = "keep"

    def n_test(self) -> int:
        return int(self.test_fraction * self.block_size) if self.test_size is None else self.test_size

    def n_val(self) -> int:
        return int(round((self.block_size - self.n_test()) * self.val_fraction))


@dataclass(frozen=True)
class AugmentConfig:
    """The augmented training set of §6.3.4 (the thesis gives no recipe; our reading).

    source: "all_patterns" (default): pool the training portions of the six patterns (6 x 1,200)
        and write every story in all 6 orders: 43,200 questions; "pattern1" (option B): only pattern 1's
        training portion x 6 orders = 7,200.
    augment_val: the validation portions are pooled and augmented the same way (6 x 133 x 6 = 4,788);
        False keeps the pooled validation questions as they are.
    """

    source: str = "all_patterns"
    augment_val: bool = True


# -- single samples -------------------------------------------------------------------------------------
def supporting_positions(sample: Sample) -> tuple[int, int, int]:
    """Story positions (0-based) of F1, F2, F3; ValueError naming the sample unless there are 3 distinct."""
    if len(sample.supporting) != 3 or len(set(sample.supporting)) != 3:
        raise ValueError(f"{sample.source}: fact-order patterns need 3 distinct supporting facts, "
                         f"got ids {list(sample.supporting)}")
    try:
        pos = tuple(sample.fact_ids.index(i) for i in sample.supporting)
    except ValueError:
        raise ValueError(f"{sample.source}: supporting ids {list(sample.supporting)} are not all fact ids "
                         f"{list(sample.fact_ids)}") from None
    return pos  # type: ignore[return-value]


def natural_pattern(sample: Sample) -> int:
    """The Table 6.1 pattern a sample already has (diagnostic: the file's natural orders are far from balanced)."""
    pos = supporting_positions(sample)
    order = tuple(sorted(range(3), key=pos.__getitem__))
    return next(k for k, v in PATTERNS.items() if v == order)


def pattern_histogram(samples: Iterable[Sample]) -> dict[int, int]:
    """How many samples have each natural pattern (all six keys, zeros included)."""
    counts = Counter(natural_pattern(s) for s in samples)
    return {k: counts.get(k, 0) for k in PATTERNS}


def reorder(sample: Sample, pattern: int) -> Sample:
    """The sample with F1, F2, F3 written into their sorted line slots p1 < p2 < p3 in `pattern`'s order.

    Distractors keep their lines, the answer is unchanged, fact ids are the story's own (1..n), and the
    supporting ids still list F1, F2, F3 in annotation order, now pointing at their new lines (§4.10 step 3).
    """
    if pattern not in PATTERNS:
        raise ValueError(f"unknown fact-order pattern {pattern!r}; expected 1..6 (Table 6.1)")
    pos = supporting_positions(sample)
    slots = sorted(pos)
    facts = list(sample.facts)
    new_pos = [0, 0, 0]
    for slot, which in zip(slots, PATTERNS[pattern]):
        facts[slot] = sample.facts[pos[which]]
        new_pos[which] = slot
    ids = tuple(range(1, len(facts) + 1))
    return Sample(tuple(facts), ids, sample.question, sample.answer, tuple(ids[p] for p in new_pos),
                  f"{origin_source(sample.source)}{_SUFFIX}{pattern})")


def _is_species(fact: tuple[str, ...]) -> bool:
    return len(fact) == 4 and fact[1:3] == ("is", "a")


def order_cue(samples: Iterable[Sample]) -> dict[str, int]:
    """How often an entity's species fact ('X is a swan') precedes its other fact ('X is white'), for the
    distractor entities (not the F2/F3 entity) and for the F2/F3 entity itself, over task-16 samples."""
    out = {"distractors": 0, "distractors_species_first": 0, "answer_entity": 0, "answer_entity_species_first": 0}
    for s in samples:
        pos = supporting_positions(s)
        target = s.facts[pos[1]][0]                       # F2 = another entity of that species
        by_entity: dict[str, list[int]] = {}
        for i, fact in enumerate(s.facts):
            by_entity.setdefault(fact[0], []).append(i)
        for entity, idx in by_entity.items():
            species = [i for i in idx if _is_species(s.facts[i])]
            other = [i for i in idx if not _is_species(s.facts[i])]
            if len(species) != 1 or len(other) != 1:
                continue
            key = "answer_entity" if entity == target else "distractors"
            out[key] += 1
            out[f"{key}_species_first"] += species[0] < other[0]
    return out


def shuffle_distractors(sample: Sample, rng: np.random.Generator) -> Sample:
    """Swap the two lines of each distractor entity (one species and one other fact, neither supporting)
    with probability 1/2; supporting facts, the answer and the annotation are unchanged."""
    support = set(supporting_positions(sample))
    by_entity: dict[str, list[int]] = {}
    for i, fact in enumerate(sample.facts):
        by_entity.setdefault(fact[0], []).append(i)
    facts = list(sample.facts)
    for entity in sorted(by_entity):
        idx = by_entity[entity]
        if len(idx) == 2 and not support & set(idx) and rng.random() < 0.5:
            facts[idx[0]], facts[idx[1]] = facts[idx[1]], facts[idx[0]]
    return dataclasses.replace(sample, facts=tuple(facts))


def origin_source(source: str) -> str:
    """The original question's `path:line` of a derived sample's source ("<path>:<line> (pattern k)")."""
    head, sep, tail = source.rpartition(_SUFFIX)
    return head if sep and tail[:-1].isdigit() and tail.endswith(")") else source


def content_key(sample: Sample) -> tuple:
    """Order-free story content: the multiset of facts, the question and the answer (leakage checks)."""
    return tuple(sorted(sample.facts)), sample.question, sample.answer


def augment(samples: Iterable[Sample]) -> list[Sample]:
    """Every sample in all 6 fact orders (§1.5): sample-major, patterns 1..6; answers unchanged."""
    return [reorder(s, k) for s in samples for k in PATTERNS]


# -- data sets --------------------------------------------------------------------------------------------
def pattern_blocks(samples: Sequence[Sample], cfg: PatternConfig) -> dict[int, list[Sample]]:
    """Six disjoint blocks of `block_size` original samples, block k -> pattern k (§4.10 step 2)."""
    need = len(PATTERNS) * cfg.block_size
    if cfg.block_size < 1 or len(samples) < need:
        raise ValueError(f"pattern blocks need {len(PATTERNS)} x block_size={cfg.block_size} = {need} samples, "
                         f"got {len(samples)}")
    if cfg.block_order == "file":
        order = np.arange(len(samples))
    elif cfg.block_order == "shuffled":
        order = np.random.default_rng([cfg.seed, 0]).permutation(len(samples))
    else:
        raise ValueError(f"block_order: unknown value {cfg.block_order!r} (expected 'file' or 'shuffled')")
    return {k: [samples[i] for i in order[(k - 1) * cfg.block_size: k * cfg.block_size]] for k in PATTERNS}


def make_patterns(samples: Sequence[Sample], cfg: PatternConfig = PatternConfig()
                  ) -> dict[int, dict[str, list[Sample]]]:
    """pattern -> {"train", "val", "test"} of re-ordered samples (Table 6.1; §1.4, §4.10).

    Per pattern a numpy Generator([seed, pattern]) draws the test questions, then the validation questions
    from the rest; every split keeps file order.
    """
    n_test, n_val = cfg.n_test(), cfg.n_val()
    if not (0 < n_test < cfg.block_size and 0 <= n_val <= cfg.block_size - n_test):
        raise ValueError(f"bad pattern split sizes: block {cfg.block_size}, test {n_test}, val {n_val}")
    counts = Counter(content_key(s) for s in samples)
    out: dict[int, dict[str, list[Sample]]] = {}
    for k, block in pattern_blocks(samples, cfg).items():
        rng = np.random.default_rng([cfg.seed, k])
        candidates = [i for i, s in enumerate(block) if not cfg.unique_test_content or counts[content_key(s)] == 1]
        if len(candidates) < n_test:
            raise ValueError(f"pattern {k}: only {len(candidates)} questions with unique content for "
                             f"test_size={n_test}")
        test = set(rng.choice(candidates, size=n_test, replace=False).tolist())
        rest = [i for i in range(len(block)) if i not in test]
        val = set(rng.choice(rest, size=n_val, replace=False).tolist()) if n_val else set()
        parts = {"train": [i for i in rest if i not in val], "val": sorted(val), "test": sorted(test)}
        out[k] = {split: [reorder(block[i], k) for i in idx] for split, idx in parts.items()}
        if cfg.distractor_order == "shuffle":
            shuffle_rng = np.random.default_rng([cfg.seed, k, 1])
            out[k] = {split: [shuffle_distractors(x, shuffle_rng) for x in xs] for split, xs in out[k].items()}
        elif cfg.distractor_order != "keep":
            raise ValueError(f"distractor_order: unknown value {cfg.distractor_order!r} (expected keep or shuffle)")
    return out


def make_augmented(patterns: Mapping[int, Mapping[str, Sequence[Sample]]], cfg: AugmentConfig = AugmentConfig()
                   ) -> dict[str, list[Sample]]:
    """{"train", "val"} of the augmented network (§1.5, §4.11) from `make_patterns`' (or read) output."""
    if cfg.source == "all_patterns":
        chosen = list(PATTERNS)
    elif cfg.source == "pattern1":
        chosen = [1]
    else:
        raise ValueError(f"source: unknown value {cfg.source!r} (expected 'all_patterns' or 'pattern1')")
    missing = [k for k in chosen if k not in patterns]
    if missing:
        raise ValueError(f"augmentation needs the splits of patterns {missing}")
    train = [s for k in chosen for s in patterns[k]["train"]]
    val = [s for k in chosen for s in patterns[k]["val"]]
    return {"train": augment(train), "val": augment(val) if cfg.augment_val else list(val)}


def split_name(pattern: int, split: str) -> str:
    """File stem of one pattern split: pattern3_test."""
    return f"pattern{pattern}_{split}"


def flatten_patterns(patterns: Mapping[int, Mapping[str, Sequence[Sample]]]) -> dict[str, list[Sample]]:
    """{"pattern1_train": [...], ...}: the form `write_dataset` takes."""
    return {split_name(k, s): list(parts[s]) for k, parts in patterns.items() for s in PATTERN_SPLITS}


def unflatten_patterns(splits: Mapping[str, Sequence[Sample]]) -> dict[int, dict[str, list[Sample]]]:
    """Inverse of `flatten_patterns` (KeyError naming the missing split)."""
    out: dict[int, dict[str, list[Sample]]] = {}
    for k in PATTERNS:
        for s in PATTERN_SPLITS:
            name = split_name(k, s)
            if name not in splits:
                raise KeyError(f"derived data set has no split {name!r} (has {sorted(splits)})")
            out.setdefault(k, {})[s] = list(splits[name])
    return out


# -- files ------------------------------------------------------------------------------------------------
def format_samples(samples: Iterable[Sample]) -> str:
    """bAbI text, one story per sample (ids 1..n, then the question line); facts renumbered if needed."""
    lines: list[str] = []
    for s in samples:
        for part in (*s.facts, s.question):
            bad = [t for t in part if not _TOKEN.fullmatch(t) or t != t.lower()]
            if bad:
                raise ValueError(f"{s.source}: tokens {bad} would not survive bAbI tokenisation")
        if not s.answer or any(c in s.answer for c in "\t\r\n") or s.answer != s.answer.strip().lower():
            raise ValueError(f"{s.source}: answer {s.answer!r} cannot be written on a bAbI question line")
        new_id = {old: i for i, old in enumerate(s.fact_ids, 1)}
        lines += [f"{i} {' '.join(f)}." for i, f in enumerate(s.facts, 1)]
        support = " ".join(str(new_id[i]) for i in s.supporting)
        lines.append(f"{len(s.facts) + 1} {' '.join(s.question)}?\t{s.answer}\t{support}")
    return "".join(line + "\n" for line in lines)


def write_dataset(out_dir: str | os.PathLike, splits: Mapping[str, Sequence[Sample]], params: Mapping) -> Path:
    """Write `<out_dir>/<split>.txt` (bAbI format) for each split, then `manifest.json` (format, params,
    per-split size, sha256 and each sample's origin `source`). Every file is written atomically and the
    manifest last, so a manifest means a complete data set; a file that already holds these bytes is left
    untouched (nlpbench.runtime.io.atomic_path's keep_identical). Returns the manifest path."""
    out = Path(out_dir)
    entries = {}
    for name, samples in splits.items():
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name == Path(MANIFEST).stem:
            raise ValueError(f"split name {name!r} is not a plain file stem")
        text = format_samples(samples)
        io.write_text(out / f"{name}.txt", text, keep_identical=True)
        data = text.encode("utf-8")
        entries[name] = {"file": f"{name}.txt", "n": len(samples), "bytes": len(data),
                         "sha256": hashlib.sha256(data).hexdigest(),
                         "sources": [s.source for s in samples]}
    manifest = out / MANIFEST
    io.write_json(manifest, {"format": FORMAT, "params": dict(params), "splits": entries}, keep_identical=True)
    return manifest


def read_manifest(out_dir: str | os.PathLike) -> dict:
    """manifest.json of a derived data set (FetchError naming the data step when it was not written)."""
    out = Path(out_dir)
    manifest = read_status(out, out.name, MANIFEST)
    if manifest.get("format") != FORMAT:
        raise FetchError(f"{out / MANIFEST}: key 'format' must be {FORMAT!r}; {remedy_for(out, out.name)}")
    return manifest


def read_dataset(out_dir: str | os.PathLike) -> dict[str, list[Sample]]:
    """The splits written by `write_dataset`, equal to what was written (origin sources restored from the
    manifest). Each file is checked against its manifest record (size and sha256: PreparedDataChanged naming it,
    nlpbench.data.prepared) and its question count."""
    out = Path(out_dir)
    manifest = read_manifest(out)
    records = {e["file"]: {k: e[k] for k in ("bytes", "sha256") if k in e} for e in manifest["splits"].values()}
    verify_prepared(out, out.name, status={"files": records}, status_file=MANIFEST)
    splits: dict[str, list[Sample]] = {}
    for name, entry in manifest["splits"].items():
        path = out / entry["file"]
        samples = parse_file(path)
        if len(samples) != entry["n"] or len(entry["sources"]) != entry["n"]:
            raise FetchError(f"{path}: {len(samples)} questions, manifest key splits.{name}.n says {entry['n']}; "
                             f"{remedy_for(out, out.name)}")
        splits[name] = [dataclasses.replace(s, source=src) for s, src in zip(samples, entry["sources"])]
    return splits
