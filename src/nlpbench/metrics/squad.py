"""SQuAD v1.1 exact match (EM) and F1, the official evaluation's rules (thesis Eqs. 3.23-3.25).

An answer is normalised before comparison: lower case, every ASCII punctuation character deleted, the whole words
a/an/the deleted, whitespace runs collapsed. Per question the score is the best over its gold answers; the corpus
score is the mean over all questions, times 100. A question with no prediction scores 0.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Mapping, Sequence

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLE = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    lowered = text.lower()
    no_punct = "".join(ch for ch in lowered if ch not in _PUNCTUATION)
    no_articles = _ARTICLE.sub(" ", no_punct)
    return " ".join(no_articles.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str) -> float:
    """Harmonic mean of token precision and recall; tokens shared are counted as a multiset."""
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    shared = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if shared == 0:
        return 0.0
    precision = shared / len(pred_tokens)
    recall = shared / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def best_over_golds(score, prediction: str, golds: Sequence[str]) -> float:
    if not golds:
        raise ValueError("a question needs at least one gold answer")
    return max(score(prediction, gold) for gold in golds)


def squad_scores(predictions: Mapping[str, str], golds: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """{"em": %, "f1": %, "n": questions} over every question in `golds` (unanswered ones score 0)."""
    if not golds:
        raise ValueError("no questions to score")
    em_total = f1_total = 0.0
    for qid, answers in golds.items():
        if qid not in predictions:
            continue
        em_total += best_over_golds(exact_match, predictions[qid], answers)
        f1_total += best_over_golds(f1, predictions[qid], answers)
    n = len(golds)
    return {"em": 100.0 * em_total / n, "f1": 100.0 * f1_total / n, "n": n}
