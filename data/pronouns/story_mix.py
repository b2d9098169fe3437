"""What the generated language draws (data/pronouns/generator.py): how often each kind of story
comes, and two choices a study of the model's choice needs; the config's `data.pronouns` section
(configs/schema.py) says it for a run.

    agreement, role, meaning   a weight per kind of sentence shape (shapes.py): each shape of a
                               kind is drawn that many times as often as with weight 1; the
                               default, 1 each, draws every shape alike (docs/guide/pronouns.md
                               gives the shares of stories it makes)
    role_same_kind             role stories whose candidates that take the pronoun are of the
                               antecedent's kind and number, so that they can exchange places
                               (a role choice twin, data/pronouns/choice_twins.py); the role
                               shapes whose other slot can never hold that kind (a place beside
                               an animal) give way to SAME_KIND_ROLE_SHAPES
    prose                      how much text without a pronoun the corpus holds, as a multiple
                               of the language's own (1: 30% of the lines, and a sentence after
                               half of the examples; 0: none, every line an example): prose
                               teaches each noun's doings, examples which noun a pronoun takes
    heldout_cue_pairs          a describing word (a meaning cue, a description, an adjective in
                               front of a noun) is put with a noun in one split only, by a hash
                               of the pair: test's pairs are never in the training text, so a
                               model must read the cue's kind, not remember the pair

The default draws exactly what the generator drew before these settings existed.
"""

import hashlib
import math
import re
from dataclasses import dataclass, fields

from data.pronouns.jsonl import DECIDED_BY, Example
from data.pronouns.lexicon import find_noun, lexicon
from data.pronouns.shapes import SAME_KIND_ROLE_SHAPES, SHAPES, SLOT_KINDS, Shape


def kind_of(shape: Shape) -> str:
    """The kind of story a shape is made for: agreement, role or meaning."""
    return "meaning" if shape.meaning else "agreement" if shape.role is None else "role"


def _can_share_kind(shape: Shape) -> bool:
    """Whether every slot of a role shape can hold a noun of the role slot's kind."""
    kinds = set(SLOT_KINDS[shape.slots[shape.role]])
    return all(kinds & set(SLOT_KINDS[s]) for s in shape.slots)


MAX_PROSE = 2.0  # twice the language's prose: a sentence after every example


@dataclass(frozen=True)
class StoryMix:
    """The generated language's settings (see the module docstring); the default is the
    language as it always was. ValueError for a weight below 0 or every weight 0."""

    agreement: float = 1.0
    role: float = 1.0
    meaning: float = 1.0
    role_same_kind: bool = False
    heldout_cue_pairs: bool = False
    prose: float = 1.0

    def __post_init__(self):
        weights = [getattr(self, k) for k in DECIDED_BY]
        # `not <=`: NaN too; a finite sum, as the draw divides by it
        if any(not 0 <= w < math.inf for w in weights) or not 0 < sum(weights) < math.inf:
            raise ValueError(
                f"the pronoun mix's weights must be finite numbers of 0 or more, one above 0, "
                f"with a finite sum; got {self.label}"
            )
        if not 0 <= self.prose <= MAX_PROSE:
            raise ValueError(
                f"data.pronouns.prose must be between 0 and {MAX_PROSE:g} (a multiple of the "
                f"language's own share of prose); got {self.prose!r}"
            )

    @property
    def label(self) -> str:
        """The settings in one line: "agreement=1,role=1,meaning=7" and the choices that are on."""
        weights = [f"{k}={getattr(self, k):g}" for k in DECIDED_BY]
        flags = [f.name for f in fields(self) if f.type is bool and getattr(self, f.name)]
        prose = [] if self.prose == 1 else [f"prose={self.prose:g}"]  # as before it existed
        return ",".join(weights + flags + prose)

    @classmethod
    def from_label(cls, label: str) -> "StoryMix":
        """The settings a `label` gives (ValueError where it is not one)."""
        parts = [p for p in str(label).split(",") if p]
        weights = dict(p.split("=", 1) for p in parts if "=" in p)
        flags = {p: True for p in parts if "=" not in p}
        try:
            return cls(**{k: float(v) for k, v in weights.items()}, **flags)
        except TypeError:
            raise ValueError(f"{label!r} is not a pronoun language's settings") from None

    def draws_like(self, other: "StoryMix") -> bool:
        """Whether `other` draws the same stories: the same choices, weights in proportion."""

        def shares(mix):
            weights = [getattr(mix, k) for k in DECIDED_BY]
            return [w / sum(weights) for w in weights]

        flags = [f.name for f in fields(self) if f.type is bool]
        return all(getattr(self, f) == getattr(other, f) for f in flags) and all(
            math.isclose(a, b, rel_tol=1e-9) for a, b in zip(shares(self), shares(other))
        )

    @property
    def is_default(self) -> bool:
        """Whether it draws the default language (equal weights draw every shape alike)."""
        return (
            self.agreement == self.role == self.meaning
            and not self.role_same_kind
            and not self.heldout_cue_pairs
            and self.prose == 1
        )

    @property
    def key(self) -> str:
        """A short hash of the label: what tells a corpus file of this language from another's."""
        return hashlib.sha256(self.label.encode()).hexdigest()[:8]

    @property
    def shapes(self) -> tuple[Shape, ...]:
        """The shapes drawn from, in the order they are drawn by."""
        if not self.role_same_kind:
            return SHAPES
        kept = [s for s in SHAPES if s.role is None or _can_share_kind(s)]
        return (*kept, *SAME_KIND_ROLE_SHAPES)

    @property
    def weights(self) -> list[float] | None:
        """Each shape's weight, or None where every shape is drawn alike."""
        if self.agreement == self.role == self.meaning:
            return None
        return [getattr(self, kind_of(s)) for s in self.shapes]


DEFAULT_MIX = StoryMix()


def cue_pairs(example: Example) -> set[tuple[str, str]]:
    """(describing phrase of the lexicon, antecedent noun) for each adjective or description
    standing between the last candidate and the pronoun: the cue a meaning story gives. The
    longest phrases are found first, and the words of one are not read again as another."""
    start = max(e for _, e in (example.antecedent, *example.distractors))
    region = example.text[start : example.pronoun[0]].lower()
    lex = lexicon()
    written = example.text[slice(*example.antecedent)].lower()
    found = find_noun(written)
    noun = found[0].word if found else written
    phrases = sorted({d for d, _ in lex.descriptions + lex.adjectives}, key=len, reverse=True)
    found = set()
    for phrase in phrases:
        if phrase in region:  # a cheap test before the word-bounded one
            pattern = rf"\b{re.escape(phrase)}\b"
            if re.search(pattern, region):
                found.add((phrase, noun))
                region = re.sub(pattern, "|", region)
    return found
