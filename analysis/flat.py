"""Which heads spread their attention almost evenly: a flat head, read at the query, gives no
token much more than the even share. Summed over a word's tokens (the word map), a flat head
favours the words of more tokens by their length alone, so the maps mark no word on it and say
that it is flat."""

from analysis.words import SentenceAttention

FLAT = 1.5  # a head is flat where no token gets this many times the even share


def flat_heads(sentence: SentenceAttention, ratio: float = FLAT) -> set[tuple[int, int]]:
    """The (layer, head) pairs whose attention from the query token has its largest share on
    one token under `ratio` times the even share (1 / the tokens it may see); none where the
    query sees only itself (nothing to spread)."""
    q = sentence.query_token
    if q == 0:
        return set()
    even = 1 / (q + 1)
    return {
        (l, h)
        for l, layer in enumerate(sentence.weights)
        for h, weights in enumerate(layer)
        if max(float(w) for w in weights[q][: q + 1]) < ratio * even
    }
