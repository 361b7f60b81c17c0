"""The paper-scale downloads, offline: each reader on a small fixture in the exact format of the real file, served by a
local HTTP server through the same download code, its checksum checked (a wrong one is rejected, naming the file);
the catalogue against the offline mirror's README and docs/data.md."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import re
import zipfile
from pathlib import Path

import pytest

from nlpbench.data import catalog
from nlpbench.data.fetch import ChecksumError, DownloadError, fetch_remote, git_blob_sha1

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_mirror(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NLPBENCH_MIRROR", raising=False)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def patch_catalog(monkeypatch: pytest.MonkeyPatch, **changes: dict) -> None:
    """Point catalogue entries (by key) at fixtures: the code under test reads them through catalog.get."""
    files = tuple(dataclasses.replace(f, **changes[f.key]) if f.key in changes else f for f in catalog.FILES)
    monkeypatch.setattr(catalog, "FILES", files)


# ---------------------------------------------------------------------------------------------------- SQuAD
SQUAD = {"version": "1.1", "data": [{"title": "Normans", "paragraphs": [{
    "context": "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy.",
    "qas": [{"answers": [{"answer_start": 82, "text": "Normandy"}, {"answer_start": 82, "text": "Normandy"}],
             "question": "In what country is Normandy located?", "id": "56ddde6b9a695914005b9628"}]}]}]}


def test_squad_train_download_is_verified_by_its_git_blob_sha1(served, tmp_path, no_mirror, monkeypatch) -> None:
    from nlpbench.squad import data
    root, base = served
    (root / "train-v1.1.json").write_text(json.dumps(SQUAD), encoding="utf-8")
    monkeypatch.setitem(data.URLS, "train", f"{base}/train-v1.1.json")
    monkeypatch.setitem(data.OFFICIAL_GIT_SHA1, "train", git_blob_sha1(root / "train-v1.1.json"))
    src = data.fetch_split("train", tmp_path / "downloads")
    assert src.version == "official" and src.checksum.startswith("git-sha1:")
    built = data.build_examples(data.load_articles(src.path))
    assert built["examples"][0]["answers"] == ["Normandy", "Normandy"]

    monkeypatch.setitem(data.OFFICIAL_GIT_SHA1, "train", "0" * 40)
    src.path.unlink()
    with pytest.raises(ChecksumError, match=r"downloads/train-v1\.1\.json: git blob SHA-1 .* is not the official"
                                            rf".*downloaded from {re.escape(base)}/train-v1\.1\.json"):
        data.fetch_split("train", tmp_path / "downloads")
    assert list((tmp_path / "downloads").iterdir()) == []      # checked before it was kept: no file, no .part


# ---------------------------------------------------------------------------------------------------- GloVe
GLOVE_LINES = [
    "the " + " ".join(["0.1"] * 300),
    ", " + " ".join(["-0.2"] * 300),
    "at the " + " ".join(["0.3"] * 300),          # 840B has "words" with spaces: the vector is the last 300 fields
    "Normandy " + " ".join(["0.5"] * 300),
]


def glove_zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("glove.840B.300d.txt", "\n".join(GLOVE_LINES) + "\n")
    return path


def test_glove_zip_downloaded_verified_and_streamed(served, tmp_path, no_mirror, monkeypatch) -> None:
    from nlpbench.squad import glove
    root, base = served
    z = glove_zip(root / "glove.840B.300d.zip")
    patch_catalog(monkeypatch, **{"glove-840b": {"url": f"{base}/glove.840B.300d.zip", "sha256": sha256(z)}})
    path = glove.fetch_840b(tmp_path / "downloads")
    assert path == tmp_path / "downloads" / "glove.840B.300d.zip"
    vectors = glove.load_text(path, glove.wanted_forms(["normandy", "at the"]))
    assert set(vectors) == {"Normandy", "at the"} and vectors["at the"].shape == (300,)
    assert [p.name for p in (tmp_path / "downloads").iterdir()] == ["glove.840B.300d.zip"]   # never unpacked


def test_glove_wrong_checksum_is_rejected_naming_the_file(served, tmp_path, no_mirror, monkeypatch) -> None:
    from nlpbench.squad import glove
    root, base = served
    glove_zip(root / "glove.840B.300d.zip")
    patch_catalog(monkeypatch, **{"glove-840b": {"url": f"{base}/glove.840B.300d.zip", "sha256": "0" * 64}})
    with pytest.raises(ChecksumError, match=r"downloads/glove\.840B\.300d\.zip: sha256 mismatch for "
                                            r"glove\.840B\.300d\.zip .* expected 0{64}"):
        glove.fetch_840b(tmp_path / "downloads")
    assert not (tmp_path / "downloads").exists()      # nothing unverified stays (no .part), nor an empty folder


def test_glove_from_the_mirror_needs_no_network(tmp_path, monkeypatch) -> None:
    from nlpbench.squad import glove
    mirror = tmp_path / "mirror"
    (mirror / "glove").mkdir(parents=True)
    z = glove_zip(mirror / "glove" / "glove.840B.300d.zip")
    patch_catalog(monkeypatch, **{"glove-840b": {"url": "http://127.0.0.1:9/none.zip", "sha256": sha256(z)}})
    assert glove.fetch_840b(tmp_path / "downloads", mirror) == z
    patch_catalog(monkeypatch, **{"glove-840b": {"url": "http://127.0.0.1:9/none.zip", "sha256": "f" * 64}})
    with pytest.raises(ChecksumError, match=r"mirror/glove/glove\.840B\.300d\.zip: sha256 mismatch.*mirror's copy"):
        glove.fetch_840b(tmp_path / "downloads", mirror)
    assert z.is_file()                                       # a mirror's file is not ours to delete


def test_no_copy_anywhere_names_the_mirror_path(served, tmp_path, no_mirror) -> None:
    entry = dataclasses.replace(catalog.get("glove-840b"), url=f"{served[1]}/glove.840B.300d.zip")    # a 404
    with pytest.raises(DownloadError, match=r"glove\.840B\.300d\.zip.*NLPBENCH_MIRROR.*glove/glove\.840B\.300d\.zip"):
        fetch_remote(entry, tmp_path / "downloads", timeout=5)


# ------------------------------------------------------------------------------------- SNLI, QG, dialog, Cornell
def snli_record(n: int, s1: str, s2: str, label: str) -> dict:
    return {"annotator_labels": [label], "captionID": f"{n}.jpg#0", "gold_label": label, "pairID": f"{n}.jpg#0r1n",
            "sentence1": s1, "sentence1_binary_parse": "( " + s1 + " )", "sentence1_parse": "(ROOT (S ...))",
            "sentence2": s2, "sentence2_binary_parse": "( " + s2 + " )", "sentence2_parse": "(ROOT (S ...))"}


def snli_zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for k, split in enumerate(("train", "dev", "test")):
            rows = [snli_record(k, f"A person on a horse jumps ({split}).", "A person is outdoors.", "entailment")]
            z.writestr(f"snli_1.0/snli_1.0_{split}.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
            z.writestr(f"snli_1.0/snli_1.0_{split}.txt", "gold_label\tsentence1\n")
        z.writestr("__MACOSX/snli_1.0/._snli_1.0_train.jsonl", b"\0")
    return path


def cornell_zip(path: Path) -> Path:
    sep = " +++$+++ "
    lines = [sep.join(["L1045", "u0", "m0", "BIANCA", "They do not!"]),
             sep.join(["L1044", "u2", "m0", "CAMERON", "They do to!"]),
             sep.join(["L985", "u0", "m0", "BIANCA", "I hope so."])]
    convs = [sep.join(["u0", "u2", "m0", "['L1044', 'L1045', 'L985']"])]
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("cornell movie-dialogs corpus/movie_lines.txt", "\n".join(lines).encode("iso-8859-1"))
        z.writestr("cornell movie-dialogs corpus/movie_conversations.txt", "\n".join(convs).encode("iso-8859-1"))
    return path


def csv_file(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def text_fetcher(tmp_path: Path, key: str, url: str, sha256: str = "", git_sha1: str = ""):
    from nlpbench.textgen import sources as ts
    manifest = {key: ts.TextManifestEntry(key, None, sha256, git_sha1, "fixture")}
    return ts.SourceFetcher(None, tmp_path / "downloads", True, manifest, {key: url})


def test_snli_and_cornell_zips_through_the_text_fetcher(served, tmp_path) -> None:
    from nlpbench.textgen import sources as ts
    root, base = served
    for name, make, read, want in (
            ("snli_1.0.zip", snli_zip, ts.read_snli_zip, "A person is outdoors."),
            ("cornell_movie_dialogs_corpus.zip", cornell_zip, ts.read_cornell_zip, ("They do to!", "They do not!"))):
        z = make(root / name)
        key = {"snli_1.0.zip": ts.SNLI_ZIP, "cornell_movie_dialogs_corpus.zip": ts.CORNELL_ZIP}[name]
        path = text_fetcher(tmp_path, key, f"{base}/{name}", sha256=sha256(z)).get(key, "unused", "all")
        assert want in read(path)
        path.unlink()
        with pytest.raises(ChecksumError, match=rf"downloads/{re.escape(name)}"):
            text_fetcher(tmp_path, key, f"{base}/{name}", sha256="0" * 64).get(key, "unused", "all")
        assert not path.exists()


def test_the_authors_training_csvs_are_verified_by_their_git_blob_sha1(served, tmp_path) -> None:
    from nlpbench.textgen import sources as ts
    root, base = served
    qg = csv_file(root / "df_qgen_train.csv", ["question", "answer"],
                  [["what country has unmanageable students ?", "in japan for example classroom discipline is poor"]])
    dialog = csv_file(root / "df_movie_train.csv", ["line", "reply", "movie_id"],
                      [["not now, sven...", "i must kill kill", "m54"]])
    for f, files, columns in ((qg, ts.QG_FILES, ts.QG_COLUMNS), (dialog, ts.DIALOG_FILES, ts.DIALOG_COLUMNS)):
        key = files[0].path
        path = text_fetcher(tmp_path, key, f"{base}/{f.name}", git_sha1=git_blob_sha1(f)).get(key, "unused", "train")
        assert ts.read_csv_pairs(path, columns) == [tuple(next(csv.DictReader(open(f)))[c] for c in columns)]
        path.unlink()
        with pytest.raises(ChecksumError, match=rf"downloads/{f.name} .*git blob SHA-1"):
            text_fetcher(tmp_path, key, f"{base}/{f.name}", git_sha1="1" * 40).get(key, "unused", "train")


def test_the_catalogue_gives_the_training_csvs_full_checksums() -> None:
    from nlpbench.textgen import sources as ts
    manifest = ts.load_text_manifest()
    assert manifest[ts.QG_FILES[0].path].git_sha1 == catalog.get("qg-train").git_sha1
    assert manifest[ts.DIALOG_FILES[0].path].git_sha1 == catalog.get("dialog-train").git_sha1
    assert all(len(manifest[f.path].git_sha1) == 40 for f in (ts.QG_FILES[0], ts.DIALOG_FILES[0]))


# ---------------------------------------------------------------------------------------------------- CNN/DM
STORIES = {
    "train": [("0001d1afc246a7964130f43ae940af6bc6c57f01", "(CNN) -- The cat sat on the mat . It was happy .",
               "Cat sits on mat .\nCat is happy"),
              ("0002095e55fcbd3a2f366d9bf92a95433dc305ef", "LONDON, England -- Rain fell all day .", "Rain falls")],
    "validation": [("0a0a4c90d59df9e36ffec4ba306b4f20f3ba4acb", "A storm hit the coast .", "Storm hits coast")],
    "test": [("0b0b4c90d59df9e36ffec4ba306b4f20f3ba4acb", "The match ended 2-1 .", "Match ends 2-1")],
}


def cnndm_parquet(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pa.table({"article": [r[1] for r in rows], "highlights": [r[2] for r in rows], "id": [r[0] for r in rows]})
    pq.write_table(table, path)
    return path


def serve_cnndm(root: Path, base: str, monkeypatch: pytest.MonkeyPatch, bad: str = "") -> None:
    """The five parquet files of 3.0.0 under root/3.0.0/, the catalogue pointed at them; the first training shard is
    verified through its git-LFS pointer (served beside it), the others by their recorded sha256."""
    (root / "3.0.0").mkdir()
    shards = {"cnndm-train-00000-of-00003": STORIES["train"][:1], "cnndm-train-00001-of-00003": STORIES["train"][1:],
              "cnndm-train-00002-of-00003": [], "cnndm-validation": STORIES["validation"],
              "cnndm-test": STORIES["test"]}
    changes = {}
    for key, rows in shards.items():
        name = catalog.get(key).name
        f = cnndm_parquet(root / "3.0.0" / name, rows)
        digest = "0" * 64 if key == bad else sha256(f)
        if key == "cnndm-train-00000-of-00003":
            (root / "pointers").mkdir()
            (root / "pointers" / name).write_text(f"version https://git-lfs.github.com/spec/v1\noid sha256:{digest}\n"
                                                  f"size {f.stat().st_size}\n")
            changes[key] = {"url": f"{base}/3.0.0/{name}", "sha256": "", "lfs_pointer": f"{base}/pointers/{name}"}
        else:
            changes[key] = {"url": f"{base}/3.0.0/{name}", "sha256": digest}
    patch_catalog(monkeypatch, **changes)


def test_cnndm_parquet_files_downloaded_verified_and_tokenised(served, tmp_path, no_mirror, monkeypatch) -> None:
    from nlpbench.acvi.data import prepare_cnndm_hub, read_cnndm_split
    root, base = served
    serve_cnndm(root, base, monkeypatch)
    out = tmp_path / "data" / "acvi" / "cnndm-full"
    status = prepare_cnndm_hub(out, tmp_path / "data" / "downloads", tokenizer="regex")
    assert status["stories"] == {"train": 2, "val": 1, "test": 1}
    assert {s["checksum"][:7] for s in status["sources"]} == {"sha256:"}
    rows = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [s[0] for s in STORIES["train"]]     # See et al.'s story names, in file order
    assert rows[0]["reference"] == [["cat", "sits", "on", "mat", "."], ["cat", "is", "happy", "."]]
    assert rows[0]["article"][-1] == ["it", "was", "happy", "."]          # lower-cased, split into sentences
    article, reference = read_cnndm_split(out, "test")[0]
    assert reference == ["match", "ends", "2-1", "."] and article[:2] == ["the", "match"]


@pytest.mark.parametrize("bad", ["cnndm-train-00000-of-00003", "cnndm-test"])
def test_cnndm_wrong_checksum_is_rejected_naming_the_file(served, tmp_path, no_mirror, monkeypatch, bad) -> None:
    from nlpbench.acvi.data import prepare_cnndm_hub
    root, base = served
    serve_cnndm(root, base, monkeypatch, bad=bad)
    name = catalog.get(bad).name
    with pytest.raises(ChecksumError, match=rf"downloads/{re.escape(name)}: sha256.* mismatch for {re.escape(name)}"):
        prepare_cnndm_hub(tmp_path / "out", tmp_path / "downloads", tokenizer="regex")
    assert not (tmp_path / "downloads" / name).exists() and not (tmp_path / "out" / "STATUS.json").exists()


def test_cnndm_parquet_without_the_real_columns_is_refused(tmp_path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from nlpbench.acvi.data import read_cnndm_parquet
    from nlpbench.data.fetch import FetchError
    pq.write_table(pa.table({"document": ["x"], "summary": ["y"]}), tmp_path / "x.parquet")
    with pytest.raises(FetchError, match=r"x\.parquet: lacks the column\(s\) id, article, highlights"):
        read_cnndm_parquet(tmp_path / "x.parquet")


def test_the_paper_scale_data_step_fetches_cnndm_from_the_mirror(tmp_path, monkeypatch) -> None:
    """acvi-cnndm-full at the paper scale, acvi.data.cnndm_dir null: no hand-assembled directory; the mirror's copies
    of the parquet files are used and verified (the URLs are unreachable)."""
    from nlpbench import config
    from nlpbench.acvi import config as ac
    from nlpbench.acvi import groups as ag
    from nlpbench.acvi.experiments import prepare
    mirror = tmp_path / "mirror"
    changes = {}
    for key, rows in (("cnndm-train-00000-of-00003", STORIES["train"]), ("cnndm-train-00001-of-00003", []),
                      ("cnndm-train-00002-of-00003", []), ("cnndm-validation", STORIES["validation"]),
                      ("cnndm-test", STORIES["test"])):
        entry = catalog.get(key)
        (mirror / entry.mirror).parent.mkdir(parents=True, exist_ok=True)
        f = cnndm_parquet(mirror / entry.mirror, rows)
        changes[key] = {"url": "http://127.0.0.1:9/" + entry.name, "sha256": sha256(f)}
    patch_catalog(monkeypatch, **changes)
    params = config.load(REPO / "params.yaml", {"scale": "paper", "acvi.data.tokenizer": "regex"})
    assert ag.trainable(params, "cnndm") and params["acvi"]["data"]["cnndm_dir"] is None
    message = prepare("acvi-cnndm-full", params, tmp_path / "data", str(mirror))
    assert "{'train': 2, 'val': 1, 'test': 1}" in message
    status = json.loads((ac.data_dir(params, "acvi-cnndm-full", tmp_path / "data") / "STATUS.json").read_text())
    assert all(s["from"].startswith(str(mirror)) for s in status["sources"])


def test_cnndm_download_stays_off_at_the_cpu_and_smoke_scales() -> None:
    from nlpbench import config
    from nlpbench.acvi import groups as ag
    for scale in ("cpu", "smoke"):
        params = config.load(REPO / "params.yaml", {"scale": scale})
        assert params["acvi"]["data"]["cnndm_download"] is False
        assert "cnndm_download" not in ag.data_key(params, "cnndm")["data"]     # the run ids of before


# ------------------------------------------------------------------------------------------ catalogue and docs
def test_catalogue_urls_and_checksums_match_the_mirror_readme(mirror_dir: Path) -> None:
    """Where the mirror's README gives a file's URL or git blob SHA-1 (in full or its first 8 hex), the catalogue
    records the same."""
    mirror_readme = mirror_dir / "README.md"
    if not mirror_readme.is_file():
        pytest.skip(f"{mirror_readme} not here")
    readme = mirror_readme.read_text(encoding="utf-8")
    urls = re.findall(r"https?://[^\s`)]+", readme)
    checked = set()
    for f in catalog.FILES:
        for u in urls:
            u = u.rstrip(".,;")
            if u.rsplit("/", 1)[-1] == f.name:
                assert u == f.url, (f.key, u)
                checked.add(f.key + " url")
    for key, shown in (("squad-train", 40), ("squad-dev", 40), ("dialog-train", 8)):   # as the README gives them
        sha1 = catalog.get(key).git_sha1
        assert (f"`{sha1}`" if shown == 40 else f"`{sha1[:8]}…`") in readme, key
        checked.add(key + " sha1")
    assert {"squad-train url", "snli url", "cornell url", "squad-train sha1", "squad-dev sha1",
            "dialog-train sha1"} <= checked, checked


def test_every_catalogue_file_has_a_checksum_and_a_size() -> None:
    for f in catalog.FILES:
        assert f.sha256 or f.git_sha1 or f.lfs_pointer, f.key
        assert f.bytes or (f.approx_bytes and f.size_note), f.key
        assert f.url.startswith("https://") and f.mirror and f.how, f.key
    assert {f.dataset for f in catalog.FILES} == {d.name for d in catalog.DATASETS}


def test_docs_data_md_holds_the_rendered_tables() -> None:
    text = (REPO / "docs" / "data.md").read_text(encoding="utf-8")
    assert catalog.table_markdown() in text, "docs/data.md: paste the output of python -m nlpbench.data.catalog"
    assert catalog.checksum_markdown() in text


def test_data_all_runs_every_step_of_the_scale_each_after_what_it_reads(capsys) -> None:
    """`nlpbench --set scale=paper data --all` fetches every paper-scale data set: every step of the plan, in an
    order where each step comes after the steps it reads; naming steps and --all together, or neither, is refused."""
    from nlpbench import cli, plan, registry
    p = plan.make(registry.load(REPO / "params.yaml", {"scale": "paper"}))
    order = cli.in_order(p.data)
    assert sorted(order) == sorted(p.data)
    assert all(order.index(need) < order.index(step) for step in order for need in p.data[step].needs
               if need in p.data)
    assert {"squad", "squad-vectors", "snli", "qg", "dialog"} <= set(order)
    assert cli.main(["--set", "scale=paper", "data"]) == 2
    assert "name the steps" in capsys.readouterr().err
