"""The tab-separated listings: the packaged checksum manifests and a data mirror's MANIFEST.tsv."""

import pytest

from nlpbench.acvi import data as acvi_data
from nlpbench.data import fetch, tsv
from nlpbench.data.fetch import FetchError

SHA = "ab" * 32


def test_records_name_the_file_and_line_of_a_bad_header_or_row():
    text = "# a comment\npath\tsha256\n\na.txt\t" + SHA + "\n"
    assert list(tsv.records(text, "m.tsv", header=("path", "sha256"))) == [(4, {"path": "a.txt", "sha256": SHA})]
    with pytest.raises(ValueError, match=r"m\.tsv:1: expected the header 'path<TAB>sha256'"):
        list(tsv.records("path\tbytes\n", "m.tsv", header=("path", "sha256")))
    with pytest.raises(ValueError, match=r"m\.tsv:1: the header lacks the column\(s\) sha256"):
        list(tsv.records("path\tbytes\n", "m.tsv", required=("path", "sha256")))
    with pytest.raises(ValueError, match=r"m\.tsv:3: expected 2 tab-separated fields, got 1"):
        list(tsv.records("path\tsha256\na\t" + SHA + "\nb\n", "m.tsv", required=("path",)))
    with pytest.raises(ValueError, match=r"m\.tsv: empty"):
        list(tsv.records("# nothing\n", "m.tsv", required=("path",)))


def test_a_mirror_manifest_is_read_by_its_columns_in_any_order(tmp_path):
    path = tmp_path / "MANIFEST.tsv"
    path.write_text(f"bytes\tsha256\tpath\n3\t{SHA.upper()}\tx/a.txt\n", encoding="utf-8")
    assert tsv.mirror_checksums(path) == {"x/a.txt": SHA}


def test_a_malformed_mirror_manifest_is_an_error_naming_it_not_a_crash_or_a_silent_miss(tmp_path):
    folder = tmp_path / "cnn_dm"
    folder.mkdir()
    (folder / "MANIFEST.tsv").write_text("path\tbytes\n" "a.txt\t3\n", encoding="utf-8")
    with pytest.raises(FetchError, match=r"MANIFEST\.tsv:1: the header lacks the column\(s\) sha256"):
        acvi_data.read_manifest(folder)
    (folder / "MANIFEST.tsv").write_text(f"path\tsha256\na.txt\t{SHA}\nb.txt\n", encoding="utf-8")
    with pytest.raises(FetchError, match=r"MANIFEST\.tsv:3: expected 2 tab-separated fields"):
        acvi_data.read_manifest(folder)
    with pytest.raises(FetchError, match=r"MANIFEST\.tsv:3: expected 2 tab-separated fields"):
        fetch._mirror_manifest_sha256(tmp_path, "cnn_dm/a.txt")
