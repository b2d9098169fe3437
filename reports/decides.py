"""What decides each kind's choice, in plain words: one sentence per kind of sentence from the
choice study (analysis/choice.py), naming the deciding heads and through which input they read
(q, k, v), and inside each MLP that matters the neurons that carry it and the tokens they write;
and the lines that list those neurons. The text report (reports/choice_report.py) and the page
(reports/choice_page.py) say the same sentences."""

from analysis.circuit_results import ChoiceSet, LayerNeurons
from analysis.neurons import OF_LAYER, SHOWN

MATTERS = 0.2  # an MLP is named where patching it whole moves at least this share of the gap
THROUGH = 0.5  # an input is named where patching it alone flips at least this share


def _pct(x):
    return f"{100 * x:.0f}%"


def _heads_said(part: ChoiceSet) -> list[str]:
    said = []
    for name in part["deciding"]:
        through = part.get("inputs", {}).get(name, {})
        reads = [x for x, share in through.items() if share >= THROUGH]
        how = {"q": "query", "k": "keys", "v": "values"}
        where = " and ".join(f"its {how[x]}" for x in reads)
        said.append(f"{name[:2]} {name[2:]}" + (f" through {where}" if where else ""))
    return said


def _words(tokens, k=3):
    return ", ".join(repr(t.strip() or t) for t in tokens[:k])


def _named(layer: LayerNeurons, k: int) -> str:
    """The set, its first k by number: "neurons 17, 88", or "32 neurons (17, 88, 5, ...)"."""
    names = ", ".join(str(n["index"]) for n in layer["neurons"][:k])
    if layer["count"] <= k:
        return f"neuron{'s' * (layer['count'] > 1)} {names}"
    return f"{layer['count']} neurons ({names}, ...)"


def _mlp_said(layer: LayerNeurons) -> str:
    first = layer["neurons"][0]
    return (
        f"MLP{layer['layer']}'s {_named(layer, 3)} of {layer['size']} carry "
        f"{_pct(layer['moved'])} of the gap (the whole MLP {_pct(layer['layer_moved'])}); "
        f"neuron {first['index']} writes {_words(first['writes'])}"
    )


def mattering(part: ChoiceSet) -> list[LayerNeurons]:
    """The MLPs of a set's neurons that move at least MATTERS of its gap, patched whole."""
    return [layer for layer in part.get("neurons", []) if layer["layer_moved"] >= MATTERS]


def decides_said(kind: str, part: ChoiceSet) -> str:
    """One sentence: what decides this set's choice, or why nothing is named."""
    accuracy, flip = _pct(part["accuracy"]), _pct(part["flip"])
    if not part["prefers"]:
        return (
            f"{kind}: the model does not choose by this reason (accuracy {accuracy}, flip "
            f"{flip}; chance 50% and 25%): nothing to name"
        )
    parts = _heads_said(part) + [_mlp_said(layer) for layer in mattering(part)]
    if not parts:
        return (
            f"{kind}: prefers the antecedent (accuracy {accuracy}, flip {flip}), but no single "
            f"head or MLP moves {_pct(MATTERS)} of the gap alone"
        )
    return f"{kind} (accuracy {accuracy}, flip {flip}): " + "; ".join(parts)


def neuron_lines(part: ChoiceSet) -> list[str]:
    """Each MLP's deciding neurons, one line each, and one per neuron with the tokens it
    writes; [] where the set has none (it shows no preference)."""
    lines = []
    for layer in part.get("neurons", []):
        enough = "" if layer["enough"] else f", short of {_pct(OF_LAYER)} of the whole"
        lines.append(
            f"  MLP{layer['layer']}: whole, {_pct(layer['layer_moved'])} of the CM gap; its "
            f"{_named(layer, SHOWN)} together {_pct(layer['moved'])}{enough}"
        )
        lines += [
            f"    neuron {n['index']:>4}: alone {_pct(n['moved']):>4}, "
            f"writes {_words(n['writes'], 5)}"
            for n in layer["neurons"]
        ]
    return lines
