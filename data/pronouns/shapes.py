"""The sentence shapes of the pronoun language (data/pronouns/generator.py fills them).

A pattern's fields:
    {0} {1} {2}   candidate noun phrases, in text order ("the dog", "an old kettle", "children");
                  `slots` says which kinds each may hold (SLOT_KINDS)
    {v01}         a transitive verb whose subject is candidate 0 and object candidate 1
    {act0}        a generic action candidate 0 can do; {act01}: one that both 0 and 1 can do
    {be0} {adj0}  "was" or "were" as candidate 0 is singular or plural; an adjective that fits it
    {adjA}        an adjective that fits the antecedent's kind and no other candidate's; {adjB}:
                  a second one; {descA}: a description ("limping badly") that fits it alone;
                  {desc}: one that fits the antecedent, whatever the others are
    {pro} {cont}  the pronoun, and what its antecedent does (one of that noun's doings)
    {conj}        a connective (CONNECTIVES); {time} a time phrase of the lexicon
The generator capitalises each sentence's first letter (so "It", "They" open sentences too).

Agreement decides (role None): the other candidates take other pronouns than the antecedent
("The king fed the dog, so it ..."), and the antecedent's slot is drawn at random. Syntactic role
decides (role = a slot): every candidate may agree with the pronoun, and the antecedent is the
subject of the clause the pronoun continues ("The owl in the barn ... it"); such shapes put that
subject first or last, so that neither "first" nor "nearest" is a shortcut. Meaning decides
(meaning True): the others agree with the pronoun but are another kind of noun, and a description
just before the pronoun fits only the antecedent's kind ("The van passed the fox, and, hungry,
it ..."); only "it" and "they" can be meant this way. `they_ok` is False where two candidates are
joined by "and", which "they" could mean together.
"""

from typing import NamedTuple

SLOT_KINDS = {
    "agent": ("person", "animal"),
    "person": ("person",),
    "animal": ("animal",),
    "thing": ("thing",),
    "place": ("place",),
    "entity": ("person", "animal", "thing"),
    "any": ("person", "animal", "thing", "place"),
}
CONNECTIVES = (
    "because",
    "so",
    "and then",
    "and soon",
    "until",
    "before",
    "but later",
    "and later",
    "after that",
    "while",
)


class Shape(NamedTuple):
    name: str
    pattern: str
    slots: tuple[str, ...]
    role: int | None = None
    they_ok: bool = True
    meaning: bool = False


SHAPES = (
    # Agreement, two candidates: subject, object, clauses in front, a second sentence.
    Shape("saw", "{0} {v01} {1} {conj} {pro} {cont}.", ("agent", "entity")),
    Shape("comma", "{0} {v01} {1}, and {pro} {cont}.", ("agent", "entity")),
    Shape("but", "{0} {v01} {1}, but {pro} {cont}.", ("agent", "entity")),
    Shape("when", "When {0} {v01} {1}, {pro} {cont}.", ("agent", "entity")),
    Shape("after", "After {0} {v01} {1}, {pro} {cont}.", ("agent", "entity")),
    Shape("because", "Because {0} {v01} {1}, {pro} {cont}.", ("agent", "entity")),
    Shape("as", "As soon as {0} {v01} {1}, {pro} {cont}.", ("agent", "entity")),
    Shape("story2", "{0} {v01} {1}. Then {pro} {cont}.", ("agent", "entity")),
    Shape("later2", "{0} {v01} {1} {time}. Later {pro} {cont}.", ("agent", "entity")),
    Shape("time2", "{time}, {0} {v01} {1}. Soon {pro} {cont}.", ("agent", "entity")),
    Shape("next2", "{0} {v01} {1}. The next day {pro} {cont}.", ("agent", "entity")),
    Shape("and", "{0} and {1} {act01} {conj} {pro} {cont}.", ("agent", "agent"), they_ok=False),
    Shape(
        "home2",
        "{0} and {1} stayed at home. Later {pro} {cont}.",
        ("agent", "agent"),
        they_ok=False,
    ),
    Shape("acts2", "{0} {act0}. {1} {act1}. Then {pro} {cont}.", ("agent", "entity")),
    Shape("watched", "{0} watched as {1} {act1}, and then {pro} {cont}.", ("agent", "agent")),
    Shape("wanted", "{0} wanted {1}, so {pro} {cont}.", ("person", "entity")),
    Shape("gave", "{0} gave {1} to {2}, and then {pro} {cont}.", ("person", "thing", "agent")),
    Shape("with", "{0} {v01} {1} with {2}. Then {pro} {cont}.", ("person", "entity", "thing")),
    # Relative clauses.
    Shape("that", "{0} that {v01} {1} {act0}, and {pro} {cont}.", ("agent", "entity")),
    Shape("who", "{0} who {v01} {1} {act0}, so {pro} {cont}.", ("person", "entity")),
    Shape(
        "saw_that", "{0} {v01} {1} that {v12} {2}, and {pro} {cont}.", ("agent", "agent", "entity")
    ),
    Shape("who_obj", "{0} {v01} {1}, who {act1}. Afterwards {pro} {cont}.", ("agent", "person")),
    # Places as candidates.
    Shape("found_in", "{0} found {1} in {2}, and {pro} {cont}.", ("agent", "entity", "place")),
    Shape("at", "{0} {v01} {1} at {2}. Later {pro} {cont}.", ("agent", "entity", "place")),
    Shape("in3", "In {0}, {1} {v12} {2}, and {pro} {cont}.", ("place", "agent", "entity")),
    Shape("from", "{0} from {1} {v02} {2}, and {pro} {cont}.", ("agent", "place", "entity")),
    Shape(
        "went_to", "{0} went to {1} with {2}, {conj} {pro} {cont}.", ("agent", "place", "entity")
    ),
    # Three candidates.
    Shape(
        "list3",
        "{0}, {1} and {2} {act012} {conj} {pro} {cont}.",
        ("agent", "agent", "agent"),
        they_ok=False,
    ),
    Shape(
        "pair3",
        "{0} {v01} {1} and {2}, {conj} {pro} {cont}.",
        ("agent", "entity", "entity"),
        they_ok=False,
    ),
    Shape(
        "while3",
        "While {0} {v01} {1}, {2} {act2} {conj} {pro} {cont}.",
        ("agent", "entity", "agent"),
    ),
    Shape("story3", "{0} {v01} {1}. {2} {act2}. Soon {pro} {cont}.", ("agent", "entity", "agent")),
    Shape("near3", "When {0} {v01} {1} near {2}, {pro} {cont}.", ("agent", "entity", "entity")),
    Shape(
        "both3",
        "{0} and {1} {v02} {2}, and {pro} {cont}.",
        ("agent", "agent", "entity"),
        they_ok=False,
    ),
    Shape(
        "then3", "{0} {v01} {1}, and {2} {act2}. Then {pro} {cont}.", ("agent", "entity", "agent")
    ),
    Shape(
        "every3",
        "Every morning {0} {v01} {1} while {2} {act2}, and {pro} {cont}.",
        ("agent", "entity", "agent"),
    ),
    # The pronoun opening a sentence ("It", "They"), as English mostly writes a second sentence.
    Shape("open2", "{0} {v01} {1}. {pro} {cont}.", ("agent", "entity")),
    Shape("open_time", "{time}, {0} {v01} {1}. {pro} {cont}.", ("agent", "entity")),
    Shape("open_at", "{0} {v01} {1} at {2}. {pro} {cont}.", ("agent", "entity", "place")),
    Shape(
        "open3",
        "{0} {v01} {1} and {2}. {pro} {cont}.",
        ("agent", "entity", "entity"),
        they_ok=False,
    ),
    Shape("open_acts", "{0} {act0} while {1} {act1}. {pro} {cont}.", ("agent", "agent")),
    # A candidate described with "was" / "were".
    Shape("was", "{0} {be0} {adj0} when {1} {act1}, and {pro} {cont}.", ("entity", "agent")),
    Shape("said", "{0} said that {1} {be1} {adj1}, so {pro} {cont}.", ("person", "entity")),
    Shape("that_was", "{0} {v01} {1} that {be1} {adj1}, and {pro} {cont}.", ("agent", "entity")),
    Shape("was_open", "{0} near {1} {be0} {adj0}. {pro} {cont}.", ("entity", "entity")),
    # A description of the antecedent before the pronoun, as English often puts one.
    Shape("desc", "{0} {v01} {1}, and, {desc}, {pro} {cont}.", ("agent", "entity")),
    Shape("desc_open", "{0} {v01} {1}. {desc}, {pro} {cont}.", ("agent", "entity")),
    # Meaning: a description before the pronoun fits only the antecedent's kind.
    Shape("m_and", "{0} {v01} {1}, and, {adjA}, {pro} {cont}.", ("agent", "entity"), meaning=True),
    Shape(
        "m_desc", "{0} {v01} {1}, and, {descA}, {pro} {cont}.", ("agent", "entity"), meaning=True
    ),
    Shape(
        "m_desc_open", "{0} {v01} {1}. {descA}, {pro} {cont}.", ("agent", "entity"), meaning=True
    ),
    Shape(
        "m_but",
        "{0} {v01} {1} near {2}, but, {descA}, {pro} {cont}.",
        ("agent", "entity", "any"),
        meaning=True,
    ),
    Shape(
        "m_open",
        "{0} {v01} {1}. {adjA} and {adjB}, {pro} {cont}.",
        ("agent", "entity"),
        meaning=True,
    ),
    Shape("m_still", "{0} {v01} {1}. Still {adjA}, {pro} {cont}.", ("agent", "any"), meaning=True),
    Shape(
        "m_when",
        "When {0} {v01} {1}, {adjA} as ever, {pro} {cont}.",
        ("agent", "entity"),
        meaning=True,
    ),
    Shape(
        "m_three",
        "{0} {v01} {1} near {2}, and, {adjA}, {pro} {cont}.",
        ("agent", "entity", "any"),
        meaning=True,
    ),
    # Syntactic role: the subject, first ...
    Shape(
        "hunt", "{0} in {1} went out on a hunt because {pro} {cont}.", ("animal", "place"), role=0
    ),
    Shape("near", "{0} near {1} {act0} {conj} {pro} {cont}.", ("agent", "entity"), role=0),
    Shape(
        "with_role", "{0} with {1} came home, and then {pro} {cont}.", ("agent", "entity"), role=0
    ),
    Shape(
        "that_role", "{0} that {v01} {1} {act0} because {pro} {cont}.", ("agent", "agent"), role=0
    ),
    Shape("reached", "When {0} reached {1}, {pro} {cont}.", ("agent", "place"), role=0),
    # ... or last.
    Shape(
        "in", "In {0}, {1} went out on a hunt because {pro} {cont}.", ("place", "animal"), role=1
    ),
    Shape("beside", "Beside {0}, {1} {act1} {conj} {pro} {cont}.", ("entity", "agent"), role=1),
    Shape("far", "Far from {0}, {1} woke up. Soon {pro} {cont}.", ("place", "agent"), role=1),
    Shape(
        "past",
        "Past {0} and {1}, {2} {act2}, and then {pro} {cont}.",
        ("entity", "entity", "agent"),
        role=2,
    ),
)
# Role shapes whose candidates can be of one kind, in place of those that put a place beside the
# subject, where data.pronouns.role_same_kind asks for role stories whose candidates can exchange
# places (data/pronouns/story_mix.py).
SAME_KIND_ROLE_SHAPES = (
    Shape(
        "hunt_pair",
        "{0} beside {1} went out on a hunt because {pro} {cont}.",
        ("animal", "animal"),
        role=0,
    ),
    Shape(
        "in_pair",
        "Behind {0}, {1} went out on a hunt because {pro} {cont}.",
        ("animal", "animal"),
        role=1,
    ),
    Shape("reached_pair", "When {0} reached {1}, {pro} {cont}.", ("agent", "agent"), role=0),
    Shape("far_pair", "Far from {0}, {1} woke up. Soon {pro} {cont}.", ("agent", "agent"), role=1),
)
