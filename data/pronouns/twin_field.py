"""A labelled example's choice twin: the same sentence with the answer flipped to another
candidate, as the JSONL key "twin" gives it (data/pronouns/jsonl.py reads it, the built-in sets
get theirs from data/pronouns/choice_twins.py).

    "twin": {"text": str, "pronoun": [start, end], "antecedent": [start, end]}

offsets into the twin's own text, end exclusive. Up to its pronoun the twin keeps every candidate
and changes only what decides (the pronoun's number or gender, the describing words, the
candidates' places), so that another candidate is the answer: `antecedent` spans that candidate
in the twin. After the pronoun, each text goes on with what its own antecedent does: the choice
metric compares the first token of the example's continuation with the first of the twin's, at
the pronoun. Whether the two texts have the same number of tokens up to the pronoun (token-aligned)
depends on the tokenizer, so the analysis checks that (analysis/choice_pairs.py), not this file.
"""

import re
from dataclasses import dataclass

KEYS = ("text", "pronoun", "antecedent")
_WORD = re.compile(r"(?:[^\W_]|['’])+")
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")


@dataclass(frozen=True)
class Twin:
    """A choice twin (see the module docstring); spans as (start, end) tuples."""

    text: str
    pronoun: tuple[int, int]
    antecedent: tuple[int, int]

    def __post_init__(self):
        object.__setattr__(self, "pronoun", tuple(self.pronoun))
        object.__setattr__(self, "antecedent", tuple(self.antecedent))

    def record(self) -> dict:
        """The JSON object of the "twin" key."""
        return {
            "text": self.text,
            "pronoun": list(self.pronoun),
            "antecedent": list(self.antecedent),
        }


def parse_twin(value: object, text: str, pronoun: tuple[int, int]) -> Twin:
    """The "twin" key's value of an example with `text` and `pronoun` as a checked Twin;
    ValueError saying what is wrong."""
    if not isinstance(value, dict) or sorted(value) != sorted(KEYS):
        raise ValueError(
            '"twin" must be an object with exactly the keys text, pronoun, antecedent '
            "(the twin's own text and offsets)"
        )
    twin_text = value["text"]
    if not isinstance(twin_text, str) or not twin_text:
        raise ValueError('"twin.text" must be a non-empty string')
    for name in ("pronoun", "antecedent"):
        span = value[name]
        if not isinstance(span, list) or len(span) != 2 or not all(type(x) is int for x in span):
            raise ValueError(f'"twin.{name}" must be a [start, end] pair of integers')
        if not 0 <= span[0] < span[1] <= len(twin_text):
            raise ValueError(
                f'"twin.{name}" span {span} is empty or outside the twin\'s text '
                f"(length {len(twin_text)}); use offsets into twin.text"
            )
    twin = Twin(twin_text, value["pronoun"], value["antecedent"])
    start, end = twin.pronoun
    beside = twin_text[start - 1 : start] + twin_text[end : end + 1]
    if not _WORD.fullmatch(twin_text[start:end]) or _LETTER_OR_DIGIT.search(beside):
        raise ValueError(f'"twin.pronoun" {list(twin.pronoun)} is not one whole word of twin.text')
    if twin.antecedent[1] > start:
        raise ValueError('"twin.antecedent" must end before the twin\'s pronoun starts')
    if twin_text[:end] == text[: pronoun[1]]:
        raise ValueError('"twin.text" is the same as "text" up to the pronoun; change what decides')
    for name, t, e in (("text", text, pronoun[1]), ("twin.text", twin_text, end)):
        if not t[e:].strip(" .,;:!?"):
            raise ValueError(
                f'"{name}" ends at its pronoun; a twin needs each text to go on with what '
                "its antecedent does (the choice metric compares the two)"
            )
    return twin
