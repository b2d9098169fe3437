"""Byte-level BPE: a pure-Python trainer and tiktoken's rank file format.

Training produces `mergeable_ranks` (token bytes -> rank), the table `tiktoken.Encoding` runs:
ranks 0..255 are the single bytes 0x00..0xFF, and each merge learned afterwards takes the next rank,
so rank order is merge order. Text is first split with GPT-4's (cl100k) pattern, so merges never
cross a chunk boundary (a word with its leading space, a run of up to three digits, punctuation...),
exactly as tiktoken splits before it merges.

The trainer is the standard fast one: count each distinct chunk once with its frequency, keep the
count of every adjacent pair and an index from each pair to the chunks that contain it, and after
a merge patch the counts around each of its occurrences in the chunks it occurred in. A max-heap
with lazy invalidation picks the most frequent pair: every count change pushes a fresh entry, and
popped entries whose count no longer matches are dropped.

Pieces longer than MAX_PIECE_CHARS (text without whitespace: DNA, minified code, base64) are cut
into fixed-size sub-pieces before counting, as production byte-level trainers bound their input
words; the cap only limits which merges can be learned. tiktoken still splits with the bare
pattern at encode time and merges long pieces with the learned ranks, so encoding stays lossless.
"""

import heapq
import sys
from collections import Counter, defaultdict

import regex
from tqdm import tqdm

from checks import int_at_least

# GPT-4's (cl100k_base) pre-tokenisation pattern, as published in tiktoken.
GPT4_SPLIT_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

# A pair seen once is a memorised fragment of the corpus, not a reusable piece of text.
MIN_PAIR_COUNT = 2

# Text without whitespace (DNA, minified code, base64) is one pre-tokenised piece: uncapped, 5 MB
# of DNA is one 5 MB word that every merge re-scans, minutes without output. With a cap, a merge
# only scans the short words holding its pair, so training time grows linearly with the text.
# 128 characters sits far above the pieces of prose in any script (a word, at most 3 digits, a
# punctuation run or an 80-column rule of dashes stays whole), so ordinary text trains exactly as
# before, and a token of more than 128 characters would be a memorised string, not a reusable
# piece. Speed hardly depends on the cap between 64 and 256 (docs/log/performance.md).
MAX_PIECE_CHARS = 128

# Quick runs print nothing; a step that runs longer than this shows a progress bar.
PROGRESS_DELAY_S = 3.0


def train_bpe(text: str, vocab_size: int) -> dict[bytes, int]:
    """Learn byte-level BPE merges on `text` and return tiktoken's mergeable ranks.

    `vocab_size` counts the 256 byte tokens, so `vocab_size - 256` merges are learned. Training
    stops early, returning fewer ranks than asked, once no pair occurs at least MIN_PAIR_COUNT
    times (a small corpus). Each step merges the most frequent pair, counted over all chunks with
    overlaps counted ("aaa" holds two "aa"); ties go to the pair whose (left id, right id) is
    smallest, where ids are the ranks, so the result is a pure function of (text, vocab_size).
    Raises ValueError if vocab_size < 256 or the text is not valid Unicode (lone surrogates).
    """
    int_at_least("bpe vocab_size", vocab_size, 256, "the 256 byte tokens come first; e.g. 4096")
    utf8_bytes(text)  # validate once, so the error can name the position in the whole text
    chunk_counts = count_pieces(text)
    words = [list(chunk.encode("utf-8")) for chunk in chunk_counts]
    freqs = list(chunk_counts.values())

    pair_counts: dict[tuple[int, int], int] = defaultdict(int)
    where: dict[tuple[int, int], set[int]] = defaultdict(set)  # pair -> indices of words holding it
    counting = _progress(len(words), "bpe: counting pairs", "word", iterable=zip(words, freqs))
    for wi, (word, freq) in enumerate(counting):
        for pair in zip(word, word[1:]):
            pair_counts[pair] += freq
            where[pair].add(wi)
    heap = [(-count, pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)

    token_bytes = [bytes([b]) for b in range(256)]  # rank -> bytes
    ranks = {tok: rank for rank, tok in enumerate(token_bytes)}
    with _progress(vocab_size - 256, "bpe: merging", "token") as bar:
        while len(token_bytes) < vocab_size and heap:
            neg_count, pair = heapq.heappop(heap)
            count = pair_counts.get(pair, 0)
            if count != -neg_count:
                continue  # stale entry: the pair's count changed after this was pushed
            if count < MIN_PAIR_COUNT:
                break  # the heap top is the largest count, so no later pair qualifies either
            merged_bytes = token_bytes[pair[0]] + token_bytes[pair[1]]
            new_id = ranks.get(merged_bytes)
            if new_id is None:
                new_id = len(token_bytes)
                token_bytes.append(merged_bytes)
                ranks[merged_bytes] = new_id
                bar.update()
            # else: a different split of the same bytes was merged earlier. Reusing its rank
            # keeps ranks one-to-one with byte strings, which tiktoken's table requires.
            _apply_merge(pair, new_id, words, freqs, pair_counts, where, heap)
    return ranks


def count_pieces(text: str) -> Counter[str]:
    """Distinct pre-tokenised pieces of `text` (GPT-4's pattern, then split_long_piece) and
    how often each occurs, in the order they first appear."""
    counts = Counter(regex.findall(GPT4_SPLIT_PATTERN, text))
    for piece in [p for p in counts if len(p) > MAX_PIECE_CHARS]:
        freq = counts.pop(piece)
        for sub_piece in split_long_piece(piece):
            counts[sub_piece] += freq
    return counts


def split_long_piece(piece: str, cap: int = MAX_PIECE_CHARS) -> list[str]:
    """`piece` cut into consecutive sub-pieces of `cap` characters (the last one shorter)."""
    return [piece[i : i + cap] for i in range(0, len(piece), cap)]


def _progress(total: int, desc: str, unit: str, iterable=None) -> tqdm:
    """A bar on stderr that appears only once the step has run PROGRESS_DELAY_S."""
    return tqdm(
        iterable, total=total, desc=desc, unit=unit, delay=PROGRESS_DELAY_S, file=sys.stderr
    )


def _apply_merge(pair, new_id, words, freqs, pair_counts, where, heap) -> None:
    """Replace `pair` by `new_id` in every word holding it and update counts, index and heap."""
    delta: dict[tuple[int, int], int] = defaultdict(int)
    for wi in where.pop(pair):
        new, removed, added = _merge_word(words[wi], pair, new_id)
        if not removed:
            continue  # the index is never pruned, so it may list words that lost the pair
        freq = freqs[wi]
        for p in removed:
            delta[p] -= freq
        for p in added:
            delta[p] += freq
            where[p].add(wi)
        words[wi] = new
    for p, change in delta.items():
        if change == 0:
            continue
        count = pair_counts[p] + change
        if count > 0:
            pair_counts[p] = count
            heapq.heappush(heap, (-count, p))
        else:
            del pair_counts[p]
    assert pair not in pair_counts, "a merged pair must disappear from every word"


def _merge_word(word: list[int], pair: tuple[int, int], new_id: int):
    """Left-to-right, non-overlapping replacement of `pair` by new_id in `word`.

    Returns (new word, pairs removed, pairs added), one entry per adjacent pair that disappears
    or appears, so counts are patched at each merge site rather than re-counted over the word.
    """
    first, second = pair
    out, removed, added = [], [], []
    i, n = 0, len(word)
    last_merge_end = -1
    while True:
        try:
            j = word.index(first, i, n - 1)  # C-speed scan; stop before the last position
        except ValueError:
            break
        if word[j + 1] != second:
            out.extend(word[i : j + 1])
            i = j + 1
            continue
        out.extend(word[i:j])
        removed.append(pair)
        if j == last_merge_end:  # back to back with the previous merge ("abab")
            removed.append((second, first))
            added.append((new_id, new_id))
        elif j > 0:
            removed.append((word[j - 1], first))
            added.append((word[j - 1], new_id))
        if j + 2 < n and not (word[j + 2] == first and j + 3 < n and word[j + 3] == second):
            # A merge starting right after this one records the pair between them, above.
            removed.append((second, word[j + 2]))
            added.append((new_id, word[j + 2]))
        out.append(new_id)
        i = last_merge_end = j + 2
    out.extend(word[i:])
    return out, removed, added


def utf8_bytes(text: str) -> bytes:
    """UTF-8 bytes of `text`; ValueError naming the position of a lone surrogate."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        code = ord(text[e.start])
        raise ValueError(
            f"text has a lone surrogate U+{code:04X} at character {e.start}, which is not valid "
            f"Unicode; read the file with errors='replace' or clean it before tokenising"
        ) from None
