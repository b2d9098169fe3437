"""The lexicon indexed the ways the generator draws from it, and the noun phrases and doings it
draws (data/pronouns/generator.py builds the stories)."""

import functools
from collections import Counter
from typing import NamedTuple

from data.pronouns.lexicon import AGENTS, lexicon
from data.pronouns.shapes import SLOT_KINDS


class Tables(NamedTuple):
    """The lexicon indexed the ways the generator draws from it."""

    nouns: dict  # kind -> nouns
    actions: list  # (phrase, kinds) naming no noun
    verbs: dict  # (subject kind, object kind) -> verbs naming no noun
    describing: dict  # "adj" | "desc" -> kind -> (phrase, kinds) naming no noun
    distinct: dict  # noun -> a weight per doing: 1 / how many nouns share its first word


@functools.cache
def tables() -> Tables:
    lex = lexicon()
    nouns = {kind: [n for n in lex.nouns if n.kind == kind] for kind in SLOT_KINDS["any"]}
    noun_words = {n.word for n in lex.nouns} | {n.plural for n in lex.nouns if n.plural}
    # Before the pronoun only candidates may name things: actions, verbs and descriptions that
    # name one ("waited by the door", "wrote a letter to") are left out.
    actions = [(a, kinds) for a, kinds in lex.actions if not noun_words.intersection(a.split())]
    verbs = {
        (s, o): [
            v
            for v, subj, obj in lex.verbs
            if s in subj and o in obj and not noun_words.intersection(v.split())
        ]
        for s in AGENTS
        for o in SLOT_KINDS["any"]
    }
    describing = {}
    for field, table in (("adj", lex.adjectives), ("desc", lex.descriptions)):
        describing[field] = {
            k: [
                (d, kinds)
                for d, kinds in table
                if k in kinds and not noun_words.intersection(d.split())
            ]
            for k in SLOT_KINDS["any"]
        }
    # After a pronoun, a doing whose first word few nouns share is drawn more often: that word,
    # the next token, then says which noun the pronoun meant ("whistled", not "smelled").
    sharing = Counter(first for n in lex.nouns for first in {d.split()[0] for d in n.doings})
    distinct = {n.word: [1 / sharing[d.split()[0]] for d in n.doings] for n in lex.nouns}
    return Tables(nouns, actions, verbs, describing, distinct)


class Mention:
    """A candidate: its noun and number (plural three times in ten where the noun has one)."""

    def __init__(self, noun, rng):
        self.noun, self.plural = noun, noun.plural is not None and rng.random() < 0.3
        self.pronoun = noun.pronoun(self.plural)
        self.form = noun.plural if self.plural else noun.word


def _article(rng, mention):
    if mention.plural or mention.noun.plural is None:  # "the dogs", "dogs"; "the milk", "milk"
        return rng.choice(("the ", "the ", "the ", ""))
    if rng.random() < 0.75:
        return "the "
    return "an " if mention.form[0] in "aeio" else "a "


def phrase(rng, mention, adjectives, allowed=None):
    """(text, offset of the noun in it): "the dog", "an old kettle", "children"; an adjective
    only one that `allowed(adjective, noun)` lets go with the noun, where given."""
    article = _article(rng, mention)
    fitting = adjectives[mention.noun.kind]
    if allowed is not None:
        fitting = [(a, kinds) for a, kinds in fitting if allowed(a, mention.noun)]
    if fitting and rng.random() < 0.15:
        adjective, _ = rng.choice(fitting)
        article = (
            article if article in ("the ", "") else ("an " if adjective[0] in "aeio" else "a ")
        )
        article += adjective + " "
    return article + mention.form, len(article)


def doing(rng, mention, weights=None):
    """One of the noun's doings (drawn with `weights` if given), "was" as "were" after a plural."""
    drawn = rng.choices(mention.noun.doings, weights)[0]
    if mention.plural and drawn.startswith("was "):
        drawn = "were " + drawn[4:]
    return drawn
