"""Text-generation metrics of seed 001 (thesis §4.6.3, Eqs. 5.1-5.3): corpus BLEU-1..4, entropy and distinct-1/2.

Inputs are token sequences (a string is split on whitespace). BLEU values are fractions in [0, 1]; tables
print 100x.

BLEU (thesis §4.6.3, Eq. 4.16). The published numbers come from the authors' NLTK `corpus_bleu`
(tf-var-attention utils/eval_utils.py): corpus-level cumulative BLEU, one reference per hypothesis, no smoothing,
brevity penalty exp(1 - r/c) when c < r, weights (1), (1/2, 1/2), (0.34, 0.33, 0.33), (1/4 x 4). sacrebleu
(tokenize="none", smooth_method="none", max_ngram_order=n) does not reproduce that in two respects, so the
statistics are counted here and sacrebleu only serves as a cross-check in the tests:
  * it has no weights argument (uniform 1/n only), so it cannot give the authors' BLEU-3;
  * NLTK's modified_precision floors each hypothesis's n-gram total at 1, so a hypothesis shorter than n adds a
    phantom n-gram to the order-n denominator (an empty one to every order); sacrebleu adds nothing.
With nltk_floor=False and uniform weights the result equals sacrebleu's score / 100.
`bleu_eq416` is Eq. 4.16 read literally (min(1, c/r) x precision_j), logged as a diagnostic only.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence, Union

Tokens = Union[str, Sequence[str]]

# The authors' NLTK weights (tf-var-attention utils/eval_utils.py).
BLEU_WEIGHTS: dict[int, tuple[float, ...]] = {
    1: (1.0,),
    2: (0.5, 0.5),
    3: (0.34, 0.33, 0.33),
    4: (0.25, 0.25, 0.25, 0.25),
}
DISTINCT_VARIANTS = ("code", "eq")


def _tokens(x: Tokens, what: str) -> list[str]:
    toks = x.split() if isinstance(x, str) else list(x)
    for t in toks:
        if not isinstance(t, str) or not t or any(c.isspace() for c in t):
            raise ValueError(f"{what}: tokens must be non-empty strings without whitespace, got {t!r}")
    return toks


@dataclass(frozen=True)
class BleuStats:
    """Corpus sufficient statistics: matches[k] / totals[k] for (k+1)-grams, summed lengths c and r."""

    matches: tuple[int, ...]
    totals: tuple[int, ...]
    hyp_len: int
    ref_len: int

    @property
    def brevity_penalty(self) -> float:
        """exp(1 - r/c) if c < r, 1 otherwise, 0 for an empty output (Papineni et al. 2002)."""
        if self.hyp_len >= self.ref_len:
            return 1.0
        return math.exp(1.0 - self.ref_len / self.hyp_len) if self.hyp_len > 0 else 0.0

    def precision(self, n: int) -> float:
        """Clipped corpus n-gram precision, 0 when there are no n-grams."""
        total = self.totals[n - 1]
        return self.matches[n - 1] / total if total else 0.0


def _ngram_counts(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def bleu_stats(hypotheses: Sequence[Tokens], references: Sequence[Tokens], max_order: int = 4, *,
               nltk_floor: bool = True) -> BleuStats:
    """Clipped n-gram matches and totals summed over the corpus, one reference per hypothesis.

    nltk_floor=True counts each hypothesis's order-n total as max(1, #n-grams), as NLTK's corpus_bleu does.
    """
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:
        raise ValueError("BLEU of an empty corpus is undefined")
    if max_order < 1:
        raise ValueError(f"max_order must be >= 1, got {max_order}")
    matches, totals, hyp_len, ref_len = [0] * max_order, [0] * max_order, 0, 0
    for hyp, ref in zip(hypotheses, references):
        h, r = _tokens(hyp, "hypothesis"), _tokens(ref, "reference")
        hyp_len, ref_len = hyp_len + len(h), ref_len + len(r)
        for n in range(1, max_order + 1):
            h_counts, r_counts = _ngram_counts(h, n), _ngram_counts(r, n)
            matches[n - 1] += sum(min(c, r_counts[g]) for g, c in h_counts.items())
            total = sum(h_counts.values())
            totals[n - 1] += max(1, total) if nltk_floor else total
    return BleuStats(tuple(matches), tuple(totals), hyp_len, ref_len)


def bleu_from_stats(stats: BleuStats, weights: Sequence[float]) -> float:
    """BP * exp(sum_n w_n log p_n); 0 if an order with positive weight has no match (NLTK without smoothing
    returns at most ~1e-150 there: log of the smallest float; sacrebleu returns 0)."""
    if len(weights) > len(stats.matches):
        raise ValueError(f"{len(weights)} weights but statistics up to order {len(stats.matches)}")
    log_sum = 0.0
    for n, w in enumerate(weights, 1):
        if w == 0:
            continue
        p = stats.precision(n)
        if p == 0.0:
            return 0.0
        log_sum += w * math.log(p)
    return stats.brevity_penalty * math.exp(log_sum)


def corpus_bleu(hypotheses: Sequence[Tokens], references: Sequence[Tokens], order: int = 4,
                weights: Sequence[float] | None = None, *, nltk_floor: bool = True) -> float:
    """Corpus BLEU-`order` as the thesis's numbers were computed (weights BLEU_WEIGHTS[order] by default)."""
    if weights is None:
        if order not in BLEU_WEIGHTS:
            raise ValueError(f"BLEU order must be one of {sorted(BLEU_WEIGHTS)} (or give weights), got {order}")
        weights = BLEU_WEIGHTS[order]
    stats = bleu_stats(hypotheses, references, len(weights), nltk_floor=nltk_floor)
    return bleu_from_stats(stats, weights)


def corpus_bleu_1_to_4(hypotheses: Sequence[Tokens], references: Sequence[Tokens], *,
                       nltk_floor: bool = True) -> dict[str, float]:
    """{"bleu1": .., "bleu4": ..} from one pass of n-gram counting (Tables 4.2, 6.1, 6.2)."""
    stats = bleu_stats(hypotheses, references, 4, nltk_floor=nltk_floor)
    return {f"bleu{n}": bleu_from_stats(stats, BLEU_WEIGHTS[n]) for n in (1, 2, 3, 4)}


def bleu_eq416(hypotheses: Sequence[Tokens], references: Sequence[Tokens], order: int) -> float:
    """Eq. 4.16 read literally: min(1, generated-length / reference-length) * precision_order (corpus sums,
    Papineni n-gram totals without NLTK's floor)."""
    stats = bleu_stats(hypotheses, references, order, nltk_floor=False)
    if stats.ref_len == 0:
        raise ValueError("all references are empty")
    return min(1.0, stats.hyp_len / stats.ref_len) * stats.precision(order)


def entropy(sentences: Iterable[Tokens]) -> float:
    """Eq. 5.1: H = -sum_w p(w) ln p(w) over the unigram distribution of the pooled tokens (natural log, spec
    §6.2 / A18). 0 for a set without tokens."""
    counts = Counter(t for s in sentences for t in _tokens(s, "sentence"))
    total = sum(counts.values())
    return -sum(c / total * math.log(c / total) for c in counts.values()) if total else 0.0


def distinct_n(sentences: Iterable[Tokens], n: int, variant: str = "code") -> float:
    """Distinct-n of one set of sentences (Eqs. 5.2-5.3; reading A7, docs/textgen.md). 0 when there is nothing to count.

    "eq": distinct n-grams / total n-grams, n-grams taken inside each sentence (the equation).
    "code": the authors' code: sentences concatenated into one stream (n-grams cross sentence boundaries),
    denominator = number of tokens (NLTK BigramCollocationFinder's N). Same as "eq" for n = 1.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    sents = [_tokens(s, "sentence") for s in sentences]
    if variant == "eq":
        grams = Counter(g for s in sents for g in _ngram_counts(s, n).elements())
        total = sum(grams.values())
        return len(grams) / total if total else 0.0
    if variant == "code":
        stream = [t for s in sents for t in s]
        return len(_ngram_counts(stream, n)) / len(stream) if stream else 0.0
    raise ValueError(f"unknown distinct variant {variant!r}; expected one of {DISTINCT_VARIANTS}")


def diversity(sample_sets: Sequence[Sequence[Tokens]], variant: str = "code") -> dict[str, float]:
    """Mean entropy, distinct-1 and distinct-2 over inputs, each computed on that input's k samples (Table 5.2)."""
    if not sample_sets:
        raise ValueError("no sample sets")
    rows = [(entropy(s), distinct_n(s, 1, variant), distinct_n(s, 2, variant)) for s in sample_sets]
    return {name: sum(r[i] for r in rows) / len(rows) for i, name in enumerate(("entropy", "distinct1", "distinct2"))}
