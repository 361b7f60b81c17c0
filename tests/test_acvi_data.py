"""CNN/DM mirror subset, tokenisation, lead-3 and released outputs scored by our ROUGE; QG pairs; video stand-in."""

from __future__ import annotations

import hashlib
import json

import pytest

from nlpbench.acvi import data as acvi_data
from nlpbench.acvi.data import (SYNTHETIC_LABEL, lead_k, load_cnndm, load_qg, prepare_cnndm, prepare_qg,
                                read_prepared_cnndm, synthetic_video_features, truncate)
from nlpbench.acvi.tokenize import (corenlp_ptb_tokenize, fix_missing_period, java_available, regex_ptb_tokenize,
                                    split_sentences)
from nlpbench.data.fetch import ChecksumError, FetchError
from nlpbench.metrics.rouge import rouge_f1


@pytest.fixture(scope="module")
def cnndm(mirror_dir):
    if not (mirror_dir / "cnn_dm" / "MANIFEST.tsv").is_file():
        pytest.skip("the mirror has no cnn_dm/")
    return load_cnndm(mirror_dir)


def joined(sents):
    return [" ".join(s) for s in sents]


def test_tokenizer_fallback_agrees_with_corenlp_on_common_cases():
    lines = ["Gary Locke will be confirmed as Kilmarnock’s manager (on Friday).",
             'He said: "It\'s great, don\'t you think?" Yes', "The U.S. team won 3.5 points..."]
    expected = [["gary", "locke", "will", "be", "confirmed", "as", "kilmarnock", "'s", "manager", "-lrb-", "on",
                 "friday", "-rrb-", "."],
                ["he", "said", ":", "``", "it", "'s", "great", ",", "do", "n't", "you", "think", "?", "''", "yes"],
                ["the", "u.s.", "team", "won", "3.5", "points", "..."]]
    assert regex_ptb_tokenize(lines) == expected
    if java_available():
        assert corenlp_ptb_tokenize(lines) == expected


def test_sentences_and_missing_period():
    assert fix_missing_period(["breaking", "news"]) == ["breaking", "news", "."]
    assert fix_missing_period(["done", "."]) == ["done", "."]
    assert split_sentences("a b . `` c ! '' d".split()) == [["a", "b", "."], ["``", "c", "!", "''"], ["d"]]
    assert truncate(list("abcdef"), 4) == list("abcd")


def test_cnndm_mirror_loads_and_verifies(cnndm):
    articles, backend = cnndm
    assert len(articles) == 250 and backend in ("corenlp", "regex")
    assert len({a.id for a in articles}) == 250
    for a in articles:
        assert a.article and a.reference and set(a.systems) >= {"pgn", "s2s"}
        assert all(t == t.lower() for t in a.article_tokens[:50])
    assert 3 <= sum(len(a.reference) for a in articles) / 250 <= 5     # about 3.75 highlight sentences


def test_lead3_and_released_pointer_generator_are_scored(cnndm):
    """Runs our ROUGE over the 250 articles; asserts only a broad range, never published numbers."""
    articles, _ = cnndm
    refs = [joined(a.reference) for a in articles]
    lead3 = rouge_f1([joined(lead_k(a, 3)) for a in articles], refs)
    pgn = rouge_f1([joined(a.systems["pgn"]) for a in articles], refs)
    s2s = rouge_f1([joined(a.systems["s2s"]) for a in articles], refs)
    for s in (lead3, pgn, s2s):
        assert s["n"] == 250 and 5 < s["rouge2"] < s["rougeL"] < s["rouge1"] < 60
    assert pgn["rouge1"] > s2s["rouge1"]                     # the pointer beats plain seq2seq on this subset


def test_checksum_mismatch_and_missing_mirror(tmp_path):
    folder = tmp_path / "cnn_dm" / acvi_data.CNNDM_JSON_DIR
    folder.mkdir(parents=True)
    rel = f"{acvi_data.CNNDM_JSON_DIR}/x.json"
    (folder / "x.json").write_text(json.dumps({"id": "x"}))
    wrong = hashlib.sha256(b"something else").hexdigest()
    (tmp_path / "cnn_dm" / "MANIFEST.tsv").write_text(f"path\tbytes\tlines\tsha256\n{rel}\t1\t1\t{wrong}\n")
    with pytest.raises(ChecksumError, match="x.json"):
        load_cnndm(tmp_path, tokenizer="regex")
    with pytest.raises(FetchError, match="MANIFEST.tsv"):
        load_cnndm(tmp_path / "nowhere", tokenizer="regex")


def test_prepare_cnndm_writes_status_last(mirror_dir, tmp_path):
    if not (mirror_dir / "cnn_dm" / "MANIFEST.tsv").is_file():
        pytest.skip("the mirror has no cnn_dm/")
    status = prepare_cnndm(tmp_path / "cnndm", mirror_dir, tokenizer="regex")
    assert status["n_articles"] == 250 and status["tokenizer"] == "regex"
    out = tmp_path / "cnndm"
    assert (out / "STATUS.json").stat().st_mtime_ns >= (out / "articles.jsonl").stat().st_mtime_ns
    assert len(read_prepared_cnndm(out)) == 250
    with pytest.raises(FetchError, match="STATUS.json"):
        read_prepared_cnndm(tmp_path / "empty")


def test_qg_pairs(mirror_dir, tmp_path):
    if not (mirror_dir / "qg_du2017" / "MANIFEST.tsv").is_file():
        pytest.skip("the mirror has no qg_du2017/")
    dev = load_qg("dev", mirror_dir)
    assert len(dev) == 10_570 and all(s and q for s, q in dev[:100])
    with pytest.raises(ValueError, match="no train"):
        load_qg("train", mirror_dir)
    status = prepare_qg(tmp_path / "qg", mirror_dir)
    assert status["pairs"] == {"dev": 10_570, "test": 11_877}


def test_synthetic_video_features_are_labelled():
    v = synthetic_video_features(3, seed=1)
    assert v["features"].shape == (3, 24, 1024) and "synthetic" in v["label"] and v["label"] == SYNTHETIC_LABEL
    assert (v["features"] >= 0).all()
    assert synthetic_video_features(3, seed=1)["features"].equal(v["features"])


def test_released_rows_scorer(cnndm):
    from nlpbench.acvi.released import score_systems

    articles, _ = cnndm
    scores = score_systems(articles[:40], ("lead3", "pgn"))
    assert scores["lead3"]["novel_word_rate"] == 0.0         # lead-3 copies the article verbatim
    assert scores["pgn"]["n"] == 40 and 0 <= scores["pgn"]["novel_word_rate"] < 10


def test_user_supplied_cnndm_stories_are_found_by_url_hash_and_tokenised(tmp_path, mirror_dir):
    import hashlib
    import json

    from nlpbench.acvi.data import prepare_cnndm_full, read_cnndm_split, read_story, story_name
    from nlpbench.data.fetch import FetchError

    url = "http://www.cnn.com/2015/04/01/a/"
    assert story_name(url) == hashlib.sha1(url.encode()).hexdigest() + ".story"
    assert read_story("Line one.\n\n@highlight\n\nfirst point\n\n@highlight\n\nsecond point\n") == (
        ["Line one."], ["first point", "second point"])
    root = tmp_path / "cnndm"
    (root / "cnn" / "stories").mkdir(parents=True)
    (root / "dailymail" / "stories").mkdir(parents=True)
    (root / "url_lists").mkdir()
    for split, urls in {"train": ["http://a/1", "http://a/2"], "val": ["http://a/3"], "test": ["http://a/4"]}.items():
        (root / "url_lists" / f"all_{split}.txt").write_text("\n".join(urls) + "\n")
        for i, u in enumerate(urls):
            folder = "cnn" if i % 2 == 0 else "dailymail"
            (root / folder / "stories" / story_name(u)).write_text(
                f"The story {u} begins here. It goes on\n\n@highlight\n\nA Highlight of {u}\n")
    status = prepare_cnndm_full(tmp_path / "out", root, mirror_dir, tokenizer="regex")
    assert status["stories"] == {"train": 2, "val": 1, "test": 1}
    assert json.loads((tmp_path / "out" / "STATUS.json").read_text())["available"] is True
    (src, ref), _ = read_cnndm_split(tmp_path / "out", "train")
    assert src[:3] == ["the", "story", "http"] and src[-1] == "."          # lower-cased; missing period added
    assert ref[:3] == ["a", "highlight", "of"] and ref[-1] == "."
    (root / "cnn" / "stories" / story_name("http://a/1")).unlink()
    with pytest.raises(FetchError, match="1 of 2 train stories missing"):
        prepare_cnndm_full(tmp_path / "out2", root, mirror_dir, tokenizer="regex")
