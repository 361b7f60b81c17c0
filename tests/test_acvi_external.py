"""User-supplied MSVD and DUC 2004 (acvi.data.msvd_dir / duc2004_dir): the readers on tiny fake copies in the
documented layouts (acvi/README.md), their errors, a video run on prepared MSVD and the DUC 2004 scoring protocol."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from nlpbench import config
from nlpbench.acvi import config as ac
from nlpbench.acvi import groups as ag
from nlpbench.acvi.data import (MSVD_MAPPING, MSVD_SPLIT_DIR, prepare_duc2004, prepare_msvd, read_duc2004,
                                read_msvd_split)
from nlpbench.acvi.tokenize import wordpunct_tokenize
from nlpbench.data.fetch import FetchError
from nlpbench.metrics.rouge import rouge_multi, truncate_bytes

REPO = Path(__file__).resolve().parents[1]
SPLITS = {"train": ["aaa_1_5", "bbb_2_9", "ccc_0_4", "ddd_3_8"], "valid": ["eee_1_2"], "test": ["fff_5_9", "ggg_0_1"]}
HEADER = ["VideoID", "Start", "End", "WorkerID", "Source", "AnnotationTime", "Language", "Description"]


def fake_mirror(root: Path) -> Path:
    """A mirror holding video_captioning/ in the real one's layout (JSON split lists, youtube_mapping.txt,
    MANIFEST.tsv with sha256) for the clips of SPLITS, whose vidN order is that of SPLITS (the lists are not)."""
    folder = root / "video_captioning"
    files = {f"{MSVD_SPLIT_DIR}/{s}.list": json.dumps(c[::-1], indent=1) for s, c in SPLITS.items()}  # unordered
    clips = [c for cs in SPLITS.values() for c in cs]
    files[MSVD_MAPPING] = "".join(f"{c} vid{i}\n" for i, c in enumerate(clips, 1))
    rows = ["path\tbytes\tlines\tsha256"]
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
        rows.append(f"{rel}\t{len(text)}\t{text.count(chr(10))}\t{hashlib.sha256(text.encode()).hexdigest()}")
    (folder / "MANIFEST.tsv").write_text("\n".join(rows) + "\n")
    return root


def fake_msvd(root: Path, frames: int = 24, dim: int = 1024) -> Path:
    """captions/<corpus>.csv (English and other rows) and features/<clip>.npy; one clip named by its vidN."""
    (root / "captions").mkdir(parents=True)
    (root / "features").mkdir()
    rng = np.random.default_rng(0)
    clips = [c for cs in SPLITS.values() for c in cs]
    with open(root / "captions" / "MSR Video Description Corpus.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        for i, clip in enumerate(clips):
            vid, start, end = clip.rsplit("_", 2)
            w.writerow([vid, start, end, "1", "clean", "10", "English", f"A man's dog-run #{i}."])
            w.writerow([vid, start, end, "2", "clean", "12", "English", f"Someone plays, clip {i}"])
            w.writerow([vid, start, end, "3", "clean", "9", "German", "Ein Mann"])
            name = f"vid{i + 1}" if clip == "ccc_0_4" else clip
            np.save(root / "features" / f"{name}.npy", rng.random((frames, dim), dtype=np.float32))
    return root


def test_wordpunct_keeps_case_and_splits_punctuation():
    assert wordpunct_tokenize("A man's dog-run #3.") == ["A", "man", "'", "s", "dog", "-", "run", "#", "3", "."]
    assert wordpunct_tokenize("Hello,  World!!") == ["Hello", ",", "World", "!!"]


def test_prepare_msvd_splits_by_the_mirror_lists_with_checksums(tmp_path):
    mirror = fake_mirror(tmp_path / "mirror")
    root = fake_msvd(tmp_path / "msvd")
    out = tmp_path / "out"
    status = prepare_msvd(out, root, mirror)
    assert status["splits"] == {"train": {"clips": 4, "captions": 8}, "valid": {"clips": 1, "captions": 2},
                                "test": {"clips": 2, "captions": 4}}
    for name, rec in status["files"].items():
        data = (out / name).read_bytes()
        assert rec == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert json.loads((out / "STATUS.json").read_text())["files"] == status["files"]
    feats, caps = read_msvd_split(out, "train")
    assert feats.shape == (4, 24, 1024) and feats.dtype == torch.float32
    want = np.load(root / "features" / "vid3.npy")                      # ccc_0_4 found by its vidN name
    assert torch.equal(feats[2], torch.from_numpy(want))
    assert caps[1] == [["A", "man", "'", "s", "dog", "-", "run", "#", "1", "."], ["Someone", "plays", ",", "clip", "1"]]
    assert torch.load(out / "test.pt", weights_only=False)["clips"] == SPLITS["test"]   # vidN order, not list order


def test_msvd_errors_name_the_missing_clip_and_bad_files(tmp_path):
    mirror = fake_mirror(tmp_path / "mirror")
    root = fake_msvd(tmp_path / "msvd")
    (root / "features" / "fff_5_9.npy").unlink()
    with pytest.raises(FetchError, match=r"test clip fff_5_9.*fff_5_9\.npy or .*vid6\.npy"):
        prepare_msvd(tmp_path / "o1", root, mirror)
    assert not (tmp_path / "o1" / "STATUS.json").exists()
    np.save(root / "features" / "fff_5_9.npy", np.zeros((24, 512), dtype=np.float32))
    with pytest.raises(FetchError, match=r"fff_5_9\.npy: shape \(24, 512\)"):
        prepare_msvd(tmp_path / "o2", root, mirror)
    csv_path = root / "captions" / "MSR Video Description Corpus.csv"
    csv_path.write_text("VideoID,Start,End,Description\naaa,1,5,a man\n")
    with pytest.raises(FetchError, match=r"MSR Video Description Corpus\.csv: header lacks column\(s\) Language"):
        prepare_msvd(tmp_path / "o3", root, mirror)


def test_real_mirror_lists_name_the_first_missing_clip(tmp_path, mirror_dir):
    if not (mirror_dir / "video_captioning" / "MANIFEST.tsv").is_file():
        pytest.skip("the mirror has no video_captioning/")
    root = tmp_path / "msvd"
    (root / "captions").mkdir(parents=True)
    (root / "features").mkdir()
    with open(root / "captions" / "c.csv", "w", newline="") as f:
        csv.writer(f).writerows([HEADER, ["-4wsuPCjDBc", "5", "15", "1", "c", "1", "English", "A cat"]])
    with pytest.raises(FetchError, match=r"train clip -4wsuPCjDBc_5_15: .*-4wsuPCjDBc_5_15\.npy or .*/vid1\.npy"):
        prepare_msvd(tmp_path / "out", root, mirror_dir)               # vid1 comes first, though not in the list
    np.save(root / "features" / "vid1.npy", np.zeros((24, 1024), dtype=np.float32))
    with pytest.raises(FetchError, match=r"no English description of train clip -7KMZQEsJW4_205_208"):
        prepare_msvd(tmp_path / "out", root, mirror_dir)               # vid2


@pytest.mark.filterwarnings("error:Converting a tensor with requires_grad")   # losses are logged detached
def test_video_run_trains_on_prepared_msvd(tmp_path):
    from nlpbench.acvi.experiments import prepare, train_run
    mirror = fake_mirror(tmp_path / "mirror")
    root = fake_msvd(tmp_path / "msvd")
    params = config.load(REPO / "params.yaml", {
        "scale": "smoke", "acvi.stand_ins": False, "acvi.data.msvd_dir": str(root),
        "acvi.tasks.video.video": {"dropout": 0.5, "frames": 24, "feat_dim": 1024, "n_train": 1200, "n_valid": 100,
                                   "n_test": 670, "n_classes": 4},
        "acvi.tasks.video.train": {"phases": [[6, 24, 10]], "coverage_iters": 0, "max_dec_steps": 10,
                                   "vocab_size": 100}})
    assert ag.trainable(params, "video") and not ag.trainable(params, "cnndm")
    run = ag.make_run(params, "video-asa")
    assert ag.run_needs(params, run) == ("acvi-msvd",)
    msg = prepare("acvi-msvd", params, tmp_path / "data", str(mirror))
    assert "prepared" in msg
    m = train_run(run, params, tmp_path / "data", tmp_path / "runs", "cpu", log=lambda *_: None)
    assert m["synthetic"] is False and m["data"].startswith("MSVD") and m["steps"] == 6
    assert m["test"]["n"] == 2 and m["valid"]["n"] == 1
    hist = json.loads((run.run_dir(tmp_path / "runs") / "history.json").read_text())
    assert hist and all(np.isfinite(h["loss"]) for h in hist)


# ------------------------------------------------------------------------------------------------------- DUC 2004
def fake_duc(root: Path) -> Path:
    docs = {"d30001t": ("APW19981016.0240", "Cambodian leader Hun Sen rejected talks.\nThe opposition left"),
            "d30002t": ("NYT19981017.0001", "Hurricane Mitch hit Honduras on Friday.")}
    for cluster, (docno, text) in docs.items():
        (root / "docs" / cluster).mkdir(parents=True)
        (root / "docs" / cluster / docno).write_text(
            f"<DOC>\n<DOCNO> {docno} </DOCNO>\n<DOCTYPE> NEWS </DOCTYPE>\n<TEXT>\n<P>\n{text}\n</P>\n</TEXT>\n</DOC>\n")
    models = root / "eval" / "models" / "1"
    models.mkdir(parents=True)
    for k, (cluster, (docno, _)) in enumerate(docs.items()):
        for a in "ABCD":
            (models / f"D3000{k + 1}.P.10.T.{a}.{docno}").write_text(f"Summary {a} of {docno.split('.')[0]}\n")
    return root


def test_prepare_duc2004_reads_documents_and_four_references(tmp_path):
    root = fake_duc(tmp_path / "duc")
    out = tmp_path / "out"
    status = prepare_duc2004(out, root, tokenizer="regex")
    assert status["documents"] == 2 and status["references"] == 8
    data = (out / "articles.jsonl").read_bytes()
    assert status["files"]["articles.jsonl"] == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    docs = {d["id"]: d for d in read_duc2004(out)}
    d = docs["APW19981016.0240"]
    assert d["cluster"] == "d30001t"
    assert d["article"] == [["cambodian", "leader", "hun", "sen", "rejected", "talks", "."],
                            ["the", "opposition", "left", "."]]           # lower-cased, missing period fixed
    assert [r[0][1] for r in d["references"]] == list("abcd") and len(d["references"]) == 4


def test_without_duc_the_table4_cells_need_data(tmp_path):
    from nlpbench.acvi import experiments
    params = config.load(REPO / "params.yaml", {"scale": "smoke"})
    assert "acvi-duc2004: not supplied" in experiments.prepare("acvi-duc2004", params, tmp_path, None)
    cell = experiments._cell(params, "SA", "ROUGE-1", {"run": "cnndm-pg-asa", "eval": "duc2004", "metric": "rouge1"},
                             tmp_path, tmp_path / "runs", [0])
    assert cell.status == "needs_data" and "eval/models/1/" in cell.detail


def test_duc_errors_name_the_file(tmp_path):
    root = fake_duc(tmp_path / "duc")
    bad = root / "docs" / "d30002t" / "NYT19981017.0001"
    bad.write_text("<DOC><DOCNO> NYT19981017.0001 </DOCNO> no text element </DOC>")
    with pytest.raises(FetchError, match=r"NYT19981017\.0001: malformed DUC document \(no <TEXT>"):
        prepare_duc2004(tmp_path / "o1", root, tokenizer="regex")
    root = fake_duc(tmp_path / "duc2")
    for p in (root / "eval" / "models" / "1").glob("D30002*"):
        p.unlink()
    with pytest.raises(FetchError, match=r"NYT19981017\.0001: no model summary of NYT19981017\.0001"):
        prepare_duc2004(tmp_path / "o2", root, tokenizer="regex")
    (root / "eval" / "models" / "1" / "README").write_text("x")
    with pytest.raises(FetchError, match=r"README: name not <cluster>"):
        prepare_duc2004(tmp_path / "o3", root, tokenizer="regex")


def test_duc_truncation_then_rouge1_recall_by_hand():
    hyp = "the cat sat on the mat and then the dog came in and barked loudly at everyone in the house today"
    assert len(hyp.encode()) > 75
    cut = truncate_bytes(hyp, 75)
    assert cut == hyp[:75] and cut.endswith("at everyo")
    assert truncate_bytes("caf\u00e9 bar", 4) == "caf"                # a cut multi-byte character is dropped
    # the cut keeps unigrams: the cat sat on the mat and then the dog came in and barked loudly at everyo (16)
    # reference 1 "the dog barked at the house": the x2, dog, barked, at match; house is cut off -> 5/6
    # reference 2 "a cat sat today": cat, sat match; "a" never occurs; today is cut off -> 2/4
    refs = [["the dog barked at the house", "a cat sat today"]]
    r = rouge_multi([hyp], refs, measure="recall", truncate=75)
    assert r["rouge1"] == pytest.approx(100 * (5 / 6 + 2 / 4) / 2)
    full = rouge_multi([hyp], refs, measure="recall", truncate=None)
    assert full["rouge1"] == pytest.approx(100 * (6 / 6 + 3 / 4) / 2)  # uncut: house and today count
    f1 = rouge_multi([hyp], refs, measure="f1", truncate=75)
    assert f1["rouge1"] < r["rouge1"]
    with pytest.raises(ValueError, match="measure 'f2'"):
        rouge_multi([hyp], refs, measure="f2")


def test_table4_scores_a_trained_cnndm_run_on_prepared_duc(tmp_path, monkeypatch):
    """The eval: duc2004 cells decode the CNN/DM-trained run's model.pt on DUC and score with the protocol."""
    from nlpbench.acvi import experiments
    from nlpbench.acvi.train import TrainConfig, run as train
    params = config.load(REPO / "params.yaml", {"scale": "smoke", "acvi.data.duc2004_dir": str(tmp_path / "duc")})
    fake_duc(tmp_path / "duc")
    data, runs = tmp_path / "data", tmp_path / "runs"
    assert "2 documents" in experiments.prepare("acvi-duc2004", params, data, None)
    run = ag.make_run(params, "cnndm-pg-asa")
    spec = {"run": "cnndm-pg-asa", "eval": "duc2004", "metric": "rouge1"}
    untrained = experiments._cell(params, "SA", "ROUGE-1", spec, data, runs, [0])
    assert untrained.status == "not_run" and "cnndm-pg-asa" in untrained.detail
    docs = read_duc2004(ac.data_dir(params, "acvi-duc2004", data))
    pairs = [([t for s in d["article"] for t in s], [t for s in d["references"][0] for t in s]) for d in docs]
    cfg = experiments.train_config(run, "cpu")
    train(cfg, run.run_dir(runs), pairs=(pairs * 4, pairs))
    cell = experiments._cell(params, "SA", "ROUGE-1", spec, data, runs, [0])
    assert cell.status == "ok" and 0.0 <= cell.reproduced <= 100.0
    cached = list(run.run_dir(runs).glob("duc2004-*.json"))
    assert len(cached) == 1
    saved = json.loads(cached[0].read_text())
    assert saved["protocol"] == {"truncate_bytes": 75, "measure": "recall", "stem": False}
    assert saved["rouge1"] == cell.reproduced and saved["n"] == 2
    notes = experiments.reading_notes(params, [run], [{"eval": "duc2004"}])
    assert any("first 75 bytes" in n and "ROUGE recall" in n for n in notes)


def test_prepared_msvd_and_duc_files_edited_after_preparation_are_refused(tmp_path):
    """The readers re-check a prepared file against the size and sha256 STATUS.json records (as the bAbI and
    text-corpus steps do): a file changed after the data step is an error naming it and the step to re-run."""
    from nlpbench.data.fetch import PreparedDataChanged
    out_v, out_d = tmp_path / "msvd_out", tmp_path / "duc_out"
    prepare_msvd(out_v, fake_msvd(tmp_path / "msvd"), fake_mirror(tmp_path / "mirror"))
    prepare_duc2004(out_d, fake_duc(tmp_path / "duc"), tokenizer="regex")
    read_msvd_split(out_v, "valid")                                     # untouched: read
    read_duc2004(out_d)
    data = (out_v / "valid.pt").read_bytes()
    (out_v / "valid.pt").write_bytes(data[:-1] + bytes([data[-1] ^ 1]))   # same size, one bit flipped
    with pytest.raises(PreparedDataChanged, match=r"valid\.pt.*nlpbench data acvi-msvd"):
        read_msvd_split(out_v, "valid")
    with open(out_d / "articles.jsonl", "a", encoding="utf-8") as f:
        f.write("{}\n")
    with pytest.raises(PreparedDataChanged, match=r"articles\.jsonl.*nlpbench data acvi-duc2004"):
        read_duc2004(out_d)
