"""ROUGE / METEOR / CIDEr wrappers on hand-checkable cases (nlpbench.metrics.rouge)."""

from __future__ import annotations

import os
import shutil

import pytest

from nlpbench.metrics.rouge import coco_cider, coco_rouge_l, meteor, rouge155, rouge155_available, rouge_f1

java = pytest.mark.skipif(shutil.which("java") is None, reason="METEOR needs Java")


def test_rouge_hand_computed():
    # unigrams: 5 of 6 match each way -> F1 5/6; bigrams: the-cat, on-the, the-mat = 3 of 5 -> 3/5;
    # LCS "the cat on the mat" = 5 -> 5/6.
    s = rouge_f1(["the cat sat on the mat"], ["the cat was on the mat"])
    assert s["rouge1"] == pytest.approx(100 * 5 / 6)
    assert s["rouge2"] == pytest.approx(60.0)
    assert s["rougeL"] == pytest.approx(100 * 5 / 6)
    assert s["n"] == 1


def test_rouge_is_mean_of_documents_and_summary_level_lcs():
    perfect = ["a b c", "d e f"]
    s = rouge_f1([perfect, ["x y z"]], [perfect, ["q r s"]])
    assert s["rouge1"] == pytest.approx(50.0) and s["rougeL"] == pytest.approx(50.0)
    # Summary-level LCS over sentences: the sentence order of the hypothesis does not matter for rougeLsum,
    # while a flat LCS over the joined text would lose one sentence.
    s = rouge_f1([["d e f", "a b c"]], [["a b c", "d e f"]])
    assert s["rougeL"] == pytest.approx(100.0)


def test_rouge_stemming_switch():
    assert rouge_f1(["cats running"], ["cat runs"], stem=False)["rouge1"] == 0.0
    assert rouge_f1(["cats running"], ["cat runs"], stem=True)["rouge1"] == pytest.approx(100.0)


def test_rouge_rejects_mismatched_lengths():
    with pytest.raises(ValueError):
        rouge_f1(["a"], ["a", "b"])


@java
def test_meteor_exact_mode():
    same = meteor(["the cat sat on the mat"], [["the cat sat on the mat"]], mode="exact")
    assert 0.99 < same <= 1.0                       # only the fragmentation penalty of one chunk
    none = meteor(["dogs bark loudly"], [["the cat sat on the mat"]], mode="exact")
    assert none == pytest.approx(0.0)
    with pytest.raises(ValueError):
        meteor(["a"], [["a"]], mode="fuzzy")


@java
@pytest.mark.skipif(not os.environ.get("ACVI_SLOW_TESTS"), reason="full METEOR loads the paraphrase table (~16 s)")
def test_meteor_full_mode_rewards_stems():
    hyp, ref = ["the cats were running"], [["the cat was running"]]
    assert meteor(hyp, ref, mode="full") > meteor(hyp, ref, mode="exact")


def test_coco_rouge_l_and_cider():
    refs = [["a man is firing a gun", "a man shoots a gun"], ["a woman is riding a horse"]]
    assert coco_rouge_l(["a man is firing a gun", "a woman is riding a horse"], refs) == pytest.approx(1.0)
    good = coco_cider(["a man is firing a gun", "a woman is riding a horse"], refs)
    bad = coco_cider(["the sky", "blue water"], refs)
    assert bad == pytest.approx(0.0) and good > 1.0


def test_coco_rouge_l_hand_computed():
    # LCS("a man is firing a gun", "a man shoots a gun") = "a man a gun" = 4: P = 4/6, R = 4/5;
    # F = (1 + b^2) P R / (R + b^2 P) with b = 1.2 = 2.44 * 0.5333 / (0.8 + 1.44 * 0.6667) = 0.73939
    assert coco_rouge_l(["a man is firing a gun"], [["a man shoots a gun"]]) == pytest.approx(0.73939, abs=1e-4)


# CI sets NLPBENCH_REQUIRE_ROUGE155 (it installs Perl's XML::Parser): there these tests run or fail, never skip
perl_rouge = pytest.mark.skipif(rouge155_available() is not None and not os.environ.get("NLPBENCH_REQUIRE_ROUGE155"),
                                reason=f"ROUGE-1.5.5: {rouge155_available()}")


@perl_rouge
def test_official_rouge155_on_a_hand_worked_case_agrees_with_ours():
    # hypothesis 9 words, reference 10 (punctuation dropped by both tokenisers); unigrams: 8 match -> F 16/19;
    # bigrams (across the sentence break): the-cat on-the the-mat mat-it it-was = 5 of 8 and 9 -> F 10/17;
    # summary-level LCS: "the cat on the mat" + "it was happy" = 8 -> 16/19.
    hyp, ref = [["the cat sat on the mat .", "it was happy ."]], [["the cat lay on the mat .", "it was very happy ."]]
    for s in (rouge155(hyp, ref), rouge_f1(hyp, ref)):
        assert s["rouge1"] == pytest.approx(100 * 16 / 19, abs=1e-3)
        assert s["rouge2"] == pytest.approx(100 * 10 / 17, abs=1e-3)
        assert s["rougeL"] == pytest.approx(100 * 16 / 19, abs=1e-3)


@perl_rouge
def test_official_rouge155_rougel_is_summary_level_and_stemming_is_a_switch():
    assert rouge155([["d e f", "a b c"]], [["a b c", "d e f"]])["rougeL"] == pytest.approx(100.0)
    assert rouge155(["cats running"], ["cat runs"])["rouge1"] == 0.0
    assert rouge155(["cats running"], ["cat runs"], stem=True)["rouge1"] == pytest.approx(100.0)


def test_coco_bleu4_hand_computed_and_caption_metrics_call_each_scorer():
    from nlpbench.metrics.rouge import caption_metrics, coco_bleu4
    # identical caption: every n-gram precision 1, no brevity penalty -> BLEU-4 = 1
    assert coco_bleu4(["a man is firing a gun"], [["a man is firing a gun"]]) == pytest.approx(1.0, abs=1e-6)
    # 6-word hypothesis, 5 of 6 unigrams, 3 of 5 bigrams, 1 of 4 trigrams, 0 of 3 4-grams: BLEU-4 ~ 0
    assert coco_bleu4(["a man is riding a gun"], [["a man is firing a gun"]]) < 1e-3
    m = caption_metrics(["a man is firing a gun"], [["a man is firing a gun"]])
    assert set(m) == {"rougeL", "cider", "bleu4"} and m["rougeL"] == pytest.approx(1.0)
