"""The types of the results that patch one run into another: activation patching, the circuit,
the choice and a user's own pairs; a TypedDict per result, each field documented once, here.
analysis/results.py says why TypedDicts (and how to read `total=False`), and holds the study
that gathers these with the probe's."""

from typing import TypedDict

from analysis.bootstrap import Interval
from analysis.conform import Count, Share

# --- activation patching (analysis/patching.py) ------------------------------------------------


class _CellInterval(TypedDict, total=False):  # on at least MIN_FOR_STATS pairs
    recovered_ci: Interval


class Cell(_CellInterval):
    recovered: float  # 0 the corrupted run, 1 the clean one


class PatchingResult(TypedDict):
    """activation_patching's and patching_of_pairs' result."""

    heads: list[list[Cell]]  # [layer][head]: the head's output at the pronoun
    stream: list[list[Cell]]  # [point][column]: the residual stream
    mlps: list[list[Cell]]  # [layer][column]: each MLP's output
    points: list[str]  # "embedding", "block 0", ...
    columns: list[str]  # analysis.patching.COLUMNS (the choice's first is "changed")
    clean_ld: float  # mean logit difference, clean
    corrupt_ld: float  # the same, corrupted
    n: Count
    skipped: Count
    seed: int
    resamples: int


class NoTwinsSaid(TypedDict):
    """Why patching or the circuit is missing (analysis.patching.NoTwins)."""

    reason: str
    tokenizer: str


# --- the circuit (analysis/circuit.py) ---------------------------------------------------------


class _AgreementValues(TypedDict, total=False):  # on at least two checked edges
    spearman: float
    sign_agreement: Share
    median_ratio: float | None  # None: no edge's real effect is nonzero


class Agreement(_AgreementValues):
    """How attribution's scores match real patching on the checked edges."""

    edges: Count


_EdgeFields = TypedDict(  # "from" is a keyword: the functional form names it
    "_EdgeFields",
    {
        "from": str,  # a node: "embed:antecedent", "L0H2", "MLP0", ...
        "to": str,  # a node and its input: "L1H0.q", "MLP1", "logits"
        "eap": float,  # attribution's estimate of LD patched - LD clean
        "in_circuit": bool,
        "share": float,  # estimated (attribution): the gap's share patching it alone takes away
        "share_ci": Interval | None,
    },
)


class _EdgePatched(TypedDict, total=False):  # the checked edges, patched for real
    patched: float  # LD patched - LD clean
    patched_share: float  # that share measured: the edge patched alone
    patched_share_ci: Interval | None


class Edge(_EdgeFields, _EdgePatched):
    pass


class _CircuitFound(TypedDict, total=False):  # where the set shows a preference
    faithfulness_ci: Interval | None
    agreement: Agreement


class CircuitSet(_CircuitFound):
    """The circuit of one set: the whole set's, or one kind's."""

    n: Count
    clean_ld: float
    corrupt_ld: float
    gap: float  # clean - corrupt: the preference to explain
    gap_ci: Interval | None
    preference: bool  # the gap is at least min_gap and its interval above 0
    edges: list[Edge]  # ranked, the circuit's first; [] without a preference
    faithfulness: float | None  # the share of the gap the circuit keeps
    size: Count | None  # the circuit's edges


class PairsCircuit(CircuitSet):
    """circuit_of_pairs' result."""

    by_kind: dict[str, CircuitSet]
    n_edges: Count  # the graph's
    threshold: float  # the faithfulness the circuit must reach
    min_gap: float | None
    checked: Count  # edges patched for real
    seed: int
    resamples: int


class CircuitResult(PairsCircuit):
    """trace_circuit's result."""

    skipped: Count  # examples with no twin


# --- which candidate wins (analysis/choice.py) -------------------------------------------------


class ChoiceCircuit(TypedDict):
    gap: float
    gap_ci: Interval | None
    size: int | None
    faithfulness: float | None
    faithfulness_ci: Interval | None
    agreement: Agreement | None
    drawn: bool  # the set prefers and its twins move CM enough
    edges: list[Edge]  # [] where not drawn


class Through(TypedDict):
    """The share of the right-both-ways examples whose preference patching one input of a
    deciding head flips both ways."""

    q: Share
    k: Share
    v: Share


class Neuron(TypedDict):
    """One neuron of a deciding set."""

    index: int
    moved: float  # patched alone
    writes: list[str]  # the tokens it raises most, most first


class LayerNeurons(TypedDict):
    """One MLP's deciding neurons for one set (analysis/neurons.py)."""

    layer: int
    neurons: list[Neuron]  # the deciding set's first SHOWN, most estimated effect first
    count: int  # neurons in the deciding set
    moved: float  # the set patched together
    layer_moved: float  # the whole MLP patched
    enough: bool  # the set keeps at least OF_LAYER of the layer's effect
    size: int  # neurons in the layer


class _SharedEdges(TypedDict, total=False):  # beside an identity circuit
    shared_edges: list[str]  # "from -> to", in both circuits


class _Neurons(TypedDict, total=False):  # where the set prefers
    neurons: list[LayerNeurons]  # each MLP's deciding neurons, layer 0 first


class ChoiceSet(_SharedEdges, _Neurons):
    """One set's choice: the whole set's, or one kind's."""

    n: Count
    accuracy: Share  # the share with CM > 0
    flip: Share  # CM > 0 on the example and < 0 on its twin
    clean_cm: float
    twin_cm: float
    accuracy_ci: Interval | None
    flip_ci: Interval | None
    clean_cm_ci: Interval | None
    twin_cm_ci: Interval | None
    prefers: bool  # the flip and its interval above PREFERS (chance): the choice follows the reason
    right: Count  # examples right both ways
    flip_share: list[list[Share | None]]  # [layer][head]; None: not patched
    deciding: list[str]  # "L0H2", ...
    circuit: ChoiceCircuit
    inputs: dict[str, Through]  # each deciding head's


class Twins(TypedDict):
    found: dict[str, Count]  # kind -> pairs made
    tried: dict[str, Count]  # kind -> examples tried
    skipped: dict[str, Count]  # reason -> examples left out


class _ChoicePatched(TypedDict, total=False):
    patching: PatchingResult


class ChoiceResult(ChoiceSet, _ChoicePatched):
    """choice_study's result."""

    by_kind: dict[str, ChoiceSet]
    twins: Twins
    threshold: float
    prefers_from: float  # PREFERS: the flip a preferring set lies above (its chance)
    decides_from: float
    n_edges: int
    seed: int
    resamples: int


class TooFewPairs(TypedDict):
    """Why a user's pairs have no circuit: fewer than the bar's number of pairs."""

    reason: str  # analysis.user_pairs.TOO_FEW
    needs: Count  # analysis.probe.MIN_FOR_STATS


class _PairsParts(TypedDict, total=False):
    patching: PatchingResult  # columns: analysis.user_pairs.COLUMNS
    circuit: CircuitResult  # no kinds: by_kind is {}
    circuit_skipped: TooFewPairs


class PairsResult(_PairsParts):
    """pairs_study's result: on a user's own clean/corrupt pairs (analysis/user_pairs.py)."""

    pairs: Count
    last_changed: Count  # pairs whose last token differs too
