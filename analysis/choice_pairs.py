"""Choice twins as patching pairs: each example and its twin (data/pronouns/choice_twins.py, or
the user's "twin" key) read up to the pronoun, token for token the same length, as the Pair of
analysis/patching.py that the circuit takes:

    clean         the example's ids up to its pronoun's last token
    corrupt       the twin's, the same length (token-aligned)
    antecedent    the positions where the two differ (the pronoun, the describing words, the
                  exchanged candidates): the tokens that carry the choice
    clean_next    the first token of the antecedent's continuation (after the example's pronoun)
    corrupt_next  the first token of the other candidate's (after the twin's pronoun)

so that the patching metric, logit(clean_next) - logit(corrupt_next) at the pronoun, is the
choice metric: above 0 where the model prefers the antecedent's continuation, below 0 where it
prefers the other candidate's (what it should do on the twin). A text longer than the model's
block_size is read in its last block_size tokens up to the pronoun, both alike.
"""

from typing import NamedTuple

from analysis.patching import Pair
from analysis.words import query_token, token_spans, without_clitic
from data.pronouns import Example
from data.pronouns.choice_twins import REASONS, choice_twins
from data.tokenizer import Tokenizer

SKIPS = {
    **REASONS,
    "cannot encode": "the tokenizer cannot encode the example or its twin",
    "not aligned": "no twin has the example's token length up to the pronoun",
    "same next": "the two continuations start with the same token",
}


class NotTokenAligned(ValueError):
    """A twin whose token count up to the pronoun is not the example's: position by position,
    the two runs would not say the same thing, so no patch between them means anything."""

    def __init__(self, clean: int, twin: int):
        super().__init__(
            f"the twin has {twin} tokens up to its pronoun and the example {clean}; a choice twin "
            "must have as many, changing only the reason"
        )
        self.clean, self.twin = clean, twin


class Choices(NamedTuple):
    """The pairs made from a list of examples."""

    pairs: list[Pair]
    kinds: list[str | None]  # each pair's example's decided_by
    examples: list[Example]  # each pair's example, its twin in .twin
    found: dict[str, int]  # kind -> pairs made ("unlabelled" for examples of no kind)
    tried: dict[str, int]  # kind -> examples tried
    skipped: dict[str, int]  # SKIPS key -> examples left out for it


def _upto_pronoun(tokenizer, text, pronoun):
    """(ids up to and including the pronoun's last token, the token after it or None)."""
    ids, starts = tokenizer.encode_with_offsets(text)
    at = query_token(text, token_spans(text, starts), without_clitic(text, pronoun))
    return ids[: at + 1], ids[at + 1] if at + 1 < len(ids) else None


def choice_pair(tokenizer: Tokenizer, example: Example, block_size: int) -> Pair:
    """The Pair of an example that carries a twin (example.twin). NotTokenAligned where the twin
    has another token count up to its pronoun; ValueError where either text cannot be encoded
    or does not go on after its pronoun, or both go on with the same token."""
    twin = example.twin
    if twin is None:
        raise ValueError("the example has no twin")
    clean, clean_next = _upto_pronoun(tokenizer, example.text, example.pronoun)
    corrupt, corrupt_next = _upto_pronoun(tokenizer, twin.text, twin.pronoun)
    if len(clean) != len(corrupt):
        raise NotTokenAligned(len(clean), len(corrupt))
    if clean_next is None or corrupt_next is None or clean_next == corrupt_next:
        raise ValueError("the example and its twin must go on with different first tokens")
    clean, corrupt = clean[-block_size:], corrupt[-block_size:]
    changed = [i for i, (a, b) in enumerate(zip(clean, corrupt)) if a != b]
    if not changed:
        raise ValueError("the twin is the example itself up to the pronoun")
    return Pair(clean, corrupt, changed, clean_next, corrupt_next)


def _first_pair(tokenizer, tries, block_size):
    """(the first try that makes a Pair, its Pair) or (None, the SKIPS key of why none did)."""
    why = "not aligned"
    for example in tries:
        try:
            return example, choice_pair(tokenizer, example, block_size)
        except NotTokenAligned:
            continue
        except ValueError:  # an encoding error, or the same next token
            try:
                _upto_pronoun(tokenizer, example.text, example.pronoun)
                _upto_pronoun(tokenizer, example.twin.text, example.twin.pronoun)
                why = "same next" if why == "not aligned" else why
            except ValueError:
                why = "cannot encode"
    return None, why


def choice_pairs(tokenizer: Tokenizer, examples: list[Example], block_size: int) -> Choices:
    """Every example's first token-aligned choice twin as a Pair, and what was left out why."""
    out = Choices([], [], [], {}, {}, {})
    for example in examples:
        kind = example.decided_by or "unlabelled"
        out.tried[kind] = out.tried.get(kind, 0) + 1
        tries, why = choice_twins(example)
        made, pair = _first_pair(tokenizer, tries, block_size) if tries else (None, why)
        if made is None:
            out.skipped[pair] = out.skipped.get(pair, 0) + 1
            continue
        out.pairs.append(pair)
        out.kinds.append(example.decided_by)
        out.examples.append(made)
        out.found[kind] = out.found.get(kind, 0) + 1
    return out
