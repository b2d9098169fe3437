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
antecedent up: the attention the probe measures. Words and templates: data/pronoun_words.py.

No positional shortcut: the antecedent's slot is random in agreement templates (2 or 3
candidates), and role templates put the subject first ("The owl in the barn ...") or last ("In
the barn, the owl ..."), so "first candidate" and "nearest candidate" each score about 45%.

Splits hold out combinations: each (template, antecedent, set of distractors) is hashed to
train / dev / test (80/10/10) independently of the seed, and each split is generated only from
its own combinations, so dev and test sentences never occur in the training text.

JSONL format (the probe's input; users may write their own), one object per line, character
offsets with end exclusive:
    {"text": str, "pronoun": [start, end], "antecedent": [start, end],
     "distractors": [[start, end], ...]}
"""

import hashlib
import json
import random
import re
from dataclasses import dataclass
from typing import Iterator

from data.pronoun_words import (
    ACTIONS, CONNECTORS, LINK_VERBS, NOUNS, OBJECT_NOUNS, PLACES, PRONOUNS, TAILS, TEMPLATES,
    Template,
)
from storage.atomic import write_atomic

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


@dataclass(frozen=True)
class Example:
    """One labelled pronoun. Spans are (start, end) character offsets into text, end exclusive;
    antecedent and distractors span the bare noun ("dog", not "the dog"). Lists are stored as
    tuples so that examples compare equal after a JSONL round trip."""

    text: str
    pronoun: tuple[int, int]
    antecedent: tuple[int, int]
    distractors: tuple[tuple[int, int], ...]

    def __post_init__(self):
        object.__setattr__(self, "pronoun", tuple(self.pronoun))
        object.__setattr__(self, "antecedent", tuple(self.antecedent))
        object.__setattr__(self, "distractors", tuple(tuple(d) for d in self.distractors))


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
    if n is None:
        n = DEFAULT_COUNT
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError(f"n must be a positive integer (or None for {DEFAULT_COUNT}), got {n!r}")
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
    if isinstance(n_bytes, bool) or not isinstance(n_bytes, int) or n_bytes <= 0:
        raise ValueError(f"n_bytes must be a positive integer, got {n_bytes!r}")
    lines, size = [], 0
    for example, _ in iter_examples("train", random.Random(f"corpus:{seed}")):
        lines.append(example.text + "\n")
        size += len(lines[-1])
        if size >= n_bytes:
            return "".join(lines)


# A word is a run of letters, digits and apostrophes ("it", "it's"); as in analysis.words, a
# query word only needs no letter or digit right beside it ("it" is a word in "it's", not in "hit").
_WORD = re.compile(r"(?:[^\W_]|['’])+")
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")


def validate_example(example: Example) -> None:
    """Raise ValueError saying what is wrong with an example's spans (read_jsonl uses it): each
    span inside the text, none overlapping, the pronoun exactly one word, and every candidate
    ending before the pronoun starts. The pronoun's word need not be in PRONOUNS (the probe's
    report says when it is not)."""
    text = example.text
    if not isinstance(text, str) or not text:
        raise ValueError('"text" must be a non-empty string')
    if not example.distractors:
        raise ValueError('"distractors" needs at least one [start, end] span')
    named = [("pronoun", example.pronoun), ("antecedent", example.antecedent)]
    named += [(f"distractors[{i}]", span) for i, span in enumerate(example.distractors)]
    for name, span in named:
        if len(span) != 2 or not all(type(x) is int for x in span):
            raise ValueError(f'"{name}" must be a [start, end] pair of integers, got {list(span)}')
        if not 0 <= span[0] < span[1] <= len(text):
            raise ValueError(
                f'"{name}" span {list(span)} is empty or outside the text (length {len(text)}); '
                "use character offsets with 0 <= start < end <= len(text)"
            )
    ordered = sorted(named, key=lambda item: item[1])
    for (name_a, a), (name_b, b) in zip(ordered, ordered[1:]):
        if b[0] < a[1]:
            raise ValueError(f'"{name_a}" {list(a)} and "{name_b}" {list(b)} overlap; '
                             "make the spans disjoint")
    start, end = example.pronoun
    beside = text[start - 1 : start] + text[end : end + 1]
    if not _WORD.fullmatch(text[start:end]) or _LETTER_OR_DIGIT.search(beside):
        raise ValueError(f'"pronoun" {[start, end]} covers {text[start:end]!r}, which is not one '
                         "whole word of the text; point it at exactly one word, such as \"it\"")
    for name, span in named[1:]:
        if span[1] > start:
            raise ValueError(
                f'"{name}" {list(span)} comes after the pronoun {[start, end]}; a causal model at '
                "the pronoun cannot see it, so candidates must end before the pronoun starts"
            )


def write_jsonl(examples: list[Example], path) -> None:
    """Write examples to `path` atomically (storage.atomic), one JSON object per line (format in
    the module docstring)."""
    lines = (json.dumps({"text": ex.text, "pronoun": list(ex.pronoun),
                         "antecedent": list(ex.antecedent),
                         "distractors": [list(d) for d in ex.distractors]}) + "\n"
             for ex in examples)
    write_atomic(path, "".join(lines))


def _parse_line(line: str) -> Example:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"not valid JSON ({e.msg}); write one JSON object per line") from None
    keys = ("text", "pronoun", "antecedent", "distractors")
    missing = [k for k in keys if not isinstance(record, dict) or k not in record]
    if missing:
        raise ValueError(f'missing key "{missing[0]}"; each line needs {", ".join(keys)}')
    spans = [record["pronoun"], record["antecedent"]]
    if isinstance(record["distractors"], list):
        spans += record["distractors"]
    if not isinstance(record["distractors"], list) or not all(isinstance(s, list) for s in spans):
        raise ValueError("spans must be [start, end] lists and distractors a list of them")
    example = Example(record["text"], spans[0], spans[1], spans[2:])
    validate_example(example)
    return example


def read_jsonl(path) -> list[Example]:
    """Read and validate examples; blank lines are skipped. A bad line raises ValueError naming
    the file and line number (text that is not UTF-8: naming the file); a missing file raises
    FileNotFoundError."""
    out = []
    with open(path, encoding="utf-8") as f:
        try:
            for lineno, line in enumerate(f, start=1):
                if line.strip():
                    out.append(_parse_line(line))
        except UnicodeDecodeError:
            raise ValueError(f"{path} is not UTF-8 text; save it as UTF-8 JSONL") from None
        except ValueError as e:
            raise ValueError(f"{path}, line {lineno}: {e}") from None
    return out
