"""data/sources.py: file and folder sources, bad input, and downloads from a real local server."""

import hashlib
import os
import random
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

import data.sources as sources
from data.sources import download, open_source, pronouns_path
from tests.helpers import one_line

# --- files and folders --------------------------------------------------------------------------


def test_file_source_reads_the_text(tmp_path):
    text = "First Citizen:\nBefore we proceed any further, hear me speak.\nnaïve café ✓\n"
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    source = open_source(str(path), cache_dir=tmp_path / "cache")
    assert source.read_text() == text
    assert source.n_bytes == len(text.encode("utf-8"))
    # Small chunks split multi-byte characters; the incremental decoder must stitch them.
    assert "".join(source.iter_text(chunk_bytes=3)) == text


def test_folder_source_joins_txt_files_sorted_by_name(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "b.txt").write_text("second doc\n")
    (folder / "a.txt").write_text("first doc")
    (folder / "c.md").write_text("not a .txt file")
    (folder / "sub.txt").mkdir()  # a folder named like a text file is not read
    source = open_source(str(folder), cache_dir=tmp_path / "cache")
    assert [p.name for p in source.files] == ["a.txt", "b.txt"]
    assert source.read_text() == "first doc\nsecond doc\n"
    assert source.n_bytes == len(b"first doc\nsecond doc\n")
    assert b"".join(source.iter_bytes(chunk_bytes=4)) == b"first doc\nsecond doc\n"


def test_missing_path_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError) as excinfo:
        open_source(str(tmp_path / "nope.txt"), cache_dir=tmp_path)
    assert "nope.txt" in one_line(excinfo)


@pytest.mark.parametrize("sizes", [[0], [0, 0]])
def test_empty_corpus_is_rejected(tmp_path, sizes):
    folder = tmp_path / "docs"
    folder.mkdir()
    for i, size in enumerate(sizes):
        (folder / f"{i}.txt").write_text("x" * size)
    target = folder / "0.txt" if len(sizes) == 1 else folder
    with pytest.raises(ValueError) as excinfo:
        open_source(str(target), cache_dir=tmp_path)
    assert "empty" in one_line(excinfo)


def test_folder_without_txt_files_is_rejected(tmp_path):
    (tmp_path / "notes.md").write_text("hello")
    with pytest.raises(ValueError) as excinfo:
        open_source(str(tmp_path), cache_dir=tmp_path / "cache")
    assert ".txt" in one_line(excinfo)


def test_unknown_corpus_name_lists_the_names(tmp_path):
    with pytest.raises(ValueError) as excinfo:
        open_source("tinyshakespear", cache_dir=tmp_path)
    message = one_line(excinfo)
    assert "tinyshakespeare" in message and "pronouns" in message


@pytest.mark.parametrize(
    "data, offset",
    [
        (b"hello \xff world", 6),  # a byte that never starts a character
        ("caf\u00e9 ".encode() + b"\xc3(", 6),  # a lead byte followed by a non-continuation byte
        (b"ab" + "\u20ac".encode()[:2], 2),  # a character cut off by the end of the file
    ],
)
@pytest.mark.parametrize("chunk_bytes", [1 << 20, 1, 3])
def test_invalid_utf8_names_file_and_offset(tmp_path, data, offset, chunk_bytes):
    path = tmp_path / "latin1.txt"
    path.write_bytes(data)
    source = open_source(str(path), cache_dir=tmp_path)
    with pytest.raises(ValueError) as excinfo:
        list(source.iter_text(chunk_bytes=chunk_bytes))
    message = one_line(excinfo)
    assert str(path) in message and f"offset {offset})" in message


# --- the pronouns corpus ------------------------------------------------------------------------


def test_pronouns_corpus_is_materialised_once(tmp_path):
    from data.pronouns import corpus_text

    source = open_source("pronouns", cache_dir=tmp_path)
    (path,) = source.files
    assert path.parent == tmp_path / "corpora" and path.name.startswith("pronouns-seed0-")
    assert path.read_text(encoding="utf-8") == corpus_text(seed=0)
    stamp = path.stat().st_mtime_ns
    assert pronouns_path(tmp_path) == path
    assert path.stat().st_mtime_ns == stamp
    # Beside it only the text's SHA-256, which every use checks.
    names = sorted(p.name for p in (tmp_path / "corpora").iterdir())
    assert names == [path.name, path.name + ".sha256"]


# --- downloads ----------------------------------------------------------------------------------


@pytest.fixture
def server():
    """A real HTTP server on 127.0.0.1; routes maps a path to (body, announced Content-Length)."""
    routes, hits = {}, Counter()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            hits[self.path] += 1
            if self.path not in routes:
                self.send_error(404)
                return
            body, announced = routes[self.path]
            self.send_response(200)
            self.send_header("Content-Length", str(announced))
            self.end_headers()
            # HTTP/1.0: the connection closes when this returns, even if announced > len(body).
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield SimpleNamespace(
        url=f"http://127.0.0.1:{httpd.server_address[1]}", routes=routes, hits=hits
    )
    httpd.shutdown()
    httpd.server_close()
    thread.join()


BODY = random.Random(0).randbytes(300_000)
BODY_SHA256 = hashlib.sha256(BODY).hexdigest()


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_download_saves_a_verified_file(tmp_path, server):
    server.routes["/input.txt"] = (BODY, len(BODY))
    dest = tmp_path / "corpora" / "input.txt"
    assert download(server.url + "/input.txt", dest, BODY_SHA256) == dest
    assert dest.read_bytes() == BODY
    assert leftovers(dest.parent) == []


def test_checksum_mismatch_leaves_no_file(tmp_path, server):
    server.routes["/input.txt"] = (BODY, len(BODY))
    dest = tmp_path / "input.txt"
    with pytest.raises(ValueError) as excinfo:
        download(server.url + "/input.txt", dest, "0" * 64)
    message = one_line(excinfo)
    assert "SHA-256" in message and str(dest) in message
    assert not dest.exists() and leftovers(tmp_path) == []


def test_cut_off_transfer_is_never_taken_for_complete(tmp_path, server):
    server.routes["/cut"] = (BODY[:100_000], len(BODY))
    dest = tmp_path / "input.txt"
    with pytest.raises(ValueError) as excinfo:
        download(server.url + "/cut", dest, BODY_SHA256)
    assert str(dest) in one_line(excinfo)
    assert not dest.exists() and leftovers(tmp_path) == []

    # A good file already in place survives a failed re-download untouched.
    dest.write_bytes(BODY)
    for path in ("/cut", "/missing"):
        with pytest.raises(ValueError):
            download(server.url + path, dest, BODY_SHA256)
        assert dest.read_bytes() == BODY and leftovers(tmp_path) == []


def serve_tinyshakespeare(monkeypatch, url, sha256):
    """The named corpus `tinyshakespeare`, as users ask for it, fetched from `url` instead."""
    monkeypatch.setattr(sources, "TINYSHAKESPEARE_URL", url)
    monkeypatch.setattr(sources, "TINYSHAKESPEARE_SHA256", sha256)


def test_offline_message_says_where_to_put_the_file(tmp_path, monkeypatch):
    serve_tinyshakespeare(monkeypatch, "http://127.0.0.1:9/input.txt", BODY_SHA256)  # nobody there
    with pytest.raises(ValueError) as excinfo:
        open_source("tinyshakespeare", tmp_path)
    message = one_line(excinfo)
    dest = tmp_path / "corpora" / "tinyshakespeare.txt"
    assert str(dest) in message and "SHA-256" in message
    assert not dest.exists() and leftovers(dest.parent) == []


def test_tinyshakespeare_is_downloaded_once_then_checked(tmp_path, server, monkeypatch):
    server.routes["/input.txt"] = (BODY, len(BODY))
    serve_tinyshakespeare(monkeypatch, server.url + "/input.txt", BODY_SHA256)
    source = open_source("tinyshakespeare", tmp_path)
    path = tmp_path / "corpora" / "tinyshakespeare.txt"
    assert source.files == (path,) and path.read_bytes() == BODY
    assert open_source("tinyshakespeare", tmp_path).files == (path,)
    assert server.hits["/input.txt"] == 1
    # A wrong file put there by hand is reported, not used.
    path.write_bytes(b"not shakespeare")
    with pytest.raises(ValueError) as excinfo:
        open_source("tinyshakespeare", tmp_path)
    assert "delete it" in one_line(excinfo)


@pytest.mark.skipif(not os.path.isfile("/proc/self/environ"), reason="needs Linux's /proc")
def test_a_proc_file_is_not_called_empty():
    # Its size says 0, but reading it gives bytes: made as it is read, and differently each time.
    with pytest.raises(ValueError) as e:
        open_source("/proc/self/environ")
    one_line(e, "/proc/self/environ", "0 bytes but has text", "copy it into a file")
