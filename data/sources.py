"""Where training text comes from: a file, a folder of .txt files, a named corpus, or a text
file of a Hugging Face dataset repository.

`open_source(source, cache_dir)` turns a `data.source` value into a `Source`, a list of files
read as one UTF-8 text. Named corpora are materialised as files under `<cache_dir>/corpora/`
first, so everything downstream only ever reads files:

    tinyshakespeare   downloaded once from TINYSHAKESPEARE_URL, checked against its SHA-256
    pronouns          the embedded labelled corpus (data.pronouns.corpus_text), written once
                      for each language its settings say (data.pronouns.story_mix.StoryMix)
    hf:OWNER/DATASET/PATH/IN/REPO
                      that file of a Hugging Face dataset repository, fetched once into the
                      hub's own cache (storage/hub.py), which checks it and serves it offline

Files are streamed in chunks, never read whole, so a corpus may be larger than memory.
"""

import codecs
import hashlib
import http.client
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from storage.atomic import write_atomic
from storage.hub import dataset_file, is_hub_name

if TYPE_CHECKING:  # only the pronouns corpus needs the generator, and only when it is asked for
    from data.pronouns.story_mix import StoryMix

TINYSHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
)
TINYSHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
NAMED_CORPORA = ("pronouns", "tinyshakespeare")
# Small enough that a chunk and its decoded text cost little next to the output, large enough
# that per-chunk overhead is negligible.
READ_CHUNK_BYTES = 1 << 18
DOCUMENT_SEPARATOR = b"\n"  # between the files of a folder source


@dataclass(frozen=True)
class Source:
    """A corpus: `files` read in order as one text, DOCUMENT_SEPARATOR between consecutive files.

    `name` is the `data.source` value the user gave (a path or a corpus name); `language`, of
    the pronouns corpus only, the settings it was written with (StoryMix.label).
    """

    name: str
    files: tuple[Path, ...]
    language: str | None = None

    @property
    def n_bytes(self) -> int:
        """Length of the joined text in UTF-8 bytes (file sizes plus separators)."""
        sizes = sum(path.stat().st_size for path in self.files)
        return sizes + len(DOCUMENT_SEPARATOR) * (len(self.files) - 1)

    def iter_bytes(self, chunk_bytes: int = READ_CHUNK_BYTES) -> Iterator[bytes]:
        """The joined text as raw byte chunks of at most chunk_bytes (not checked as UTF-8)."""
        for index, path in enumerate(self.files):
            if index > 0:
                yield DOCUMENT_SEPARATOR
            with open(path, "rb") as f:
                while chunk := f.read(chunk_bytes):
                    yield chunk

    def iter_text(self, chunk_bytes: int = READ_CHUNK_BYTES) -> Iterator[str]:
        """The joined text as str chunks, each decoded from at most chunk_bytes bytes.

        Raises ValueError naming the file and the byte offset of its first invalid UTF-8 byte.
        """
        for index, path in enumerate(self.files):
            if index > 0:
                yield DOCUMENT_SEPARATOR.decode()
            # An incremental decoder, because a chunk may end inside a multi-byte character.
            decoder = codecs.getincrementaldecoder("utf-8")()
            offset = 0  # bytes of this file read before the current chunk
            with open(path, "rb") as f:
                while True:
                    chunk = f.read(chunk_bytes)
                    pending = len(decoder.getstate()[0])
                    try:
                        text = decoder.decode(chunk, final=not chunk)
                    except UnicodeDecodeError as e:
                        # e.start counts from the start of the pending bytes + this chunk.
                        raise ValueError(
                            f"{path} is not valid UTF-8 (first bad byte at offset "
                            f"{offset - pending + e.start}); convert it to UTF-8, "
                            f"e.g. with iconv -f <its encoding> -t UTF-8"
                        ) from None
                    if text:
                        yield text
                    if not chunk:
                        break
                    offset += len(chunk)

    def read_text(self) -> str:
        """The whole text in memory: for small texts only (a prompt, a file of sentences)."""
        return "".join(self.iter_text())


def open_source(
    source: str, cache_dir: str | os.PathLike = ".cache", pronouns: "StoryMix | None" = None
) -> Source:
    """Resolve a `data.source` value: a corpus name, `hf:OWNER/DATASET/PATH`, a UTF-8 text file,
    or a folder of .txt files. `pronouns` says which language the pronouns corpus is written in
    (None: the default).

    Corpus names and hf: win over paths; write ./tinyshakespeare to mean a local file of that name.
    A folder contributes its own *.txt files (not subfolders), sorted by file name.
    """
    source, language = str(source), None
    if source == "tinyshakespeare":
        files = (tinyshakespeare_path(cache_dir),)
    elif source == "pronouns":
        from data.pronouns.story_mix import DEFAULT_MIX  # only this corpus needs the generator

        pronouns = pronouns or DEFAULT_MIX
        files, language = (pronouns_path(cache_dir, mix=pronouns),), pronouns.label
    elif is_hub_name(source):
        files = (dataset_file(source),)
    else:
        files = _files_at(source)
    opened = Source(name=source, files=files, language=language)
    if all(path.stat().st_size == 0 for path in files):
        if any(_made_as_read(path) for path in files):
            raise ValueError(
                f"corpus {source} says it has 0 bytes but has text (a file of /proc or /sys, "
                "made as it is read); a corpus is read several times, so copy it into a file "
                "and give that"
            )
        raise ValueError(f"corpus {source} is empty; give a source that contains text")
    return opened


def _made_as_read(path) -> bool:
    """Whether a file whose size says 0 gives bytes when read (the kernel's /proc, /sys)."""
    try:
        with open(path, "rb") as f:
            return bool(f.read(1))
    except OSError:
        return False


def check_source(source: str) -> None:
    """Raise what open_source would for a missing file or folder, without downloading or
    writing anything: named corpora and hf: sources are taken as they are."""
    if str(source) not in NAMED_CORPORA and not is_hub_name(str(source)):
        _files_at(str(source))


def _files_at(source: str) -> tuple[Path, ...]:
    path = Path(source).expanduser()
    if path.is_dir():
        files = sorted(
            (p for p in path.iterdir() if p.suffix == ".txt" and p.is_file()), key=lambda p: p.name
        )
        if not files:
            raise ValueError(
                f"folder {path} has no .txt files; put the corpus in *.txt files "
                f"there, or give the path of a text file"
            )
        return tuple(files)
    if path.is_file():
        return (path,)
    if (
        path.exists()
    ):  # a pipe, a device, /dev/stdin, <(...): read more than once, it would be empty
        raise ValueError(
            f"{path} is not a regular file (a pipe or a device); a corpus is read several times, "
            "so save it to a file first and give that file"
        )
    # A bare word that is not on disk was most likely meant as a corpus name.
    if os.sep not in source and "/" not in source and not path.suffix:
        raise ValueError(
            f"unknown corpus name {source!r}; the named corpora are "
            f"{', '.join(NAMED_CORPORA)}, or give a path to a text file or folder, "
            f"or hf:OWNER/DATASET/PATH"
        )
    raise FileNotFoundError(
        f"no such file or folder: {path.absolute()}; give a path to a UTF-8 "
        "text file, a folder of .txt files, hf:OWNER/DATASET/PATH, or one of "
        f"{', '.join(NAMED_CORPORA)}"
    )


def tinyshakespeare_path(cache_dir: str | os.PathLike) -> Path:
    """`<cache_dir>/corpora/tinyshakespeare.txt`, downloaded from TINYSHAKESPEARE_URL and
    verified against TINYSHAKESPEARE_SHA256 on first use."""
    dest = Path(cache_dir) / "corpora" / "tinyshakespeare.txt"
    if dest.exists():
        # The file may have been put there by hand, so it is checked like a download.
        actual = file_sha256(dest)
        if actual != TINYSHAKESPEARE_SHA256:
            raise ValueError(
                f"{dest} has SHA-256 {actual}, expected {TINYSHAKESPEARE_SHA256}; "
                "delete it to download it again, or replace it with the right file"
            )
        return dest
    return download(TINYSHAKESPEARE_URL, dest, TINYSHAKESPEARE_SHA256)


def pronouns_path(
    cache_dir: str | os.PathLike, seed: int = 0, mix: "StoryMix | None" = None
) -> Path:
    """The embedded pronouns corpus, written once to
    `<cache_dir>/corpora/pronouns-seed<N>-<version>.txt`, where version hashes the generator's
    source files: an edited generator writes a new corpus instead of reusing a stale one. A
    language other than the default (`mix`) adds `-mix<its key>` to the name, so that one
    language's file never stands in for another's. The text's SHA-256, recorded beside it when it
    is written, is checked on every use: a file that is not that text (written over, cut short,
    or of a version that recorded none) is generated again, so no run trains on another text."""
    from data.pronouns import corpus_text, corpus_version  # only this corpus needs the generator
    from data.pronouns.story_mix import DEFAULT_MIX

    mix = mix or DEFAULT_MIX
    other = "" if mix.is_default else f"-mix{mix.key}"
    dest = Path(cache_dir) / "corpora" / f"pronouns-seed{seed}-{corpus_version()}{other}.txt"
    recorded = dest.with_name(dest.name + ".sha256")
    if not (dest.is_file() and _read_digest(recorded) == file_sha256(dest)):
        text = corpus_text(seed=seed, mix=mix)
        write_atomic(dest, text)
        write_atomic(recorded, hashlib.sha256(text.encode("utf-8")).hexdigest() + "\n")
    return dest


def _read_digest(path: Path) -> str | None:
    """The hex digest a `.sha256` file beside a corpus holds, or None where it holds none."""
    try:
        if not path.is_file():  # never opened where a FIFO stands: that read would wait
            return None
        with open(path, encoding="ascii") as f:
            return f.read(100).strip()
    except (OSError, ValueError):
        return None


def download(url: str, dest: str | os.PathLike, sha256: str, timeout: float = 30.0) -> Path:
    """Download url to dest, keeping it only if complete and its SHA-256 equals sha256.

    The body streams into write_atomic's temp file beside dest and is verified (size against
    Content-Length, then checksum) before it is renamed into place; on any failure the temp
    file is deleted, so dest is either absent, the old file untouched, or the verified new one.
    Raises ValueError (one line; for network or checksum failures it says where to put the
    file by hand) on any failure.
    """
    dest = Path(dest)
    by_hand = f"put the file there by hand: {dest.absolute()} (its SHA-256 must be {sha256})"

    def fetch(f):
        digest = hashlib.sha256()
        for chunk in _body_chunks(url, timeout, by_hand):
            f.write(chunk)
            digest.update(chunk)
        if digest.hexdigest() != sha256:
            raise ValueError(
                f"{url} has SHA-256 {digest.hexdigest()}, not the expected one; "
                f"nothing was saved; check the URL, or {by_hand}"
            )

    return write_atomic(dest, fetch)


def _body_chunks(url: str, timeout: float, by_hand: str) -> Iterator[bytes]:
    """The body of url in chunks; ValueError (one line) if the transfer fails or stops short.

    Only reading from the network is guarded here: a failed write by the consumer is its own
    error (write_atomic reports a full disk as such, not as a failed download)."""
    received, announced = 0, None
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            announced = response.headers.get("Content-Length")
            while chunk := response.read(1 << 16):
                received += len(chunk)
                yield chunk
    except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
        reason = " ".join(str(getattr(e, "reason", e) or type(e).__name__).split())
        raise ValueError(f"could not download {url} ({reason}); {by_hand}") from None
    # urllib returns a short body without complaint when the server closes early.
    if announced is not None and received != int(announced):
        raise ValueError(
            f"download of {url} stopped after {received} of {announced} bytes; "
            f"try again, or {by_hand}"
        )


def file_sha256(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(READ_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()
