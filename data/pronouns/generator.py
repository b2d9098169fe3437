"""A generated English corpus of short sentences whose pronouns have labelled antecedents.

Each line is one sentence or a 2-3 sentence story with exactly one pronoun (it, he, she, they).
Every noun before the pronoun is a candidate; exactly one is the antecedent, and it is decidable
at the pronoun itself (a causal model sees nothing after it), by
- agreement: the candidates take different pronouns (king/he, queen/she, bell/it, dogs...
  plural nouns/they), so only one agrees; or
- syntactic role: "The animal in the jungle went out on a hunt because it was hungry." - the
  place or object in the prepositional phrase also takes "it", but the subject is meant.
Right after the pronoun comes the antecedent's own signature ("... because it hooted"), which no
other noun shares, so predicting the next token forces the pronoun's position to look the
antecedent up: the attention the probe measures. Words and templates: data/pronouns/words.py;
the examples' record and file format: data/pronouns/jsonl.py.

No positional shortcut: the antecedent's slot is random in agreement templates (2 or 3
candidates), and role templates put the subject first ("The owl in the barn ...") or last ("In
the barn, the owl ..."), so "first candidate" and "nearest candidate" each score about 45%.

Splits hold out combinations: each (template, antecedent, set of distractors) is hashed to
train / dev / test (80/10/10) independently of the seed, and each split is generated only from
its own combinations, so dev and test sentences never occur in the training text.
"""

import hashlib
import random
import re
from pathlib import Path
from typing import Iterator

from checks import positive_int
from data.pronouns.jsonl import Example
from data.pronouns.words import (
    ACTIONS, CONNECTORS, LINK_VERBS, NOUNS, OBJECT_NOUNS, PLACES, PRONOUNS, TAILS, TEMPLATES,
    Template,
)

SPLITS = ("train", "dev", "test")
SPLIT_PERCENT = {"train": 80, "dev": 10}  # test gets the remaining 10
DEFAULT_COUNT = 300  # examples(split) when n is None
DEFAULT_CORPUS_BYTES = 1_500_000

ATTENTION_EXAMPLES = [
    "The animal in the jungle went out on a hunt because it was hungry.",
    "The queen met the king and then he ruled the land.",
    "When the wizard saw the princess, she curtsied.",
    "The soldiers followed the dog until they marched.",
    "In the barn, the owl went out on a hunt because it hooted.",
    "While the knight watched the bell, the girl waited so she skipped rope.",
]

_FIELD = re.compile(r"\{(\w+)\}")
_BY_PRONOUN = {p: [w for w, n in NOUNS.items() if n.pronoun == p] for p in PRONOUNS}
_OTHERS = {p: [w for w, n in NOUNS.items() if n.pronoun != p] for p in PRONOUNS}
# Role templates favour "it", the one pronoun for which role (not agreement) must decide.
_ROLE_PRONOUN_WEIGHTS = {"he": 1, "she": 1, "it": 3, "they": 1}


def split_of(combination: str) -> str:
    """The split a combination key belongs to; a stable hash, independent of any seed."""
    bucket = int.from_bytes(hashlib.blake2b(combination.encode(), digest_size=8).digest()) % 100
    if bucket < SPLIT_PERCENT["train"]:
        return "train"
    return "dev" if bucket < SPLIT_PERCENT["train"] + SPLIT_PERCENT["dev"] else "test"


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")


def _choose_candidates(rng: random.Random, tpl: Template) -> tuple[str, list[str], int]:
    """(pronoun, candidate words in slot order, antecedent slot)."""
    n_slots = len(set(_FIELD.findall(tpl.pattern)) & {"0", "1", "2"})
    if tpl.subject_slot is None:
        pronoun = rng.choice(PRONOUNS if tpl.they_ok else ("he", "she", "it"))
        antecedent = rng.choice(_BY_PRONOUN[pronoun])
        words = rng.sample(_OTHERS[pronoun], n_slots - 1)
        slot = rng.randrange(n_slots)
    else:
        pronoun = rng.choices(list(_ROLE_PRONOUN_WEIGHTS), list(_ROLE_PRONOUN_WEIGHTS.values()))[0]
        antecedent = rng.choice(_BY_PRONOUN[pronoun])
        pool = PLACES if tpl.pp_pool == "place" else OBJECT_NOUNS
        words = [rng.choice([w for w in pool if w != antecedent])]
        slot = tpl.subject_slot
    words.insert(slot, antecedent)
    return pronoun, words, slot


def _render(rng: random.Random, tpl: Template, pronoun: str, words: list[str],
            slot: int) -> Example:
    """Fill `tpl` with the candidates, the pronoun and the antecedent's signature."""
    fills = {str(i): w for i, w in enumerate(words)}
    fills.update(
        pro=pronoun,
        sig=rng.choice(NOUNS[words[slot]].signatures) + rng.choice(TAILS),
        link=rng.choice(LINK_VERBS),
        conj=rng.choice(CONNECTORS),
        act=rng.choice(ACTIONS),
    )
    pieces, spans, pos = [], {}, 0
    for i, piece in enumerate(_FIELD.split(tpl.pattern)):
        if i % 2 == 1:  # odd pieces of the split are field names
            name, piece = piece, fills[piece]
            spans[name] = (pos, pos + len(piece))
        pieces.append(piece)
        pos += len(piece)
    distractors = [spans[str(i)] for i in range(len(words)) if i != slot]
    return Example("".join(pieces), spans["pro"], spans[str(slot)], distractors)


def iter_examples(split: str, rng: random.Random) -> Iterator[tuple[Example, str]]:
    """Endless (example, combination) pairs whose combinations belong to `split`; a combination
    is "template|antecedent|distractors sorted and joined by +"."""
    _check_split(split)
    while True:
        tpl = rng.choice(TEMPLATES)
        pronoun, words, slot = _choose_candidates(rng, tpl)
        others = sorted(w for i, w in enumerate(words) if i != slot)
        combination = f"{tpl.name}|{words[slot]}|{'+'.join(others)}"
        if split_of(combination) == split:  # decided before rendering: rejects are cheap
            yield _render(rng, tpl, pronoun, words, slot), combination


def examples(split: str, seed: int = 0, n: int | None = None) -> list[Example]:
    """`n` (default DEFAULT_COUNT) distinct labelled examples of `split`, deterministic in seed."""
    n = DEFAULT_COUNT if n is None else positive_int("n", n, note=f"or None for {DEFAULT_COUNT}")
    out, seen = [], set()
    for example, _ in iter_examples(split, random.Random(f"examples:{split}:{seed}")):
        if example.text not in seen:
            seen.add(example.text)
            out.append(example)
            if len(out) == n:
                return out


def corpus_text(seed: int = 0, n_bytes: int = DEFAULT_CORPUS_BYTES) -> str:
    """Training text from train combinations only: one example per line, each line ending in
    "\\n", stopping at the first line that brings the total to at least n_bytes (ASCII, so
    bytes == characters)."""
    positive_int("n_bytes", n_bytes)
    lines, size = [], 0
    for example, _ in iter_examples("train", random.Random(f"corpus:{seed}")):
        lines.append(example.text + "\n")
        size += len(lines[-1])
        if size >= n_bytes:
            return "".join(lines)


def corpus_version() -> str:
    """A hash of the generator's source files: a corpus written by another version of them is
    another corpus (data.sources keeps one file per version)."""
    files = [Path(__file__), Path(__file__).with_name("words.py")]
    return hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()[:12]
