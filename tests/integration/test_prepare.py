"""data/prepare.py: round trips, meta.json, the val split, caching, atomicity, bounded memory."""

import hashlib
import json
import random
import re
import subprocess
import sys
import threading
from functools import partial
from pathlib import Path

import numpy as np
import pytest

import data.prepare as prepare_module
import data.token_files as token_files
from data.parallel import map_in_order
from data.prepare import prepare, token_dtype
from tests.helpers import ROOT

WORDS = ["the", "owl", "hooted", "naïve", "café", "über", "—", "it", "was", "hungry", "42", "✓"]


def corpus(n_lines: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    return "".join(
        " ".join(rng.choices(WORDS, k=rng.randint(1, 12))) + "\n" for _ in range(n_lines)
    )


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def tokens(prepared, split: str) -> list[int]:
    path = prepared.train_path if split == "train" else prepared.val_path
    return np.fromfile(path, dtype=prepared.meta["dtype"]).tolist()


def split_texts(prepared) -> tuple[str, str]:
    return (
        prepared.tokenizer.decode(tokens(prepared, "train")),
        prepared.tokenizer.decode(tokens(prepared, "val")),
    )


@pytest.mark.parametrize("kind, vocab_size", [("char", None), ("bpe", 300)])
def test_round_trip_and_meta(tmp_path, kind, vocab_size):
    text = corpus(400)
    source = write(tmp_path / "corpus.txt", text)
    prepared = prepare(source, kind, vocab_size, val_fraction=0.2, cache_dir=tmp_path / "cache")
    train, val = split_texts(prepared)
    assert train + val == text and train and val

    meta = json.loads((prepared.dir / "meta.json").read_text())
    assert meta == prepared.meta
    assert meta["source"] == source
    assert meta["source_sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert meta["tokenizer_kind"] == kind and prepared.tokenizer.kind == kind
    assert (prepared.dir / meta["tokenizer_file"]).is_file()
    assert meta["vocab_size"] == prepared.tokenizer.vocab_size
    assert meta["dtype"] == "uint16" and meta["val_fraction"] == 0.2
    assert meta["train_tokens"] == len(tokens(prepared, "train"))
    assert meta["val_tokens"] == len(tokens(prepared, "val"))
    assert prepared.dir.parent == tmp_path / "cache" / "prepared"
    assert sorted(p.name for p in prepared.dir.iterdir()) == sorted(
        ["meta.json", "train.bin", "val.bin", meta["tokenizer_file"]]
    )


def test_gpt2_round_trip(tmp_path):
    from data.tokenizer import gpt2_tokenizer

    try:
        gpt2_tokenizer()
    except ValueError:
        pytest.skip("tiktoken's gpt2 files are not cached and there is no network")
    text = corpus(100)
    prepared = prepare(write(tmp_path / "t.txt", text), "gpt2", cache_dir=tmp_path / "cache")
    assert "".join(split_texts(prepared)) == text
    assert prepared.meta["vocab_size"] == 50257 and prepared.meta["dtype"] == "uint16"


def test_dtype_rule():
    assert token_dtype(65) == np.uint16
    assert token_dtype(50257) == np.uint16
    assert token_dtype(65536) == np.uint16  # ids 0..65535 fit
    assert token_dtype(65537) == np.uint32
    assert token_dtype(100277) == np.uint32


def test_val_split_starts_after_the_first_newline_past_the_cut(tmp_path):
    text = "aaaa\nbbbbbbbbbb\ncc\ndd\n"  # 22 chars; 0.5 cuts at 11, inside the b line
    prepared = prepare(
        write(tmp_path / "t.txt", text), "char", val_fraction=0.5, cache_dir=tmp_path / "cache"
    )
    assert split_texts(prepared) == ("aaaa\nbbbbbbbbbb\n", "cc\ndd\n")
    assert prepared.meta["split_char"] == 16


@pytest.mark.parametrize(
    "text, expected",
    [
        # The only newline past the cut ends the text: val would be empty, so split before the cut.
        ("aaaa\nbbbbbbbbbb\n", ("aaaa\n", "bbbbbbbbbb\n")),
        # No newline at all: cut at the character at the cut point.
        ("abcdefghij", ("abcdefgh", "ij")),
        # Two characters are enough for both splits.
        ("ab", ("a", "b")),
    ],
)
def test_val_split_without_a_usable_newline(tmp_path, text, expected):
    prepared = prepare(
        write(tmp_path / "t.txt", text), "char", val_fraction=0.2, cache_dir=tmp_path / "cache"
    )
    assert split_texts(prepared) == expected


def test_one_character_cannot_be_split(tmp_path):
    with pytest.raises(ValueError, match="longer corpus"):
        prepare(write(tmp_path / "t.txt", "a"), "char", cache_dir=tmp_path / "cache")


def folder_corpus(tmp_path: Path) -> Path:
    """Many files with long lines, some without newlines or spaces, so small chunks are cut
    every way and pieces cross files and the val split."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(30):
        (folder / f"{i:02d}.txt").write_text(
            corpus(5, seed=i) + "x" * 130 + " y" * 40, encoding="utf-8"
        )
    return folder


@pytest.mark.parametrize("kind, vocab_size", [("char", None), ("bpe", 300)])
def test_chunked_encoding_of_a_folder_round_trips(tmp_path, monkeypatch, kind, vocab_size):
    # Tiny chunks and many files: pieces cross the split, and long lines without newlines or
    # spaces must be cut anyway.
    monkeypatch.setattr(prepare_module, "ENCODE_CHUNK_CHARS", 50)
    folder = folder_corpus(tmp_path)
    text = prepare_module.open_source(str(folder)).read_text()
    prepared = prepare(str(folder), kind, vocab_size, cache_dir=tmp_path / "cache")
    train, val = split_texts(prepared)
    assert train + val == text
    if kind == "char":  # char ids do not depend on where the chunks were cut
        assert tokens(prepared, "train") + tokens(prepared, "val") == prepared.tokenizer.encode(
            text
        )


def test_cache_is_reused_and_changes_prepare_anew(tmp_path, monkeypatch):
    calls = []
    real_encode = prepare_module.encode_splits
    monkeypatch.setattr(
        prepare_module, "encode_splits", lambda *args: calls.append(1) or real_encode(*args)
    )
    path, cache = tmp_path / "t.txt", tmp_path / "cache"
    write(path, corpus(200))
    first = prepare(str(path), "char", cache_dir=cache)
    stamps = {p.name: p.stat().st_mtime_ns for p in first.dir.iterdir()}
    again = prepare(str(path), "char", cache_dir=cache)
    assert again.dir == first.dir and again.meta == first.meta and len(calls) == 1
    assert {p.name: p.stat().st_mtime_ns for p in again.dir.iterdir()} == stamps

    # Same content elsewhere: same folder. Other content, tokenizer or val_fraction: a new one.
    copy = tmp_path / "copy.txt"
    copy.write_bytes(path.read_bytes())
    assert prepare(str(copy), "char", cache_dir=cache).dir == first.dir and len(calls) == 1
    write(path, corpus(200) + "one more line\n")
    dirs = {
        first.dir,
        prepare(str(path), "char", cache_dir=cache).dir,
        prepare(str(path), "bpe", 300, cache_dir=cache).dir,
        prepare(str(path), "bpe", 280, cache_dir=cache).dir,
        prepare(str(path), "char", val_fraction=0.3, cache_dir=cache).dir,
    }
    assert len(dirs) == 5 and len(calls) == 5


@pytest.mark.parametrize("block_size, split", [(1000, "val"), (100_000, "train")])
def test_too_short_split_names_it(tmp_path, block_size, split):
    source = write(tmp_path / "t.txt", corpus(200))  # ~8k chars, val ~800
    with pytest.raises(ValueError) as excinfo:
        prepare(source, "char", block_size=block_size, cache_dir=tmp_path / "cache")
    message = str(excinfo.value)
    assert "\n" not in message and f"the {split} split" in message
    assert (
        re.search(rf"block_size.*\b{block_size + 1}\b", message) and "more text" in message
    )  # the need, a way out
    assert prepare(source, "char", block_size=64, cache_dir=tmp_path / "cache").meta


@pytest.mark.parametrize("error", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_failing_prepare_leaves_nothing_and_damages_nothing(tmp_path, monkeypatch, error):
    source, cache = write(tmp_path / "t.txt", corpus(200)), tmp_path / "cache"
    done = prepare(source, "char", cache_dir=cache)
    before = {p.name: p.read_bytes() for p in done.dir.iterdir()}

    def encode_then_fail(*args):
        prepare_module_encode(*args)  # the .bin files are written in full, then the crash
        raise error

    prepare_module_encode = prepare_module.encode_splits
    monkeypatch.setattr(prepare_module, "encode_splits", encode_then_fail)
    with pytest.raises(type(error)):
        prepare(source, "bpe", 300, cache_dir=cache)
    assert list((cache / "prepared").iterdir()) == [done.dir]
    assert {p.name: p.read_bytes() for p in done.dir.iterdir()} == before

    # A temp folder left by a killed run is not mistaken for a finished one.
    monkeypatch.undo()
    stale = cache / "prepared" / ".tmp-stale"
    stale.mkdir()
    (stale / "train.bin").write_bytes(b"\0\0")
    train, val = split_texts(prepare(source, "bpe", 300, cache_dir=cache))
    assert train + val == corpus(200)


MEMORY_SCRIPT = """
import json, sys
from data.prepare import prepare

def peak_rss_kb():
    # VmHWM, not ru_maxrss: ru_maxrss survives exec, so it would report pytest's own peak.
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))

before = peak_rss_kb()
prepared = prepare(sys.argv[1], "char", cache_dir=sys.argv[2])
print(json.dumps({"growth_kb": peak_rss_kb() - before,
                  "tokens": prepared.meta["train_tokens"] + prepared.meta["val_tokens"]}))
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_memory_stays_bounded(tmp_path):
    # 20 MB of text: reading it whole, or holding all its ids in a list, would cost 20-180 MB.
    block = corpus(20_000).encode()
    path = tmp_path / "big.txt"
    with open(path, "wb") as f:
        while f.tell() < 20_000_000:
            f.write(block)
    size = path.stat().st_size
    result = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT, str(path), str(tmp_path / "c")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(result.stdout)
    assert report["tokens"] == len(path.read_text(encoding="utf-8"))
    assert 0 < report["growth_kb"] * 1024 < size / 4, report


# Parallel encoding: bpe and gpt2 encode on threads (tiktoken releases the GIL); the files must
# not depend on how many.


@pytest.mark.parametrize("kind, vocab_size", [("char", None), ("bpe", 300)])
def test_encoding_writes_the_same_bytes_on_any_number_of_workers(tmp_path, kind, vocab_size):
    # Through encode_splits, the pass prepare runs, so char too goes through the threads here.
    src = prepare_module.open_source(str(folder_corpus(tmp_path)))
    _, n_chars = prepare_module.content_fingerprint(src)
    split, training_text = prepare_module._scan(src, n_chars, 0.1, kind)
    tokenizer = prepare_module.train_tokenizer(kind, training_text, vocab_size)
    dtype = token_dtype(tokenizer.vocab_size)
    files, counts = {}, {}
    for workers in (1, 2, 3):
        out = tmp_path / f"workers{workers}"
        out.mkdir()
        # 64-character chunks: about 200 pieces, dozens of windows of 2 * workers.
        counts[workers] = prepare_module.encode_splits(
            src, tokenizer, split, n_chars, dtype, out, workers, 64
        )
        files[workers] = [(out / name).read_bytes() for name in ("train.bin", "val.bin")]
    assert files[1] == files[2] == files[3]
    assert counts[1] == counts[2] == counts[3]
    ids = np.frombuffer(files[1][0] + files[1][1], dtype=dtype).tolist()
    assert tokenizer.decode(ids) == src.read_text()


def test_prepare_writes_the_same_folder_on_any_number_of_workers(tmp_path):
    text = corpus(30_000)  # ~840K characters: a dozen chunks of ENCODE_CHUNK_CHARS
    assert len(text) > 10 * prepare_module.ENCODE_CHUNK_CHARS
    source = write(tmp_path / "t.txt", text)
    folders = [
        prepare(source, "bpe", 300, cache_dir=tmp_path / f"cache{w}", workers=w).dir
        for w in (1, 2, 3)
    ]
    assert len({folder.name for folder in folders}) == 1  # the key ignores the worker count
    contents = [{p.name: p.read_bytes() for p in folder.iterdir()} for folder in folders]
    assert contents[0] == contents[1] == contents[2]
    assert sorted(contents[0]) == ["meta.json", "tokenizer.bpe", "train.bin", "val.bin"]


@pytest.mark.parametrize("workers", [0, -2, 1.5, True, "2"])
def test_bad_worker_count_is_refused(tmp_path, workers):
    with pytest.raises(ValueError, match="workers.*positive integer"):
        prepare(
            write(tmp_path / "t.txt", corpus(10)),
            "bpe",
            300,
            cache_dir=tmp_path / "c",
            workers=workers,
        )


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_pieces_in_flight_never_exceed_the_window(tmp_path, workers):
    # The real pieces and the real piece encoder; the source only counts what is taken from it.
    src = prepare_module.open_source(str(folder_corpus(tmp_path)))
    tokenizer = prepare_module.train_tokenizer("bpe", src.read_text(), 300)
    taken, in_flight = [], []

    def counted_pieces():
        for piece in token_files.chunks(src, 1000, 64):
            taken.append(piece)
            yield piece

    encode = partial(token_files.encode_piece, tokenizer, np.dtype(np.uint16))
    results = []
    for result in map_in_order(encode, counted_pieces(), workers):
        in_flight.append(len(taken) - len(results))  # taken, and not handed over before this one
        results.append(result)
    window = 2 * workers if workers > 1 else 1  # one worker encodes each piece as it is taken
    assert len(results) == len(taken) > 10 * window
    assert max(in_flight) == window
    # In order: the same ids as encoding the pieces one after another.
    assert [r[1].tolist() for r in results] == [tokenizer.encode(text) for _, text in taken]


def test_a_failing_piece_stops_the_pool(tmp_path):
    taken = []

    def pieces():
        for i in range(100):
            taken.append(i)
            yield i

    def fail_on_five(i):
        if i == 5:
            raise RuntimeError("piece 5 is bad")
        return i

    with pytest.raises(RuntimeError, match="piece 5"):
        for _ in map_in_order(fail_on_five, pieces(), 2):
            pass
    assert len(taken) == 5 + 4  # pieces 0-4 handed over, 5-8 in flight (2 workers: 4), no more
    assert not [t for t in threading.enumerate() if t.name.startswith("prepare")]
