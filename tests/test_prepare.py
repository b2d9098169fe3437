"""data/prepare.py: round trips, meta.json, the val split, caching, atomicity, bounded memory."""

import hashlib
import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import data.prepare as prepare_module
from data.prepare import prepare, token_dtype

ROOT = Path(__file__).resolve().parent.parent
WORDS = ["the", "owl", "hooted", "naïve", "café", "über", "—", "it", "was", "hungry", "42",
         "✓"]


def corpus(n_lines: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    return "".join(" ".join(rng.choices(WORDS, k=rng.randint(1, 12))) + "\n"
                   for _ in range(n_lines))


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def tokens(prepared, split: str) -> list[int]:
    path = prepared.train_path if split == "train" else prepared.val_path
    return np.fromfile(path, dtype=prepared.meta["dtype"]).tolist()


def split_texts(prepared) -> tuple[str, str]:
    return (prepared.tokenizer.decode(tokens(prepared, "train")),
            prepared.tokenizer.decode(tokens(prepared, "val")))


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
        ["meta.json", "train.bin", "val.bin", meta["tokenizer_file"]])


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
    prepared = prepare(write(tmp_path / "t.txt", text), "char", val_fraction=0.5,
                       cache_dir=tmp_path / "cache")
    assert split_texts(prepared) == ("aaaa\nbbbbbbbbbb\n", "cc\ndd\n")
    assert prepared.meta["split_char"] == 16


@pytest.mark.parametrize("text, expected", [
    # The only newline past the cut ends the text: val would be empty, so split before the cut.
    ("aaaa\nbbbbbbbbbb\n", ("aaaa\n", "bbbbbbbbbb\n")),
    # No newline at all: cut at the character at the cut point.
    ("abcdefghij", ("abcdefgh", "ij")),
    # Two characters are enough for both splits.
    ("ab", ("a", "b")),
])
def test_val_split_without_a_usable_newline(tmp_path, text, expected):
    prepared = prepare(write(tmp_path / "t.txt", text), "char", val_fraction=0.2,
                       cache_dir=tmp_path / "cache")
    assert split_texts(prepared) == expected


def test_one_character_cannot_be_split(tmp_path):
    with pytest.raises(ValueError, match="longer corpus"):
        prepare(write(tmp_path / "t.txt", "a"), "char", cache_dir=tmp_path / "cache")


@pytest.mark.parametrize("kind, vocab_size", [("char", None), ("bpe", 300)])
def test_chunked_encoding_of_a_folder_round_trips(tmp_path, monkeypatch, kind, vocab_size):
    # Tiny chunks and many files: pieces cross the split, and long lines without newlines or
    # spaces must be cut anyway.
    monkeypatch.setattr(prepare_module, "ENCODE_CHUNK_CHARS", 50)
    folder = tmp_path / "docs"
    folder.mkdir()
    docs = [corpus(5, seed=i) + "x" * 130 + " y" * 40 for i in range(30)]
    for i, doc in enumerate(docs):
        (folder / f"{i:02d}.txt").write_text(doc, encoding="utf-8")
    prepared = prepare(str(folder), kind, vocab_size, cache_dir=tmp_path / "cache")
    train, val = split_texts(prepared)
    assert train + val == "\n".join(docs)
    if kind == "char":  # char ids do not depend on where the chunks were cut
        assert tokens(prepared, "train") + tokens(prepared, "val") == \
            prepared.tokenizer.encode("\n".join(docs))


def test_cache_is_reused_and_changes_prepare_anew(tmp_path, monkeypatch):
    calls = []
    real_encode = prepare_module._encode
    monkeypatch.setattr(prepare_module, "_encode",
                        lambda *args: calls.append(1) or real_encode(*args))
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
    dirs = {first.dir,
            prepare(str(path), "char", cache_dir=cache).dir,
            prepare(str(path), "bpe", 300, cache_dir=cache).dir,
            prepare(str(path), "bpe", 280, cache_dir=cache).dir,
            prepare(str(path), "char", val_fraction=0.3, cache_dir=cache).dir}
    assert len(dirs) == 5 and len(calls) == 5


@pytest.mark.parametrize("block_size, split", [(1000, "val"), (100_000, "train")])
def test_too_short_split_names_it(tmp_path, block_size, split):
    source = write(tmp_path / "t.txt", corpus(200))  # ~8k chars, val ~800
    with pytest.raises(ValueError) as excinfo:
        prepare(source, "char", block_size=block_size, cache_dir=tmp_path / "cache")
    message = str(excinfo.value)
    assert "\n" not in message and f"the {split} split" in message
    assert f"block_size + 1 = {block_size + 1}" in message and "more text" in message
    assert prepare(source, "char", block_size=64, cache_dir=tmp_path / "cache").meta


@pytest.mark.parametrize("error", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_failing_prepare_leaves_nothing_and_damages_nothing(tmp_path, monkeypatch, error):
    source, cache = write(tmp_path / "t.txt", corpus(200)), tmp_path / "cache"
    done = prepare(source, "char", cache_dir=cache)
    before = {p.name: p.read_bytes() for p in done.dir.iterdir()}

    def encode_then_fail(*args):
        prepare_module_encode(*args)  # the .bin files are written in full, then the crash
        raise error

    prepare_module_encode = prepare_module._encode
    monkeypatch.setattr(prepare_module, "_encode", encode_then_fail)
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


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_memory_stays_bounded(tmp_path):
    # 20 MB of text: reading it whole, or holding all its ids in a list, would cost 20-180 MB.
    block = corpus(20_000).encode()
    path = tmp_path / "big.txt"
    with open(path, "wb") as f:
        while f.tell() < 20_000_000:
            f.write(block)
    size = path.stat().st_size
    result = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(path), str(tmp_path / "c")],
                            cwd=ROOT, capture_output=True, text=True, check=True)
    report = json.loads(result.stdout)
    assert report["tokens"] == len(path.read_text(encoding="utf-8"))
    assert 0 < report["growth_kb"] * 1024 < size / 4, report
