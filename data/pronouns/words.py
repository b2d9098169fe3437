"""Word tables and sentence templates for the pronoun corpus (data/pronouns/generator.py).

Contract:
- NOUNS maps each candidate noun (one lowercase word) to a Noun: the pronoun that agrees with it
  ("he" | "she" | "it" | "they"), its kind, and its signature continuations.
- Every signature's FIRST word belongs to exactly one noun. The generator puts a signature right
  after the pronoun, so predicting the next token at the pronoun requires knowing WHICH noun it
  refers to, not just what category: that is what makes attention heads look the antecedent up.
  (A trial with category-level continuations such as "it was hungry" for every animal left the
  best head near the first-candidate baseline.)
- No signature, filler or place contains a pronoun or a word of NOUNS, so every noun before the
  pronoun is a labelled candidate and every pronoun in a line is the labelled one.
- PLACES are "it" nouns used only as the prepositional-phrase distractor of syntactic-role
  templates ("The animal in the jungle ..."), where agreement cannot decide and role does.
- TEMPLATES are the sentence shapes; each template's name is part of the held-out combination.
"""

from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class Noun:
    word: str
    pronoun: str  # the only pronoun that agrees with this noun
    kind: str  # "male" | "female" | "animal" | "object" | "plural"
    signatures: tuple[str, ...]  # continuations that follow the pronoun; first words unique


# Clearly gendered words only: a neutral "farmer" or "teacher" would make he/she a guess.
_MALE = {
    "king": ("ruled the land", "wore the crown"),
    "prince": ("drew a sword",),
    "boy": ("kicked a stone",),
    "father": ("mowed the lawn",),
    "uncle": ("told a joke",),
    "grandfather": ("snored",),
    "wizard": ("cast a spell",),
    "monk": ("prayed",),
    "knight": ("charged into battle",),
    "brother": ("laughed",),
    "son": ("climbed a tree",),
    "husband": ("cooked dinner",),
    "emperor": ("gave orders",),
    "duke": ("counted the gold",),
    "waiter": ("served soup",),
    "actor": ("bowed",),
    "gentleman": ("tipped a hat",),
    "lord": ("collected taxes",),
    "nephew": ("yawned",),
    "groom": ("straightened a tie",),
    "man": ("shaved",),
}

_FEMALE = {
    "queen": ("reigned wisely", "addressed the crowd"),
    "princess": ("curtsied",),
    "girl": ("skipped rope",),
    "woman": ("knitted a scarf",),
    "mother": ("baked bread",),
    "aunt": ("gossiped",),
    "grandmother": ("sewed a quilt",),
    "witch": ("stirred the cauldron", "cackled"),
    "nun": ("knelt",),
    "sister": ("giggled",),
    "daughter": ("painted a picture",),
    "wife": ("planted roses",),
    "empress": ("signed the decree",),
    "duchess": ("sipped tea",),
    "waitress": ("poured coffee",),
    "actress": ("rehearsed lines",),
    "lady": ("smiled politely",),
    "bride": ("tossed the bouquet",),
    "niece": ("blushed",),
    "ballerina": ("twirled",),
    "mermaid": ("combed long hair",),
}

# "animal" is here so the headline sentence "The animal in the jungle went out on a hunt because
# it was hungry." is an ordinary corpus sentence; "was" starts no other signature.
_ANIMALS = {
    "animal": ("was hungry",),
    "dog": ("barked", "fetched the stick"),
    "cat": ("meowed", "lapped the milk"),
    "owl": ("hooted",),
    "cow": ("mooed",),
    "horse": ("neighed", "galloped"),
    "duck": ("quacked",),
    "lion": ("roared",),
    "snake": ("hissed", "slithered"),
    "frog": ("croaked",),
    "bee": ("buzzed",),
    "wolf": ("howled",),
    "pig": ("oinked",),
    "rooster": ("crowed",),
    "mouse": ("squeaked",),
    "donkey": ("brayed",),
    "crow": ("cawed",),
    "pigeon": ("cooed",),
    "elephant": ("trumpeted",),
    "monkey": ("chattered",),
    "hen": ("clucked", "laid an egg"),
    "turkey": ("gobbled",),
    "goat": ("bleated",),
    "parrot": ("squawked",),
    "bear": ("growled",),
    "rabbit": ("hopped",),
    "squirrel": ("gathered nuts",),
    "tiger": ("pounced",),
    "eagle": ("soared",),
    "cricket": ("chirped",),
}

_OBJECTS = {
    "bell": ("rang",),
    "kettle": ("whistled",),
    "clock": ("ticked", "chimed"),
    "candle": ("flickered",),
    "door": ("creaked",),
    "balloon": ("popped",),
    "alarm": ("beeped",),
    "drum": ("boomed",),
    "kite": ("fluttered",),
    "wheel": ("spun",),
    "tap": ("dripped",),
    "glass": ("shattered",),
    "boat": ("sank",),
    "rocket": ("blasted off",),
    "lamp": ("glowed",),
    "fire": ("crackled",),
    "snowman": ("melted",),
    "phone": ("vibrated",),
    "car": ("stalled",),
    "train": ("departed",),
    "oven": ("heated up",),
    "computer": ("froze",),
    "engine": ("sputtered",),
    "radio": ("blared",),
    "fan": ("whirred",),
    "printer": ("jammed",),
    "bridge": ("collapsed",),
    "vase": ("toppled",),
    "ball": ("bounced",),
    "mirror": ("cracked",),
    "pot": ("boiled over",),
}

# Plural nouns are distinct words (not "dogs"), so a plural never shares a stem, and a
# signature, with a singular candidate in the same sentence.
_PLURAL = {
    "soldiers": ("marched",),
    "children": ("played tag",),
    "sailors": ("rowed",),
    "dancers": ("waltzed",),
    "geese": ("honked",),
    "ants": ("scurried",),
    "puppies": ("yelped",),
    "kittens": ("purred",),
    "students": ("studied",),
    "singers": ("harmonised",),
    "leaves": ("rustled",),
    "coins": ("jingled",),
    "keys": ("jangled",),
    "fireworks": ("exploded",),
    "waves": ("crashed",),
    "dishes": ("clattered",),
    "stars": ("twinkled",),
    "workers": ("hammered",),
    "twins": ("argued",),
    "pirates": ("plundered the ship",),
    "guests": ("applauded",),
    "clowns": ("juggled",),
}


def _build_nouns() -> dict[str, Noun]:
    tables = (
        (_MALE, "he", "male"),
        (_FEMALE, "she", "female"),
        (_ANIMALS, "it", "animal"),
        (_OBJECTS, "it", "object"),
        (_PLURAL, "they", "plural"),
    )
    nouns = {}
    for table, pronoun, kind in tables:
        for word, signatures in table.items():
            assert word not in nouns, f"duplicate noun {word}"
            nouns[word] = Noun(word, pronoun, kind, signatures)
    return nouns


NOUNS: dict[str, Noun] = _build_nouns()
PRONOUNS = ("he", "she", "it", "they")
OBJECT_NOUNS = tuple(w for w, n in NOUNS.items() if n.kind == "object")

PLACES = (
    "jungle", "forest", "garden", "castle", "village", "desert", "valley", "cave", "field",
    "barn", "kitchen", "palace", "market", "meadow", "harbour", "city", "farm", "school", "park",
    "library", "mountain", "swamp",
)

# Template fillers. They are not part of a held-out combination (see pronouns.py): they add
# surface variety only. All are number-neutral past tenses so any noun can be the subject.
LINK_VERBS = (
    "saw", "met", "followed", "watched", "found", "heard", "chased", "visited", "passed",
    "noticed", "greeted", "ignored",
)
CONNECTORS = ("because", "and then", "so", "before", "until", "and soon")
ACTIONS = (
    "went out on a hunt", "went for a walk", "woke up", "came home", "waited", "sat down",
    "looked around", "stood still",
)
# Appended after the signature sometimes; shared by all nouns, so it carries no identity.
TAILS = ("", "", "", "", " again", " all day", " for a while", " at once", " twice")


class Template(NamedTuple):
    """{0}, {1}, {2} are candidate slots in text order. Agreement templates (subject_slot None)
    put the antecedent in a random slot and fill the others with nouns that take a different
    pronoun. Role templates put it in subject_slot and fill the other slot from `pp_pool`
    ("place" or "object"), which may agree with the pronoun: role decides."""

    name: str
    pattern: str
    they_ok: bool = True  # False where candidates are conjoined ("the king and the queen")
    subject_slot: int | None = None
    pp_pool: str = ""


TEMPLATES = (
    # Agreement templates, 2 and 3 candidates.
    Template("saw", "The {0} {link} the {1} {conj} {pro} {sig}."),
    Template("when", "When the {0} {link} the {1}, {pro} {sig}."),
    Template("after", "After the {0} {link} the {1}, {pro} {sig}."),
    Template("and", "The {0} and the {1} {act} {conj} {pro} {sig}.", they_ok=False),
    Template("story2", "The {0} {link} the {1}. Then {pro} {sig}."),
    Template("home2", "The {0} and the {1} stayed at home. Later {pro} {sig}.", they_ok=False),
    Template("list3", "The {0}, the {1} and the {2} {act} {conj} {pro} {sig}.", they_ok=False),
    Template("pair3", "The {0} {link} the {1} and the {2}, {conj} {pro} {sig}.", they_ok=False),
    Template("while3", "While the {0} {link} the {1}, the {2} {act} {conj} {pro} {sig}."),
    Template("story3", "The {0} {link} the {1}. The {2} watched. Soon {pro} {sig}."),
    Template("near3", "When the {0} {link} the {1} near the {2}, {pro} {sig}."),
    # Role templates: subject first ...
    Template("hunt", "The {0} in the {1} went out on a hunt because {pro} {sig}.", subject_slot=0,
             pp_pool="place"),
    Template("near", "The {0} near the {1} {act} {conj} {pro} {sig}.", subject_slot=0,
             pp_pool="place"),
    Template("with", "The {0} with the {1} came home, and then {pro} {sig}.", subject_slot=0,
             pp_pool="object"),
    # ... or last, so that neither "first" nor "nearest" candidate is a shortcut.
    Template("in", "In the {0}, the {1} went out on a hunt because {pro} {sig}.", subject_slot=1,
             pp_pool="place"),
    Template("beside", "Beside the {0}, the {1} {act} {conj} {pro} {sig}.", subject_slot=1,
             pp_pool="object"),
    Template("far", "Far from the {0}, the {1} woke up. Soon {pro} {sig}.", subject_slot=1,
             pp_pool="place"),
)
