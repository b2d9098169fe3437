"""Tokenizers: one interface over three kinds, each saved to and rebuilt from ONE file.

- "char": the vocabulary is the sorted set of characters in the training corpus (any Unicode).
  Saved as JSON. Text containing a character the corpus lacked cannot be encoded (ValueError).
- "bpe": byte-level BPE trained here (data/bpe.py) with GPT-4's split pattern and run by tiktoken.
  Lossless for any valid Unicode, including text never seen in training. Saved in tiktoken's rank
  format (`base64(token) rank` lines), which has no room for a header, so load_tokenizer tells it
  apart by its first byte: JSON files start with "{", which base64 never contains. The split
  pattern is not stored: bpe always means GPT-4's pattern.
- "gpt2": GPT-2's pretrained byte-level BPE (50257 ids), from the first place that has it: a
  Hugging Face GPT-2 folder in the hub's cache (hf:openai-community/gpt2 or hf:gpt2, put there by
  storage.hub), else tiktoken's copy, downloaded once and cached (TIKTOKEN_CACHE_DIR). Without
  either, loading fails fast with a ValueError. Saved as a small JSON naming the kind.
  `gpt2_tokenizer(folder)` reads any Hugging Face GPT-2 folder's vocab.json + merges.txt instead
  (a fine-tune's own vocabulary, say); such a tokenizer saves its vocabulary and merges inline.

No kind parses special tokens: "<|endoftext|>" in text is ordinary text. gpt2's end-of-text id
(50256) is never produced by encode, though decode accepts it; it is the tokenizer's `eot_id`
(None for the other kinds), for stop conditions.
"""

import json
import os

import numpy as np
import tiktoken

from data.bpe import GPT4_SPLIT_PATTERN, train_bpe, utf8_bytes
from data.gpt2_files import EOT, GPT2_SPLIT_PATTERN, encoding_of_files, gpt2_encoding
from data.rank_file import parse_ranks, write_ranks
from storage.atomic import write_atomic
from storage.json_read import parse_json

KINDS = ("char", "bpe", "gpt2")
DEFAULT_BPE_VOCAB_SIZE = 4096


class NotInVocabulary(ValueError):
    """A character the char tokenizer has no id for; `what` names it and where it is."""

    def __init__(self, message: str, what: str):
        super().__init__(message)
        self.what = what


class Tokenizer:
    """Common interface. `kind` is one of KINDS; ids are 0..vocab_size-1.

    encode(text) -> ids; decode(ids) -> text, with decode(encode(text)) == text for every text
    the kind accepts. encode_array(text): the same ids as a numpy array (uint32).
    encode_with_offsets(text) -> (ids, starts): starts[i] is the character offset in `text` where
    token i begins; a byte-level token that starts inside a multi-byte character gets that
    character's offset, so starts never decrease. save(path) writes one file, atomically
    (storage.atomic.write_atomic).
    """

    kind: str
    vocab_size: int
    eot_id: int | None = None  # the end-of-text token's id, where the vocabulary has one

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def encode_array(self, text: str) -> np.ndarray:
        return np.asarray(self.encode(text), dtype=np.uint32)

    def decode(self, ids: list[int]) -> str:
        raise NotImplementedError

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[int]]:
        raise NotImplementedError

    def save(self, path) -> None:
        raise NotImplementedError

    def _checked_ids(self, ids) -> list[int]:
        """`ids` as plain ints (tensors and numpy ints welcome); ValueError for an id outside
        the vocabulary, e.g. from a model built for another tokenizer."""
        ids = [int(i) for i in ids]
        if ids and (min(ids) < 0 or max(ids) >= self.vocab_size):
            bad = next(i for i in ids if not 0 <= i < self.vocab_size)
            raise ValueError(
                f"token id {bad} is outside this {self.kind} tokenizer's vocabulary "
                f"[0, {self.vocab_size}); use the tokenizer the ids were made with"
            )
        return ids


class CharTokenizer(Tokenizer):
    """One token per Unicode code point; id = position of the character in the sorted vocabulary.

    Encoding a character absent from the training corpus raises ValueError naming it: a char
    vocabulary has no fallback, and silently dropping or replacing text would hide the problem.
    """

    kind = "char"

    def __init__(self, chars: list[str]):
        if not chars:
            raise ValueError("char tokenizer needs a non-empty corpus; pass some training text")
        if any(len(c) != 1 for c in chars) or sorted(set(chars)) != list(chars):
            raise ValueError("char vocabulary must be sorted distinct single characters; retrain")
        self.chars = list(chars)
        self.vocab_size = len(chars)
        self._ids = {c: i for i, c in enumerate(chars)}

    def encode(self, text: str) -> list[int]:
        try:
            return [self._ids[c] for c in text]
        except KeyError:
            pos, ch = next((i, c) for i, c in enumerate(text) if c not in self._ids)
            what = f"character {ch!r} (U+{ord(ch):04X}) at offset {pos} is not in the vocabulary"
            raise NotInVocabulary(
                f"{what}: this char tokenizer was trained on a corpus without it; retrain on text "
                f"that contains it, or use the 'bpe' tokenizer, which encodes any text",
                what,
            ) from None

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] for i in self._checked_ids(ids))

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[int]]:
        return self.encode(text), list(range(len(text)))

    def save(self, path) -> None:
        # ensure_ascii keeps the file readable in any editor and lets odd code points round-trip.
        write_atomic(
            path, json.dumps({"kind": "char", "chars": self.chars}, ensure_ascii=True, indent=0)
        )


class TiktokenTokenizer(Tokenizer):
    """A tiktoken Encoding with special tokens disabled: kind "bpe" (our ranks) or "gpt2".

    Text with a lone surrogate (not valid Unicode) raises ValueError rather than being silently
    replaced by U+FFFD, which would break decode(encode(text)) == text.
    """

    def __init__(
        self,
        kind: str,
        encoding: tiktoken.Encoding,
        ranks: dict[bytes, int] | None,
        files: dict | None = None,
    ):
        self.kind = kind
        self.encoding = encoding
        self.ranks = ranks  # only for bpe, which save() writes out
        self.files = files  # gpt2 read from vocab.json + merges.txt: {"vocab": ..., "merges": ...}
        self.vocab_size = encoding.n_vocab
        self.eot_id = (
            encoding.encode_single_token(EOT) if EOT in encoding.special_tokens_set else None
        )

    def encode(self, text: str) -> list[int]:
        utf8_bytes(text)  # raises on lone surrogates, which tiktoken would quietly replace
        return self.encoding.encode(text, disallowed_special=())

    def encode_array(self, text: str) -> np.ndarray:
        # Straight from tiktoken's buffer: no Python int per token, less work under the GIL
        # when prepare encodes on several threads.
        utf8_bytes(text)
        return self.encoding.encode_to_numpy(text, disallowed_special=())

    def decode(self, ids: list[int]) -> str:
        # errors="replace": a model can emit ids that cut a character in half; show U+FFFD.
        return self.encoding.decode(self._checked_ids(ids), errors="replace")

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[int]]:
        ids = self.encode(text)
        decoded, starts = self.encoding.decode_with_offsets(ids)
        assert decoded == text, "byte-level BPE must round-trip valid Unicode"
        return ids, starts

    def save(self, path) -> None:
        if self.kind == "gpt2":
            write_atomic(
                path, json.dumps({"kind": "gpt2", **(self.files or {})}, ensure_ascii=True)
            )
        else:
            write_ranks(self.ranks, path)


def bpe_from_ranks(ranks: dict[bytes, int]) -> TiktokenTokenizer:
    """Wrap mergeable ranks (from train_bpe or a rank file) as a "bpe" tokenizer."""
    encoding = tiktoken.Encoding(
        f"tinygpt-bpe-{len(ranks)}",
        pat_str=GPT4_SPLIT_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={},
    )
    return TiktokenTokenizer("bpe", encoding, ranks)


def gpt2_tokenizer(folder=None) -> TiktokenTokenizer:
    """GPT-2's tokenizer: from `folder` (a Hugging Face GPT-2 folder) if given, else from the hub's
    cache or tiktoken (see the module docstring); ValueError saying how to get its files. One read
    from a folder saves its vocabulary and merges inline (they may not be GPT-2's own)."""
    encoding, files = gpt2_encoding(folder)
    return TiktokenTokenizer("gpt2", encoding, None, files if folder is not None else None)


def train_tokenizer(kind: str, text: str, vocab_size: int | None = None) -> Tokenizer:
    """Build a tokenizer of `kind` for `text`.

    char: vocabulary = the distinct characters of `text`; vocab_size must be None (it is set by
    the text). bpe: vocab_size defaults to DEFAULT_BPE_VOCAB_SIZE and must be >= 256; a corpus too
    small to supply that many merges stops early, so the result's vocab_size is then smaller.
    gpt2: pretrained, `text` is ignored and vocab_size must be None.
    """
    if kind == "char":
        _no_vocab_size(kind, vocab_size)
        return CharTokenizer(sorted(set(text)))
    if kind == "bpe":
        size = DEFAULT_BPE_VOCAB_SIZE if vocab_size is None else vocab_size
        return bpe_from_ranks(train_bpe(text, size))
    if kind == "gpt2":
        _no_vocab_size(kind, vocab_size)
        return gpt2_tokenizer()
    raise ValueError(f"unknown tokenizer kind {kind!r}; choose one of {', '.join(KINDS)}")


def _no_vocab_size(kind: str, vocab_size) -> None:
    if vocab_size is not None:
        raise ValueError(
            f"the {kind} tokenizer's vocabulary size is fixed by its "
            f"{'corpus' if kind == 'char' else 'pretrained files'}; leave vocab_size unset "
            f"(got {vocab_size}) or use 'bpe' to choose one"
        )


def load_tokenizer(path) -> Tokenizer:
    """Rebuild a tokenizer from a file written by Tokenizer.save; the kind is read from the file.

    FileNotFoundError if `path` does not exist; ValueError if it is not a tokenizer file.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no tokenizer file at {path}; train one and save it first")
    with open(path, "rb") as f:
        data = f.read()
    if not data.lstrip().startswith(b"{"):
        return bpe_from_ranks(parse_ranks(data, path))  # rank lines: base64 has no "{"
    try:
        meta = parse_json(data)
        kind = meta["kind"]
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"{path} is not a tokenizer file saved by tinygpt; retrain it") from None
    if kind == "char" and isinstance(meta.get("chars"), list):
        return CharTokenizer(meta["chars"])
    if kind == "gpt2" and "vocab" in meta:
        files = {key: meta[key] for key in ("vocab", "merges", "pattern") if key in meta}
        pattern = (
            GPT4_SPLIT_PATTERN if meta.get("pattern") == GPT4_SPLIT_PATTERN else GPT2_SPLIT_PATTERN
        )
        return TiktokenTokenizer(
            "gpt2",
            encoding_of_files(files["vocab"], files.get("merges"), path, pattern),
            None,
            files,
        )
    if kind == "gpt2":
        return gpt2_tokenizer()
    if kind in KINDS:  # a known kind whose fields are not what save() writes
        raise ValueError(
            f"{path} is not a {kind} tokenizer file saved by tinygpt (its fields are damaged); "
            "retrain it, or copy the run's own file back"
        )
    raise ValueError(f"{path}: unknown tokenizer kind {kind!r}; expected one of {', '.join(KINDS)}")
