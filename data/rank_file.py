"""A BPE tokenizer's file: `base64(token) rank` lines, the format tiktoken.load_tiktoken_bpe
reads (data/bpe.py learns the ranks; data/tokenizer.py saves and loads them through here)."""

import base64

from storage.atomic import write_atomic


def write_ranks(ranks: dict[bytes, int], path) -> None:
    """Write `base64(token) rank` lines in rank order, atomically (storage.atomic): the file
    tiktoken.load_tiktoken_bpe reads."""
    lines = (
        f"{base64.b64encode(tok).decode('ascii')} {rank}\n"
        for tok, rank in sorted(ranks.items(), key=lambda item: item[1])
    )
    write_atomic(path, "".join(lines))


def parse_ranks(data: bytes, path) -> dict[bytes, int]:
    """Parse a rank file written by write_ranks, checking it is a byte-level BPE table.

    Raises ValueError (naming `path`) unless every line is `base64 rank`, ranks are exactly
    0..n-1, ranks 0..255 are the single bytes in order, and no byte string appears twice.
    """
    ranks: dict[bytes, int] = {}
    for lineno, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            tok_b64, rank_text = line.split()
            tok, rank = base64.b64decode(tok_b64, validate=True), int(rank_text)
        except ValueError:  # binascii.Error is a ValueError too
            raise ValueError(
                f"{path}: line {lineno} is not 'base64 rank', so this is not a tokenizer file "
                f"saved by tinygpt; save one with Tokenizer.save or retrain it"
            ) from None
        if tok in ranks:
            raise ValueError(f"{path}: token {tok!r} appears twice (line {lineno}); retrain it")
        ranks[tok] = rank
    if (
        sorted(ranks.values()) != list(range(len(ranks)))
        or len(ranks) < 256
        or any(ranks.get(bytes([b])) != b for b in range(256))
    ):
        raise ValueError(
            f"{path}: ranks must be 0..n-1 with the 256 single bytes first, in byte order; "
            f"this is not a byte-level BPE file saved by tinygpt, so retrain the tokenizer"
        )
    return ranks
