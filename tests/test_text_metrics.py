"""nlpbench.metrics.text: BLEU-1..4, entropy and distinct-1/2 (Bahuleyan thesis §5.2, §6.5.3) on hand-worked
examples."""

from __future__ import annotations

import math
import random
import warnings

import pytest

from nlpbench.metrics.text import (
    BLEU_WEIGHTS,
    bleu_eq416,
    bleu_stats,
    corpus_bleu,
    corpus_bleu_1_to_4,
    distinct_n,
    diversity,
    entropy,
)

# Two-sentence corpus worked by hand.
#   hyp1 "the cat sat on the mat"  (6 tokens)   ref1 "the cat is on the mat"   (6)
#   hyp2 "a dog runs in"           (4 tokens)   ref2 "a dog runs in the park"  (6)
# c = 10, r = 12  ->  BP = exp(1 - 12/10) = exp(-0.2) = 0.8187307531
# clipped matches / hypothesis n-grams:
#   1-grams: hyp1 the(2, ref has 2) cat on mat = 5 of 6; hyp2 4 of 4              -> p1 = 9/10
#   2-grams: hyp1 "the cat" "on the" "the mat" = 3 of 5; hyp2 3 of 3              -> p2 = 6/8 = 3/4
#   3-grams: hyp1 "on the mat" = 1 of 4; hyp2 "a dog runs" "dog runs in" = 2 of 2  -> p3 = 3/6 = 1/2
#   4-grams: hyp1 0 of 3; hyp2 "a dog runs in" = 1 of 1                            -> p4 = 1/4
# BLEU-1 = BP * 0.9                                        = 0.7368576778
# BLEU-2 = BP * (0.9 * 0.75) ** 0.5                        = 0.8187307531 * 0.8215838363 = 0.6726559530
# BLEU-3 = BP * exp(0.34 ln 0.9 + 0.33 ln 0.75 + 0.33 ln 0.5)
#        = BP * exp(-0.0358226 - 0.0949351 - 0.2287386) = BP * exp(-0.3594963) = 0.5714968950
# BLEU-4 = BP * (0.9 * 0.75 * 0.5 * 0.25) ** 0.25          = 0.8187307531 * 0.5389562 = 0.4412599893
# Eq. 4.16 literally: min(1, 10/12) * p_j = 0.75, 0.625, 0.41667, 0.20833
HYPS = ["the cat sat on the mat", "a dog runs in"]
REFS = ["the cat is on the mat", "a dog runs in the park"]
BP = math.exp(-0.2)
HAND_BLEU = {
    "bleu1": BP * 0.9,
    "bleu2": BP * math.sqrt(0.9 * 0.75),
    "bleu3": BP * math.exp(0.34 * math.log(0.9) + 0.33 * math.log(0.75) + 0.33 * math.log(0.5)),
    "bleu4": BP * (0.9 * 0.75 * 0.5 * 0.25) ** 0.25,
}


def test_hand_worked_statistics() -> None:
    stats = bleu_stats(HYPS, REFS, 4)
    assert stats.matches == (9, 6, 3, 1) and stats.totals == (10, 8, 6, 4)
    assert (stats.hyp_len, stats.ref_len) == (10, 12)
    assert stats.brevity_penalty == pytest.approx(0.8187307531)


def test_hand_worked_bleu_1_to_4() -> None:
    got = corpus_bleu_1_to_4(HYPS, REFS)
    assert got == pytest.approx(HAND_BLEU, rel=1e-12)
    assert [round(100 * got[k], 2) for k in sorted(got)] == [73.69, 67.27, 57.15, 44.13]  # as tables print
    for n in (1, 2, 3, 4):
        assert corpus_bleu(HYPS, REFS, n) == pytest.approx(HAND_BLEU[f"bleu{n}"], rel=1e-12)


def test_hand_worked_eq_4_16_literal() -> None:
    assert [bleu_eq416(HYPS, REFS, n) for n in (1, 2, 3, 4)] == pytest.approx([0.75, 0.625, 5 / 12, 5 / 24])


def test_token_lists_and_strings_agree() -> None:
    assert corpus_bleu([h.split() for h in HYPS], [r.split() for r in REFS], 4) == corpus_bleu(HYPS, REFS, 4)


def test_perfect_and_disjoint_output() -> None:
    assert corpus_bleu(REFS, REFS, 4) == pytest.approx(1.0)
    assert corpus_bleu(["x y z w"], ["a b c d"], 1) == 0.0


def test_longer_output_has_no_brevity_penalty() -> None:
    # hyp "a b c d e" vs ref "a b c d": p1 = 4/5, c > r -> BP = 1; BLEU-1 = 0.8
    assert corpus_bleu(["a b c d e"], ["a b c d"], 1) == pytest.approx(0.8)


def test_empty_hypothesis() -> None:
    # All output empty: c = 0 -> BP = 0 and no matches -> 0 (NLTK and sacrebleu both give 0).
    assert corpus_bleu([""], ["a b"], 1) == 0.0
    # One empty hypothesis among others: NLTK counts it as one (unmatched) n-gram of every order.
    # hyp1 "a b" vs "a b" (2/2), hyp2 "" vs "c d": p1 = 2/(2+1), c = 2, r = 4, BP = exp(1 - 2) -> e^-1 * 2/3
    assert corpus_bleu(["a b", ""], ["a b", "c d"], 1) == pytest.approx(math.exp(-1) * 2 / 3)
    assert corpus_bleu(["a b", ""], ["a b", "c d"], 1, nltk_floor=False) == pytest.approx(math.exp(-1))


def test_single_token_hypothesis() -> None:
    # "a" vs "a b": p1 = 1, BP = exp(1 - 2/1) = e^-1; no bigram in the output -> BLEU-2 = 0.
    assert corpus_bleu(["a"], ["a b"], 1) == pytest.approx(math.exp(-1))
    assert corpus_bleu(["a"], ["a b"], 2) == 0.0


def test_short_hypotheses_follow_nltk_not_sacrebleu() -> None:
    # hyp1 "a b c d" = ref1 (4 of 4 unigrams ... 1 of 1 4-gram); hyp2 "e f" = ref2 (2 bigram-less 3/4-grams).
    # NLTK: 3-gram total = 2 + max(1, 0) = 3, 4-gram total = 1 + 1 = 2 -> p3 = 2/3, p4 = 1/2; c = r -> BP = 1.
    # BLEU-4 = (1 * 1 * 2/3 * 1/2) ** 0.25; sacrebleu (no floor): p3 = 2/2, p4 = 1/1 -> 1.0.
    hyps, refs = ["a b c d", "e f"], ["a b c d", "e f"]
    assert corpus_bleu(hyps, refs, 4) == pytest.approx((2 / 3 * 1 / 2) ** 0.25)
    assert corpus_bleu(hyps, refs, 4, nltk_floor=False) == pytest.approx(1.0)


def _random_corpus(rng: random.Random) -> tuple[list[list[str]], list[list[str]]]:
    vocab = "a b c d e".split()
    n = rng.randint(1, 6)
    hyps = [[rng.choice(vocab) for _ in range(rng.randint(0, 8))] for _ in range(n)]
    refs = [[rng.choice(vocab) for _ in range(rng.randint(1, 8))] for _ in range(n)]
    return hyps, refs


def test_matches_nltk_corpus_bleu_as_the_authors_called_it() -> None:
    nltk_bleu = pytest.importorskip("nltk.translate.bleu_score").corpus_bleu
    rng = random.Random(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NLTK warns on zero n-gram overlaps
        for _ in range(300):
            hyps, refs = _random_corpus(rng)
            for n, w in BLEU_WEIGHTS.items():
                expected = nltk_bleu([[r] for r in refs], hyps, weights=w + (0.0,) * (4 - len(w)))
                got = corpus_bleu(hyps, refs, n)
                if got == 0.0:  # NLTK: exp(w * ln(smallest float)) for a zero-match order, e.g. e^-177 = 1e-77
                    assert expected < 1e-70, (hyps, refs, n)
                else:
                    assert got == pytest.approx(expected, rel=1e-12), (hyps, refs, n)


def test_equals_sacrebleu_without_nltk_floor_for_uniform_weights() -> None:
    from sacrebleu.metrics import BLEU

    rng = random.Random(1)
    for _ in range(300):
        hyps, refs = _random_corpus(rng)
        for n in (1, 2, 3, 4):
            sb = BLEU(tokenize="none", smooth_method="none", max_ngram_order=n, force=True)
            expected = sb.corpus_score([" ".join(h) for h in hyps], [[" ".join(r) for r in refs]]).score / 100
            got = corpus_bleu(hyps, refs, n, weights=(1 / n,) * n, nltk_floor=False)
            assert got == pytest.approx(expected, rel=1e-9, abs=1e-12), (hyps, refs, n)


def test_bleu3_weights_differ_from_uniform() -> None:
    # The authors' (0.34, 0.33, 0.33) vs sacrebleu's uniform 1/3:
    # BP * exp((ln 0.9 + ln 0.75 + ln 0.5) / 3) = BP * exp(-0.3620633) = 0.5700317, 0.15 BLEU points below 0.5714969.
    uniform = corpus_bleu(HYPS, REFS, 3, weights=(1 / 3,) * 3)
    assert uniform == pytest.approx(BP * (0.9 * 0.75 * 0.5) ** (1 / 3), rel=1e-12)
    assert uniform == pytest.approx(0.5700317, abs=1e-7)
    assert corpus_bleu(HYPS, REFS, 3) - uniform == pytest.approx(0.0014652, abs=1e-7)


def test_bleu_input_errors() -> None:
    with pytest.raises(ValueError, match="hypotheses but"):
        corpus_bleu(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="empty corpus"):
        corpus_bleu([], [])
    with pytest.raises(ValueError, match="order"):
        corpus_bleu(["a"], ["a"], 5)
    with pytest.raises(ValueError, match="whitespace"):
        corpus_bleu([["a b"]], [["a"]])


# Entropy / distinct on one set of k = 2 outputs: "a b a" and "a b".
# Pooled tokens a a a b b (5): p(a) = 3/5, p(b) = 2/5.
#   H = -(0.6 ln 0.6 + 0.4 ln 0.4) = 0.6 * 0.5108256 + 0.4 * 0.9162907 = 0.3064954 + 0.3665163 = 0.6730117
#   distinct-1 = |{a, b}| / 5 = 0.4
#   distinct-2, Eq. 5.3 (bigrams inside sentences): (a,b) (b,a) | (a,b) -> 2 distinct / 3 total = 0.6667
#   distinct-2, authors' code (stream "a b a a b", / tokens): (a,b) (b,a) (a,a) (a,b) -> 3 distinct / 5 = 0.6
SET = ["a b a", "a b"]


def test_entropy_hand_worked() -> None:
    assert entropy(SET) == pytest.approx(0.6730117, abs=1e-7)
    assert entropy(["a b", "c d"]) == pytest.approx(math.log(4))  # uniform over 4 words
    assert entropy(["a a", "a"]) == 0.0  # one word only


def test_distinct_hand_worked() -> None:
    assert distinct_n(SET, 1, "eq") == distinct_n(SET, 1, "code") == pytest.approx(0.4)
    assert distinct_n(SET, 2, "eq") == pytest.approx(2 / 3)
    assert distinct_n(SET, 2, "code") == pytest.approx(0.6)
    assert distinct_n(SET, 2) == distinct_n(SET, 2, "code")  # default: the authors' code


def test_diversity_edge_cases() -> None:
    assert entropy([]) == entropy(["", ""]) == 0.0
    assert distinct_n(["", ""], 1) == distinct_n([], 2, "eq") == 0.0
    # single token: H = 0, distinct-1 = 1, no bigram at all -> 0
    assert (entropy(["a"]), distinct_n(["a"], 1), distinct_n(["a"], 2, "eq"), distinct_n(["a"], 2, "code")) == (
        0.0, 1.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="variant"):
        distinct_n(SET, 2, "nltk")
    with pytest.raises(ValueError):
        distinct_n(SET, 0)


def test_diversity_averages_over_inputs() -> None:
    # set 1 = SET (H 0.6730117, d1 0.4, d2 0.6); set 2 = ten identical "x y" (H ln 2, d1 2/20, d2 |{xy, yx}|/20)
    got = diversity([SET, ["x y"] * 10])
    assert got["entropy"] == pytest.approx((0.6730117 + math.log(2)) / 2, abs=1e-7)
    assert got["distinct1"] == pytest.approx((0.4 + 0.1) / 2)
    assert got["distinct2"] == pytest.approx((0.6 + 0.1) / 2)
    with pytest.raises(ValueError):
        diversity([])
