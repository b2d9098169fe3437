"""The labelled pronoun corpus: a task of its own beside the data pipeline, which reads it as the
named corpus `pronouns` (data/sources.py), and the probe's examples.

    generator.py  the generated sentences, their held-out splits, the training text
    words.py      the word tables and sentence templates the generator fills
    jsonl.py      one labelled example (Example) and the JSONL file format
"""

from data.pronouns.generator import (
    ATTENTION_EXAMPLES, DEFAULT_CORPUS_BYTES, DEFAULT_COUNT, SPLITS, corpus_text, corpus_version,
    examples, iter_examples, split_of,
)
from data.pronouns.jsonl import Example, read_jsonl, validate_example, write_jsonl
from data.pronouns.words import PRONOUNS

__all__ = [
    "ATTENTION_EXAMPLES", "DEFAULT_CORPUS_BYTES", "DEFAULT_COUNT", "PRONOUNS", "SPLITS", "Example",
    "corpus_text", "corpus_version", "examples", "iter_examples", "read_jsonl", "split_of",
    "validate_example", "write_jsonl",
]
