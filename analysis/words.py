"""From token attention to word attention: where does the pronoun look?

A model attends over tokens; a person reads words. Here a sentence is cut into words, each
token is given to one word, and a query word's attention over the words up to it is the sum of
its attention over their tokens.

Words: a maximal run of letters, digits and apostrophes ("hungry", "it's", "42"), or a maximal
run of other non-space characters (",", "...", ")."). Whitespace belongs to no word: a token's
leading spaces (BPE's " animal") belong to the word that follows. If one token spans two words
("(the" in a BPE vocabulary), the two are shown as one word, so no attention is ever split or
lost. Offsets come from the tokenizer's encode_with_offsets.

The query is the LAST token of the pronoun: in a causal model it is the first position that has
seen the whole word, and where the model must decide what comes next. A clitic the word ends
with is not the pronoun: "it's" is read at "it" (its "'s" is a token of its own in GPT-2's
split pattern), for the probe's items as for --attention and --word. The query can be read from
a later position instead (QUERY_POSITIONS, query_token): "next", the token after the pronoun, or
"last", the text's last token, where the model has read the words that follow the pronoun ("...
until it was tired": at "it" a causal model has not seen "tired" yet).

A text longer than the model's block_size is never refused: the model reads the window
`model_window` gives, the last block_size tokens up to and including the query, exactly what it
sees at that position while it reads or writes the text. Words before the window are not shown.
A labelled example is read the same way at its pronoun (analysis/items.py).
"""

import re
from dataclasses import dataclass

import torch

from analysis.errors import NoQueryWord
from data.pronouns import PRONOUNS
from model.hooks import caching, per_layer

WORD_RE = re.compile(r"(?:[^\W_]|['’])+|[^\w\s]+|_+")
# Where attention is read from, relative to the pronoun (or the word asked for): see query_token.
QUERY_POSITIONS = ("pronoun", "next", "last")


def split_words(text):
    """(start, end) character spans of the words of `text`, in order (end exclusive)."""
    return [m.span() for m in WORD_RE.finditer(text)]


def find_query_span(text, word=None, occurrence=1):
    """(start, end) of the first occurrence of `word` in `text` as a whole word, case-insensitive
    (the `occurrence`th, counted from 1, when asked); with word None, of the first pronoun
    (PRONOUNS: he, she, it or they); a clitic it ends with left out (without_clitic: "it's" is
    read at "it"). NoQueryWord if none, or if there are fewer than `occurrence`."""
    if not text.strip():
        raise NoQueryWord("empty", "the sentence is empty; give a sentence with a pronoun in it")
    if word is not None and not word.strip():
        raise NoQueryWord(
            "empty word", "the query word is empty; give the word whose attention to show"
        )
    targets = PRONOUNS if word is None else (word.strip(),)
    # Whole word: no letter or digit just before or after ("it" matches in "it's", not in
    # "hit"); a target that starts or ends with punctuation needs no boundary on that side.
    alnum = re.compile(r"[^\W_]")
    alternatives = "|".join(
        ("(?<![^\\W_])" if alnum.match(t[0]) else "")
        + re.escape(t)
        + ("(?![^\\W_])" if alnum.match(t[-1]) else "")
        for t in targets
    )
    found = list(re.finditer(alternatives, text, flags=re.IGNORECASE))
    if 1 < occurrence and found and len(found) < occurrence:
        asked = f"the word {word!r}" if word is not None else "a pronoun"
        raise NoQueryWord(
            "occurrence",
            f"{asked} occurs {len(found)} time{'s' * (len(found) > 1)} in {text!r}, not "
            f"{occurrence}; ask for an occurrence from 1 to {len(found)}",
        )
    m = found[occurrence - 1] if found else None
    if m is None:
        if word is None:
            raise NoQueryWord(
                "pronoun", f"no pronoun ({', '.join(PRONOUNS)}) in {text!r}; name the query word"
            )
        raise NoQueryWord(
            "word", f"the word {word!r} is not in {text!r}; pick a word of the sentence"
        )
    return without_clitic(text, m.span())


# English clitics after an apostrophe ("it's", "they're", "she'll"): GPT-2's split pattern
# gives them a token of their own, and they are not the word the model has to resolve.
CLITIC_RE = re.compile(r"['’](?:s|re|ll|d|ve|m)", re.IGNORECASE)


def without_clitic(text, span):
    """`span` (start, end) of a word in `text`, less a clitic it ends with: "it's" is read at
    "it", the pronoun, not at "'s" (a word that is only a clitic is kept whole)."""
    start, end = span
    for m in CLITIC_RE.finditer(text, start, end):
        if m.end() == end and m.start() > start:
            return start, m.start()
    return span


def token_spans(text, starts):
    """(start, end) character span of each token from its start offset. Byte-level tokens that
    split one character share its offset; each still gets that character (spans may overlap)."""
    ends = list(starts[1:]) + [len(text)]
    return [(s, max(e, s + 1) if s < len(text) else s) for s, e in zip(starts, ends)]


def token_indices(spans, span):
    """Indices of the tokens whose character spans (from token_spans) overlap `span` (start, end
    exclusive): a BPE token " dog" belongs to the word "dog"."""
    return [i for i, (a, b) in enumerate(spans) if a < span[1] and b > span[0]]


def query_token(text: str, spans: list, word: tuple[int, int], query: str = "pronoun") -> int:
    """Index of the query token among a text's tokens (their `spans`, from token_spans), for the
    word at character span `word` (the pronoun): "pronoun", the word's last token; "next", the
    token after it (with a character vocabulary, usually the space); "last", the text's last
    token. ValueError for another position, or for "next" where nothing follows the word."""
    if query not in QUERY_POSITIONS:
        raise ValueError(
            f"the query position {query!r} is not one of "
            f"{', '.join(QUERY_POSITIONS)}; pick one of them"
        )
    at = token_indices(spans, word)[-1]
    if query == "last":
        return len(spans) - 1
    if query == "next" and at + 1 == len(spans):
        raise ValueError(
            f"nothing follows {text[word[0] : word[1]]!r} in {text!r}, so there is no "
            "next token to read from; read at the pronoun or the last token"
        )
    return at + 1 if query == "next" else at


def group_tokens(text, starts):
    """Words of `text` and the word of each token.

    Returns (words, word_spans, token_word): word texts, their (start, end) spans, and for every
    token the index of its word. See the module docstring for the rules.
    """
    spans = split_words(text)
    if not spans:
        raise ValueError(f"{text!r} has no words; give a sentence")
    # Each token reaches from its first to its last non-space character; it joins every word it
    # touches. A token that is all whitespace belongs to the next word (or the last one).
    parent = list(range(len(spans)))  # word i is merged into word parent[i] <= i
    reach = []
    for s, e in token_spans(text, starts):
        touched = [i for i, (ws, we) in enumerate(spans) if ws < e and s < we]
        if not touched:
            later = [i for i, (ws, _) in enumerate(spans) if ws >= s]
            touched = [later[0] if later else len(spans) - 1]
        reach.append(touched)
        for i in range(touched[0] + 1, touched[-1] + 1):
            parent[i] = parent[touched[0]]
    roots = sorted(set(parent))
    group_of_word = [roots.index(parent[i]) for i in range(len(spans))]
    word_spans = []
    for g in range(len(roots)):
        members = [spans[i] for i in range(len(spans)) if group_of_word[i] == g]
        word_spans.append((members[0][0], members[-1][1]))
    words = [text[s:e] for s, e in word_spans]
    token_word = [group_of_word[touched[-1]] for touched in reach]
    return words, word_spans, token_word


def word_weights(token_weights, token_word, n_words):
    """Sum one query's attention over tokens (a sequence of floats) into its words."""
    totals = [0.0] * n_words
    for w, word in zip(token_weights, token_word):
        totals[word] += float(w)
    return totals


def model_window(n_tokens, query, block_size):
    """(start, end): the slice of a text's n_tokens tokens the model reads for the attention at
    token `query`. The last block_size tokens up to and including the query when the text up to
    it is longer, else the first block_size; the tokens after the query change nothing there
    (attention is causal) but the token maps show them."""
    start = max(0, query + 1 - block_size)
    return start, min(n_tokens, start + block_size)


@dataclass
class SentenceAttention:
    """One sentence through the model, read in the window the query sees (model_window).

    tokens, weights and query_token belong to the window: weights[l][h] is head h of layer l as
    a (T, T) tensor over the window's T tokens, query_token the index there of the query word's
    last token. `words` are the words with a token in the window, up to and including the query
    word, `rows[l][h]` its attention over them. window_start is the window's first token in the
    whole sentence (0 when nothing is cut), words_cut the words wholly before the window and
    word_cut_in_part whether the first word shown lost its first tokens to it."""

    text: str
    tokens: list  # each token decoded alone, for labels
    words: list
    query_word: int
    query_token: int
    weights: list
    rows: list
    window_start: int
    words_cut: int
    word_cut_in_part: bool
    position: str = "pronoun"  # where it was read (QUERY_POSITIONS), relative to `asked`
    asked: str = ""  # the query word as found in the text, before `position` moved off it

    @property
    def window_note(self):
        """A sentence on the words the window leaves out, or None when the model sees them all."""
        if not self.window_start:
            return None
        n = self.words_cut
        cut = "the first word is" if n == 1 else f"the first {n} words are"
        left_out = [f"{cut} outside its window"] if n else []
        if self.word_cut_in_part:
            where = "it" if left_out else "its window"
            left_out.append(f'only part of "{self.words[0]}" is inside {where}')
        return (
            f"the model sees {self.query_token + 1} tokens up to "
            f'"{self.words[self.query_word]}" (its block_size): ' + ", and ".join(left_out)
        )


def sentence_attention(model, tokenizer, text, word=None, query="pronoun", occurrence=1):
    """Run `text` through `model` and gather its query token's attention per layer and head, in
    the window the model reads at the query (model_window): a text of any length is fine. The
    query token is query_token's for the query word (`word`, by default the first pronoun; its
    `occurrence`th when asked); the query word of the result is the word that token belongs to."""
    query_span = find_query_span(text, word, occurrence)
    ids, starts = tokenizer.encode_with_offsets(text)
    words, _, token_word = group_tokens(text, starts)
    query_position = query
    query = query_token(text, token_spans(text, starts), query_span, query)
    start, end = model_window(len(ids), query, model.config.block_size)
    device = next(model.parameters()).device
    names = per_layer("attn.hook_pattern", model.config.n_layer)
    with torch.no_grad(), caching(model, names) as cache:
        model.residual(torch.tensor([ids[start:end]], device=device))  # the patterns only
    weights = [[head.cpu() for head in cache[name][0]] for name in names]  # per head (T, T)
    first_word = token_word[start]
    window_word = [w - first_word for w in token_word[start:end]]  # words from the first shown
    query_word = token_word[query] - first_word
    n_words = window_word[-1] + 1
    rows = [
        [
            word_weights(head[query - start].tolist(), window_word, n_words)[: query_word + 1]
            for head in layer
        ]
        for layer in weights
    ]
    tokens = [tokenizer.decode([i]) for i in ids[start:end]]
    return SentenceAttention(
        text,
        tokens,
        words[first_word : first_word + query_word + 1],
        query_word,
        query - start,
        weights,
        rows,
        window_start=start,
        words_cut=first_word,
        word_cut_in_part=start > 0 and token_word[start - 1] == first_word,
        position=query_position,
        asked=text[query_span[0] : query_span[1]],
    )
