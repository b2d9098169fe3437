"""The natural set split by the training lexicon: the sentences whose candidates are all nouns of
the generated language's lexicon (data/pronouns/lexicon.py), which the model read in training
in other sentences, and those with a candidate noun the lexicon does not have ("unseen"). The
natural sentences were never trained on, but most of their candidates are the lexicon's nouns:
the split tells how much of the head's score, and of the model's own answer, holds on nouns the
model never read.

A candidate is the text of the example's antecedent or distractor span, looked up as the
lexicon's nouns are (data.pronouns.lexicon.find_noun: singular or plural, in any case), so a
name or a noun of two words is unseen."""

from analysis.answer import model_answer
from analysis.errors import NothingToMeasure
from analysis.results import AnswerRow
from data.pronouns import Example
from data.pronouns.lexicon import find_noun
from data.tokenizer import Tokenizer
from model.gpt import GPT

GROUPS = ("lexicon", "unseen")


def lexicon_group(example: Example) -> str:
    """The group of `example`: "lexicon" where every candidate is a noun of the lexicon, else
    "unseen"."""
    spans = (example.antecedent, *example.distractors)
    known = all(find_noun(example.text[start:end]) for start, end in spans)
    return "lexicon" if known else "unseen"


def by_lexicon(
    model: GPT,
    tokenizer: Tokenizer,
    examples: list[Example],
    head: tuple[int, int],
    query: str = "pronoun",
) -> dict[str, AnswerRow]:
    """Each group of GROUPS that holds examples, in that order: the model's own answer beside
    `head` (model_answer's row of the whole set, read on the group alone: its count, both
    methods' cand@1 and the head's, the baselines, on the examples its tokenizer reads). A
    group of which no example can be read is left out."""
    rows = {}
    for group in GROUPS:
        chosen = [ex for ex in examples if lexicon_group(ex) == group]
        try:
            rows[group] = model_answer(model, tokenizer, chosen, head, query)["all"]
        except NothingToMeasure:  # none in the group, or none its tokenizer can read
            pass
    return rows
