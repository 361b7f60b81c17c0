"""bAbI tasks as padded tensors for memory networks, stacked so that many runs can train together."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .data import babi

SPLITS = ("train", "val", "test")


@dataclass
class TaskTensors:
    """One bAbI task (or the 20 tasks of a joint model): a vocabulary and padded tensors per split."""

    name: str
    vocab: babi.Vocab
    splits: dict[str, dict[str, np.ndarray]]

    @property
    def n_words(self) -> int:
        return len(self.vocab)


def load_task_tensors(root, variant: str, tasks: list[int], memory_size: int, n_val: int,
                      split_seed: int) -> TaskTensors:
    """Parse the task files, split train into train/validation, build the vocabulary (train + test words,
    as the reference code does) and vectorise. Several tasks give one joint data set.
    Raises babi.MissingDataError when a file is absent."""
    parts = {s: [] for s in SPLITS}
    for task in tasks:
        train, test = babi.load_task(root, variant, task)
        tr, va = babi.train_val_split(train, n_val, split_seed)
        parts["train"] += tr
        parts["val"] += va
        parts["test"] += test
    vocab = babi.Vocab.build(parts["train"] + parts["val"] + parts["test"])
    L = max(len(f) for s in parts.values() for x in s for f in x.facts)
    Lq = max(len(x.question) for s in parts.values() for x in s)
    splits = {name: babi.vectorize(samples, vocab, memory_size, sentence_len=L, query_len=Lq)
              for name, samples in parts.items()}
    return TaskTensors(f"{variant}:{'+'.join(map(str, tasks))}", vocab, splits)


def _pad_to(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, dtype=a.dtype)
    out[tuple(slice(0, n) for n in a.shape)] = a
    return out


def stack_split(datasets: list[TaskTensors], split: str, device) -> dict[str, torch.Tensor]:
    """Pad every data set's `split` to common shapes and stack: tensors with a leading data-set axis.
    Rows past a data set's own size are padding; `size[t]` says how many are real."""
    arrays = [d.splits[split] for d in datasets]
    N = max(len(a["answers"]) for a in arrays)
    M = max(a["stories"].shape[1] for a in arrays)
    L = max(a["stories"].shape[2] for a in arrays)
    Lq = max(a["queries"].shape[1] for a in arrays)
    stories = np.stack([_pad_to(a["stories"], (N, M, L)) for a in arrays])
    queries = np.stack([_pad_to(a["queries"], (N, Lq)) for a in arrays])
    out = {
        "stories": stories,
        "story_len": (stories != 0).sum(-1),
        "n_facts": np.stack([_pad_to(a["n_facts"], (N,)) for a in arrays]),
        "queries": queries,
        "query_len": (queries != 0).sum(-1),
        "answers": np.stack([_pad_to(a["answers"], (N,)) for a in arrays]),
        "size": np.array([len(a["answers"]) for a in arrays]),
    }
    return {k: torch.as_tensor(v, dtype=torch.long, device=device) for k, v in out.items()}


def gather(split: dict[str, torch.Tensor], data_of_run: torch.Tensor, idx: torch.Tensor) -> dict[str, torch.Tensor]:
    """The questions idx (K, B) of each run's own data set: tensors (K, B, ...)."""
    rows = data_of_run.unsqueeze(1).expand_as(idx)
    return {k: v[rows, idx] for k, v in split.items() if k != "size"}
