"""Thesis Table 25 / paper Table 2 rates. The documents do not define them (reading B-10, docs/acvi.md); readings:

  novel-word rate   % of generated tokens (punctuation excluded) that do not occur in the source article,
                    micro-averaged over the test set.
  OOV adoption rate % of generated tokens (punctuation excluded) that are source words outside the model
                    vocabulary (so they can only have been copied), micro-averaged.
Both are flagged as readings in the table notes.
"""

from __future__ import annotations

import string
from typing import Collection, Sequence

_PUNCT = set(string.punctuation) | {"``", "''", "-lrb-", "-rrb-", "-lsb-", "-rsb-", "--", "..."}


def is_word(token: str) -> bool:
    return token not in _PUNCT and not all(ch in string.punctuation for ch in token)


def novel_word_rate(summaries: Sequence[Sequence[str]], sources: Sequence[Sequence[str]]) -> float:
    novel = total = 0
    for summ, src in zip(summaries, sources):
        seen = set(src)
        words = [t for t in summ if is_word(t)]
        total += len(words)
        novel += sum(t not in seen for t in words)
    return 100.0 * novel / total if total else 0.0


def oov_adoption_rate(summaries: Sequence[Sequence[str]], sources: Sequence[Sequence[str]],
                      vocab: Collection[str]) -> float:
    adopted = total = 0
    for summ, src in zip(summaries, sources):
        src_oov = {t for t in src if t not in vocab}
        words = [t for t in summ if is_word(t)]
        total += len(words)
        adopted += sum(t in src_oov for t in words)
    return 100.0 * adopted / total if total else 0.0
