"""Sentence preprocessing for the variational text-generation corpora (thesis §4.5.2).

Normalisation (lowercase, punctuation filter), NLTK word tokenisation, the frequency-ranked vocabulary with the
four special tokens, and the length limit with `</s>` handling. Pure functions; no file access except Vocab I/O.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
# Ids 0..3, in the order of the authors' code (PAD=0, UNK=1, GO=2, EOS=3).
SPECIALS: tuple[str, ...] = (PAD, UNK, BOS, EOS)

# Tokens ending in "." that do not end a sentence (stand-in for the abbreviation list of NLTK's punkt model).
ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "st", "mt", "jr", "sr", "vs", "etc", "prof", "lt", "sgt", "capt"})
_APOSTROPHES = re.compile(r"['\u2018\u2019`]")


@dataclass(frozen=True)
class TextRules:
    """What survives normalisation: letters, digits, whitespace and the characters in `keep_punct`.

    `intraword_hyphen` keeps a hyphen between two letters/digits ("blond-hair", as Table 4.3 prints it).
    Apostrophes are deleted (joining "can't" -> "cant", as in the authors' CSVs) unless kept; every other dropped
    character becomes a space.
    """

    keep_punct: str
    intraword_hyphen: bool = False
    _drop: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kept = re.escape(self.keep_punct + ("-" if self.intraword_hyphen else ""))
        object.__setattr__(self, "_drop", re.compile(rf"[^\w\s{kept}]|_"))


def normalize(text: str, rules: TextRules) -> str:
    """Lowercase and filter punctuation (thesis §4.5.2 steps 1-2); whitespace collapsed to single spaces."""
    text = text.lower()
    if "'" not in rules.keep_punct:
        text = _APOSTROPHES.sub("", text)
    if rules.intraword_hyphen:
        text = re.sub(r"(?<![^\W_])-|-(?![^\W_])", " ", text)  # hyphens not between two alphanumerics
    text = rules._drop.sub(" ", text)
    return " ".join(text.split())


@functools.lru_cache(maxsize=1)
def _word_tokenizer():
    from nltk.tokenize import NLTKWordTokenizer  # the word-level tokenizer inside nltk.word_tokenize

    return NLTKWordTokenizer()


def split_sentences(text: str) -> list[str]:
    """Split at whitespace after a "."-final chunk, unless it is an abbreviation or has inner dots ("u.s.").

    Deterministic stand-in for the punkt sentence splitter that nltk.word_tokenize runs first (punkt needs a
    separately downloaded model); it matters only for texts with several sentences (dialog lines).
    """
    sentences, current = [], []
    for chunk in text.split():
        current.append(chunk)
        stem = chunk[:-1]
        if chunk.endswith(".") and stem and "." not in stem and stem not in ABBREVIATIONS:
            sentences.append(" ".join(current))
            current = []
    if current:
        sentences.append(" ".join(current))
    return sentences


def tokenize(text: str) -> list[str]:
    """NLTK Treebank word tokenisation (thesis §4.5.2 step 7) of each sentence of an already normalised text."""
    tokenizer = _word_tokenizer()
    return [tok for sentence in split_sentences(text) for tok in tokenizer.tokenize(sentence)]


def preprocess(text: str, rules: TextRules) -> list[str]:
    """normalize() then tokenize(): the word sequence of one sentence, before vocabulary and length limits."""
    return tokenize(normalize(text, rules))


@dataclass(frozen=True)
class Vocab:
    """Token list whose index is the id; the four SPECIALS come first. `size` counts them (the softmax width)."""

    tokens: tuple[str, ...]
    counts: tuple[int, ...] = ()
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if tuple(self.tokens[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"vocabulary must start with {SPECIALS}, got {tuple(self.tokens[:4])}")
        index = {tok: i for i, tok in enumerate(self.tokens)}
        if len(index) != len(self.tokens):
            dup = [t for t, c in Counter(self.tokens).items() if c > 1][:5]
            raise ValueError(f"duplicate vocabulary tokens: {dup}")
        if self.counts and len(self.counts) != len(self.tokens):
            raise ValueError("counts must have one entry per token")
        object.__setattr__(self, "_index", index)

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], size: int) -> "Vocab":
        """The `size - 4` most frequent tokens (ties broken alphabetically) after the specials (§4.5.2 step 6)."""
        if size <= len(SPECIALS):
            raise ValueError(f"vocabulary size must exceed the {len(SPECIALS)} special tokens, got {size}")
        counter = Counter(tok for sent in sentences for tok in sent)
        for special in SPECIALS:
            counter.pop(special, None)
        ranked = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[: size - len(SPECIALS)]
        return cls(SPECIALS + tuple(t for t, _ in ranked), (0,) * len(SPECIALS) + tuple(c for _, c in ranked))

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self._index

    def id(self, token: str) -> int:
        return self._index.get(token, 1)  # 1 = <unk>

    def known(self, words: Sequence[str]) -> list[str]:
        """The words with out-of-vocabulary ones replaced by <unk>."""
        return [w if w in self._index else UNK for w in words]

    def encode(self, words: Sequence[str], max_words: int, *, eos_within_limit: bool,
               pad_to: int | None = None) -> list[int]:
        """Ids of `words` followed by </s>, length-limited (§4.5.2 steps 5 and 8), optionally padded with <pad>.

        eos_within_limit=True (SNLI, thesis order: </s> appended, then trimmed to m): at most `max_words` ids, so a
        sentence of >= m words loses </s>. False (authors' QG/dialog code): `max_words` words, then </s>.
        """
        ids = [self.id(w) for w in words[:max_words]] + [self._index[EOS]]
        if eos_within_limit:
            ids = ids[:max_words]
        if pad_to is not None:
            if len(ids) > pad_to:
                raise ValueError(f"{len(ids)} ids do not fit pad_to={pad_to}")
            ids += [self._index[PAD]] * (pad_to - len(ids))
        return ids

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens up to the first </s>, without <pad> and <s>."""
        out = []
        for i in ids:
            tok = self.tokens[int(i)]
            if tok == EOS:
                break
            if tok not in (PAD, BOS):
                out.append(tok)
        return out

    def save(self, path: str | Path) -> None:
        """One `token<TAB>training count` line per id (specials count 0)."""
        counts = self.counts or (0,) * len(self.tokens)
        Path(path).write_text("".join(f"{t}\t{c}\n" for t, c in zip(self.tokens, counts)), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> "Vocab":
        tokens, counts = [], []
        for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            parts = line.split("\t")
            if len(parts) != 2 or not parts[1].isdigit():
                raise ValueError(f"{path}:{lineno}: expected 'token<TAB>count', got {line!r}")
            tokens.append(parts[0])
            counts.append(int(parts[1]))
        return cls(tuple(tokens), tuple(counts))
