"""A tiny synthetic reading task for the squad tests: the answer is the word right after the marker "@"."""

import random

import numpy as np

from nlpbench.squad.data import build_examples
from nlpbench.squad.glove import build_vocab

WORDS = [f"w{i}" for i in range(30)]


def marker_task(n_train: int, n_test: int, seed: int = 0, length: int = 12, dim: int = 8, train_articles: int = 1):
    """(train_set, test_set, embeddings, vocab): data.build_examples output for passages of `length` random
    words with "@ <answer>" at a random place; the question is a few random words. The training passages are
    spread over `train_articles` articles (train0, train1, ...; one: "train")."""
    rng = random.Random(seed)

    def article(title: str, n: int) -> dict:
        paragraphs = []
        for k in range(n):
            words = [rng.choice(WORDS) for _ in range(length)]
            at = rng.randrange(length - 1)
            words[at] = "@"
            context = " ".join(words)
            start = len(" ".join(words[: at + 1])) + 1
            answer = words[at + 1]
            question = " ".join(rng.choice(WORDS) for _ in range(4)) + " ?"
            paragraphs.append({"context": context, "qas": [
                {"id": f"{title}-{k}", "question": question, "answers": [{"text": answer, "answer_start": start}]}]})
        return {"title": title, "paragraphs": paragraphs}

    if train_articles == 1:
        train = build_examples([article("train", n_train)])
    else:
        train = build_examples([article(f"train{a}", n_train // train_articles) for a in range(train_articles)])
    test = build_examples([article("test", n_test)])
    vocab = build_vocab([c["tokens"] for c in train["contexts"] + test["contexts"]] +
                        [e["question_tokens"] for e in train["examples"] + test["examples"]])
    vectors = np.random.default_rng(seed).standard_normal((len(vocab), dim)).astype(np.float32)
    vectors[0] = 0
    return train, test, vectors, vocab
