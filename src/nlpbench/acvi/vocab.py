"""Vocabulary with See et al.'s extended-vocabulary ids for copying source OOVs (thesis eq. 68)."""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

PAD, UNK, START, STOP = "[PAD]", "[UNK]", "[START]", "[STOP]"


class Vocab:
    """Ids 0..3 are PAD, UNK, START, STOP; then the `max_size` most frequent words (ties by the word itself, so the
    order never depends on hashing). An article's OOV words get ids len(vocab), len(vocab)+1, ... in order of
    first occurrence: the extended vocabulary of the pointer-generator."""

    def __init__(self, words: Sequence[str]):
        self.itos = [PAD, UNK, START, STOP] + [w for w in words if w not in (PAD, UNK, START, STOP)]
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    @classmethod
    def build(cls, texts: Iterable[Sequence[str]], max_size: int) -> "Vocab":
        counts = Counter(t for text in texts for t in text)
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return cls([w for w, _ in ranked[:max_size]])

    def __len__(self) -> int:
        return len(self.itos)

    @property
    def pad(self) -> int:
        return 0

    @property
    def unk(self) -> int:
        return 1

    @property
    def start(self) -> int:
        return 2

    @property
    def stop(self) -> int:
        return 3

    def id(self, word: str) -> int:
        return self.stoi.get(word, self.unk)

    def source_ids(self, tokens: Sequence[str]) -> tuple[list[int], list[int], list[str]]:
        """(ids with OOV -> UNK, extended ids with OOV -> V + j, the article's OOV list)."""
        ids, ext, oovs = [], [], []
        for t in tokens:
            i = self.id(t)
            ids.append(i)
            if i == self.unk:
                if t not in oovs:
                    oovs.append(t)
                ext.append(len(self) + oovs.index(t))
            else:
                ext.append(i)
        return ids, ext, oovs

    def target_ids(self, tokens: Sequence[str], oovs: Sequence[str]) -> tuple[list[int], list[int]]:
        """(decoder input ids [START] + y with OOV -> UNK, target ids y + [STOP] where an OOV found in the
        source gets its extended id and other OOVs UNK)."""
        inp = [self.start] + [self.id(t) for t in tokens]
        tgt = []
        for t in tokens:
            i = self.id(t)
            if i == self.unk and t in oovs:
                i = len(self) + list(oovs).index(t)
            tgt.append(i)
        return inp, tgt + [self.stop]

    def words(self, ids: Iterable[int], oovs: Sequence[str] = ()) -> list[str]:
        out = []
        for i in ids:
            out.append(self.itos[i] if i < len(self) else oovs[i - len(self)])
        return out
