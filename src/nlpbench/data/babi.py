"""bAbI QA tasks v1.2: strict parser, vocabulary, train/validation split and padded arrays."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from nlpbench.data.fetch import BABI_URL
from nlpbench.data.prepared import STATUS_FILE, read_status, verify_prepared

TASK_NAMES: dict[int, str] = {
    1: "single-supporting-fact",
    2: "two-supporting-facts",
    3: "three-supporting-facts",
    4: "two-arg-relations",
    5: "three-arg-relations",
    6: "yes-no-questions",
    7: "counting",
    8: "lists-sets",
    9: "simple-negation",
    10: "indefinite-knowledge",
    11: "basic-coreference",
    12: "conjunction",
    13: "compound-coreference",
    14: "time-reasoning",
    15: "basic-deduction",
    16: "basic-induction",
    17: "positional-reasoning",
    18: "size-reasoning",
    19: "path-finding",
    20: "agents-motivations",
}
VARIANTS = ("en", "hn", "shuffled", "en-10k", "hn-10k", "shuffled-10k")
# A task is passed at 95 % correct answers or more (Weston et al. 2015, the tasks' paper; every bAbI table of the
# documents counts passes by it): the threshold of every task table (tables.TableSpec.pass_threshold)
PASS_THRESHOLD = 95.0
SPLITS = ("train", "test")
NIL = "<nil>"

_WORD = re.compile(r"\w+")
_INT = re.compile(r"[+-]?\d+")


class BabiFormatError(ValueError):
    """A line of a bAbI file breaks the format; the message is `<path>:<lineno>: <problem>: <line>`."""

    def __init__(self, path: str | os.PathLike, lineno: int, problem: str, line: str) -> None:
        super().__init__(f"{path}:{lineno}: {problem}: {line!r}")
        self.path, self.lineno, self.problem, self.line = str(path), lineno, problem, line


class MissingDataError(FileNotFoundError):
    """A bAbI task file is absent (e.g. the 10k qa3 train files, which the offline mirror lacks)."""

    def __init__(self, path: str | os.PathLike) -> None:
        super().__init__(
            f"bAbI file not found: {path}. The official download ({BABI_URL}) has it, but an offline mirror "
            "may lack it (the mirror's partial archive has no qa3_three-supporting-facts_train.txt in "
            "en-10k, hn-10k or shuffled-10k); see STATUS.json in the data folder, and prepare it from the "
            "official archive to get it."
        )
        self.path = str(path)  # not `filename`: OSError would then print only errno and path


@dataclass(frozen=True)
class Sample:
    """One question with the story facts that precede it."""

    facts: tuple[tuple[str, ...], ...]
    fact_ids: tuple[int, ...]
    question: tuple[str, ...]
    answer: str
    supporting: tuple[int, ...]
    source: str


def task_file(root: str | os.PathLike, variant: str, task: int, split: str) -> Path:
    """Path of `root/<variant>/qa<task>_<name>_<split>.txt`; MissingDataError if it does not exist."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown bAbI variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    if isinstance(task, bool) or task not in TASK_NAMES:
        raise ValueError(f"unknown bAbI task {task!r}; expected an integer 1..20")
    if split not in SPLITS:
        raise ValueError(f"unknown bAbI split {split!r}; expected one of {', '.join(SPLITS)}")
    path = Path(root) / variant / f"qa{task}_{TASK_NAMES[task]}_{split}.txt"
    _verify_prepared(Path(root), f"{variant}/{path.name}")
    if not path.is_file():
        raise MissingDataError(path)
    return path


def _verify_prepared(root: Path, rel: str) -> None:
    """A file of a prepared bAbI folder is as prepare_babi wrote it (size and sha256 in STATUS.json); a folder
    without STATUS.json (an unpacked archive) is not checked, nor a file the preparation lacks (MissingDataError)."""
    if not (root / STATUS_FILE).is_file():
        return
    status = read_status(root, "babi")
    if rel in status.get("present", ()):
        verify_prepared(root, "babi", [rel], status=status)


def tokenize(text: str) -> list[str]:
    """Lowercased word tokens; punctuation and whitespace are dropped ("Where is Mary?" -> where is mary)."""
    return _WORD.findall(text.lower())


class _BadLine(Exception):
    """Internal: what is wrong with the current line (turned into BabiFormatError by parse_file)."""


def parse_file(path: str | os.PathLike) -> list[Sample]:
    """All questions of a bAbI file, in file order; BabiFormatError on any malformed line."""
    samples: list[Sample] = []
    facts: list[tuple[str, ...]] = []
    fact_ids: list[int] = []
    prev_id: int | None = None
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            try:
                if "\ufffd" in line:
                    raw.decode("utf-8")  # raises with the exact reason
                line_id, text = _split_id(line, prev_id)
                if line_id == 1:
                    facts, fact_ids = [], []
                prev_id = line_id
                if "\t" in text:
                    samples.append(_parse_question(text, facts, fact_ids, f"{path}:{lineno}"))
                else:
                    tokens = tuple(tokenize(text))
                    if not tokens:
                        raise _BadLine("fact has no text")
                    facts.append(tokens)
                    fact_ids.append(line_id)
            except UnicodeDecodeError as e:
                raise BabiFormatError(path, lineno, f"line is not valid UTF-8 ({e.reason})", line) from None
            except _BadLine as e:
                raise BabiFormatError(path, lineno, str(e), line) from None
    return samples


def _split_id(line: str, prev_id: int | None) -> tuple[int, str]:
    """(id, rest of the line), checking that the id continues the story or starts a new one."""
    head, _, text = line.partition(" ")
    if not _INT.fullmatch(head):
        raise _BadLine("line does not start with an integer id followed by a space")
    line_id = int(head)
    if line_id <= 0:
        raise _BadLine(f"id {line_id} is not positive")
    if line_id != 1 and (prev_id is None or line_id != prev_id + 1):
        expected = "1" if prev_id is None else f"1 (new story) or {prev_id + 1}"
        raise _BadLine(f"id {line_id} breaks the story numbering (expected {expected})")
    return line_id, text


def _parse_question(text: str, facts: list[tuple[str, ...]], fact_ids: list[int], source: str) -> Sample:
    fields = text.split("\t")
    if len(fields) != 3:
        raise _BadLine(
            f"question line needs 3 tab-separated fields (question, answer, supporting ids), got {len(fields)}"
        )
    question, answer, support = fields
    q_tokens = tuple(tokenize(question))
    if not q_tokens:
        raise _BadLine("question has no text")
    answer = answer.strip().lower()
    if not answer:
        raise _BadLine("empty answer")
    items = support.split()
    if not items:
        raise _BadLine("question has no supporting fact ids")
    supporting = []
    for item in items:
        if not (item.isascii() and item.isdigit()):
            raise _BadLine(f"supporting id {item!r} is not an integer")
        fact_id = int(item)
        if fact_id not in fact_ids:
            raise _BadLine(f"supporting id {fact_id} refers to no earlier fact line of this story")
        supporting.append(fact_id)
    return Sample(tuple(facts), tuple(fact_ids), q_tokens, answer, tuple(supporting), source)


def load_task(root: str | os.PathLike, variant: str, task: int) -> tuple[list[Sample], list[Sample]]:
    """(train, test) samples of one task."""
    return (
        parse_file(task_file(root, variant, task, "train")),
        parse_file(task_file(root, variant, task, "test")),
    )


class Vocab:
    """Word <-> index map; index 0 is the nil (padding) word `<nil>`."""

    def __init__(self, itos: Sequence[str]) -> None:
        itos = tuple(itos)
        if not itos or itos[0] != NIL:
            raise ValueError(f"vocabulary must start with the nil word {NIL!r}")
        if len(set(itos)) != len(itos):
            dupes = sorted({t for t in itos if itos.count(t) > 1})
            raise ValueError(f"vocabulary has duplicate tokens: {dupes[:10]}")
        self.itos: tuple[str, ...] = itos
        self.stoi: dict[str, int] = {tok: i for i, tok in enumerate(itos)}

    @classmethod
    def build(cls, samples: Iterable[Sample], extra_tokens: Iterable[str] = ()) -> Vocab:
        """Every fact, question and answer token of `samples` plus `extra_tokens`, sorted after `<nil>`."""
        tokens: set[str] = set(extra_tokens)
        for sample in samples:
            for fact in sample.facts:
                tokens.update(fact)
            tokens.update(sample.question)
            tokens.add(sample.answer)
        tokens.discard(NIL)
        return cls((NIL, *sorted(tokens)))

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: object) -> bool:
        return token in self.stoi

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Indices of `tokens`; KeyError naming the first unknown token."""
        try:
            return [self.stoi[tok] for tok in tokens]
        except KeyError as e:
            raise KeyError(f"token {e.args[0]!r} is not in the vocabulary ({len(self)} tokens)") from None

    def to_dict(self) -> dict:
        return {"itos": list(self.itos)}

    @classmethod
    def from_dict(cls, data: dict) -> Vocab:
        if not isinstance(data, dict) or not isinstance(data.get("itos"), list):
            raise ValueError("vocabulary dict needs the key 'itos' (a list of tokens)")
        return cls(data["itos"])


def default_n_val(variant: str) -> int:
    """Validation size used for a variant: 1000 for the 10k variants, 100 otherwise."""
    return 1000 if variant.endswith("-10k") else 100


def train_val_split(samples: Sequence[Sample], n_val: int, seed: int) -> tuple[list[Sample], list[Sample]]:
    """Hold out `n_val` random samples (numpy Generator(seed).permutation); both parts keep file order."""
    samples = list(samples)
    if not 0 <= n_val <= len(samples):
        raise ValueError(f"n_val={n_val} must be between 0 and the number of samples ({len(samples)})")
    perm = np.random.default_rng(seed).permutation(len(samples))
    val_idx = sorted(perm[:n_val].tolist())
    train_idx = sorted(perm[n_val:].tolist())
    return [samples[i] for i in train_idx], [samples[i] for i in val_idx]


def _checked_len(name: str, given: int | None, needed: int, where: str) -> int:
    if given is None:
        return max(needed, 1)
    if given < needed:
        raise ValueError(f"{name}={given} is too short: {where} needs {needed}")
    return given


def vectorize(
    samples: Sequence[Sample],
    vocab: Vocab,
    memory_size: int = 50,
    sentence_len: int | None = None,
    query_len: int | None = None,
    supporting_len: int | None = None,
) -> dict[str, np.ndarray]:
    """Padded int64 arrays: stories [N,M,L], n_facts [N], queries [N,Lq], answers [N], supporting [N,S].

    Keeps the `memory_size` most recent facts, oldest first from slot 0. `supporting` holds the memory
    slot of each supporting fact (-1 padding, -1 if truncated away); S defaults to max(3, most ids).
    """
    if memory_size < 1:
        raise ValueError(f"memory_size={memory_size} must be at least 1")
    samples = list(samples)
    kept = [(s.facts[-memory_size:], s.fact_ids[-memory_size:]) for s in samples]

    def longest(lengths: Iterable[tuple[int, str]]) -> tuple[int, str]:
        return max(lengths, default=(0, "no sample"))

    need_l, where_l = longest((len(f), s.source) for s, (facts, _) in zip(samples, kept) for f in facts)
    need_q, where_q = longest((len(s.question), s.source) for s in samples)
    need_s, where_s = longest((len(s.supporting), s.source) for s in samples)
    n_l = _checked_len("sentence_len", sentence_len, need_l, f"a fact of {where_l}")
    n_q = _checked_len("query_len", query_len, need_q, f"the question of {where_q}")
    n_s = _checked_len("supporting_len", supporting_len, need_s, f"the supporting ids of {where_s}")
    if supporting_len is None:
        n_s = max(n_s, 3)

    n = len(samples)
    stories = np.zeros((n, memory_size, n_l), dtype=np.int64)
    n_facts = np.zeros(n, dtype=np.int64)
    queries = np.zeros((n, n_q), dtype=np.int64)
    answers = np.zeros(n, dtype=np.int64)
    supporting = np.full((n, n_s), -1, dtype=np.int64)
    cache: dict[tuple[str, ...], list[int]] = {}
    for i, (sample, (facts, ids)) in enumerate(zip(samples, kept)):
        for j, fact in enumerate(facts):
            if fact not in cache:
                cache[fact] = vocab.encode(fact)
            stories[i, j, : len(fact)] = cache[fact]
        n_facts[i] = len(facts)
        queries[i, : len(sample.question)] = vocab.encode(sample.question)
        answers[i] = vocab.encode([sample.answer])[0]
        slot = {fact_id: j for j, fact_id in enumerate(ids)}
        supporting[i, : len(sample.supporting)] = [slot.get(fid, -1) for fid in sample.supporting]
    return {"stories": stories, "n_facts": n_facts, "queries": queries, "answers": answers, "supporting": supporting}
