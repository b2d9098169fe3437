"""The labelled pronoun corpus: a task of its own beside the data pipeline, which reads it as the
named corpus `pronouns` (data/sources.py), and the probe's examples.

    generator.py   the generated stories and their held-out splits
    corpus.py      the training text made of them, and its version
    draw.py        the lexicon indexed for drawing; the noun phrases and doings drawn from it
    shapes.py      the sentence shapes the generator fills
    story_mix.py   what it draws (StoryMix, the config's data.pronouns): the kinds' weights, ...
    lexicon.py     the word tables (lexicon/*.tsv) it fills them with
    natural.jsonl  hand-written natural English sentences: an evaluation set, never trained on
    jsonl.py       one labelled example (Example) and the JSONL file format
"""

from data.pronouns.corpus import DEFAULT_CORPUS_BYTES, corpus_text, corpus_version
from data.pronouns.generator import (
    ATTENTION_EXAMPLES,
    DEFAULT_COUNT,
    NATURAL,
    NATURAL_FILE,
    PRONOUNS,
    SPLITS,
    examples,
    iter_examples,
    natural,
    split_of,
)
from data.pronouns.jsonl import (
    DECIDED_BY,
    Example,
    read_examples,
    read_jsonl,
    validate_example,
    write_jsonl,
)

__all__ = [
    "ATTENTION_EXAMPLES",
    "DECIDED_BY",
    "DEFAULT_CORPUS_BYTES",
    "DEFAULT_COUNT",
    "NATURAL",
    "NATURAL_FILE",
    "PRONOUNS",
    "SPLITS",
    "Example",
    "corpus_text",
    "corpus_version",
    "examples",
    "iter_examples",
    "natural",
    "read_examples",
    "read_jsonl",
    "split_of",
    "validate_example",
    "write_jsonl",
]
