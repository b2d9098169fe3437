"""A generated English of short stories whose pronouns have labelled antecedents.

Each labelled example is one to three sentences with exactly one pronoun (it, he, she, they)
built from a sentence shape (data/pronouns/shapes.py) and the lexicon's words
(data/pronouns/lexicon.py). Every candidate noun comes before the pronoun, exactly one is the
antecedent, and a reader who stops at the pronoun can tell which, by
- agreement: the candidates take different pronouns (the king / the kettle / the children);
- syntactic role: all agree, and the pronoun continues the subject's clause ("The owl in the barn
  went out on a hunt because it ..."); or
- meaning: all agree, and a description just before the pronoun fits only the antecedent's kind
  ("The van passed the fox, and, limping badly, it ...").
After the pronoun comes one of the antecedent's own doings ("it hooted at the moon", "they
marked the homework"), which the other candidates do not share: predicting the next word needs
the pronoun to look its antecedent up, the attention the probe measures.

The training text (data/pronouns/corpus.py) reads as simple prose: most lines are one example,
half of them followed by a sentence without a pronoun, and PROSE_LINES of the lines have no
pronoun at all ("The baker kneaded the dough. The children played in the park."), where each
noun does its own doings with its name in front.

No positional shortcut: agreement shapes draw the antecedent's slot at random, and role shapes
put the subject first or last, so "first candidate" and "nearest candidate" stay near chance.
Splits hold out combinations: each (shape, antecedent, set of other candidates) is hashed to
train / dev / test (80/10/10) independently of the seed, and each split is generated only from
its own combinations, so dev and test examples never occur in the training text.
"""

import functools
import hashlib
import random
import re
from pathlib import Path
from typing import Iterator

from checks import positive_int
from data.pronouns import draw
from data.pronouns.jsonl import Example, read_jsonl
from data.pronouns.lexicon import lexicon
from data.pronouns.shapes import CONNECTIVES, SLOT_KINDS
from data.pronouns.story_mix import DEFAULT_MIX, StoryMix

SPLITS = ("train", "dev", "test")
SPLIT_PERCENT = {"train": 80, "dev": 10}  # test gets the remaining 10
DEFAULT_COUNT = 300  # examples(split) when n is None
PRONOUNS = ("he", "she", "it", "they")
PRONOUN_WEIGHTS = {"he": 2, "she": 2, "it": 3, "they": 2}
NATURAL = "natural"  # the name of the natural set where a JSONL path could stand (--probe natural)
NATURAL_FILE = Path(__file__).with_name("natural.jsonl")

# Sentences of the generated language for `generate.py --attention`; the first is the question
# this project started from.
ATTENTION_EXAMPLES = [
    "The animal in the jungle went out on a hunt because it was hungry.",
    "The queen met the king and then he ruled the land wisely.",
    "When the waiter saw the girl, she skipped across the playground.",
    "The soldiers followed the dog until they marched in step.",
    "In the barn, the owl went out on a hunt because it hooted in the night.",
    "While the farmer watched the kettle, the woman sat down so she hailed a taxi.",
]

_FIELD = re.compile(r"\{(\w+)\}")
_SENTENCE_START = re.compile(r"(?:^|[.!?] )([a-z])")


def split_of(combination: str) -> str:
    """The split a combination key belongs to; a stable hash, independent of any seed."""
    bucket = int.from_bytes(hashlib.blake2b(combination.encode(), digest_size=8).digest()) % 100
    if bucket < SPLIT_PERCENT["train"]:
        return "train"
    return "dev" if bucket < SPLIT_PERCENT["train"] + SPLIT_PERCENT["dev"] else "test"


def paired_in(split: str):
    """Whether a describing phrase may go with a noun in `split` (heldout_cue_pairs): a hash of
    the pair decides the one split it may be written in, as split_of does for a combination."""
    return lambda phrase, noun: _pair_split(phrase, noun.word) == split


@functools.cache  # asked for every describing word a noun could take, at every draw
def _pair_split(phrase, word):
    return split_of(f"cue:{phrase}|{word}")


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")


def _pick_pronoun(rng, shape):
    names = [
        p
        for p in PRONOUN_WEIGHTS
        if (shape.they_ok or p != "they") and (not shape.meaning or p in ("it", "they"))
    ]
    return rng.choices(names, [PRONOUN_WEIGHTS[p] for p in names])[0]


def _pick(rng, nouns, kinds, accept, used):
    """A mention of a noun of `kinds` (in either number) that `accept` takes, or None."""
    for _ in range(30):
        noun = rng.choice(nouns[rng.choice(kinds)])
        mention = draw.Mention(noun, rng)
        if noun.word not in used and accept(mention):
            return mention
    return None


def _choose(rng, shape, same_kind=False):
    """(mentions in slot order, antecedent slot), or None when this draw found no fit; with
    `same_kind`, a role shape's candidates that take the pronoun are of the antecedent's kind
    and number."""
    nouns = draw.tables().nouns
    slot = rng.randrange(len(shape.slots)) if shape.role is None else shape.role
    pronoun = _pick_pronoun(rng, shape)
    antecedent = _pick(
        rng, nouns, SLOT_KINDS[shape.slots[slot]], lambda m: m.pronoun == pronoun, set()
    )
    if antecedent is None:
        return None
    if shape.meaning:  # the others agree, but are another kind of noun

        def accept(m):
            return m.pronoun == pronoun and m.noun.kind != antecedent.noun.kind
    elif shape.role is None:  # agreement: every other candidate takes a pronoun of its own

        def accept(m):
            return m.pronoun != pronoun and (m.pronoun is not None or pronoun == "it")
    else:  # role: most others agree with the pronoun, so that only the role can decide
        agree = rng.random() < 0.7

        def accept(m):
            if same_kind and m.pronoun == pronoun:  # one that can exchange places with it
                return m.noun.kind == antecedent.noun.kind and m.plural == antecedent.plural
            return m.pronoun == pronoun if agree else m.pronoun is not None

    mentions, used = [], {antecedent.noun.word}
    for i, kind in enumerate(shape.slots):
        if i == slot:
            mentions.append(antecedent)
            continue
        other = _pick(rng, nouns, SLOT_KINDS[kind], accept, used)
        if other is None:
            return None
        used.add(other.noun.word)
        mentions.append(other)
    return mentions, slot


def _fill(rng, shape, mentions, slot, allowed=None):
    """The field values of `shape` for these mentions, or None when a verb or action fits none;
    `allowed(phrase, noun)`, where given, says which describing words may go with which noun."""
    tables = draw.tables()
    fills = {}
    for name in dict.fromkeys(_FIELD.findall(shape.pattern)):  # in order: sets vary by process
        if name.isdigit():
            fills[name] = draw.phrase(rng, mentions[int(name)], tables.describing["adj"], allowed)
        elif name.startswith("v"):
            subject, obj = (mentions[int(c)].noun.kind for c in name[1:])
            choices = tables.verbs.get((subject, obj), [])
            if not choices:
                return None
            fills[name] = (rng.choice(choices), None)
        elif name.startswith("be"):
            fills[name] = ("were" if mentions[int(name[2:])].plural else "was", None)
        elif name.startswith(("adj", "desc")):
            chosen = {value for value, _ in fills.values()}  # "hungry and hungry" would not do
            fits = [
                a
                for a in _describing(name, mentions, slot, tables.describing, allowed)
                if a not in chosen
            ]
            if not fits:
                return None
            fills[name] = (rng.choice(fits), None)
        elif name.startswith("act"):
            kinds = {mentions[int(c)].noun.kind for c in name[3:]}
            choices = [a for a, fit in tables.actions if kinds <= fit]
            if not choices:
                return None
            fills[name] = (rng.choice(choices), None)
    fills["pro"] = (mentions[slot].pronoun, None)
    fills["cont"] = (
        draw.doing(rng, mentions[slot], tables.distinct[mentions[slot].noun.word]),
        None,
    )
    fills["conj"] = (rng.choice(CONNECTIVES), None)
    fills["time"] = (rng.choice(lexicon().times), None)
    return fills


def _describing(name, mentions, slot, describing, allowed=None):
    """What field `name` may take: {adj0} an adjective that fits candidate 0; {adjA}, {adjB},
    {descA} an adjective or description that fits the antecedent's kind and no other
    candidate's; {desc} a description that fits the antecedent's kind; each one `allowed` lets go
    with the noun it describes, where given."""
    table = describing["desc" if name.startswith("desc") else "adj"]
    which = name.removeprefix("desc").removeprefix("adj")
    noun = mentions[int(which) if which.isdigit() else slot].noun
    if which.isdigit():
        found = [d for d, _ in table[noun.kind]]
    else:
        others = {m.noun.kind for i, m in enumerate(mentions) if i != slot}
        found = [d for d, kinds in table[noun.kind] if not (which and kinds & others)]
    return found if allowed is None else [d for d in found if allowed(d, noun)]


def _decided_by(shape, mentions, slot):
    """What tells the antecedent apart: agreement where no other candidate takes its pronoun (a
    role shape draws such candidates three times in ten), else the shape's role or meaning."""
    pronoun = mentions[slot].pronoun
    if all(m.pronoun != pronoun for i, m in enumerate(mentions) if i != slot):
        return "agreement"
    return "meaning" if shape.meaning else "role"


def _render(shape, fills, slot, n_slots, decided_by):
    """The example: the pattern with its fields filled, sentences capitalised, spans found."""
    pieces, spans, pos = [], {}, 0
    for i, piece in enumerate(_FIELD.split(shape.pattern)):
        if i % 2 == 1:  # odd pieces of the split are field names
            name = piece
            piece, noun_at = fills[name]
            if noun_at is not None:
                spans[name] = (pos + noun_at, pos + len(piece))
            elif name == "pro":
                spans[name] = (pos, pos + len(piece))
        pieces.append(piece)
        pos += len(piece)
    text = _SENTENCE_START.sub(lambda m: m.group(0).upper(), "".join(pieces))
    distractors = [spans[str(i)] for i in range(n_slots) if i != slot]
    return Example(text, spans["pro"], spans[str(slot)], distractors, decided_by)


def iter_examples(
    split: str, rng: random.Random, mix: StoryMix = DEFAULT_MIX
) -> Iterator[tuple[Example, str]]:
    """Endless (example, combination) pairs of the language `mix` says, whose combinations
    belong to `split`; a combination is "shape|antecedent|other candidates' nouns sorted and
    joined by +"."""
    _check_split(split)
    shapes, weights = mix.shapes, mix.weights
    allowed = paired_in(split) if mix.heldout_cue_pairs else None
    while True:
        # rng.choice where every shape is drawn alike: the default language draws as it always did
        shape = rng.choice(shapes) if weights is None else rng.choices(shapes, weights)[0]
        chosen = _choose(rng, shape, mix.role_same_kind)
        if chosen is None:
            continue
        mentions, slot = chosen
        others = sorted(m.noun.word for i, m in enumerate(mentions) if i != slot)
        combination = f"{shape.name}|{mentions[slot].noun.word}|{'+'.join(others)}"
        if split_of(combination) != split:  # decided before filling: rejects are cheap
            continue
        fills = _fill(rng, shape, mentions, slot, allowed)
        if fills is not None:
            decided_by = _decided_by(shape, mentions, slot)
            yield _render(shape, fills, slot, len(shape.slots), decided_by), combination


def examples(
    split: str, seed: int = 0, n: int | None = None, mix: StoryMix = DEFAULT_MIX
) -> list[Example]:
    """`n` (default DEFAULT_COUNT) distinct labelled examples of `split` in the language `mix`
    says, deterministic in seed."""
    n = DEFAULT_COUNT if n is None else positive_int("n", n, note=f"or None for {DEFAULT_COUNT}")
    out, seen = [], set()
    for example, _ in iter_examples(split, random.Random(f"examples:{split}:{seed}"), mix):
        if example.text not in seen:
            seen.add(example.text)
            out.append(example)
            if len(out) == n:
                return out


def natural() -> list[Example]:
    """The hand-written natural sentences (NATURAL_FILE): an evaluation set only, never trained
    on."""
    return read_jsonl(NATURAL_FILE)
