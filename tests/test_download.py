"""nlpbench.data.download against a local HTTP server that misbehaves on purpose: dropped connections, servers
that ignore Range, 503s, wrong checksums, a .part left by a killed run. Nothing here reaches the internet."""

from __future__ import annotations

import hashlib
import http.server
import io
import re
import socket
import threading
from pathlib import Path

import pytest

from nlpbench.data import download as dl
from nlpbench.data.download import ChecksumError, DownloadError, download, part_path

BODY = bytes(range(256)) * 1200          # 307,200 bytes
BODY_SHA256 = hashlib.sha256(BODY).hexdigest()
CUT = 100_000                            # where a dropped connection stops


class Server:
    """A server of BODY at /file whose answers follow `script`, one step per request (the last step repeats):
    "drop" (200, the first CUT bytes, then the connection closes), "range" (206 from the Range asked for, else 200),
    "full" (200 and the whole body, Range or not), "416" (no byte past the end: the body is complete), "503",
    "404". `ranges` records each request's Range header."""

    def __init__(self, script: list[str]):
        self.script, self.ranges = script, []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.ranges.append(self.headers.get("Range"))
                step = owner.script[min(len(owner.ranges), len(owner.script)) - 1]
                if step in ("503", "404"):
                    self.send_error(int(step))
                elif step == "416":
                    self._send(416, b"", {"Content-Range": f"bytes */{len(BODY)}"})
                elif step == "drop":
                    self._send(200, BODY, body=BODY[:CUT])
                elif step == "range" and self.headers.get("Range"):
                    start = int(re.fullmatch(r"bytes=(\d+)-", self.headers["Range"]).group(1))
                    self._send(206, BODY[start:], {"Content-Range": f"bytes {start}-{len(BODY) - 1}/{len(BODY)}"})
                else:
                    self._send(200, BODY)

            def _send(self, code: int, content: bytes, headers: dict | None = None, body: bytes | None = None):
                self.send_response(code)
                self.send_header("Content-Length", str(len(content)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(content if body is None else body)
                self.close_connection = True

            def log_message(self, *args) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/file"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve():
    servers = []

    def start(*script: str) -> Server:
        servers.append(Server(list(script)))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_dropped_connection_is_resumed_with_a_range_request(serve, tmp_path: Path) -> None:
    server = serve("drop", "range")
    dest = tmp_path / "out" / "file.bin"
    assert download(server.url, dest, sha256=BODY_SHA256, backoff=0) == dest
    assert dest.read_bytes() == BODY
    assert server.ranges == [None, f"bytes={CUT}-"]
    assert files_in(dest.parent) == ["file.bin"]                 # no .part left


def test_a_server_that_ignores_range_is_read_again_from_the_start(serve, tmp_path: Path) -> None:
    server = serve("drop", "full")
    dest = tmp_path / "file.bin"
    download(server.url, dest, sha256=BODY_SHA256, backoff=0)
    assert dest.read_bytes() == BODY                             # not the first CUT bytes twice
    assert server.ranges == [None, f"bytes={CUT}-"]


def test_503_answers_are_retried(serve, tmp_path: Path) -> None:
    server = serve("503", "503", "full")
    dest = tmp_path / "file.bin"
    download(server.url, dest, sha256=BODY_SHA256, backoff=0.001)
    assert dest.read_bytes() == BODY and len(server.ranges) == 3


def test_503_answers_past_the_retries_fail_naming_the_url_and_file(serve, tmp_path: Path) -> None:
    server = serve("503")
    dest = tmp_path / "out" / "file.bin"
    with pytest.raises(DownloadError) as err:
        download(server.url, dest, retries=2, backoff=0.001)
    assert server.url in str(err.value) and str(dest) in str(err.value) and "HTTP 503" in str(err.value)
    assert len(server.ranges) == 3
    assert not (tmp_path / "out").exists()                       # no empty folder, no empty .part


def test_a_404_is_not_retried(serve, tmp_path: Path) -> None:
    server = serve("404")
    with pytest.raises(DownloadError, match="HTTP 404"):
        download(server.url, tmp_path / "file.bin", backoff=0.001)
    assert server.ranges == [None] and files_in(tmp_path) == []


def test_a_refused_connection_is_retried_then_named(tmp_path: Path) -> None:
    with socket.socket() as s:                # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/file"
    with pytest.raises(DownloadError, match=re.escape(url)):
        download(url, tmp_path / "file.bin", retries=1, backoff=0)
    assert files_in(tmp_path) == []


def test_a_wrong_checksum_names_url_file_and_digests_and_leaves_nothing(serve, tmp_path: Path) -> None:
    server = serve("full")
    dest = tmp_path / "file.bin"
    with pytest.raises(ChecksumError) as err:
        download(server.url, dest, sha256="0" * 64, backoff=0)
    message = str(err.value)
    assert server.url in message and str(dest) in message and "0" * 64 in message and BODY_SHA256 in message
    assert files_in(tmp_path) == []                              # neither the file nor its .part


def test_a_refusing_check_deletes_the_part_and_names_the_final_file(serve, tmp_path: Path) -> None:
    server = serve("full")
    dest = tmp_path / "file.bin"

    def refuse(part: Path) -> None:
        assert part == part_path(dest) and part.read_bytes() == BODY   # called on the complete download
        raise ChecksumError(f"{part}: git blob SHA-1 abc is not the recorded def")

    with pytest.raises(ChecksumError) as err:
        download(server.url, dest, verify=refuse, backoff=0)
    assert str(err.value).startswith(f"{dest}: git blob SHA-1") and server.url in str(err.value)
    assert files_in(tmp_path) == []


def test_the_part_of_a_killed_run_is_resumed(serve, tmp_path: Path) -> None:
    server = serve("range")
    dest = tmp_path / "file.bin"
    part_path(dest).write_bytes(BODY[:CUT])
    download(server.url, dest, sha256=BODY_SHA256, backoff=0)
    assert dest.read_bytes() == BODY and server.ranges == [f"bytes={CUT}-"]
    assert files_in(tmp_path) == ["file.bin"]


def test_a_part_already_complete_is_not_downloaded_again(serve, tmp_path: Path) -> None:
    """Killed between the last byte and the rename: the server answers 416 to a Range past the end."""
    server = serve("416")
    dest = tmp_path / "file.bin"
    part_path(dest).write_bytes(BODY)
    download(server.url, dest, sha256=BODY_SHA256, backoff=0)
    assert dest.read_bytes() == BODY and server.ranges == [f"bytes={len(BODY)}-"]
    assert files_in(tmp_path) == ["file.bin"]


def test_a_connection_that_keeps_dropping_without_progress_fails_and_keeps_the_part(serve, tmp_path: Path) -> None:
    server = serve("drop")                       # ignores Range: never gets past CUT
    dest = tmp_path / "file.bin"
    with pytest.raises(DownloadError) as err:
        download(server.url, dest, retries=2, backoff=0)
    assert server.url in str(err.value) and str(part_path(dest)) in str(err.value)
    assert len(server.ranges) == 4 and part_path(dest).stat().st_size == CUT and not dest.exists()


def test_only_http_urls_are_downloaded(tmp_path: Path) -> None:
    source = tmp_path / "source.txt"
    source.write_text("x")
    with pytest.raises(DownloadError, match=r"only http and https URLs .*NLPBENCH_MIRROR"):
        download(source.as_uri(), tmp_path / "out" / "x")


def test_a_second_process_waits_for_the_first_and_takes_its_file(serve, tmp_path: Path, monkeypatch) -> None:
    """While one process holds the .part's lock, another waits; once the first has renamed it into place, the
    second finds the file and downloads nothing."""
    import fcntl
    server = serve("full")
    dest = tmp_path / "file.bin"
    part = part_path(dest)
    part.write_bytes(BODY)
    holder = open(part, "rb")
    fcntl.flock(holder, fcntl.LOCK_EX)
    waiting, real_flock = threading.Event(), fcntl.flock

    def flock(fd, operation):
        if operation == fcntl.LOCK_EX:           # the blocking wait, after LOCK_NB failed
            waiting.set()
        return real_flock(fd, operation)

    monkeypatch.setattr(dl.fcntl, "flock", flock)
    result = {}
    second = threading.Thread(target=lambda: result.update(path=download(server.url, dest, backoff=0)))
    second.start()
    assert waiting.wait(timeout=60)
    part.rename(dest)                            # the first finishes: renamed into place, then unlocked
    holder.close()
    second.join()
    assert result["path"] == dest and dest.read_bytes() == BODY and server.ranges == []
    assert files_in(tmp_path) == ["file.bin"]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("quiet", [False, True])
def test_a_progress_bar_on_a_terminal_unless_quiet(serve, tmp_path: Path, monkeypatch, quiet: bool) -> None:
    server = serve("full")
    err = Terminal()
    monkeypatch.setattr(dl.sys, "stderr", err)
    download(server.url, tmp_path / "file.bin", quiet=quiet, backoff=0)
    assert ("file.bin" in err.getvalue() and "300k" in err.getvalue()) != quiet


def test_no_progress_bar_off_a_terminal(serve, tmp_path: Path, monkeypatch) -> None:
    server = serve("full")
    err = io.StringIO()                          # isatty() is False: a log file, a pipe
    monkeypatch.setattr(dl.sys, "stderr", err)
    download(server.url, tmp_path / "file.bin", backoff=0)
    assert err.getvalue() == ""
