"""BPE training on text without whitespace: long pieces are capped, encoding stays lossless.

No durations are asserted here: bench.py times 5 MB of DNA.
"""

import math
import random
from collections import Counter

import regex

from data.bpe import GPT4_SPLIT_PATTERN, MAX_PIECE_CHARS, count_pieces, split_long_piece, train_bpe
from data.tokenizer import train_tokenizer

MIXED = (
    "Plain prose, with 123456 digits, CRLF\r\n, tabs\t\tand   spaces; ünïcödé, 日本語のテキスト, "
    "emoji \U0001f468\u200d\U0001f469\u200d\U0001f467 and --- dashes ---\n\n  trailing  \n"
)


def dna(n: int, seed: int = 0) -> str:
    return "".join(random.Random(seed).choices("ACGT", k=n))


def test_split_long_piece_cuts_at_the_cap():
    piece = "x" * 300
    assert [len(p) for p in split_long_piece(piece, cap=128)] == [128, 128, 44]
    assert "".join(split_long_piece(piece, cap=128)) == piece
    assert split_long_piece("x" * 128, cap=128) == ["x" * 128]
    assert split_long_piece("日本語", cap=2) == ["日本", "語"]  # characters, never half of one


def test_prose_pieces_are_counted_whole():
    text = MIXED * 20
    assert count_pieces(text) == Counter(regex.findall(GPT4_SPLIT_PATTERN, text))


def test_dna_pieces_are_bounded():
    text = dna(200_000)
    counts = count_pieces(text)
    assert max(map(len, counts)) == MAX_PIECE_CHARS
    assert len(counts) <= math.ceil(len(text) / MAX_PIECE_CHARS)
    assert sum(len(piece) * n for piece, n in counts.items()) == len(text)  # nothing lost


def test_one_long_piece_learns_tokens_up_to_the_cap_and_still_encodes_whole():
    # 10000 = 78 * 128 + 16. Uncapped, "x" * 4096 would occur twice and be learned; capped, the
    # sub-pieces are 78 copies of "x" * 128 and one "x" * 16, so merges stop at "x" * 128.
    text = "x" * 10_000
    tok = train_tokenizer("bpe", text, vocab_size=400)
    assert sorted(t for t, rank in tok.ranks.items() if rank >= 256) == [
        b"x" * 2**k for k in range(1, 8)
    ]
    ids = tok.encode(text)  # tiktoken merges the whole 10000-character piece with those ranks
    assert len(ids) == 79 and tok.decode(ids) == text


def test_dna_trains_and_round_trips():
    text = dna(200_000)
    tok = train_tokenizer("bpe", text, vocab_size=1024)
    assert tok.vocab_size == 1024
    held_out = dna(50_000, seed=1)
    for sample in (text, held_out, held_out + " " + MIXED + held_out):
        assert tok.decode(tok.encode(sample)) == sample
    assert len(tok.encode(held_out)) < len(held_out) / 3.5  # about 4 bases a token: k-mers
    assert tok.decode(tok.encode(MIXED)) == MIXED


def test_long_multibyte_piece_round_trips():
    text = "日本語のテキスト" * 200  # one letter run of 1600 characters, 4800 bytes
    tok = train_tokenizer("bpe", text, vocab_size=300)
    assert max(map(len, tok.ranks)) <= 3 * MAX_PIECE_CHARS
    assert tok.decode(tok.encode(text)) == text
    assert tok.decode(tok.encode(MIXED)) == MIXED


def test_quick_training_prints_no_progress_bar(capsys):
    train_bpe(MIXED * 5, 300)
    assert capsys.readouterr() == ("", "")
