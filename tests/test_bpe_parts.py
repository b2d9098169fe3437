"""BPE's pieces counted in parts, on several processes: the same counts, in the same order, as
counting the whole text at once. No durations here: `bench.py prepare` times it."""

import itertools
import os
import random
import sys
from collections import Counter

import pytest
import regex

from data import bpe
from data.bpe import GPT4_SPLIT_PATTERN, count_pieces, text_parts, train_bpe

# Every kind of character the split pattern treats differently, newlines and CR among them,
# so that cuts land next to whitespace runs, punctuation with trailing newlines, digits,
# contractions and words of other scripts.
ALPHABET = list("abcXYZ") + ["é", "日", "Ω"] + list("0123") + [" ", "  ", "\t", "\n", "\n\n", "\r\n",
                                                             " \n", "'", "'s", "'LL", ".", "--", "!?"]


def jumble(n, seed):
    rng = random.Random(seed)
    return "".join(rng.choice(ALPHABET) for _ in range(n))


def test_parts_tile_the_text_and_are_cut_after_a_newline_before_a_letter():
    text = jumble(20_000, seed=0)
    parts = text_parts(text, 500)
    assert "".join(parts) == text
    assert len(parts) > 10
    assert all(len(p) >= 500 for p in parts[:-1])
    assert all(p.endswith("\n") and nxt[0].isalpha() for p, nxt in itertools.pairwise(parts))


def test_text_without_a_safe_place_is_one_part():
    assert text_parts("x" * 5000, 100) == ["x" * 5000]
    assert text_parts("1a\n.\n \n" * 500, 100) == ["1a\n.\n \n" * 500]  # no letter after a newline
    assert text_parts("", 100) == [""]


@pytest.mark.parametrize("seed", range(20))
def test_counting_in_parts_adds_up_to_the_whole_text(seed):
    text = jumble(5_000, seed)
    whole = Counter(regex.findall(GPT4_SPLIT_PATTERN, text))
    in_parts = Counter()
    for part in text_parts(text, 37):
        in_parts.update(Counter(regex.findall(GPT4_SPLIT_PATTERN, part)))
    assert in_parts == whole
    assert list(in_parts) == list(whole)  # first appearances in the same order


def _pid(_):
    return os.getpid()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parts are counted in processes on Linux only")
def test_several_workers_count_in_other_processes():
    with bpe._pool(2, 4) as pool:
        pids = set(pool.imap(_pid, ["a", "b", "c", "d"]))
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


def test_any_number_of_workers_gives_the_same_counts_and_tokenizer(monkeypatch):
    text = jumble(60_000, seed=1)
    monkeypatch.setattr(bpe, "COUNT_PART_CHARS", 4_000)  # about 15 parts
    assert len(text_parts(text, bpe.COUNT_PART_CHARS)) > 10
    counts = {w: count_pieces(text, w) for w in (1, 2, 3)}
    assert counts[1] == counts[2] == counts[3] == Counter(regex.findall(GPT4_SPLIT_PATTERN, text))
    assert list(counts[1]) == list(counts[2]) == list(counts[3])
    assert train_bpe(text, 400, workers=1) == train_bpe(text, 400, workers=2)
