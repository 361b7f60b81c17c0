"""SQuAD EM/F1 on hand-worked cases (normalisation, multiple golds, repeated tokens, empty answers)."""

import pytest

from nlpbench.metrics.squad import exact_match, f1, normalize_answer, squad_scores


@pytest.mark.parametrize(
    "raw, normalised",
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("  an   apple\tpie ", "apple pie"),
        ("U.S.A.", "usa"),  # punctuation inside a token is deleted, not turned into a space
        ("state-of-the-art", "stateoftheart"),  # 'the' glued by hyphens is no longer a whole word
        ("Theatre", "theatre"),  # article only as a whole word
        ("A", ""),
        ("¿Qué?", "¿qué"),  # only ASCII punctuation is removed
        ("February 7, 2016", "february 7 2016"),
    ],
)
def test_normalize(raw, normalised):
    assert normalize_answer(raw) == normalised


def test_exact_match_ignores_case_articles_punctuation():
    assert exact_match("the Denver Broncos!", "Denver Broncos") == 1.0
    assert exact_match("Denver", "Denver Broncos") == 0.0


def test_f1_partial_overlap():
    # pred tokens: denver broncos team (3), gold: denver broncos (2): p = 2/3, r = 1 -> 0.8
    assert f1("Denver Broncos team", "the Denver Broncos") == pytest.approx(0.8)


def test_f1_repeated_tokens_counted_as_multiset():
    # pred "new new york": gold "new york" shares new x1, york x1 -> p = 2/3, r = 1 -> 0.8
    assert f1("new new york", "New York") == pytest.approx(0.8)
    # gold "new new york", pred "new york": p = 1, r = 2/3 -> 0.8
    assert f1("new york", "new new york") == pytest.approx(0.8)


def test_empty_prediction_and_article_only_gold():
    assert f1("", "Denver") == 0.0
    assert exact_match("", "Denver") == 0.0
    # both normalise to "": EM counts them equal, F1 has no shared token -> 0
    assert exact_match("the", "a") == 1.0
    assert f1("the", "a") == 0.0


def test_corpus_scores_take_best_gold_and_average_all_questions():
    golds = {
        "q1": ["Denver Broncos", "Broncos"],
        "q2": ["Santa Clara, California", "Levi's Stadium"],
        "q3": ["1996"],
    }
    preds = {"q1": "Broncos", "q2": "Santa Clara"}  # q3 unanswered -> 0
    scores = squad_scores(preds, golds)
    # q1: EM 1, F1 1. q2: EM 0, F1 vs "santa clara california" = 2*(1*2/3)/(1+2/3) = 0.8. q3: 0.
    assert scores["n"] == 3
    assert scores["em"] == pytest.approx(100 / 3)
    assert scores["f1"] == pytest.approx(100 * 1.8 / 3)


def test_no_golds_is_an_error():
    with pytest.raises(ValueError):
        squad_scores({}, {})
