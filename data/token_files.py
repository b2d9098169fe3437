"""The encoding pass of data/prepare.py: a source's text cut into pieces at line ends, encoded
on worker threads, and appended in order to train.bin and val.bin, so the files do not depend on
how many threads encoded them."""

import errno
import os
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import numpy as np
from tqdm import tqdm

from data.parallel import map_in_order
from data.sources import Source
from data.tokenizer import Tokenizer


def encode_splits(
    src: Source,
    tokenizer: Tokenizer,
    split: int,
    n_chars: int,
    dtype: np.dtype,
    folder: Path,
    workers: int,
    chunk_chars: int,
) -> dict[str, int]:
    """Append the ids of text[:split] to train.bin and of text[split:] to val.bin; return the
    token and UTF-8 byte counts of each split (bytes make losses comparable across tokenizers).

    Pieces of about chunk_chars characters are encoded on `workers` threads (map_in_order) and
    written in order, so the files do not depend on `workers`.
    """
    counts = {"train_tokens": 0, "val_tokens": 0, "train_bytes": 0, "val_bytes": 0}
    # delay: quick runs print nothing; a long one shows its rate and time left.
    with (
        open(folder / "train.bin", "wb") as train_file,
        open(folder / "val.bin", "wb") as val_file,
        tqdm(
            total=n_chars,
            unit="char",
            unit_scale=True,
            delay=3.0,
            file=sys.stderr,
            desc=f"tokenising {src.name}",
        ) as bar,
    ):
        files = {"train": train_file, "val": val_file}
        encoded = map_in_order(
            partial(encode_piece, tokenizer, dtype), chunks(src, split, chunk_chars), workers
        )
        for name, ids, n_piece_chars, n_bytes in encoded:
            try:
                ids.tofile(files[name])
            except (
                OSError
            ) as e:  # numpy reports a short write ("N requested and M written") without errno
                if e.errno is not None:
                    raise
                raise OSError(
                    errno.ENOSPC, os.strerror(errno.ENOSPC), str(folder / f"{name}.bin")
                ) from None
            counts[f"{name}_tokens"] += len(ids)
            counts[f"{name}_bytes"] += n_bytes
            bar.update(n_piece_chars)
    return counts


def encode_piece(
    tokenizer: Tokenizer, dtype: np.dtype, piece: tuple[str, str]
) -> tuple[str, np.ndarray, int, int]:
    """(split name, ids, characters, UTF-8 bytes) of one ("train" | "val", text) piece."""
    name, text = piece
    ids = tokenizer.encode_array(text).astype(dtype, copy=False)
    return name, ids, len(text), len(text.encode("utf-8"))


def chunks(src: Source, split: int, chunk_chars: int) -> Iterator[tuple[str, str]]:
    """("train" | "val", text) pieces of about chunk_chars characters, in order.

    Pieces end at a newline where one is in reach, so tokens rarely straddle a cut (a cut can
    change how BPE groups the text around it, never what decodes back). No piece crosses split.
    """
    name, carry, pos = "train", "", 0  # pos: characters of the source moved into carry
    for piece in src.iter_text(chunk_chars):
        if name == "train" and pos + len(piece) >= split:
            head, piece = piece[: split - pos], piece[split - pos :]
            pos += len(head)
            yield from cut_lines("train", carry + head, chunk_chars, final=True)
            name, carry = "val", ""
        carry += piece
        pos += len(piece)
        carry = yield from cut_lines(name, carry, chunk_chars, final=False)
    yield from cut_lines(name, carry, chunk_chars, final=True)


def cut_lines(name: str, text: str, limit: int, final: bool) -> Iterator[tuple[str, str]]:
    """Yield pieces of at most `limit` characters while more than that is left (everything if
    final); return the rest, which the next text may continue."""
    start = 0
    while len(text) - start > limit:
        # After the last newline in reach; else before the last space (BPE keeps a word's
        # leading space with it); else anywhere, for text with no whitespace at all.
        end = text.rfind("\n", start, start + limit) + 1
        if end <= start:
            end = text.rfind(" ", start + 1, start + limit)
            if end <= start:
                end = start + limit
        yield name, text[start:end]
        start = end
    if final:
        if start < len(text):
            yield name, text[start:]
        return ""
    return text[start:]
