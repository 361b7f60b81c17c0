"""bAbI tasks as padded tensors for memory networks, stacked so that many runs can train together."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch
from torch.nn import functional as F

from nlpbench.data import babi

SPLITS = ("train", "val", "test")


@dataclass
class TaskTensors:
    """One bAbI task (or the 20 tasks of a joint model): a vocabulary and padded tensors per split."""

    name: str
    vocab: babi.Vocab
    splits: dict[str, dict[str, np.ndarray]]
    task_of: dict[str, np.ndarray] | None = None   # bAbI task of every sample per split (joint data sets)
    _sentence_index: tuple | None = field(default=None, repr=False, compare=False)   # cache of sentence_index

    @property
    def n_words(self) -> int:
        return len(self.vocab)


def load_task_tensors(root, variant: str, tasks: list[int], memory_size: int, n_val: int,
                      split_seed: int, train_questions: int | None = None,
                      answer_forms: dict[str, str] | None = None) -> TaskTensors:
    """Parse the task files, split train into train/validation, build the vocabulary (train + test words,
    as the reference code does) and vectorise. Several tasks give one joint data set. `train_questions`: only
    the first N questions of each training file (in file order) are split and used. `answer_forms`: answers
    rewritten as their stories write them (answers_in_story_form).
    Raises babi.MissingDataError when a file is absent."""
    parts = {s: [] for s in SPLITS}
    task_of = {s: [] for s in SPLITS}
    for task in tasks:
        train, test = babi.load_task(root, variant, task)
        if answer_forms:
            train, test = answers_in_story_form(train, answer_forms), answers_in_story_form(test, answer_forms)
        if train_questions is not None:
            if train_questions > len(train):
                raise ValueError(f"memnet.data.train_questions: {train_questions} questions asked for, but "
                                 f"{babi.task_file(root, variant, task, 'train')} holds {len(train)}")
            train = train[:train_questions]
        tr, va = babi.train_val_split(train, n_val, split_seed)
        for split, samples in (("train", tr), ("val", va), ("test", test)):
            parts[split] += samples
            task_of[split] += [task] * len(samples)
    data = tensors_from_samples(f"{variant}:{'+'.join(map(str, tasks))}", parts, memory_size)
    data.task_of = {s: np.array(t, dtype=np.int64) for s, t in task_of.items()}
    return data


def answers_in_story_form(samples: list[babi.Sample], forms: dict[str, str]) -> list[babi.Sample]:
    """Each answer as its own story writes it: where an answer is not a word of the question's story and its form
    in `forms` is, the answer becomes that form. Hindi bAbI answers name a place in the direct case ('bagicha')
    where the story names it in the oblique case ('Sita bagichey gayi'); an answer its story already holds
    ('bagicha' as the subject of a task-4 fact) is left as it is."""
    out = []
    for x in samples:
        form = forms.get(x.answer)
        if form is not None and not any(x.answer in f for f in x.facts) and any(form in f for f in x.facts):
            x = replace(x, answer=form)
        out.append(x)
    return out


def tensors_from_samples(name: str, parts: dict[str, list[babi.Sample]], memory_size: int,
                         vocab: babi.Vocab | None = None) -> TaskTensors:
    """Vectorise samples per split with one vocabulary (default: every word of every split)."""
    vocab = vocab or babi.Vocab.build([x for samples in parts.values() for x in samples])
    L = max((len(f) for s in parts.values() for x in s for f in x.facts), default=1)
    Lq = max(len(x.question) for s in parts.values() for x in s)
    splits = {split: babi.vectorize(samples, vocab, memory_size, sentence_len=L, query_len=Lq)
              for split, samples in parts.items()}
    return TaskTensors(name, vocab, splits)


def _pad_to(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, dtype=a.dtype)
    out[tuple(slice(0, n) for n in a.shape)] = a
    return out


def unique_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(x, axis=0, return_inverse=True) for a 2-D integer array, in the same (lexicographic) order,
    at a fraction of the cost: rows are deduplicated as opaque byte strings, then the few distinct rows sorted."""
    x = np.ascontiguousarray(x)
    flat = x.view(np.dtype((np.void, x.dtype.itemsize * x.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
    table = x[first]
    order = np.lexsort(table.T[::-1])            # lexicographic by column 0, then 1, ...
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return table[order], rank[inverse.reshape(-1)]


def sentence_index(data: TaskTensors) -> tuple[np.ndarray, dict[str, dict[str, np.ndarray]]]:
    """Every distinct sentence (fact or question) of a data set, once: a table (U, W) of token rows whose
    row 0 is the empty sentence, and per split `story_ids` (N, M) and `query_ids` (N) into it.

    bAbI repeats a few hundred sentences across thousands of stories, so embedding the table once per step
    and gathering rows is the same sum_j l_j A x_j as embedding every memory slot, at a fraction of the cost."""
    if data._sentence_index is None:
        W = max(max(a["stories"].shape[2], a["queries"].shape[1]) for a in data.splits.values())
        rows = [np.zeros((1, W), dtype=np.int64)]
        for a in data.splits.values():
            facts = a["stories"].reshape(-1, a["stories"].shape[2])
            rows.append(_pad_to(facts, (len(facts), W)))
            rows.append(_pad_to(a["queries"], (a["queries"].shape[0], W)))
        table, inverse = unique_rows(np.concatenate(rows))
        assert not table[0].any(), "the empty sentence sorts first"
        ids, at = {}, 1
        for name, a in data.splits.items():
            N, M = a["stories"].shape[:2]
            story = inverse[at:at + N * M].reshape(N, M)
            at += N * M
            ids[name] = {"story_ids": story, "query_ids": inverse[at:at + N]}
            at += N
        data._sentence_index = (table, ids)
    return data._sentence_index


def padded_split(data: TaskTensors, split: str) -> dict[str, torch.Tensor]:
    """A split's stories (N, M, W) and queries (N, W) as word ids padded to the sentence table's width W (the
    width the position encoding reads), with n_facts and answers: the input of the one-run memnet.model."""
    W = sentence_index(data)[0].shape[1]
    a = data.splits[split]
    stories, queries = torch.as_tensor(a["stories"]), torch.as_tensor(a["queries"])
    return {"stories": F.pad(stories, (0, W - stories.shape[2])), "queries": F.pad(queries, (0, W - queries.shape[1])),
            "n_facts": torch.as_tensor(a["n_facts"]), "answers": torch.as_tensor(a["answers"])}


def stack_sentences(datasets: list[TaskTensors], device) -> dict[str, torch.Tensor]:
    """The data sets' sentence tables padded to common shape and stacked: tokens (T, U, W), len (T, U), and
    each table's own width W_t (T,) and rows U_t (T,)."""
    tables = [sentence_index(d)[0] for d in datasets]
    U = max(t.shape[0] for t in tables)
    W = max(t.shape[1] for t in tables)
    tokens = np.stack([_pad_to(t, (U, W)) for t in tables])
    return {"tokens": torch.as_tensor(tokens, device=device),
            "len": torch.as_tensor((tokens != 0).sum(-1), device=device),
            "width": torch.as_tensor([t.shape[1] for t in tables], device=device),   # each data set's own width
            "count": torch.as_tensor([t.shape[0] for t in tables], device=device)}   # and its own rows


def stack_split(datasets: list[TaskTensors], split: str, device) -> dict[str, torch.Tensor]:
    """Pad every data set's `split` to common shapes and stack: tensors with a leading data-set axis.
    Stories and questions are ids into the data set's sentence table (see `sentence_index`).
    Rows past a data set's own size are padding; `size[t]` says how many are real."""
    arrays = [d.splits[split] for d in datasets]
    ids = [sentence_index(d)[1][split] for d in datasets]
    N = max(len(a["answers"]) for a in arrays)
    M = max(a["stories"].shape[1] for a in arrays)
    out = {
        "story_ids": np.stack([_pad_to(i["story_ids"], (N, M)) for i in ids]),
        "query_ids": np.stack([_pad_to(i["query_ids"], (N,)) for i in ids]),
        "n_facts": np.stack([_pad_to(a["n_facts"], (N,)) for a in arrays]),
        "answers": np.stack([_pad_to(a["answers"], (N,)) for a in arrays]),
        "size": np.array([len(a["answers"]) for a in arrays]),
    }
    return {k: torch.as_tensor(v, dtype=torch.long, device=device) for k, v in out.items()}


def gather(split: dict[str, torch.Tensor], data_of_run: torch.Tensor, idx: torch.Tensor) -> dict[str, torch.Tensor]:
    """The questions idx (K, B) of each run's own data set: tensors (K, B, ...). Each split tensor (T, N, ...) is
    read as one table of T N rows (index_select copies whole rows: several times faster than indexing by the two
    index tensors, element by element)."""
    K, B = idx.shape
    out = {}
    for k, v in split.items():
        if k == "size":
            continue
        flat = (data_of_run.unsqueeze(1) * v.shape[1] + idx).reshape(-1)
        out[k] = v.reshape(v.shape[0] * v.shape[1], *v.shape[2:]).index_select(0, flat).view(K, B, *v.shape[2:])
    return out
