"""ROUGE / METEOR / CIDEr wrappers on hand-checkable cases (nlpbench.metrics.rouge)."""

from __future__ import annotations

import os
import shutil

import pytest

from nlpbench.metrics.rouge import coco_cider, coco_rouge_l, meteor, rouge_f1

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
