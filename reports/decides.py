"""Each reason's choice in plain words: one sentence per reason (agreement, role, meaning) from
the choice study (analysis/choice.py). Only a reason whose choice has a preference (its circuit
is drawn: the flip's interval above chance and the twins moving CM by analysis.circuit's
MIN_GAP) gets what decides it: the deciding heads and what each reads, the share of the choice
each MLP that matters carries, and the whole words its neurons write; any other reason gets one
sentence that the model does not choose by it, with its numbers. Where the model's own answer
on the reason's stories and the choice test disagree, a second sentence says what each measures.
The neurons' ids and every token they write are in neuron_lines, the detail. The text report
(reports/choice_report.py) and the page (reports/choice_page.py) say the same sentences."""

import re
from functools import cache

from analysis.choice import PREFERS
from analysis.circuit import MIN_GAP
from analysis.circuit_results import ChoiceSet, LayerNeurons
from analysis.neurons import OF_LAYER, SHOWN
from data.pronouns.lexicon import FOLDER
from reports.formatting import pct

MATTERS = 0.2  # an MLP is named where patching it whole moves at least this share of the gap
THROUGH = 0.5  # an input is named where patching it alone flips at least this share
ANSWERS = 0.65  # the model's own answer from which it counts as answering a reason's stories
READS = {"q": "the pronoun's side (its query)", "k": "the candidates (its keys)"}
READS["v"] = "what it copies from them (its values)"


def _pct(x):
    return f"{100 * x:.0f}%"


def _heads_said(part: ChoiceSet) -> list[str]:
    said = []
    for name in part["deciding"]:
        through = part.get("inputs", {}).get(name, {})
        reads = [READS[x] for x, share in through.items() if share >= THROUGH]
        head = f"head {name[:2]} {name[2:]} decides it"
        said.append(head + (f", reading the reason through {' and '.join(reads)}" if reads else ""))
    return said


@cache
def _lexicon_words() -> frozenset[str]:
    """Every word of the pronoun language's lexicon, lower case: what counts as a whole word."""
    text = " ".join(p.read_text(encoding="utf-8") for p in sorted(FOLDER.glob("*.tsv")))
    return frozenset(re.findall(r"[a-z]+", text.lower()))


def whole_words(tokens: list[str]) -> list[str]:
    """The tokens that are whole words (a leading space, then a word of the lexicon), stripped;
    word pieces ('scr', 'spl') and marks are left out."""
    words = _lexicon_words()
    return [t.strip() for t in tokens if t.startswith(" ") and t.strip().lower() in words]


def _mlp_said(layer: LayerNeurons) -> str:
    said = f"the MLP of layer {layer['layer']} carries {_pct(layer['layer_moved'])} of the choice"
    words = list(dict.fromkeys(w for n in layer["neurons"] for w in whole_words(n["writes"])))
    if not words:
        return said + " (its neurons write word pieces, no whole word)"
    return said + f" (its deciding neurons write {', '.join(repr(w) for w in words[:4])})"


def mattering(part: ChoiceSet) -> list[LayerNeurons]:
    """The MLPs of a set's neurons that move at least MATTERS of its gap, patched whole."""
    return [layer for layer in part.get("neurons", []) if layer["layer_moved"] >= MATTERS]


def _not_chosen(reason: str, part: ChoiceSet) -> str:
    gap = part["circuit"].get("gap")
    moved = "" if gap is None else f"; its twins move CM by {gap:.2f}, a choice needs {MIN_GAP:g}"
    return (
        f"{reason}: the model does not choose by this reason (flip "
        f"{pct(part['flip'], part.get('flip_ci'))}, chance {PREFERS:.0%}{moved})"
    )


def _answer_vs_choice(reason: str, chooses: bool, answer: float | None) -> str:
    """The sentence that reconciles the model's own answer with the choice test where one is
    high and the other says no; "" where they agree or no answer was measured."""
    if answer is None or (answer >= ANSWERS) == chooses:
        return ""
    if chooses:
        return (
            f" Its own answer is right on only {_pct(answer)} of {reason} stories: the choice "
            "test asks whether changing the reason moves the preference, the answer whether "
            "the antecedent's next word wins outright."
        )
    return (
        f" Yet its own answer is right on {_pct(answer)} of {reason} stories: the answer is read "
        "on the stories as written, where other cues (a position, the words) also point to the "
        "antecedent; the choice test changes only the reason and finds the choice does not "
        "follow it."
    )


def decides_said(reason: str, part: ChoiceSet, answer: float | None = None) -> str:
    """What decides this reason's choice, or that the model does not choose by it, in plain
    words; and, where `answer` (the model's own answer's cand@1 on the reason's stories)
    disagrees with the choice test, what each measures."""
    chooses = bool(part["circuit"]["drawn"])
    after = _answer_vs_choice(reason, chooses, answer)
    if not chooses:
        return _not_chosen(reason, part) + "." + after
    numbers = f"flip {pct(part['flip'], part.get('flip_ci'))}, accuracy {_pct(part['accuracy'])}"
    parts = _heads_said(part) + [_mlp_said(layer) for layer in mattering(part)]
    if not parts:
        return (
            f"{reason} ({numbers}): the choice follows this reason, but no single head or MLP "
            f"carries {_pct(MATTERS)} of it alone." + after
        )
    return f"{reason} ({numbers}): " + "; ".join(parts) + "." + after


def _named(layer: LayerNeurons, k: int) -> str:
    """The set, its first k by number: "neurons 17, 88", or "32 neurons (17, 88, 5, ...)"."""
    names = ", ".join(str(n["index"]) for n in layer["neurons"][:k])
    if layer["count"] <= k:
        return f"neuron{'s' * (layer['count'] > 1)} {names}"
    return f"{layer['count']} neurons ({names}, ...)"


def neuron_lines(part: ChoiceSet) -> list[str]:
    """Each MLP's deciding neurons, one line each, and one per neuron with the tokens it
    writes (␣: a leading space); [] where the set has none (its choice has no preference)."""
    lines = []
    for layer in part.get("neurons", []):
        enough = "" if layer["enough"] else f", short of {_pct(OF_LAYER)} of the whole"
        lines.append(
            f"  MLP{layer['layer']}: whole, {_pct(layer['layer_moved'])} of the CM gap; its "
            f"{_named(layer, SHOWN)} together {_pct(layer['moved'])}{enough}"
        )
        lines += [
            f"    neuron {n['index']:>4}: alone {_pct(n['moved']):>4}, writes "
            + ", ".join(repr(t.replace(" ", "␣")) for t in n["writes"][:5])
            for n in layer["neurons"]
        ]
    return lines
