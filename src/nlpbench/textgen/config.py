"""params.yaml `textgen:` (seed 001, Bahuleyan thesis chs. 4-6): the declared tables and outputs, and where the
prepared corpora, their word vectors and the outputs lie (the runs are made in nlpbench.textgen.groups).
No torch here: the plan imports this module.
"""

from __future__ import annotations

from pathlib import Path

from nlpbench import config
from nlpbench.runtime import rundirs

SOURCE = "bahuleyan-thesis"
CORPORA = ("snli", "qg", "dialog")


digest = config.digest


def tg_tables(params: dict) -> dict[str, dict]:
    """table name -> declaration, for every table of params.yaml this family fills."""
    return {d.name: d.decl for d in config.declared(params, "tables", "textgen")}


def tg_outputs(params: dict) -> dict[str, dict]:
    """output name -> declaration (qualitative tables and figures)."""
    return {d.name: d.decl for d in config.declared(params, "outputs", "textgen")}


# Settings added after runs existed: left out of the digests while they hold these neutral values, so that the
# ids of earlier runs (and their prepared data) stay valid.
NEUTRAL_CORPUS_KEYS = {"max_pairs": None, "mirror_split": "valid", "mirror_split_fractions": [0.8, 0.1, 0.1]}
NEUTRAL_TRAIN_KEYS = {"patience": None}


def settings_key(settings: dict) -> dict:
    """A run's settings as its id digests them: training keys at their neutral values left out."""
    train = {k: v for k, v in settings["train"].items()
             if not (k in NEUTRAL_TRAIN_KEYS and v == NEUTRAL_TRAIN_KEYS[k])}
    return {**settings, "train": train}


def corpus_key(params: dict, corpus: str) -> dict:
    section = params["textgen"]["corpora"][corpus]
    return {k: v for k, v in section.items() if not (k in NEUTRAL_CORPUS_KEYS and v == NEUTRAL_CORPUS_KEYS[k])}


def corpus_dir(params: dict, corpus: str, data_root: str | Path = "data") -> Path:
    """data/textgen/<corpus>-<digest of its preparation settings>: a changed setting prepares anew."""
    return Path(data_root) / "textgen" / f"{corpus}-{digest(corpus_key(params, corpus))}"


def embeddings_step(corpus: str) -> str:
    """The data step that trains a corpus's word2vec vectors (embeddings_path)."""
    return f"embeddings-{corpus}"


def embeddings_path(params: dict, corpus: str, runs_root: str | Path = rundirs.RUNS) -> Path:
    """The word2vec vectors of a prepared corpus: built by the pipeline (not part of the DVC data stage)."""
    return (rundirs.run_dir(runs_root, "textgen/_embeddings") /
            f"{corpus_dir(params, corpus).name}-word2vec-{digest(params['textgen']['embeddings'])}.pt")


def output_file(params: dict, key: str, results: str | Path = "results") -> Path:
    spec = tg_outputs(params)[key]
    ext = "png" if spec["kind"] in ("iterations", "epochs") else "md"
    return Path(results) / SOURCE / f"{key}.{ext}"
