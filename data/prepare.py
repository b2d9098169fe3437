"""Text to token files: a source becomes train.bin / val.bin, a tokenizer file and meta.json.

Everything for one (source content, tokenizer kind, vocab size, val_fraction) lives in one folder,
`<cache_dir>/prepared/<kind>-<vocab size or auto>-<key>/`, where key hashes those inputs with the
SHA-256 of the text, so an edited corpus or another tokenizer prepares anew and the same inputs
reuse the folder. The folder is built under a temporary name and renamed when complete, so a
folder with the final name is always whole; a failed prepare leaves nothing behind, and the temp
folder of a killed one is removed by the next prepare.

Memory stays bounded whatever the corpus size; the text is streamed three times:
  1. hash it (SHA-256) and count its characters, to find the cache folder;
  2. on a cache miss: check it is UTF-8, find the val split, and gather what the tokenizer trains
     on: the character set (char), or the first BPE_SAMPLE_CHARS characters (bpe);
  3. encode it in chunks of about ENCODE_CHUNK_CHARS cut at line ends, appending to the .bin files
     (data/token_files.py).
     bpe and gpt2 encode on `workers` threads (tiktoken encodes outside the GIL), a few chunks
     per thread in flight, written in order: the files are the same for any worker count.

The val split is the last val_fraction of the characters, moved forward to just after the first
newline at or past the cut point, so no line is split between train and val. If no newline after
the cut leaves val non-empty, the split moves back to just after the last newline before the cut;
a text without any usable newline is cut at the character at the cut point.
"""

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from checks import positive_int
from data.parallel import usable_cpus
from data.sources import Source, open_source
from data.token_files import encode_splits
from data.tokenizer import KINDS, NotInVocabulary, Tokenizer, load_tokenizer, train_tokenizer
from storage.atomic import clean_stale_temps, make_temp_folder, publish_folder

# Bump when prepare's output changes for the same inputs, so old cache folders are not reused.
FORMAT_VERSION = 2
# BPE trains in pure Python; a 10 MB prefix holds plenty of merges for a small vocabulary and
# keeps training time and memory bounded for any corpus size.
BPE_SAMPLE_CHARS = 10_000_000
# encode() returns a Python list (8 bytes per id, plus ~28 per id above 256) that numpy then
# copies, so chunks of 64K characters keep the transient cost to a few MB at no loss of speed.
ENCODE_CHUNK_CHARS = 1 << 16
# Kinds whose encode runs in tiktoken's Rust core, which releases the GIL, so threads encode in
# parallel. char's encode is a Python loop that holds the GIL: threads only add hand-offs, so a
# second thread makes it slower, not faster.
THREADED_KINDS = ("bpe", "gpt2")


@dataclass
class Prepared:
    """A prepared corpus: `dir` holds train.bin, val.bin (flat ids of meta["dtype"]), the
    tokenizer file meta["tokenizer_file"] and meta.json; `tokenizer` is loaded from that file."""

    dir: Path
    meta: dict
    tokenizer: Tokenizer
    train_path: Path
    val_path: Path


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned dtype that holds every id in [0, vocab_size)."""
    return np.dtype(np.uint16) if vocab_size <= 1 << 16 else np.dtype(np.uint32)


def prepare(
    source: str | Source,
    tokenizer_kind: str,
    vocab_size: int | None = None,
    val_fraction: float = 0.1,
    cache_dir: str | os.PathLike = ".cache",
    block_size: int | None = None,
    workers: int | None = None,
    tokenizer: Tokenizer | None = None,
) -> Prepared:
    """Tokenise `source` (see data.sources.open_source; or a Source already opened) into
    train/val token files, or reuse them.

    vocab_size: bpe only (None: the tokenizer's default); char and gpt2 fix their own.
    val_fraction: share of the text, in characters, that goes to val (0 < val_fraction < 1).
    block_size: if given, each split must hold at least block_size + 1 tokens (one training
    window plus its shifted target), else ValueError saying what to change.
    workers: threads that encode bpe and gpt2 text (None: every CPU this process may use); the
    output, and so the cache folder, is the same for any count. char always runs on one.
    tokenizer: encode with this one (a fine-tuning source's) instead of training one; its kind
    replaces tokenizer_kind and its file's SHA-256 is part of the cache key.
    meta["pronouns"] records the pronoun language's settings where the source is that corpus.
    """
    workers = _checked_workers(tokenizer_kind, val_fraction, block_size, workers)
    src = source if isinstance(source, Source) else open_source(source, cache_dir)
    sha256, n_chars = content_fingerprint(src)
    request = _Request(src, sha256, n_chars, tokenizer_kind, vocab_size, float(val_fraction))
    if tokenizer is not None:
        request = replace(
            request,
            kind=tokenizer.kind,
            vocab_size=None,
            given=tokenizer,
            given_sha256=_tokenizer_sha256(tokenizer),
        )
    out = Path(cache_dir) / "prepared" / request.folder_name()
    if not (out / "meta.json").exists():
        clean_stale_temps(out.parent)  # folders left by builds that were killed
        _build_given_or_own(request, out, workers if request.kind in THREADED_KINDS else 1)
    # The cache is shared by content: its meta.json names the first path that had this text, and
    # a run records the one it was given.
    meta = {**json.loads((out / "meta.json").read_text()), "source": src.name}
    if src.language is not None:
        meta["pronouns"] = src.language
    prepared = Prepared(
        dir=out,
        meta=meta,
        tokenizer=load_tokenizer(out / meta["tokenizer_file"]),
        train_path=out / "train.bin",
        val_path=out / "val.bin",
    )
    if block_size is not None:
        _check_long_enough(meta, block_size)
    return prepared


def _checked_workers(kind, val_fraction, block_size, workers) -> int:
    """prepare's arguments checked (ValueError saying what to give); the worker count to use."""
    if kind not in KINDS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; choose one of {', '.join(KINDS)}")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(
            f"val_fraction must be between 0 and 1 (exclusive), got {val_fraction}; 0.1 is usual"
        )
    if block_size is not None:
        positive_int("block_size", block_size)
    if workers is None:
        return usable_cpus()
    return positive_int("workers", workers, note="or None for every CPU")


@dataclass(frozen=True)
class _Request:
    """What a prepared folder is made from: the source with its SHA-256 and length, the
    tokenizer kind and size, val_fraction, and a given tokenizer with its file's SHA-256."""

    src: Source
    sha256: str
    n_chars: int
    kind: str
    vocab_size: int | None
    val_fraction: float
    given: Tokenizer | None = None
    given_sha256: str | None = None

    def folder_name(self) -> str:
        """<kind>-<vocab size, auto or given>-<key>, the key a hash of every input."""
        inputs = json.dumps(
            [FORMAT_VERSION, self.sha256, self.kind, self.vocab_size, self.val_fraction]
            + ([self.given_sha256] if self.given_sha256 else [])
        )
        key = hashlib.sha256(inputs.encode()).hexdigest()[:16]
        size = "given" if self.given_sha256 else self.vocab_size or "auto"
        return f"{self.kind}-{size}-{key}"


def _tokenizer_sha256(tokenizer: Tokenizer) -> str:
    """SHA-256 of the file the tokenizer saves to: what identifies a given tokenizer."""
    with tempfile.TemporaryDirectory() as d:
        tokenizer.save(Path(d) / "tokenizer")
        return hashlib.sha256((Path(d) / "tokenizer").read_bytes()).hexdigest()


def content_fingerprint(src: Source) -> tuple[str, int]:
    """SHA-256 of the text's bytes and its length in characters (UTF-8 lead bytes)."""
    digest, n_chars = hashlib.sha256(), 0
    for chunk in src.iter_bytes():
        digest.update(chunk)
        # Every character has exactly one byte that is not a continuation byte (0b10xxxxxx).
        n_chars += int(np.count_nonzero((np.frombuffer(chunk, np.uint8) & 0xC0) != 0x80))
    return digest.hexdigest(), n_chars


def _build_given_or_own(request: _Request, out: Path, workers: int) -> None:
    """_build, where text a given tokenizer cannot encode is a ValueError saying what to do."""
    try:
        _build(request, out, workers)
    except NotInVocabulary as e:
        if request.given is None:
            raise
        # A given tokenizer is the one fine-tuning must keep: another kind is no way out.
        raise ValueError(
            f"{request.src.name}: {e.what} of the {request.given.kind} tokenizer that "
            "fine-tuning keeps (train.init_from's); leave such characters out of "
            "the text, or fine-tune from a model whose tokenizer encodes any text "
            "(bpe, gpt2)"
        ) from None


def _build(request: _Request, out: Path, workers: int) -> None:
    """Write the prepared folder `out`: built in a temp folder beside it, renamed when complete.
    The tokenizer is trained on the corpus, or is the request's given one."""
    src, sha256, n_chars, kind = request.src, request.sha256, request.n_chars, request.kind
    vocab_size, val_fraction, given = request.vocab_size, request.val_fraction, request.given
    if n_chars < 2:
        raise ValueError(
            f"corpus {src.name} has {n_chars} character(s); train and val each "
            f"need text, so give a longer corpus"
        )
    split, training_text = _scan(src, n_chars, val_fraction, "given" if given else kind)
    tokenizer = given or train_tokenizer(kind, training_text, vocab_size)
    del training_text
    dtype = token_dtype(tokenizer.vocab_size)
    tokenizer_file = "tokenizer.bpe" if kind == "bpe" else "tokenizer.json"

    tmp = make_temp_folder(out)
    try:
        tokenizer.save(tmp / tokenizer_file)
        counts = encode_splits(
            src, tokenizer, split, n_chars, dtype, tmp, workers, ENCODE_CHUNK_CHARS
        )
        meta = {
            "format_version": FORMAT_VERSION,
            "source": src.name,
            "source_sha256": sha256,
            "source_chars": n_chars,
            "tokenizer_kind": kind,
            "tokenizer_file": tokenizer_file,
            "vocab_size": tokenizer.vocab_size,
            "requested_vocab_size": vocab_size,
            # gpt2 is pretrained (None); bpe sees a prefix; char sees every character.
            "tokenizer_trained_on_chars": None
            if given
            else {"bpe": min(n_chars, BPE_SAMPLE_CHARS), "char": n_chars}.get(kind),
            "dtype": dtype.name,
            "val_fraction": val_fraction,
            "split_char": split,
            **counts,
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
        try:
            publish_folder(tmp, out)
        except OSError:
            # Another process finished the same folder first; its copy is as good as ours.
            if not (out / "meta.json").exists():
                raise
            shutil.rmtree(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _scan(src: Source, n_chars: int, val_fraction: float, kind: str) -> tuple[int, str]:
    """One pass: the val split (character index where val starts) and the tokenizer's text."""
    cut = min(max(int(n_chars * (1.0 - val_fraction)), 1), n_chars - 1)
    last_before = first_after = -1  # newline positions around the cut
    charset: set[str] = set()
    sample: list[str] = []
    pos = 0
    for piece in src.iter_text():  # raises on invalid UTF-8
        if pos < cut:
            i = piece.rfind("\n", 0, cut - pos)
            if i >= 0:
                last_before = pos + i
        if first_after < 0 and pos + len(piece) > cut:
            i = piece.find("\n", max(cut - pos, 0))
            if i >= 0:
                first_after = pos + i
        if kind == "char":
            charset.update(piece)
        elif kind == "bpe" and pos < BPE_SAMPLE_CHARS:
            sample.append(piece[: BPE_SAMPLE_CHARS - pos])
        pos += len(piece)
    if pos != n_chars:
        raise ValueError(f"corpus {src.name} changed while it was being prepared; run again")

    if 0 <= first_after < n_chars - 1:
        split = first_after + 1
    elif last_before >= 0:
        split = last_before + 1
    else:
        split = cut
    if kind == "char":
        return split, "".join(sorted(charset))
    return split, "".join(sample)


def _check_long_enough(meta: dict, block_size: int) -> None:
    """ValueError unless both splits hold one window of block_size tokens plus its target."""
    for name, fix in (("train", "a smaller val_fraction"), ("val", "a larger val_fraction")):
        n = meta[f"{name}_tokens"]
        if n < block_size + 1:
            raise ValueError(
                f"the {name} split of {meta['source']} has {n} tokens, fewer than "
                f"block_size + 1 = {block_size + 1}; give more text, a smaller "
                f"block_size, or {fix}"
            )
