"""A labelled example (data.pronouns.Example) as the model reads it at its pronoun: the window,
the query and each candidate's tokens in it (analysis/words.py's rules), as the probe, the
causal tests, activation patching and the logit lens all read it."""

from typing import NamedTuple

from analysis.words import model_window, query_token, token_indices, token_spans, without_clitic


class Item(NamedTuple):
    ids: list[int]  # the window the model reads
    query: int  # index in ids of the query token (query_token: by default the pronoun's last)
    next_id: int | None  # the token after the query in the text (None: the text ends there)
    tokens: list[list[int]]  # per candidate (text order), the indices in ids the query can see
    cut_off: list[bool]  # per candidate: wholly before the window, so the model never reads it
    antecedent: int  # candidate index
    nearest: int  # candidate index, -1 if none precedes the pronoun
    windowed: bool  # the window leaves out the start of the text


def encode_item(tokenizer, example, block_size, query="pronoun"):
    """An Item, read in the model's window at the query position (query_token; by default the
    pronoun), or None when the tokenizer cannot encode the example."""
    try:
        ids, starts = tokenizer.encode_with_offsets(example.text)
    except ValueError:
        return None
    if not example.distractors:
        raise ValueError("every example needs at least one distractor besides the antecedent")
    token_span = token_spans(example.text, starts)
    query = query_token(
        example.text, token_span, without_clitic(example.text, example.pronoun), query
    )
    start, end = model_window(len(ids), query, block_size)
    spans = sorted([example.antecedent, *example.distractors])
    # Only tokens the query can see: a causal model gives later ones exactly 0 anyway, and the
    # model never reads those before its window. A candidate partly outside the window counts
    # the tokens inside it (as one that runs past the query does); wholly outside, it gets 0.
    tokens = [
        [i - start for i in token_indices(token_span, s) if start <= i <= query] for s in spans
    ]
    cut_off = [all(i < start for i in token_indices(token_span, s)) for s in spans]
    before = [j for j, s in enumerate(spans) if s[1] <= example.pronoun[0]]
    nearest = max(before, key=lambda j: spans[j][0]) if before else -1
    next_id = ids[query + 1] if query + 1 < len(ids) else None
    return Item(
        ids[start:end],
        query - start,
        next_id,
        tokens,
        cut_off,
        spans.index(example.antecedent),
        nearest,
        start > 0,
    )
