"""nlpbench.data.fetch: mirror resolution, checksums, downloads and the atomic, verified bAbI preparation."""

from __future__ import annotations

import io
import json
import tarfile
import time
from pathlib import Path

import pytest

from nlpbench.data import fetch
from nlpbench.data.fetch import (
    BABI_MIRROR_FULL,
    BABI_MIRROR_GAPS,
    BABI_MIRROR_PARTIAL,
    BABI_MIRROR_PARTIAL_SHA256,
    ChecksumError,
    DownloadError,
    FetchError,
    IncompleteArchiveError,
    UnsafeArchiveError,
    download,
    git_blob_sha1,
    load_babi_manifest,
    prepare_babi,
    resolve_mirror,
    sha256_file,
)

HELLO_SHA256 = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"  # b"hello\n"
HELLO_GIT_SHA1 = "ce013625030ba8dba906f756967f9e9ca394464a"  # git hash-object of b"hello\n"
QA1_TRAIN = "en/qa1_single-supporting-fact_train.txt"


@pytest.fixture
def no_env_mirror(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NLPBENCH_MIRROR", raising=False)


def make_tar(path: Path, members: dict[str, bytes]) -> Path:
    """A small .tar.gz with the given member names and contents."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir()) if path.parent.exists() else []


# --- small helpers ---------------------------------------------------------------------------


def test_resolve_mirror_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("NLPBENCH_MIRROR", raising=False)
    assert resolve_mirror(None) is None
    monkeypatch.setenv("NLPBENCH_MIRROR", str(tmp_path / "env"))
    assert resolve_mirror(None) == tmp_path / "env"
    assert resolve_mirror(tmp_path / "arg") == tmp_path / "arg"
    assert resolve_mirror(str(tmp_path / "arg")) == tmp_path / "arg"


def test_checksums_match_known_values(tmp_path: Path) -> None:
    f = tmp_path / "hello.txt"
    f.write_bytes(b"hello\n")
    assert sha256_file(f) == HELLO_SHA256
    assert git_blob_sha1(f) == HELLO_GIT_SHA1


def test_manifest_lists_every_file() -> None:
    manifest = load_babi_manifest()
    assert len(manifest) == 242  # 240 task files + README + LICENSE
    no_sha256 = {rel for rel, e in manifest.items() if not e.sha256}
    assert no_sha256 == BABI_MIRROR_GAPS
    assert manifest["en-10k/qa3_three-supporting-facts_train.txt"].git_sha1 == "9b2b35ca4357ea8ee44692c71ec71892edf51399"
    assert all(e.git_sha1 for e in manifest.values())


def test_manifest_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "m.tsv"
    bad.write_text("# comment\npath\tsha256\tgit_sha1\nen/x.txt\tnothex\t\n")
    with pytest.raises(ValueError, match=rf"{bad}:3: bad checksum"):
        load_babi_manifest(bad)
    bad.write_text("path\tsha\n")
    with pytest.raises(ValueError, match=rf"{bad}:1: expected the header"):
        load_babi_manifest(bad)


# --- download --------------------------------------------------------------------------------


def test_download_verifies_and_renames(served, tmp_path: Path) -> None:
    root, base = served
    (root / "src.txt").write_bytes(b"hello\n")
    dest = tmp_path / "out" / "dest.txt"
    assert download(f"{base}/src.txt", dest, sha256=HELLO_SHA256) == dest
    assert dest.read_bytes() == b"hello\n"
    assert siblings(dest) == ["dest.txt"]


def test_download_checksum_mismatch_deletes(served, tmp_path: Path) -> None:
    root, base = served
    (root / "src.txt").write_bytes(b"hello\n")
    dest = tmp_path / "out" / "dest.txt"
    with pytest.raises(ChecksumError) as err:
        download(f"{base}/src.txt", dest, sha256="0" * 64)
    msg = str(err.value)
    assert str(dest) in msg and "0" * 64 in msg and HELLO_SHA256 in msg
    assert siblings(dest) == []


def test_download_failure_names_url(served, tmp_path: Path) -> None:
    url = f"{served[1]}/nowhere.tar.gz"
    with pytest.raises(DownloadError, match="nowhere.tar.gz"):
        download(url, tmp_path / "out" / "x")
    assert siblings(tmp_path / "out" / "x") == []


# --- prepare_babi on the real mirror ---------------------------------------------------------


def test_prepared_layout_and_status(babi_root: Path, mirror_dir: Path) -> None:
    status = json.loads((babi_root / "STATUS.json").read_text())
    assert status["source"] == str(mirror_dir / BABI_MIRROR_PARTIAL)
    assert status["archive_sha256"] == BABI_MIRROR_PARTIAL_SHA256
    assert sorted(status["missing"]) == sorted(BABI_MIRROR_GAPS)
    assert len(status["present"]) == 239
    assert set(status["present"]).isdisjoint(status["missing"])
    for variant in ("en", "hn", "shuffled", "en-10k", "hn-10k", "shuffled-10k"):
        assert len(list((babi_root / variant).glob("qa*_*.txt"))) == (40 if "10k" not in variant else 39)
    assert (babi_root / QA1_TRAIN).is_file()
    assert not (babi_root / "tasks_1-20_v1-2").exists()
    for rel in BABI_MIRROR_GAPS:
        assert not (babi_root / rel).exists()


def test_prepare_is_idempotent(babi_root: Path, mirror_dir: Path) -> None:
    status_file = babi_root / "STATUS.json"
    before = status_file.stat().st_mtime_ns
    start = time.perf_counter()
    again = prepare_babi(babi_root, mirror=mirror_dir)
    assert time.perf_counter() - start < 0.5
    assert again == json.loads(status_file.read_text())
    assert status_file.stat().st_mtime_ns == before


def test_prepare_by_download(babi_root: Path, mirror_dir: Path, served, tmp_path: Path, no_env_mirror: None) -> None:
    """No mirror: the archive is fetched from the URL (the mirror's archive, served locally) into downloads/."""
    root, base = served
    (root / "tasks.tar.gz").symlink_to(mirror_dir / BABI_MIRROR_PARTIAL)
    url = f"{base}/tasks.tar.gz"
    out = tmp_path / "data" / "babi"
    with pytest.warns(UserWarning, match="differs from the recorded official"):
        status = prepare_babi(out, mirror=None, url=url)
    assert status["source"] == url
    assert (tmp_path / "data" / "downloads" / "tasks_1-20_v1-2.tar.gz").is_file()
    assert sorted(status["missing"]) == sorted(BABI_MIRROR_GAPS)
    assert (out / QA1_TRAIN).read_bytes() == (babi_root / QA1_TRAIN).read_bytes()


def test_prepare_without_mirror_or_network(served, tmp_path: Path, no_env_mirror: None) -> None:
    url = f"{served[1]}/offline/tasks.tar.gz"         # not there: a 404
    out = tmp_path / "data" / "babi"
    with pytest.raises(DownloadError) as err:
        prepare_babi(out, url=url)
    assert url in str(err.value) and "NLPBENCH_MIRROR" in str(err.value)
    assert not out.exists()


def test_prepare_uses_env_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NLPBENCH_MIRROR", str(tmp_path / "no-such-mirror"))
    with pytest.raises(FetchError, match="no-such-mirror"):
        prepare_babi(tmp_path / "babi")


# --- prepare_babi failures leave nothing behind ----------------------------------------------


def fake_mirror(tmp_path: Path, members: dict[str, bytes], name: str = BABI_MIRROR_FULL) -> Path:
    mirror = tmp_path / "mirror"
    make_tar(mirror / name, members)
    return mirror


def assert_nothing_left(out: Path) -> None:
    assert not out.exists()
    assert siblings(out) == []  # no temporary folder either


def test_tampered_member_raises_and_leaves_nothing(babi_root: Path, tmp_path: Path) -> None:
    good = (babi_root / "en/qa2_two-supporting-facts_train.txt").read_bytes()
    bad = (babi_root / QA1_TRAIN).read_bytes().replace(b"bathroom", b"bedroom", 1)
    mirror = fake_mirror(
        tmp_path,
        {
            "tasks_1-20_v1-2/en/qa2_two-supporting-facts_train.txt": good,
            f"tasks_1-20_v1-2/{QA1_TRAIN}": bad,
        },
    )
    out = tmp_path / "data" / "babi"
    with pytest.warns(UserWarning), pytest.raises(ChecksumError) as err:
        prepare_babi(out, mirror=mirror)
    assert f"tasks_1-20_v1-2/{QA1_TRAIN}" in str(err.value)
    assert_nothing_left(out)


def test_damaged_mirror_archive_fails_archive_checksum(tmp_path: Path) -> None:
    mirror = fake_mirror(tmp_path, {"tasks_1-20_v1-2/README.txt": b"x"}, name=BABI_MIRROR_PARTIAL)
    out = tmp_path / "data" / "babi"
    with pytest.raises(ChecksumError, match=BABI_MIRROR_PARTIAL_SHA256):
        prepare_babi(out, mirror=mirror)
    assert_nothing_left(out)


@pytest.mark.parametrize("name", ["../evil.txt", "/tmp/evil.txt", "tasks_1-20_v1-2/../../evil.txt"])
def test_unsafe_member_rejected(tmp_path: Path, name: str) -> None:
    mirror = fake_mirror(tmp_path, {name: b"evil"})
    out = tmp_path / "data" / "babi"
    with pytest.warns(UserWarning), pytest.raises(UnsafeArchiveError, match="unsafe member"):
        prepare_babi(out, mirror=mirror)
    assert_nothing_left(out)
    assert not (tmp_path / "evil.txt").exists()


def test_incomplete_archive_rejected(babi_root: Path, tmp_path: Path) -> None:
    mirror = fake_mirror(tmp_path, {f"tasks_1-20_v1-2/{QA1_TRAIN}": (babi_root / QA1_TRAIN).read_bytes()})
    out = tmp_path / "data" / "babi"
    with pytest.warns(UserWarning), pytest.raises(IncompleteArchiveError, match="lacks"):
        prepare_babi(out, mirror=mirror)
    assert_nothing_left(out)


def test_extra_members_are_ignored(babi_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """en-valid*/ and unknown files are skipped; with a two-file manifest the archive is complete."""
    data = (babi_root / QA1_TRAIN).read_bytes()
    mirror = fake_mirror(
        tmp_path,
        {
            f"tasks_1-20_v1-2/{QA1_TRAIN}": data,
            "tasks_1-20_v1-2/en-valid/qa1_train.txt": b"whatever",
            "tasks_1-20_v1-2/en/qa6_tiny_train.txt": b"whatever",
        },
    )
    full = load_babi_manifest()
    small = {QA1_TRAIN: full[QA1_TRAIN], **{rel: full[rel] for rel in BABI_MIRROR_GAPS}}
    monkeypatch.setattr(fetch, "load_babi_manifest", lambda: small)
    out = tmp_path / "data" / "babi"
    with pytest.warns(UserWarning):
        status = prepare_babi(out, mirror=mirror)
    assert status["present"] == [QA1_TRAIN]
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "STATUS.json",
        QA1_TRAIN,
    ]


def test_existing_unfinished_out_dir_is_refused(tmp_path: Path, mirror_dir: Path) -> None:
    out = tmp_path / "babi"
    out.mkdir()
    (out / "leftover.txt").write_text("half a preparation")
    with pytest.raises(FetchError, match="no STATUS.json"):
        prepare_babi(out, mirror=mirror_dir)


def test_empty_out_dir_counts_as_absent(tmp_path: Path, mirror_dir: Path) -> None:
    """Workflow engines create an output's directory before the job runs."""
    out = tmp_path / "babi"
    out.mkdir()
    status = prepare_babi(out, mirror=mirror_dir)
    assert (out / "STATUS.json").is_file() and len(status["missing"]) == 3


# --- leftovers and advice --------------------------------------------------------------------


def _dead_pid() -> int:
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_killed_preparations_partial_folder_is_removed_by_the_next_run(served, tmp_path: Path) -> None:
    import os
    import socket
    out = tmp_path / "data" / "babi"
    host = socket.gethostname()
    dead = out.parent / f".babi.{host}-{_dead_pid()}.k1l2.partial"        # killed: its process is gone
    legacy = out.parent / ".babi.x7_q2abc.partial"                       # from before owners were named
    live = out.parent / f".babi.{host}-{os.getpid()}.a1b2.partial"       # a preparation still running
    other = out.parent / ".babi.otherhost-1.a1b2.partial"                # another machine's, recent
    for d in (dead, legacy, live, other):
        (d / "en").mkdir(parents=True)
        (d / "en" / "qa1.txt").write_text("x")
    (tmp_path / "empty-mirror").mkdir()
    with pytest.raises(DownloadError):
        prepare_babi(out, mirror=tmp_path / "empty-mirror", url=f"{served[1]}/offline.tar.gz")
    assert [n for n in siblings(out) if n.endswith(".partial")] == sorted(p.name for p in (live, other))


def test_a_bad_mirror_archive_is_not_called_ours_to_delete(babi_root: Path, tmp_path: Path) -> None:
    """The mirror is read-only and not ours: the advice is to replace its file or use another mirror."""
    bad = (babi_root / QA1_TRAIN).read_bytes().replace(b"bathroom", b"bedroom", 1)
    mirror = fake_mirror(tmp_path, {f"tasks_1-20_v1-2/{QA1_TRAIN}": bad})
    with pytest.warns(UserWarning), pytest.raises(ChecksumError) as err:
        prepare_babi(tmp_path / "data" / "babi", mirror=mirror)
    message = str(err.value)
    assert "delete" not in message and "mirror's copy is corrupt or not the official" in message
    assert fetch.BABI_URL in message and "--mirror" in message


def test_no_archive_anywhere_names_the_cli_flag(served, tmp_path: Path, no_env_mirror: None) -> None:
    (tmp_path / "mirror").mkdir()
    with pytest.raises(DownloadError) as err:
        prepare_babi(tmp_path / "data" / "babi", mirror=tmp_path / "mirror", url=f"{served[1]}/x.tgz")
    assert "--mirror" in str(err.value) and "mirror=" not in str(err.value)


def test_a_failed_download_leaves_no_empty_downloads_folder(served, tmp_path: Path, no_env_mirror: None) -> None:
    (tmp_path / "empty-mirror").mkdir()
    with pytest.raises(DownloadError):
        prepare_babi(tmp_path / "data" / "babi", mirror=tmp_path / "empty-mirror", url=f"{served[1]}/offline.tar.gz")
    assert not (tmp_path / "data").exists() or list((tmp_path / "data").iterdir()) == []


# --- prepared files are re-verified before use -----------------------------------------------


QA1_TEST = "en/qa1_single-supporting-fact_test.txt"


@pytest.fixture
def small_babi(babi_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """bAbI task 1 (en) prepared through prepare_babi with a manifest of its two files."""
    mirror = fake_mirror(tmp_path, {f"tasks_1-20_v1-2/{rel}": (babi_root / rel).read_bytes()
                                    for rel in (QA1_TRAIN, QA1_TEST)})
    full = load_babi_manifest()
    monkeypatch.setattr(fetch, "load_babi_manifest", lambda: {rel: full[rel] for rel in (QA1_TRAIN, QA1_TEST)})
    out = tmp_path / "data" / "babi"
    with pytest.warns(UserWarning):
        prepare_babi(out, mirror=mirror)
    return out


@pytest.mark.parametrize("edit", ["answer", "truncate", "delete"])
def test_a_prepared_babi_file_edited_or_deleted_stops_its_use(small_babi: Path, edit: str) -> None:
    from nlpbench.data import babi
    path = small_babi / QA1_TRAIN
    recorded = json.loads((small_babi / "STATUS.json").read_text()).get("files", {}).get(QA1_TRAIN)
    assert recorded == {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
    assert len(babi.load_task(small_babi, "en", 1)[0]) == 1000
    text = path.read_text()
    if edit == "answer":              # same size: only the hash sees it
        path.write_text(text.replace("\thallway\t", "\tkitchen\t", 1))
    elif edit == "truncate":
        path.write_text(text[: len(text) // 2])
    else:
        path.unlink()
    with pytest.raises(fetch.PreparedDataChanged) as err:
        babi.load_task(small_babi, "en", 1)
    message = str(err.value)
    assert message.startswith(f"{path} was {'deleted' if edit == 'delete' else 'changed'}")
    assert "after the data step prepared it" in message
    assert f"delete {small_babi} and run the data step again (nlpbench data babi)" in message


def test_a_prepared_folder_follows_the_umask(babi_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Shared data folders: a group-writable umask gives a group-writable preparation (it was 0755/0644)."""
    import os
    import stat
    mirror = fake_mirror(tmp_path, {f"tasks_1-20_v1-2/{QA1_TRAIN}": (babi_root / QA1_TRAIN).read_bytes()})
    monkeypatch.setattr(fetch, "load_babi_manifest", lambda: {QA1_TRAIN: load_babi_manifest()[QA1_TRAIN]})
    out = tmp_path / "data" / "babi"
    old = os.umask(0o002)
    try:
        with pytest.warns(UserWarning):
            prepare_babi(out, mirror=mirror)
    finally:
        os.umask(old)
    modes = {p.relative_to(out).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in [out, *out.rglob("*")]}
    assert modes == {".": 0o775, "en": 0o775, QA1_TRAIN: 0o664, "STATUS.json": 0o664}
