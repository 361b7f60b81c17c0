"""Evaluation metrics (text generation: `nlpbench.metrics.text`)."""

from nlpbench.metrics.text import (
    BLEU_WEIGHTS,
    BleuStats,
    bleu_eq416,
    bleu_from_stats,
    bleu_stats,
    corpus_bleu,
    corpus_bleu_1_to_4,
    distinct_n,
    diversity,
    entropy,
)

__all__ = [
    "BLEU_WEIGHTS",
    "BleuStats",
    "bleu_eq416",
    "bleu_from_stats",
    "bleu_stats",
    "corpus_bleu",
    "corpus_bleu_1_to_4",
    "distinct_n",
    "diversity",
    "entropy",
]
