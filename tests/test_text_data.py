"""nlpbench.textgen.corpora / prep: SNLI, QG and dialog preparation (Bahuleyan thesis §4.5.1, §6.5.1) on the real
mirror files, plus the full-data code paths on small archives made here."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import warnings
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from nlpbench.textgen import corpora as tc
from nlpbench.textgen import sources as ts
from nlpbench.data.fetch import STATUS_FILE, ChecksumError, FetchError
from nlpbench.textgen.prep import EOS, PAD, SPECIALS, UNK, TextRules, Vocab, normalize, preprocess, tokenize

QG_VAL, QG_TEST, QG_TRAIN = (f.path for f in (ts.QG_FILES[1], ts.QG_FILES[2], ts.QG_FILES[0]))
DIALOG_VAL, DIALOG_TEST = ts.DIALOG_FILES[1].path, ts.DIALOG_FILES[2].path


@pytest.fixture(scope="session")
def prepared(mirror_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each corpus prepared once from the real mirror, downloads off."""
    root = tmp_path_factory.mktemp("text_corpora")
    out = {}
    for corpus in ("snli", "qg", "dialog"):
        tc.prepare_corpus(corpus, root / corpus, mirror_dir, allow_download=False)
        out[corpus] = root / corpus
    return out


def _mirror_with(tmp: Path, mirror_dir: Path, files: dict[str, bytes | None]) -> Path:
    """A mirror folder holding the given files: None = a link to the real mirror's file, bytes = that content."""
    root = tmp / "mirror"
    for rel, content in files.items():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            dest.symlink_to(mirror_dir / rel)
        else:
            dest.write_bytes(content)
    root.mkdir(exist_ok=True)
    return root


# --- manifest and checksums -------------------------------------------------------------------------------------
def test_packaged_manifest_is_generated_from_the_mirror_manifests(mirror_dir: Path) -> None:
    packaged = (Path(ts.__file__).parent / ts.MANIFEST_NAME).read_text(encoding="utf-8")
    assert packaged == ts.manifest_text_from_mirror(mirror_dir)


def test_mirror_files_verify_by_sha256(mirror_dir: Path) -> None:
    manifest = ts.load_text_manifest()
    in_mirror = [e for e in manifest.values() if (mirror_dir / e.path).is_file()]
    assert {e.path for e in in_mirror} == {ts.SNLI_SAMPLE, QG_VAL, QG_TEST, DIALOG_VAL, DIALOG_TEST, ts.SQUAD_DEV_REBUILT}
    for entry in in_mirror:
        assert ts.verify_file(mirror_dir / entry.path, entry) == {"sha256": entry.sha256, "verified_by": "sha256"}
    assert manifest[ts.SNLI_ZIP].sha256 == ts.SNLI_ZIP_SHA256
    assert manifest[ts.CORNELL_ZIP].sha256 == ts.CORNELL_ZIP_SHA256


def test_corrupted_copy_rejected_naming_the_file(mirror_dir: Path, tmp_path: Path) -> None:
    data = bytearray((mirror_dir / ts.SNLI_SAMPLE).read_bytes())
    data[1000] ^= 0x20  # same size, one letter's case flipped
    mirror = _mirror_with(tmp_path, mirror_dir, {ts.SNLI_SAMPLE: bytes(data)})
    with pytest.raises(ChecksumError, match=r"snli_sentences_1000\.txt.*sha256 mismatch"):
        tc.prepare_snli(tmp_path / "out", mirror, allow_download=False)
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]  # no partial folder left


def test_truncated_copy_rejected_by_size(mirror_dir: Path, tmp_path: Path) -> None:
    data = (mirror_dir / QG_VAL).read_bytes()[:-10]
    mirror = _mirror_with(tmp_path, mirror_dir, {QG_VAL: data, QG_TEST: None})
    with pytest.raises(ChecksumError, match=r"df_qgen_val\.csv.*size"):
        tc.prepare_qg(tmp_path / "out", mirror, allow_download=False)


def test_verify_file_git_prefix_and_unpublished(tmp_path: Path) -> None:
    path = tmp_path / "hello.txt"
    path.write_bytes(b"hello\n")  # git hash-object: ce013625030ba8dba906f756967f9e9ca394464a
    entry = ts.TextManifestEntry("x/hello.txt", None, "", "ce013625", "test")
    assert ts.verify_file(path, entry)["verified_by"] == "git_sha1 prefix (8 hex)"
    with pytest.raises(ChecksumError, match="hello.txt"):
        ts.verify_file(path, replace(entry, git_sha1="1c744794"))
    with pytest.warns(UserWarning, match="no published checksum"):
        got = ts.verify_file(path, replace(entry, git_sha1=""))
    assert got == {"sha256": hashlib.sha256(b"hello\n").hexdigest(), "verified_by": "none (no published checksum)"}


def test_manifest_parser_rejects_bad_rows() -> None:
    header = "path\tbytes\tsha256\tgit_sha1\torigin\n"
    with pytest.raises(ValueError, match="bad checksum"):
        ts.parse_text_manifest(header + "a\t\tXYZ\t\to\n")
    with pytest.raises(ValueError, match="duplicate"):
        ts.parse_text_manifest(header + "a\t1\t\t\to\n" + "a\t1\t\t\to\n")


# --- split sizes, STATUS.json -----------------------------------------------------------------------------------
def test_split_sizes_from_the_mirror(prepared: dict[str, Path]) -> None:
    sizes = {c: {s: v["examples"] for s, v in json.loads((p / STATUS_FILE).read_text())["splits"].items()}
             for c, p in prepared.items()}
    # SNLI: 5,000 distinct sentences -> 3,500 / 500 / 1,000 (test keeps the thesis's 1k size).
    assert sizes["snli"] == {"train": 3500, "valid": 500, "test": 1000}
    # QG: official valid 10,570 cut 90/10 into stand-in train/valid; official test 11,877 (Du et al. 2017).
    assert sizes["qg"] == {"train": 9513, "valid": 1057, "test": 11877}
    # Dialog: official valid 17,878 cut 90/10; official test 18,170 (authors' CSVs).
    assert sizes["dialog"] == {"train": 16090, "valid": 1788, "test": 18170}


@pytest.mark.parametrize("corpus, present, missing_file", [
    ("snli", [], ts.SNLI_ZIP),
    ("qg", ["valid", "test"], QG_TRAIN),
    ("dialog", ["valid", "test"], ts.DIALOG_FILES[0].path),
])
def test_status_json_of_the_mirror_version(prepared: dict[str, Path], mirror_dir: Path, corpus: str,
                                           present: list[str], missing_file: str) -> None:
    status = json.loads((prepared[corpus] / STATUS_FILE).read_text())
    assert status["corpus"] == corpus and status["version"] == "mirror"
    assert status["scales"] == ["cpu", "smoke"]
    assert status["present"] == present
    assert status["missing"] == [s for s in tc.SPLITS if s not in present]
    assert missing_file in {m["path"] for m in status["missing_files"]}
    assert all(m["url"].startswith("https://") and "downloads are disabled" in m["reason"]
               for m in status["missing_files"])
    assert all(s["verified_by"] == "sha256" and s["from"].startswith(str(mirror_dir)) for s in status["sources"])
    assert all(v["origin"].startswith(("stand-in", "official")) for v in status["splits"].values())
    assert status["vocab"]["specials"] == list(SPECIALS) and status["vocab"]["fit_on"] == "train"
    assert status["config"] == json.loads(json.dumps(tc._config_json(tc.CONFIGS[corpus])))
    assert tc.needs_data(status, "cpu") == tc.needs_data(status, "smoke") == []
    (paper_gap,) = tc.needs_data(status, "paper")
    assert Path(missing_file).name in paper_gap


def test_missing_test_split_reported_not_crashed(mirror_dir: Path, tmp_path: Path) -> None:
    mirror = _mirror_with(tmp_path, mirror_dir, {QG_VAL: None})
    status = tc.prepare_qg(tmp_path / "qg", mirror, allow_download=False)
    assert status["version"] == "mirror" and status["present"] == ["valid"]
    assert status["missing"] == ["train", "test"]
    assert {m["split"] for m in status["missing_files"]} == {"train", "test"}
    assert sorted(status["splits"]) == ["train", "valid"]
    assert not (tmp_path / "qg" / "test.tsv").exists()
    assert tc.needs_data(status, "cpu") == ["qg: no test split"]


def test_nothing_available_is_an_error_and_marks_nothing_done(served, tmp_path: Path) -> None:
    """No training data: a FetchError naming the missing files and where they were looked for; no STATUS.json
    (nothing for a later step to take as done), no partial folder, no empty downloads/ folder."""
    (tmp_path / "empty").mkdir()
    with pytest.raises(FetchError) as err:
        tc.prepare_snli(tmp_path / "data" / "snli", tmp_path / "empty", allow_download=False)
    message = str(err.value)
    assert ts.SNLI_ZIP in message and ts.SNLI_SAMPLE in message and str(tmp_path / "empty") in message
    assert not (tmp_path / "data").exists() or list((tmp_path / "data").iterdir()) == []
    offline = {key: f"{served[1]}/offline/{Path(key).name}" for key in (ts.SNLI_ZIP, ts.SNLI_SAMPLE)}   # 404s
    with pytest.raises(FetchError, match="downloads allowed"):
        tc.prepare_snli(tmp_path / "data" / "snli", tmp_path / "empty", urls=offline)
    assert not (tmp_path / "data").exists() or list((tmp_path / "data").iterdir()) == []


def test_an_empty_preparation_left_by_an_older_version_names_what_to_delete(tmp_path: Path) -> None:
    out = tmp_path / "snli"
    out.mkdir()
    (out / STATUS_FILE).write_text(json.dumps({"corpus": "snli", "version": "none", "splits": {}, "config": {}}))
    for call in (lambda: tc.load_prepared(out), lambda: tc.prepare_snli(out, tmp_path, allow_download=False)):
        with pytest.raises(FetchError, match=f"{out} holds no training data .* delete {out} and run the data step"):
            call()


def test_missing_mirror_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FetchError, match="does not exist"):
        tc.prepare_snli(tmp_path / "out", tmp_path / "nope", allow_download=False)


# --- vocabulary, preprocessing and length limits ----------------------------------------------------------------
@pytest.mark.parametrize("corpus", ["snli", "qg", "dialog"])
def test_vocabulary_limit_and_special_tokens(prepared: dict[str, Path], corpus: str) -> None:
    data = tc.load_prepared(prepared[corpus])
    vocab, limit = data.vocab, tc.CONFIGS[corpus].vocab_size
    assert vocab.tokens[:4] == (PAD, UNK, "<s>", EOS) and [vocab.id(t) for t in SPECIALS] == [0, 1, 2, 3]
    train_words = {w for ex in data.splits["train"] for w in (*ex.ref, *ex.src)}
    assert len(vocab) <= limit and UNK not in train_words  # the mirror has fewer distinct words than |V|
    assert train_words <= set(vocab.tokens)
    if corpus == "snli":  # ref = the whole sentence: the vocabulary is exactly its words (fit before trimming)
        assert len(vocab) == len(SPECIALS) + len(train_words)
    counts = vocab.counts[4:]
    assert all(a >= b for a, b in zip(counts, counts[1:]))  # most frequent first
    for split, examples in data.splits.items():
        assert all(w in vocab for ex in examples for w in (*ex.src, *ex.tgt)), split
    # words never seen in training appear as <unk> in valid/test
    assert any(UNK in ex.src for ex in data.splits["test"])


def test_small_vocabulary_maps_the_rest_to_unk(mirror_dir: Path, tmp_path: Path) -> None:
    config = replace(tc.SNLI_CONFIG, vocab_size=50)
    tc.prepare_snli(tmp_path / "snli50", mirror_dir, config=config, allow_download=False)
    data = tc.load_prepared(tmp_path / "snli50")
    assert len(data.vocab) == 50 and data.status["vocab"]["limit"] == 50
    assert {"a", ".", "the", "man"} <= set(data.vocab.tokens)
    tokens = [w for ex in data.splits["train"] for w in ex.src]
    assert all(w in data.vocab for w in tokens) and tokens.count(UNK) > 0
    top46 = set(data.vocab.tokens[4:])
    for ex in data.splits["train"][:200]:
        assert list(ex.src) == [w if w in top46 else UNK for w in ex.ref[:10]]


def test_snli_length_limit_and_eos_rule(prepared: dict[str, Path]) -> None:
    data = tc.load_prepared(prepared["snli"])
    examples = [ex for split in data.splits.values() for ex in split]
    assert max(len(ex.src) for ex in examples) == 10  # m = 10 (thesis §4.6.3)
    long = [ex for ex in examples if len(ex.ref) > 10]
    assert long and all(len(ex.src) == 10 and ex.src == tuple(data.vocab.known(ex.ref[:10])) for ex in long)
    for ex in examples[:300]:
        ids = data.encode(ex.src, "src")
        assert len(ids) == 10  # </s> appended, then trimmed to m (thesis §4.5.2 steps 5 and 8), padded
        if len(ex.ref) >= 10:
            assert data.vocab.id(EOS) not in ids
        else:
            assert ids[len(ex.src)] == data.vocab.id(EOS) and set(ids[len(ex.src) + 1:]) <= {0}


@pytest.mark.parametrize("corpus, max_src, max_tgt", [("qg", 30, 20), ("dialog", 20, 20)])
def test_paired_length_limits(prepared: dict[str, Path], corpus: str, max_src: int, max_tgt: int) -> None:
    data = tc.load_prepared(prepared[corpus])
    examples = [ex for split in data.splits.values() for ex in split]
    assert max(len(ex.src) for ex in examples) == max_src
    assert max(len(ex.tgt) for ex in examples) == max_tgt
    assert max(len(ex.ref) for ex in examples) > max_tgt  # references keep the full target
    ex = max(examples, key=lambda e: len(e.ref))
    ids = data.encode(ex.tgt, "tgt")
    assert len(ids) == max_tgt + 1 and ids[-1] == data.vocab.id(EOS)  # max words, then </s> (authors' code)
    assert len(data.encode(ex.src, "src", pad=False)) == max_src + 1


def test_preprocessing_of_the_mirror_text(prepared: dict[str, Path]) -> None:
    allowed = {"snli": set(",.-"), "qg": set("?"), "dialog": set(".,?")}
    for corpus, extra in allowed.items():
        data = tc.load_prepared(prepared[corpus])
        for ex in data.splits["train"]:
            for w in (*ex.ref, *ex.src):
                assert w in SPECIALS or all(c.isalnum() or c in extra for c in w), (corpus, w)
                assert w == w.lower()
    qg = tc.load_prepared(prepared["qg"])
    assert sum(ex.ref[-1] == "?" for ex in qg.splits["test"]) / len(qg.splits["test"]) > 0.95


def test_normalize_and_tokenize_examples() -> None:
    snli = TextRules(",.", intraword_hyphen=True)
    assert preprocess("A girl with blond-hair -- on a bike, at St. Patrick's day!", snli) == [
        "a", "girl", "with", "blond-hair", "on", "a", "bike", ",", "at", "st.", "patricks", "day"]
    assert preprocess('He said "Hi." She ran.', snli) == ["he", "said", "hi", ".", "she", "ran", "."]
    dialog = TextRules(".,?")
    assert preprocess("It's chemistry, Andy. Nothing more... Mr. Smith?", dialog) == [
        "its", "chemistry", ",", "andy", ".", "nothing", "more", "...", "mr.", "smith", "?"]
    assert normalize("3,000 u.s. men", snli) == "3,000 u.s. men"
    assert tokenize("3,000 u.s. men") == ["3,000", "u.s.", "men"]
    assert preprocess("?!", TextRules(",.")) == []


def test_vocab_encode_decode_round_trip(tmp_path: Path) -> None:
    vocab = Vocab.build([["a", "b", "a"], ["c", "b", "a"]], size=6)
    assert vocab.tokens == (*SPECIALS, "a", "b") and vocab.counts == (0, 0, 0, 0, 3, 2)
    ids = vocab.encode(["a", "c", "b"], 10, eos_within_limit=False, pad_to=6)
    assert ids == [4, 1, 5, 3, 0, 0] and vocab.decode(ids) == ["a", UNK, "b"]
    assert vocab.encode(["a", "b", "a"], 3, eos_within_limit=True) == [4, 5, 4]
    vocab.save(tmp_path / "v.tsv")
    assert Vocab.load(tmp_path / "v.tsv") == vocab
    with pytest.raises(ValueError, match="special"):
        Vocab.build([["a"]], size=4)


# --- round trip, idempotence, determinism -----------------------------------------------------------------------
def test_output_round_trip(prepared: dict[str, Path]) -> None:
    path = prepared["qg"]
    data = tc.load_prepared(path)
    lines = (path / "valid.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "src\ttgt\tref" and len(lines) - 1 == len(data.splits["valid"])
    first = data.splits["valid"][0]
    assert lines[1] == "\t".join(" ".join(x) for x in first)
    assert data.config == tc.QG_CONFIG
    assert data.vocab == Vocab.load(path / "vocab.tsv")
    in_vocab = next(ex for ex in data.splits["train"] if UNK not in ex.tgt)
    assert data.vocab.decode(data.encode(in_vocab.tgt, "tgt")) == list(in_vocab.tgt)


def test_finished_folder_is_reused_and_config_change_refused(prepared: dict[str, Path], mirror_dir: Path) -> None:
    before = (prepared["snli"] / STATUS_FILE).stat().st_mtime_ns
    assert tc.prepare_snli(prepared["snli"], mirror_dir, allow_download=False)["version"] == "mirror"
    assert (prepared["snli"] / STATUS_FILE).stat().st_mtime_ns == before
    with pytest.raises(FetchError, match="another configuration"):
        tc.prepare_snli(prepared["snli"], mirror_dir, config=replace(tc.SNLI_CONFIG, seed=1), allow_download=False)


def test_preparation_is_deterministic(prepared: dict[str, Path], mirror_dir: Path, tmp_path: Path) -> None:
    tc.prepare_snli(tmp_path / "again", mirror_dir, allow_download=False)
    for name in ("train.tsv", "valid.tsv", "test.tsv", "vocab.tsv"):
        assert (tmp_path / "again" / name).read_bytes() == (prepared["snli"] / name).read_bytes()


def test_permutation_is_a_fixed_shuffle() -> None:
    assert tc.permutation(10, 0) == tc.permutation(10, 0) != tc.permutation(10, 1)
    assert sorted(tc.permutation(1000, 3)) == list(range(1000))


# --- download route and the full-data paths ---------------------------------------------------------------------
def test_download_from_url_is_verified(mirror_dir: Path, served, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    root, base = served
    (root / "sample.txt").symlink_to(mirror_dir / ts.SNLI_SAMPLE)
    urls = {ts.SNLI_SAMPLE: f"{base}/sample.txt", ts.SNLI_ZIP: f"{base}/absent.zip"}
    status = tc.prepare_snli(tmp_path / "work" / "snli", tmp_path / "empty", urls=urls)
    assert status["version"] == "mirror"
    (source,) = status["sources"]
    assert source["from"] == urls[ts.SNLI_SAMPLE] and source["verified_by"] == "sha256"
    assert (tmp_path / "work" / "downloads" / "snli_sentences_1000.txt").is_file()
    (zip_missing,) = status["missing_files"]
    assert zip_missing["path"] == ts.SNLI_ZIP and "could not download" in zip_missing["reason"]


def _entry(path: Path, key: str) -> ts.TextManifestEntry:
    return ts.TextManifestEntry(key, path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest(), "", "test")


def test_full_snli_from_official_archive_layout(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    (mirror / "snli").mkdir(parents=True)
    archive = mirror / ts.SNLI_ZIP
    with zipfile.ZipFile(archive, "w") as zf:
        for k, member in enumerate(ts.SNLI_MEMBERS):
            rows = [{"sentence1": f"A man plays song {k}{i}.", "sentence2": f"Someone sings, loudly! {i}"}
                    for i in range(10)]
            zf.writestr(member, "".join(json.dumps(r) + "\n" for r in rows))
    manifest = {ts.SNLI_ZIP: _entry(archive, ts.SNLI_ZIP)}
    config = replace(tc.SNLI_CONFIG, subset_size=30, split_sizes=(26, 2, 2))
    status = tc.prepare_snli(tmp_path / "snli", mirror, config=config, manifest=manifest, allow_download=False)
    # 30 distinct premises + 10 distinct hypotheses ("someone sings , loudly i" repeats across files) = 40 -> 30
    assert status["version"] == "full" and status["scales"] == ["paper", "cpu", "smoke"]
    assert status["present"] == list(tc.SPLITS) and status["missing"] == []
    assert {s: v["examples"] for s, v in status["splits"].items()} == {"train": 26, "valid": 2, "test": 2}
    assert "30 of 40 distinct" in status["splits"]["train"]["origin"]
    assert tc.needs_data(status, "paper") == []
    data = tc.load_prepared(tmp_path / "snli")
    assert all(ex.src == ex.tgt for ex in data.splits["train"])


def test_full_snli_archive_with_wrong_checksum_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "mirror" / "snli").mkdir(parents=True)
    with zipfile.ZipFile(tmp_path / "mirror" / ts.SNLI_ZIP, "w") as zf:
        zf.writestr("snli_1.0/README.txt", "not the real archive")
    with pytest.raises(ChecksumError, match=r"snli_1\.0\.zip"):
        tc.prepare_snli(tmp_path / "snli", tmp_path / "mirror", allow_download=False)


def test_dialog_thesis_split_from_official_cornell_archive(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    (mirror / "cornell").mkdir(parents=True)
    archive = mirror / ts.CORNELL_ZIP
    sep = ts._CORNELL_SEP
    lines, convs = [], []
    for c in range(10):
        ids = [f"L{100 * c + k}" for k in range(4)]
        lines += [f"{i}{sep}u0{sep}m0{sep}BOB{sep}Line {i}, isn't it? Yes." for i in ids]
        convs.append(f"u0{sep}u2{sep}m0{sep}{ids!r}")
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(ts._CORNELL_TOP + "movie_lines.txt", "\n".join(lines).encode("iso-8859-1"))
        zf.writestr(ts._CORNELL_TOP + "movie_conversations.txt", "\n".join(convs).encode("iso-8859-1"))
    manifest = {**ts.load_text_manifest(), ts.CORNELL_ZIP: _entry(archive, ts.CORNELL_ZIP)}
    config = replace(tc.DIALOG_CONFIG, split_sizes=(20, 4))
    status = tc.prepare_dialog(tmp_path / "dialog", mirror, config=config, manifest=manifest, allow_download=False)
    assert status["version"] == "full" and status["present"] == list(tc.SPLITS)
    # 10 conversations x 3 consecutive pairs = 30 -> 20 / 4 / rest 6
    assert {s: v["examples"] for s, v in status["splits"].items()} == {"train": 20, "valid": 4, "test": 6}
    assert "not the authors' CSV split" in status["splits"]["test"]["origin"]
    ex = tc.load_prepared(tmp_path / "dialog").splits["train"][0]
    assert ex.ref[0] == "line" and ex.ref[1].startswith("l") and ex.ref[2:] == (",", "isnt", "it", "?", "yes", ".")


def test_unpublished_checksum_download_accepted_with_warning(served, tmp_path: Path) -> None:
    def write_csv(path: Path, n: int, tag: str) -> None:
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(["question", "answer"])
        writer.writerows([[f"what is {tag} {i} ?", f"the {tag} {i} is here"] for i in range(n)])
        path.write_text(buf.getvalue(), encoding="utf-8")

    mirror, (www, base) = tmp_path / "mirror", served
    for f, n in ((ts.QG_FILES[1], 5), (ts.QG_FILES[2], 4)):
        (mirror / f.path).parent.mkdir(parents=True, exist_ok=True)
        write_csv(mirror / f.path, n, f.split)
    write_csv(www / "df_qgen_train.csv", 12, "train")
    manifest = {f.path: _entry(mirror / f.path, f.path) for f in ts.QG_FILES[1:]}
    manifest[QG_TRAIN] = ts.TextManifestEntry(QG_TRAIN, None, "", "", "no published checksum")
    urls = {QG_TRAIN: f"{base}/df_qgen_train.csv"}
    with pytest.warns(UserWarning, match="no published checksum"):
        status = tc.prepare_qg(tmp_path / "work" / "qg", mirror, manifest=manifest, urls=urls)
    assert status["version"] == "full" and status["missing"] == [] and status["missing_files"] == []
    train_source = next(s for s in status["sources"] if s["split"] == "train")
    assert train_source["verified_by"].startswith("none") and len(train_source["sha256"]) == 64
    assert {s: v["examples"] for s, v in status["splits"].items()} == {"train": 12, "valid": 5, "test": 4}
    data = tc.load_prepared(tmp_path / "work" / "qg")
    assert data.splits["train"][0] == (("the", "train", "0", "is", "here"),) + (("what", "is", "train", "0", "?"),) * 2


def test_a_download_failing_its_checksum_is_deleted_before_it_is_kept(served, tmp_path: Path) -> None:
    """A download with a recorded git blob SHA-1 is checked before it lands under its name: a mismatch names the
    file and the URL, and leaves neither the file nor its .part in downloads/."""
    www, base = served
    mirror = tmp_path / "mirror"
    for f in ts.QG_FILES[1:]:
        (mirror / f.path).parent.mkdir(parents=True, exist_ok=True)
        (mirror / f.path).write_text("question,answer\nwhat ?,this\n", encoding="utf-8")
    (www / "df_qgen_train.csv").write_text("question,answer\nwhat ?,that\n", encoding="utf-8")
    manifest = {f.path: _entry(mirror / f.path, f.path) for f in ts.QG_FILES[1:]}
    manifest[QG_TRAIN] = ts.TextManifestEntry(QG_TRAIN, None, "", "0" * 40, "test")
    url = f"{base}/df_qgen_train.csv"
    with pytest.raises(ChecksumError) as err:
        tc.prepare_qg(tmp_path / "work" / "qg", mirror, manifest=manifest, urls={QG_TRAIN: url})
    downloads = tmp_path / "work" / "downloads"
    assert str(err.value).startswith(f"{downloads / 'df_qgen_train.csv'} (manifest entry") and url in str(err.value)
    assert not downloads.exists() or list(downloads.iterdir()) == []


def test_malformed_csv_named(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    path = mirror / QG_VAL
    path.parent.mkdir(parents=True)
    path.write_text("a,b\n1,2\n", encoding="utf-8")
    manifest = {f.path: ts.TextManifestEntry(f.path, None, "", "", "t") for f in ts.QG_FILES}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(FetchError, match=r"df_qgen_val\.csv: expected CSV columns"):
            tc.prepare_qg(tmp_path / "qg", mirror, manifest=manifest, allow_download=False)


def test_a_bad_mirror_file_is_not_called_ours_to_delete(mirror_dir: Path, tmp_path: Path) -> None:
    data = bytearray((mirror_dir / ts.SNLI_SAMPLE).read_bytes())
    data[1000] ^= 0x20
    mirror = _mirror_with(tmp_path, mirror_dir, {ts.SNLI_SAMPLE: bytes(data)})
    with pytest.raises(ChecksumError) as err:
        tc.prepare_snli(tmp_path / "out", mirror, allow_download=False)
    message = str(err.value)
    assert "delete" not in message and "mirror's file is corrupt or not the official one" in message
    assert ts.SNLI_SAMPLE_URL in message and "--mirror" in message


@pytest.mark.parametrize("edit", ["train.tsv", "vocab.tsv", "delete test.tsv"])
def test_a_prepared_file_edited_or_deleted_stops_its_use(mirror_dir: Path, tmp_path: Path, edit: str) -> None:
    from nlpbench.data.fetch import PreparedDataChanged
    out = tmp_path / "snli"
    status = tc.prepare_snli(out, _mirror_with(tmp_path, mirror_dir, {ts.SNLI_SAMPLE: None}), allow_download=False)
    assert sorted(status["files"]) == ["test.tsv", "train.tsv", "valid.tsv", "vocab.tsv"]
    tc.load_prepared(out)
    name = edit.removeprefix("delete ")
    path = out / name
    if edit.startswith("delete"):
        path.unlink()
    else:                                   # one character, same size: only the hash sees it
        data = bytearray(path.read_bytes())
        data[200] = ord("x") if data[200] != ord("x") else ord("y")
        path.write_bytes(bytes(data))
    with pytest.raises(PreparedDataChanged) as err:
        tc.load_prepared(out)
    assert str(err.value).startswith(f"{path} was {'deleted' if edit.startswith('delete') else 'changed'}")
    assert f"delete {out} and run the data step again (nlpbench data snli)" in str(err.value)


def test_split_by_group_keeps_every_group_in_one_split() -> None:
    pairs = list(range(100))
    groups = [f"m{i // 5}" for i in range(100)]                    # 20 groups of 5 pairs
    splits, members = tc.split_by_group(pairs, groups, (0.8, 0.1, 0.1), seed=3)
    assert sorted(p for s in splits.values() for p in s) == pairs
    assert [len(splits[s]) for s in ("valid", "test")] == [10, 10] and len(splits["train"]) == 80
    owner = {g: s for s, gs in members.items() for g in gs}
    assert len(owner) == 20 and all(owner[groups[p]] == s for s, ps in splits.items() for p in ps)
    assert tc.split_by_group(pairs, groups, (0.8, 0.1, 0.1), seed=3) == (splits, members)   # seeded
    assert tc.split_by_group(pairs, groups, (0.8, 0.1, 0.1), seed=4)[1] != members


def test_dialog_mirror_regrouped_by_movie_shares_no_film(mirror_dir: Path, tmp_path: Path) -> None:
    """mirror_split grouped: the authors' validation and test pairs pooled and split by movie_id (no film in two
    splits: split_by_group)."""
    config = replace(tc.DIALOG_CONFIG, vocab_size=2000, max_pairs=3000, mirror_split="grouped")
    status = tc.prepare_dialog(tmp_path / "dialog", mirror_dir, config=config, allow_download=False)
    corpus = tc.load_prepared(tmp_path / "dialog")
    sizes = {s: len(corpus.splits[s]) for s in ("train", "valid", "test")}
    assert status["version"] == "mirror" and sum(sizes.values()) == 6000 - status["dropped_empty_pairs"]
    assert 600 <= sizes["valid"] < 800 and 600 <= sizes["test"] < 800     # whole films: up to one film over
    assert all("pooled, the pairs of" in status["splits"][s]["origin"] and "no movie_id in two splits"
               in status["splits"][s]["origin"] for s in sizes), status["splits"]
    assert corpus.config.mirror_split == "grouped"
    plain = tc.prepare_dialog(tmp_path / "plain", mirror_dir, allow_download=False,
                              config=replace(tc.DIALOG_CONFIG, vocab_size=2000, max_pairs=3000))
    assert "mirror_split" not in plain["config"]            # the default leaves earlier preparations' record as is


def test_split_by_group_trains_the_fixed_groups_and_counts_them_in_the_shares() -> None:
    pairs = list(range(100))
    groups = ["fixed"] * 40 + [f"a{i // 5}" for i in range(60)]   # one group of 40 that must train, 12 of 5
    splits, members = tc.split_by_group(pairs, groups, (0.8, 0.1, 0.1), seed=1, always_train=["fixed"])
    assert "fixed" in members["train"] and set(range(40)) <= set(splits["train"])
    assert [len(splits[s]) for s in ("valid", "test")] == [10, 10]   # shares of all 100 pairs, not of the 60


def test_qg_mirror_regrouped_by_article_shares_no_article(mirror_dir: Path, tmp_path: Path) -> None:
    """mirror_split grouped for QG: a Du et al. dev pair's article is its question's article in SQuAD's dev set;
    validation and test take whole dev articles, the Du et al. test pairs (other articles) all train."""
    from nlpbench.textgen.sources import SQUAD_DEV_REBUILT, question_key, read_squad_question_articles
    config = replace(tc.QG_CONFIG, vocab_size=2000, mirror_split="grouped")
    status = tc.prepare_qg(tmp_path / "qg", mirror_dir, config=config, allow_download=False)
    corpus = tc.load_prepared(tmp_path / "qg")
    titles = read_squad_question_articles(mirror_dir / SQUAD_DEV_REBUILT)
    dev = {question_key(q): titles[question_key(q)]
           for q in ts.read_csv_column(mirror_dir / ts.QG_FILES[1].path, "question")}
    def articles(split: str) -> set[str | None]:
        return {dev.get(question_key(" ".join(ex.ref))) for ex in corpus.splits[split]}
    valid, test, train = articles("valid"), articles("test"), articles("train")
    assert None not in valid | test and not valid & test and not (valid | test) & train
    assert None in train                                               # the Du et al. test pairs train
    sizes = {s: len(corpus.splits[s]) for s in ("train", "valid", "test")}
    assert sum(sizes.values()) == 22_447 - status["dropped_empty_pairs"]
    assert 2_000 <= sizes["valid"] <= 2_700 and 2_000 <= sizes["test"] <= 2_700
    assert "no article in two splits; the Du et al. test articles always train" in status["splits"]["valid"]["origin"]
    assert any(s["path"] == SQUAD_DEV_REBUILT for s in status["sources"])
