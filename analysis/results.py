"""The types of the study's results: one TypedDict per result, each field documented once, here.

A result is the JSON object `generate.py --probe --json` prints and probe.json keeps, so its type
is a TypedDict (a dict at run time, read as `result["best_head"]["layer"]` in Python as in the
JSON) rather than a class that would need its own converter each way. analysis/conform.py checks
a value against these types, a number typed Share, Count or Rank within its range too: the tests
check every function's result, and runs/folder.py a saved probe.json before it is read (one that
does not conform, an accuracy of 7.5 say, is measured again, never half-read or shown).

A class with `total=False` holds the keys that only some results have; the class deriving from
it adds the ones every result has. Per split means a value for "dev" and "test", or for "all"
alone where the probe reads one set of examples (analysis.probe.ONE_SET). Intervals are
[lo, hi], the 95% percentile bootstrap interval (analysis/bootstrap.py), None where the set has
fewer than analysis.probe.MIN_FOR_STATS examples. The results of patching one run into another
(patching, the circuit, the choice) have theirs in analysis/circuit_results.py.
"""

import math
from typing import Annotated, TypedDict

from analysis.bootstrap import Interval
from analysis.circuit_results import ChoiceResult, CircuitResult, NoTwinsSaid, PatchingResult
from analysis.conform import AtLeast, Between, Count, Share

# --- the probe (analysis/probe.py) -------------------------------------------------------------


class PerSplit(TypedDict, total=False):
    dev: Share
    test: Share
    all: Share


class HeadRate(PerSplit):
    """A head and its cand@1 per split."""

    layer: Count
    head: Count


class HeadRow(HeadRate):
    # Mean attention from the query over the test items: on the antecedent's tokens, on every
    # distractor's together, on token 0 (where a head with nothing to do parks its attention).
    mass_antecedent: Share
    mass_distractors: Share
    mass_first_token: Share


class PositionRule(PerSplit):
    rule: str  # the position rule best on dev: "first", "nearest", "2nd from left", ...


class Baselines(TypedDict):
    random: Annotated[PerSplit, AtLeast(1)]  # a uniformly drawn candidate, in expectation
    first: Annotated[PerSplit, AtLeast(1)]  # the leftmost candidate
    nearest: Annotated[PerSplit, AtLeast(1)]  # the closest candidate that ends before the pronoun
    position: PositionRule


class KindRow(TypedDict):
    """The probe on the test items of one kind (data.pronouns DECIDED_BY)."""

    examples: Count
    best_head: Share  # the best head's cand@1 on them
    random: Share
    kind_best: HeadRate | None  # the head best on dev's items of this kind; None: dev has none


class Counts(TypedDict):
    examples: Count
    used: Count
    windowed: Count  # read in the last block_size tokens up to the pronoun
    antecedent_unseen: Count  # of those, the antecedent lost from that window
    skipped_unencodable: Count


class QueryWords(TypedDict):
    """The query words that are not pronouns: there the probe measures where that word looks,
    not coreference."""

    examples: Count
    not_pronouns: Count
    words: list[str]  # each once, in order


class _WhyNoPValue(TypedDict, total=False):
    p_value_reason: str  # "too few examples"
    p_value_needs: Count  # MIN_FOR_STATS


class ProbeResult(_WhyNoPValue):
    """run_probe's result."""

    best_head: HeadRate  # chosen by dev cand@1, ties to the lowest (layer, head)
    baselines: Baselines
    decided_by: dict[str, KindRow]  # {} where the test items name no kind
    p_value: Share | None  # None: fewer than MIN_FOR_STATS examples, no test run
    permutations: Count
    seed: int
    selection: str  # "dev", or "same data" where one set is both
    heads: list[HeadRow]  # every head, layer-major
    counts: Annotated[dict[str, Counts], AtLeast(1)]  # per split
    block_size: Count
    test_set: str | None  # the test examples' name ("test", "natural"); None for one set
    query: str  # where attention is read from (analysis.words.QUERY_POSITIONS)
    query_words: QueryWords


class PlainBaselines(TypedDict):
    random: Share
    first: Share
    nearest: Share


class KindScores(TypedDict):
    """head_scores on the items of one kind (data.pronouns DECIDED_BY)."""

    examples: Count
    cand_at_1: Share  # the best head's (over all items) cand@1 on them
    kind_best: Share  # the cand@1 of the head best on them
    kind_best_head: list[Count]  # [layer, head] of that head


class HeadScores(TypedDict):
    """head_scores' result: what training logs as the head forms."""

    heads: list[list[Share]]  # [layer][head] cand@1
    best: Share
    best_head: list[Count]  # [layer, head]
    baselines: PlainBaselines
    by_kind: dict[str, KindScores]  # each kind the items name


# --- the model's own answer (analysis/answer.py) -----------------------------------------------


class Head(TypedDict):
    layer: Count
    head: Count


class _AnswerIntervals(TypedDict, total=False):  # on at least MIN_FOR_STATS items
    cand_at_1_ci: dict[str, Interval]
    agreement_ci: dict[str, Interval]


class AnswerRow(_AnswerIntervals):
    examples: Count
    cand_at_1: dict[str, Share]  # each method's, and the head's under "head"
    agreement: dict[str, Share]  # each method's share of items where it answers the head's pick
    no_answer: dict[str, Count]  # each method's items with no answer (a tie)
    baselines: PlainBaselines  # the probe's, on these items


class AnswerResult(TypedDict):
    """model_answer's result."""

    methods: list[str]  # analysis.answer.METHODS, in the order the rows give them
    head: Head  # the head beside which the answer is read
    all: AnswerRow  # the whole set
    decided_by: dict[str, AnswerRow]  # each kind the items name
    n: Count  # examples used
    skipped: Count  # examples the tokenizer cannot encode with a substitution
    seed: int
    resamples: int


# --- the causal tests (analysis/causal.py): changes of the next-token loss, in nats ---------


class Knockouts(TypedDict):
    antecedent: float  # the antecedent's tokens hidden from the query
    distractor: float  # one drawn distractor's, the control
    antecedent_ci: Interval
    distractor_ci: Interval


class HeadEffects(Knockouts):
    ablation: float  # the head's output at the query replaced by its mean
    ablation_ci: Interval


class HeadEffectsAt(HeadEffects):
    layer: int
    head: int


class CausalResult(TypedDict):
    """causal_tests' result."""

    all_heads: Knockouts  # every head knocked out together
    layers: list[Knockouts]  # one layer's heads together
    heads: list[list[HeadEffects]]  # [layer][head]: one head alone
    n: Count
    skipped: Count
    clean_loss: float  # the mean next-token loss with nothing changed
    seed: int
    resamples: int


class CausalStudy(CausalResult):
    """with_best_head's result: causal_tests' with the probe's best head picked out."""

    best_head: HeadEffectsAt


# --- the logit lens (analysis/lens.py) ---------------------------------------------------------


Rank = Annotated[float, Between(1.0, math.inf)]  # 1: the model's first choice


class LensExample(TypedDict):
    text: str  # the first item, up to its pronoun
    next: str  # its true next token
    top: list[list[tuple[str, Share]]]  # per point, the top tokens and their probabilities


class LensResult(TypedDict):
    """logit_lens' result, a value per point (entering each block, leaving the last)."""

    points: list[str]
    mean_probability: list[Share]  # of the true next token
    median_rank: list[Rank]
    top1_share: list[Share]
    n: Count
    skipped: Count  # items whose text ends at the pronoun
    example: LensExample


class NothingSaid(TypedDict):
    """Why a part is missing (analysis.errors.NothingToMeasure)."""

    reason: str
    message: str


# --- the study (analysis/coreference.py) and the file that keeps it (runs/folder.py) -----------


class _StudyParts(TypedDict, total=False):
    # The generated language the dev and test sets were drawn in (StoryMix.label: the run's
    # data.pronouns), where it is not the default; absent for the default and a user's file.
    language: str
    # In a saved study (runs/folder.py): when each part it holds (study_parts) was measured,
    # part -> UTC time, ISO 8601; parts kept from an earlier run keep their time.
    measured: dict[str, str]
    model_answer: AnswerResult
    # The natural sentences' only (analysis/lexicon_split.py): model_answer's row on the
    # sentences whose candidates are all nouns of the training lexicon ("lexicon") and on those
    # with one it does not have ("unseen"), each group that has sentences.
    by_lexicon: dict[str, AnswerRow]
    logit_lens: LensResult
    patching: PatchingResult
    patching_skipped: NoTwinsSaid
    circuit: CircuitResult
    circuit_skipped: NoTwinsSaid
    choice: ChoiceResult
    choice_skipped: NothingSaid
    causal: CausalStudy


class Study(ProbeResult, _StudyParts):
    """study's result: the probe and the parts asked for."""


# The parts of a study that a flag asks for, each with its keys (its result, or why it is
# missing); every other key is the probe's, whose part ("probe") every study has: the head
# scores, the model's own answer and the logit lens.
PARTS = {
    "causal": ("causal",),
    "patching": ("patching", "patching_skipped"),
    "circuit": ("circuit", "circuit_skipped", "choice", "choice_skipped"),
}


def study_parts(study: Study) -> list[str]:
    """The parts `study` holds: "probe", then each of PARTS that it has a key of."""
    return ["probe", *(part for part, keys in PARTS.items() if any(k in study for k in keys))]


class CheckpointId(TypedDict):
    step: int | None
    best_val_loss: float | None


class _SavedExtras(TypedDict, total=False):
    natural: Study  # `--probe natural`'s, kept beside the built-in sets'
    # The examples it is of (runs.folder.examples_id); absent in a file saved before it was
    # recorded, which is taken to be of the built-in sets as they are now.
    examples: str


class SavedStudy(Study, _SavedExtras):
    """probe.json: the built-in sets' study of one checkpoint."""

    checkpoint: CheckpointId
    format_version: int
