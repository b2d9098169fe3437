"""Byte-level BPE: a pure-Python trainer and tiktoken's rank file format.

Training produces `mergeable_ranks` (token bytes -> rank), the table `tiktoken.Encoding` runs:
ranks 0..255 are the single bytes 0x00..0xFF, and each merge learned afterwards takes the next rank,
so rank order is merge order. Text is first split with GPT-4's (cl100k) pattern, so merges never
cross a chunk boundary (a word with its leading space, a run of up to three digits, punctuation...),
exactly as tiktoken splits before it merges.

The trainer is the standard fast one: count each distinct chunk once with its frequency, keep the
count of every adjacent pair and an index from each pair to the chunks that contain it, and after
a merge re-count only the chunks the merged pair occurred in. A max-heap with lazy invalidation
picks the most frequent pair: every count change pushes a fresh entry, and popped entries whose
count no longer matches are dropped.
"""

import base64
import heapq
from collections import Counter, defaultdict

import regex

# GPT-4's (cl100k_base) pre-tokenisation pattern, as published in tiktoken.
GPT4_SPLIT_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

# A pair seen once is a memorised fragment of the corpus, not a reusable piece of text.
MIN_PAIR_COUNT = 2


def train_bpe(text: str, vocab_size: int) -> dict[bytes, int]:
    """Learn byte-level BPE merges on `text` and return tiktoken's mergeable ranks.

    `vocab_size` counts the 256 byte tokens, so `vocab_size - 256` merges are learned. Training
    stops early, returning fewer ranks than asked, once no pair occurs at least MIN_PAIR_COUNT
    times (a small corpus). Each step merges the most frequent pair, counted over all chunks with
    overlaps counted ("aaa" holds two "aa"); ties go to the pair whose (left id, right id) is
    smallest, where ids are the ranks, so the result is a pure function of (text, vocab_size).
    Raises ValueError if vocab_size < 256 or the text is not valid Unicode (lone surrogates).
    """
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 256:
        raise ValueError(
            f"bpe vocab_size must be an integer >= 256 (the 256 byte tokens come first), "
            f"got {vocab_size!r}; pick e.g. 4096"
        )
    utf8_bytes(text)  # validate once, so the error can name the position in the whole text
    chunk_counts = Counter(regex.findall(GPT4_SPLIT_PATTERN, text))
    words = [list(chunk.encode("utf-8")) for chunk in chunk_counts]
    freqs = list(chunk_counts.values())

    pair_counts: dict[tuple[int, int], int] = defaultdict(int)
    where: dict[tuple[int, int], set[int]] = defaultdict(set)  # pair -> indices of words holding it
    for wi, (word, freq) in enumerate(zip(words, freqs)):
        for pair in zip(word, word[1:]):
            pair_counts[pair] += freq
            where[pair].add(wi)
    heap = [(-count, pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)

    token_bytes = [bytes([b]) for b in range(256)]  # rank -> bytes
    ranks = {tok: rank for rank, tok in enumerate(token_bytes)}
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
        # else: a different split of the same bytes was merged earlier. Reusing its rank keeps
        # ranks one-to-one with byte strings, which tiktoken's table requires.
        _apply_merge(pair, new_id, words, freqs, pair_counts, where, heap)
    return ranks


def _apply_merge(pair, new_id, words, freqs, pair_counts, where, heap) -> None:
    """Replace `pair` by `new_id` in every word holding it and update counts, index and heap."""
    first, second = pair
    delta: dict[tuple[int, int], int] = defaultdict(int)
    for wi in where.pop(pair):
        old = words[wi]
        new = _merge_word(old, first, second, new_id)
        if len(new) == len(old):
            continue  # the index is never pruned, so it may list words that lost the pair
        freq = freqs[wi]
        # Re-counting the whole (short) word is simpler than patching neighbours by hand and
        # handles overlapping occurrences ("aaa") without special cases.
        for p in zip(old, old[1:]):
            delta[p] -= freq
        for p in zip(new, new[1:]):
            delta[p] += freq
            if new_id in p:
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


def _merge_word(word: list[int], first: int, second: int, new_id: int) -> list[int]:
    """Left-to-right, non-overlapping replacement of (first, second) by new_id."""
    out = []
    i, n = 0, len(word)
    while i < n:
        if word[i] == first and i + 1 < n and word[i + 1] == second:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


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


def write_ranks(ranks: dict[bytes, int], path) -> None:
    """Write `base64(token) rank` lines in rank order: the file tiktoken.load_tiktoken_bpe reads."""
    with open(path, "w", encoding="ascii", newline="\n") as f:
        for tok, rank in sorted(ranks.items(), key=lambda item: item[1]):
            f.write(f"{base64.b64encode(tok).decode('ascii')} {rank}\n")


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
    if sorted(ranks.values()) != list(range(len(ranks))) or len(ranks) < 256 or any(
        ranks.get(bytes([b])) != b for b in range(256)
    ):
        raise ValueError(
            f"{path}: ranks must be 0..n-1 with the 256 single bytes first, in byte order; "
            f"this is not a byte-level BPE file saved by tinygpt, so retrain the tokenizer"
        )
    return ranks
