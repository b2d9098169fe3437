"""The pronoun language's words: tab-separated tables in data/pronouns/lexicon/, read once and
checked here. Each table has a header line; words are lowercase ASCII, phrases one space apart.

    nouns.tsv       word, plural ("-" for a noun that has none: milk, rain), kind (person |
                    animal | thing | place), gender (m | f | -),
                    doings: what this noun does, "|"-separated past-tense predicates that read
                    after any subject pronoun ("barked at the gate"); a doing that starts with
                    "was" takes "were" after a plural
    verbs.tsv       verb (past tense, transitive), subject kinds, object kinds (comma-separated)
    adjectives.tsv  word, kinds it describes
    actions.tsv     phrase (a generic intransitive past-tense predicate), kinds it fits
    descriptions.tsv  phrase that can stand, between commas, before a subject it describes
                    ("limping badly", "cracked and rusty"), kinds it fits and no others
    times.tsv       phrase: a time or manner phrase that can open or close a clause

A noun's pronoun follows from its kind, gender and number: a plural is "they", a man "he", a
woman "she", a singular animal, thing or place "it"; a singular person of no stated gender
(teacher, doctor) has none a reader could be sure of, so the generator never lets a pronoun
point at one or compete with one, except "it", which cannot mean a person.
"""

import functools
from dataclasses import dataclass
from pathlib import Path

FOLDER = Path(__file__).with_name("lexicon")
KINDS = ("person", "animal", "thing", "place")
AGENTS = ("person", "animal")  # kinds that can do things to other things
# Words no table may hold: every pronoun in a generated line is the labelled one.
PRONOUN_WORDS = frozenset(
    "he she it they him her them his its their hers theirs himself herself itself themselves "
    "i me my we us our you your".split()
)


@dataclass(frozen=True)
class Noun:
    word: str
    plural: str | None  # None: a mass noun (milk, rain), always singular
    kind: str
    gender: str  # "m", "f" or "-"
    doings: tuple[str, ...]

    def pronoun(self, plural):
        """The pronoun that refers to this noun (plural or not), or None where a reader could
        not be sure (a singular person of no stated gender)."""
        if plural:
            return "they"
        if self.kind == "person":
            return {"m": "he", "f": "she"}.get(self.gender)
        return "it"


@dataclass(frozen=True)
class Lexicon:
    nouns: tuple[Noun, ...]
    verbs: tuple[tuple[str, frozenset, frozenset], ...]  # (verb, subject kinds, object kinds)
    adjectives: tuple[tuple[str, frozenset], ...]  # (adjective, kinds)
    actions: tuple[tuple[str, frozenset], ...]  # (phrase, kinds)
    descriptions: tuple[tuple[str, frozenset], ...]  # (phrase, kinds)
    times: tuple[str, ...]

    def words(self):
        """Every distinct word of every table."""
        phrases = [n.word for n in self.nouns] + [n.plural for n in self.nouns if n.plural]
        phrases += [d for n in self.nouns for d in n.doings] + [v for v, _, _ in self.verbs]
        phrases += [a for a, _ in self.adjectives] + [a for a, _ in self.actions] + list(self.times)
        phrases += [d for d, _ in self.descriptions]
        return {w for phrase in phrases for w in phrase.split()}


def _rows(name, columns):
    """The rows of table `name` as tuples of `columns` strings; ValueError naming the file and
    line for a wrong header or a row of another width."""
    path = FOLDER / name
    lines = path.read_text(encoding="ascii").splitlines()
    if not lines or lines[0].split("\t") != list(columns):
        raise ValueError(f"{path}: the header must be {' <tab> '.join(columns)}")
    rows = []
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split("\t")]
        if len(cells) != len(columns) or not all(cells):
            raise ValueError(f"{path}, line {lineno}: expected {len(columns)} non-empty cells")
        bad = PRONOUN_WORDS.intersection(
            " ".join(cells).replace("|", " ").replace(",", " ").split()
        )
        if bad:
            raise ValueError(
                f"{path}, line {lineno}: {sorted(bad)[0]!r} is a pronoun; the "
                "lexicon holds none, so that every pronoun in a line is labelled"
            )
        rows.append(tuple(cells))
    return rows


def _kinds(text, where):
    kinds = frozenset(k.strip() for k in text.split(","))
    if not kinds <= set(KINDS):
        raise ValueError(f"{where}: unknown kind in {text!r}; use {', '.join(KINDS)}")
    return kinds


@functools.cache
def lexicon():
    """The tables, read and checked once (ValueError says what is wrong and where)."""
    nouns = []
    for word, plural, kind, gender, doings in _rows(
        "nouns.tsv", ("word", "plural", "kind", "gender", "doings")
    ):
        if (
            kind not in KINDS
            or gender not in ("m", "f", "-")
            or (gender != "-" and kind != "person")
        ):
            raise ValueError(f"nouns.tsv, {word}: kind {kind!r} / gender {gender!r} not allowed")
        nouns.append(
            Noun(
                word,
                None if plural == "-" else plural,
                kind,
                gender,
                tuple(d.strip() for d in doings.split("|")),
            )
        )
    forms = [n.word for n in nouns] + [n.plural for n in nouns if n.plural]
    if len(set(forms)) != len(forms):
        twice = sorted({f for f in forms if forms.count(f) > 1})
        raise ValueError(f"nouns.tsv: {twice[0]!r} is written twice (as a word or a plural)")
    verbs = tuple(
        (v, _kinds(s, f"verbs.tsv, {v}"), _kinds(o, f"verbs.tsv, {v}"))
        for v, s, o in _rows("verbs.tsv", ("verb", "subject", "object"))
    )
    adjectives = tuple(
        (a, _kinds(k, f"adjectives.tsv, {a}"))
        for a, k in _rows("adjectives.tsv", ("word", "kinds"))
    )
    actions = tuple(
        (a, _kinds(k, f"actions.tsv, {a}")) for a, k in _rows("actions.tsv", ("phrase", "kinds"))
    )
    descriptions = tuple(
        (d, _kinds(k, f"descriptions.tsv, {d}"))
        for d, k in _rows("descriptions.tsv", ("phrase", "kinds"))
    )
    times = tuple(t for (t,) in _rows("times.tsv", ("phrase",)))
    return Lexicon(tuple(nouns), verbs, adjectives, actions, descriptions, times)


def find_noun(word: str) -> tuple[Noun, bool] | None:
    """(noun, plural?) of the lexicon for a bare noun as written, in any case ("Dogs": dog, a
    plural), or None for a word the lexicon does not hold as a noun (a name, a phrase)."""
    lower = word.lower()
    for noun in lexicon().nouns:
        if lower == noun.word:
            return noun, False
        if lower == noun.plural:
            return noun, True
    return None
