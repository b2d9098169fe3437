"""The pronoun language's training text (data/pronouns/generator.py's module docstring says
what it holds): most lines one example from the train split, half of them followed by a sentence
without a pronoun, and PROSE_LINES of the lines prose with no pronoun at all, where each noun
does its own doings with its name in front; and the version a corpus file is kept under.
"""

import hashlib
import random
from pathlib import Path

from checks import positive_int
from data.pronouns import draw
from data.pronouns.generator import iter_examples, paired_in
from data.pronouns.lexicon import AGENTS, lexicon
from data.pronouns.shapes import SLOT_KINDS
from data.pronouns.story_mix import DEFAULT_MIX, StoryMix

DEFAULT_CORPUS_BYTES = 12_000_000
PROSE_LINES = 0.3  # the share of lines without a pronoun
PROSE_AFTER = 0.5  # the share of example lines with a sentence without one after the example


def prose_sentence(rng: random.Random, allowed=None) -> str:
    """A sentence without a pronoun: a noun doing one of its doings, a verb between two nouns,
    or an action at a time; `allowed(phrase, noun)`, where given, says which adjectives may go with
    which noun."""
    lex, tables = lexicon(), draw.tables()
    nouns, verbs, adjectives = tables.nouns, tables.verbs, tables.describing["adj"]
    kind = rng.choice(("person", "person", "animal", "thing", "place"))
    subject = draw.Mention(rng.choice(nouns[kind]), rng)
    phrase, _ = draw.phrase(rng, subject, adjectives, allowed)
    roll = rng.random()
    if roll < 0.5:
        sentence = f"{phrase} {draw.doing(rng, subject)}"
    elif roll < 0.8 and kind in AGENTS:
        obj_kind = rng.choice([k for k in SLOT_KINDS["any"] if verbs[(kind, k)]])
        obj = draw.Mention(rng.choice(nouns[obj_kind]), rng)
        verb = rng.choice(verbs[(kind, obj_kind)])
        obj_phrase, _ = draw.phrase(rng, obj, adjectives, allowed)
        sentence = f"{phrase} {verb} {obj_phrase} {rng.choice(lex.times)}"
    else:
        fitting = [a for a, kinds in lex.actions if kind in kinds] or [draw.doing(rng, subject)]
        sentence = f"{rng.choice(lex.times)}, {phrase} {rng.choice(fitting)}"
    return sentence[0].upper() + sentence[1:] + "."


def corpus_text(
    seed: int = 0, n_bytes: int = DEFAULT_CORPUS_BYTES, mix: StoryMix = DEFAULT_MIX
) -> str:
    """Training text of the language `mix` says, from train combinations only, one paragraph per
    line, each line ending in
    "\\n", stopping at the first line that brings the total to at least n_bytes (ASCII, so bytes ==
    characters). PROSE_LINES of the lines are prose without a pronoun; PROSE_AFTER of the others
    add a sentence without one after the example (both times mix.prose)."""
    positive_int("n_bytes", n_bytes)
    rng = random.Random(f"corpus:{seed}")
    examples_ = iter_examples("train", random.Random(f"corpus-examples:{seed}"), mix)
    allowed = paired_in("train") if mix.heldout_cue_pairs else None
    lines, size = [], 0
    while size < n_bytes:
        if rng.random() < PROSE_LINES * mix.prose:
            line = " ".join(prose_sentence(rng, allowed) for _ in range(rng.randint(1, 3)))
        else:
            line = next(examples_)[0].text
            if rng.random() < PROSE_AFTER * mix.prose:
                line += " " + prose_sentence(rng, allowed)
        lines.append(line + "\n")
        size += len(lines[-1])
    return "".join(lines)


def corpus_version() -> str:
    """A hash of the generator's source files and word tables: a corpus written by another
    version of them is another corpus (data.sources keeps one file per version)."""
    here = Path(__file__).parent
    files = [
        here / "generator.py",
        here / "corpus.py",
        here / "draw.py",
        here / "shapes.py",
        here / "story_mix.py",
        here / "lexicon.py",
        *sorted((here / "lexicon").glob("*.tsv")),
    ]
    return hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()[:12]
