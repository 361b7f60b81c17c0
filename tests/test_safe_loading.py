"""Torch files are loaded without running code: a crafted pickle planted where each family reads a checkpoint,
a trained model or prepared tensors is refused by name and runs nothing; a full disk while one is written is a
one-line error naming the file."""

from __future__ import annotations

import copy
import errno
import os
import resource
import signal
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from nlpbench import cli, config
from nlpbench.runtime import checkpoints
from nlpbench.runtime.checkpoints import LoadError
from nlpbench.runtime.io import OutputError

sys.path.insert(0, str(Path(__file__).parent))
from squad_synthetic import marker_task  # noqa: E402

torch.set_num_threads(1)
REPO = Path(__file__).resolve().parents[1]


class _Planted:
    """Unpickling this creates the file `sentinel`: the stand-in for a command a crafted file would run."""

    def __init__(self, sentinel: Path):
        self.sentinel = str(sentinel)

    def __reduce__(self):
        return open, (self.sentinel, "w")


def plant(path: Path) -> Path:
    """A crafted torch file at `path`, shaped like a checkpoint; returns the sentinel its loading would create."""
    sentinel = path.parent / f"{path.name}.ran-code"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": _Planted(sentinel), "epoch": 1, "run_ids": ["x"]}, path)
    return sentinel


@contextmanager
def refused(path: Path, remedy: str = "; delete it and let nlpbench write it again"):
    """The block must refuse the planted file `path` by name, with `remedy`, without running it."""
    sentinel = path.parent / f"{path.name}.ran-code"
    with pytest.raises(LoadError) as e:
        yield
    assert not sentinel.exists(), "loading the planted file ran its code"
    assert str(e.value).startswith(f"cannot load {path}: it holds a Python object (io.open) other than tensors "
                                   "and plain data, which loading could run as code")
    assert remedy in str(e.value)


# ------------------------------------------------------------------------------------------------ memnet
@pytest.fixture(scope="module")
def smoke_params():
    return config.load(REPO / "params.yaml", {"scale": "smoke"})


def test_memnet_training_refuses_a_planted_group_checkpoint_from_the_command_line(smoke_params, babi_root, tmp_path,
                                                                                 capsys):
    from nlpbench.memnet.groups import all_groups
    group = next(iter(all_groups(smoke_params).values()))
    runs = tmp_path / "runs"
    path = runs / group.group_id / "_checkpoint.pt"
    sentinel = plant(path)
    rc = cli.main(["--params", str(REPO / "params.yaml"), "--set", "scale=smoke", "--set", "device=cpu",
                   "--data", str(babi_root.parent), "--runs", str(runs), "train", group.group_id])
    err = capsys.readouterr().err
    assert rc == 2 and not sentinel.exists()
    assert err.startswith(f"nlpbench: cannot load {path}: it holds a Python object") and err.count("\n") == 1


def test_memnet_resuming_refuses_a_planted_checkpoint(babi_root, tmp_path):
    from nlpbench.memnet.data import load_task_tensors
    from nlpbench.memnet.model import MemNetConfig
    from nlpbench.memnet.train import GroupTrainer, Run, TrainConfig
    data = [load_task_tensors(babi_root, "en", [1], 50, 100, 0)]
    trainer = GroupTrainer([Run("a", 0, 0)], data, MemNetConfig(n_words=0), TrainConfig(epochs=1), None,
                           log=lambda s: None)
    plant(tmp_path / "ckpt.pt")
    with refused(tmp_path / "ckpt.pt"):
        trainer.fit(tmp_path / "ckpt.pt")


def test_memnet_reading_a_runs_model_refuses_a_planted_one(tmp_path):
    from nlpbench.memnet.predict import RunPredictor
    plant(tmp_path / "model.pt")
    with refused(tmp_path / "model.pt"):
        RunPredictor(tmp_path)


# ------------------------------------------------------------------------------------------------- squad
def _squad_config(epochs: int = 1):
    from nlpbench.squad.model import ModelConfig
    from nlpbench.squad.train import TrainConfig
    return TrainConfig(model=ModelConfig(hidden=8, embed_adjust=8, similarity="trilinear", output="O_2"),
                       epochs=epochs, batch_size=30, seed=0)


def test_squad_resuming_and_reading_a_model_refuse_planted_files(tmp_path):
    from nlpbench.squad.train import load_trained, run
    train, test, emb, vocab = marker_task(60, 20, seed=0)
    plant(tmp_path / "run" / "checkpoint.pt")
    with refused(tmp_path / "run" / "checkpoint.pt"):
        run(_squad_config(), train, test, emb, vocab, tmp_path / "run", log=lambda s: None)
    plant(tmp_path / "done" / "model.pt")
    with refused(tmp_path / "done" / "model.pt"):
        load_trained(tmp_path / "done", emb)


# --------------------------------------------------------------------------------------------------- dmn
def test_dmn_resuming_refuses_a_planted_checkpoint(babi_root, tmp_path):
    from nlpbench.data.babi import load_task, train_val_split
    from nlpbench.dmn.model import DMNConfig
    from nlpbench.dmn.train import DMNTrainConfig, DMNTrainer, build_data
    train, test = load_task(babi_root, "en", 1)
    train, val = train_val_split(train, 100, 0)
    trainer = DMNTrainer(DMNConfig(0, 0, variant="dmn+", dim=8), DMNTrainConfig(max_epochs=1),
                         build_data({"train": train[:50], "val": val, "test": test[:50]}), seed=0,
                         log=lambda s: None)
    plant(tmp_path / "checkpoint.pt")
    with refused(tmp_path / "checkpoint.pt"):
        trainer.fit(tmp_path / "checkpoint.pt")


def test_the_dmn_ensemble_refuses_a_planted_members_test_probabilities(tmp_path):
    from nlpbench.dmn import experiments as dx
    from nlpbench.dmn import groups as dg
    runs = {m: tmp_path / m for m in dg.ENSEMBLE_MEMBERS}
    gold = torch.tensor([0, 1])
    for m in dg.ENSEMBLE_MEMBERS:
        checkpoints.save({"answers": ["a", "b"], "probs": {"test": torch.eye(2)}, "gold": {"test": gold}},
                         runs[m] / "test_probs.pt")
    assert dx._ensemble_accuracy(runs, "1") == 1.0                  # the real files load
    planted = runs[dg.ENSEMBLE_MEMBERS[1]] / "test_probs.pt"
    plant(planted)
    with refused(planted):
        dx._ensemble_accuracy(runs, "1")


# -------------------------------------------------------------------------------------------------- acvi
def test_acvi_resuming_and_reading_a_model_refuse_planted_files(tmp_path):
    from nlpbench.acvi.model import ModelConfig
    from nlpbench.acvi.train import TrainConfig, load_trained, run
    cfg = TrainConfig(task="copy", model=ModelConfig(emb_dim=8, hidden_dim=8, attn_dim=8, attention="asa"),
                      batch_size=4, phases=[[4, 5, 5]], coverage_iters=0, beam_width=2, min_dec_steps=0,
                      max_dec_steps=6, eval_meteor=False,
                      copy_task={"n_train": 20, "n_eval": 2, "length": [3, 5], "n_words": 10, "n_oov_words": 5})
    plant(tmp_path / "run" / "checkpoint.pt")
    with refused(tmp_path / "run" / "checkpoint.pt"):
        run(cfg, tmp_path / "run")
    plant(tmp_path / "done" / "model.pt")
    with refused(tmp_path / "done" / "model.pt"):
        load_trained(tmp_path / "done")


def test_acvi_msvd_features_refuse_a_planted_split_even_with_matching_checksums(tmp_path):
    """A shared prepared folder can carry a STATUS.json that records the planted file's own size and sha256."""
    from nlpbench.acvi.data import STATUS_FILE, read_msvd_split
    from nlpbench.data.prepared import file_records
    from nlpbench.runtime.io import write_json
    plant(tmp_path / "test.pt")
    write_json(tmp_path / STATUS_FILE, {"available": True, "files": file_records(tmp_path, ["test.pt"])})
    with refused(tmp_path / "test.pt", "; delete it and run the data step acvi-msvd again"):
        read_msvd_split(tmp_path, "test")


# ----------------------------------------------------------------------------------------------- textgen
@pytest.fixture(scope="module")
def textgen_root(mirror_dir: Path, tmp_path_factory: pytest.TempPathFactory, smoke_params):
    from nlpbench.textgen.config import corpus_dir
    from nlpbench.textgen.corpora import CorpusConfig, prepare_corpus
    from nlpbench.textgen.train import prepare_embeddings
    root = tmp_path_factory.mktemp("textgen")
    section = {k: tuple(v) if isinstance(v, list) else v
               for k, v in smoke_params["textgen"]["corpora"]["snli"].items()}
    prepare_corpus("snli", corpus_dir(smoke_params, "snli", root / "data"), mirror_dir,
                   config=CorpusConfig(corpus="snli", **section), allow_download=False)
    prepare_embeddings(smoke_params, "snli", root / "data", root / "runs")
    return root


def test_textgen_resuming_and_reading_a_model_refuse_planted_files(textgen_root, smoke_params, tmp_path):
    from nlpbench.textgen.config import embeddings_path
    from nlpbench.textgen.groups import make_run
    from nlpbench.textgen.train import load_run_model, train_run
    params = copy.deepcopy(smoke_params)
    params["textgen"]["settings"]["snli"]["train"]["epochs"] = 1
    run = make_run(params, "snli-tanh-3000")
    data, runs = textgen_root / "data", textgen_root / "runs"
    ckpt = run.run_dir(runs) / "checkpoint.pt"
    plant(ckpt)
    with refused(ckpt):
        train_run(run, params, data, runs, log=lambda s: None)
    ckpt.unlink()
    model = run.run_dir(runs) / "model.pt"
    plant(model)
    with refused(model):
        load_run_model(run, params, data, runs)
    other = tmp_path / "runs"                                    # the shared word vectors, read by every run
    vectors = embeddings_path(params, run.corpus, other)
    plant(vectors)                       # with a record of its own size and sha256, as a shared folder could carry
    from nlpbench.data.prepared import file_records, output_status
    from nlpbench.runtime.io import write_json
    write_json(output_status(vectors), {"files": file_records(vectors.parent, [vectors.name])})
    with refused(vectors, "; delete it and run the data step embeddings-snli again"):
        train_run(run, params, data, other, log=lambda s: None)


# ------------------------------------------------------------------------------------------ the helpers
def test_what_nlpbench_writes_loads_back_generator_states_included(tmp_path):
    g = torch.Generator().manual_seed(3)
    state = {"model": {"w": torch.randn(3)}, "gens": [g.get_state()], "torch_rng": torch.get_rng_state(),
             "history": [{"epoch": 1, "val": 0.5, "best": None}], "ids": ("a", "b"), "seen": {1, 2}}
    checkpoints.save(state, tmp_path / "c.pt")
    back = checkpoints.load(tmp_path / "c.pt")
    assert torch.equal(back["model"]["w"], state["model"]["w"]) and torch.equal(back["gens"][0], g.get_state())
    assert back["history"] == state["history"] and back["ids"] == ("a", "b") and back["seen"] == {1, 2}


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 not a whole archive", b"plain text"])
def test_a_damaged_torch_file_is_named_with_a_remedy(tmp_path, content):
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(content)
    with pytest.raises(LoadError, match=rf"^cannot load {path}: not a readable torch file \(.+\); delete it"):
        checkpoints.load(path)


@contextmanager
def file_size_limit(n_bytes: int):
    """Writes past `n_bytes` fail with EFBIG, as a full disk fails them with ENOSPC (for the kernel, not a
    stand-in: torch's own writer meets the failure)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)     # else the process is killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (n_bytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def test_a_failed_torch_save_names_the_file_and_leaves_the_old_one(tmp_path):
    path = tmp_path / "checkpoint.pt"
    checkpoints.save({"epoch": 1}, path)
    with file_size_limit(64 * 1024), pytest.raises(OutputError) as e:
        checkpoints.save({"epoch": 2, "model": torch.zeros(100_000)}, path)
    assert str(e.value) == f"cannot write {path}: {os.strerror(errno.EFBIG)}"
    assert checkpoints.load(path) == {"epoch": 1} and [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_a_full_disk_while_a_group_saves_its_checkpoint_ends_in_one_line(smoke_params, babi_root, tmp_path, capsys):
    from nlpbench.memnet.groups import all_groups
    one_epoch = config.load(REPO / "params.yaml", {"scale": "smoke", "memnet.train.epochs": 1})
    group = next(iter(all_groups(one_epoch).values()))
    with file_size_limit(64 * 1024):
        rc = cli.main(["--params", str(REPO / "params.yaml"), "--set", "scale=smoke", "--set", "device=cpu",
                       "--set", "memnet.train.epochs=1", "--data", str(babi_root.parent), "--runs",
                       str(tmp_path / "runs"), "train", group.group_id])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err == f"nlpbench: cannot write {tmp_path / 'runs' / group.group_id / '_checkpoint.pt'}: " \
                  f"{os.strerror(errno.EFBIG)}\n"


def test_every_torch_file_is_written_and_read_through_the_core_helpers():
    """A family calling torch.save / torch.load itself would bypass both the safe loading and the write errors."""
    offenders = [f"{p.relative_to(REPO)}:{i}" for p in (REPO / "src").rglob("*.py") if p.name != "checkpoints.py"
                 for i, line in enumerate(p.read_text().splitlines(), 1)
                 if "torch.save(" in line or "torch.load(" in line]
    assert offenders == []
