"""The page's section on the choice (analysis/choice.py): which candidate wins. A table of the
twins found, the choice accuracy and flip with their intervals and the deciding heads per set
(turned, sets across, where it is too wide for the page); then, per set, the choice circuit, or
the reason it has none in the set's own numbers, and where both circuits exist the edges it
shares with the set's identity circuit (drawn once, in the circuit's section above), and each
MLP's deciding neurons; and each reason in plain words (reports/decides.py)."""

from html import escape

from analysis.circuit import MIN_GAP
from analysis.probe import MIN_FOR_STATS
from reports.causal_tables import interval_html
from reports.cells import BLUE, tinted_cell
from reports.circuit_svg import circuit_svg, edges_said, figure_id
from reports.decides import decides_said, neuron_lines
from reports.formatting import pct
from reports.glossary import term

# Said where the page turns the table (sets across): too wide for the page with sets down.
TURNED = " (turned, sets across: too wide for this page with the sets down)"
COLUMNS = (
    "twins",
    "accuracy",
    "flip",
    "substitution answer",
    "metric sentence / twin",
    "deciding heads",
)


def _through(head, inputs):
    if not inputs:
        return head
    return f"{head} (" + ", ".join(f"{x} {100 * v:.0f}%" for x, v in inputs.items()) + ")"


def _cells(part, found, tried, substitution):
    """One set's <td>s, in COLUMNS' order: shares tinted blue by their value, numbers to the
    right, the deciding heads as words that wrap."""
    heads = ", ".join(_through(h, part.get("inputs", {}).get(h)) for h in part["deciding"])
    heads = heads or "none"
    if part["right"] < MIN_FOR_STATS:
        heads = f"too few right both ways ({part['right']})"

    def share(x, ci=None):
        cell = interval_html(pct(x, ci))
        return tinted_cell(cell, x or 0.0, BLUE) if x is not None else f"<td>{cell}</td>"

    return [
        f"<td>{found}/{tried}</td>",
        share(part["accuracy"], part["accuracy_ci"]),
        share(part["flip"], part["flip_ci"]),
        share(substitution),
        f"<td>{part['clean_cm']:.2f} / {part['twin_cm']:.2f}</td>",
        f'<td class="words">{escape(heads)}</td>',
    ]


def _table(names, cells):
    """The table with the sets down (a row each) and, turned, across; the page's script shows
    the turned one where the first is too wide."""
    caption = "<caption>The choice, set by set</caption>"
    top = "".join(f"<th>{escape(c)}</th>" for c in COLUMNS)
    down = "".join(
        f"<tr><th>{escape(name)}</th>{''.join(row)}</tr>" for name, row in zip(names, cells)
    )
    across_top = "".join(f"<th>{escape(name)}</th>" for name in names)
    across = "".join(
        f"<tr><th>{escape(c)}</th>{''.join(row[i] for row in cells)}</tr>"
        for i, c in enumerate(COLUMNS)
    )
    turned = caption.replace("</caption>", f"{TURNED}</caption>")
    return (
        f'<div class="flip"><div class="scroll"><table>{caption}<tr><th>set</th>{top}</tr>'
        f'{down}</table></div><div class="scroll down"><table>{turned}<tr><th></th>'
        f"{across_top}</tr>{across}</table></div></div>"
    )


def no_choice_said(part, choice):
    """Why a set has no choice circuit, in its own numbers: its flip is not above chance with
    its interval, or its twins hardly move the choice metric."""
    accuracy = part["accuracy"]
    if not part["prefers"]:
        flip, ci, bar = part["flip"], part["flip_ci"], choice["prefers_from"]
        return f"flip {pct(flip, ci)} is not above chance ({bar:.0%}) with its interval"
    gap, gap_ci = part["circuit"]["gap"], part["circuit"].get("gap_ci")
    picks = (
        f"the model picks the antecedent in {pct(accuracy)} of these sentences, but their twins "
        f"move the choice metric by {gap:.2f} on average ({part['clean_cm']:.2f} on the "
        f"sentences, {part['twin_cm']:.2f} on the twins)"
    )
    if gap < MIN_GAP:
        return f"{picks}, under the {MIN_GAP:g} a circuit needs"
    return f"{picks}, and its interval [{gap_ci[0]:.2f}, {gap_ci[1]:.2f}] reaches 0"


def _figure(name, part, identity, choice):
    """One set's choice circuit with its caption, or the reason it has none; and the edges it
    shares with the set's identity circuit where both exist."""
    circuit = part["circuit"]
    svg = circuit_svg(circuit, name) + edges_said(circuit) if circuit["drawn"] else ""
    if svg:
        said = (
            f"{circuit['size']} of {choice['n_edges']} edges keep "
            f"{pct(circuit['faithfulness'])} of the choice gap"
        )
    else:
        said = f"no choice circuit: {no_choice_said(part, choice)}"
    out = (
        f'<figure id="{figure_id("choice", name)}"><figcaption>{escape(name)}: {escape(said)}'
        f"</figcaption>{svg}</figure>"
    )
    shared = part.get("shared_edges")
    if svg and shared is not None and identity and identity.get("faithfulness") is not None:
        said = (
            f"{name}, shared with its identity circuit: {', '.join(shared)}"
            if shared
            else f"{name}: no edge shared with its identity circuit"
        )
        out += f'<p class="shared">{escape(said)}</p>'
    neurons = neuron_lines(part)
    if neurons:
        listed = escape("\n".join(line[2:] for line in neurons))
        out += (
            f'<details class="neurons"><summary>{escape(name)}: the deciding neurons by id, '
            f"and the tokens each writes ({term('␣')}: a leading space)</summary>"
            '<pre class="neurons">'
            f"{listed}</pre></details>"
        )
    return out


def _substitution(probe, kind):
    """The substitution answer's cand@1 on the probe result's items of `kind` (None: all)."""
    answer = (probe or {}).get("model_answer")
    row = None if not answer else answer["all"] if kind is None else answer["decided_by"].get(kind)
    return None if row is None else row["cand_at_1"]["substitution"]


def choice_section(
    choice: dict | None, identity: dict | None = None, probe: dict | None = None
) -> str:
    """The section (see the module docstring) of choice_study's result, beside the identity
    circuit's result (analysis.circuit's trace_circuit) and the substitution answer of the probe
    result's model_answer where given; "" without a choice."""
    if not choice:
        return ""
    twins = choice["twins"]
    sets = [("all sentences", None, choice), *((k, k, p) for k, p in choice["by_kind"].items())]
    cells = [
        _cells(
            part,
            part["n"],
            sum(twins["tried"].values()) if kind is None else twins["tried"].get(kind, 0),
            _substitution(probe, kind),
        )
        for _, kind, part in sets
    ]
    figures = []
    for name, kind, part in sets:
        ident = identity if kind is None or identity is None else identity["by_kind"].get(kind)
        figures.append(_figure(name, part, ident, choice))
    return (
        '<section class="circuit choice"><h2>Which candidate wins: the choice circuit</h2>'
        f'<p class="help">Choice {term("twin", "twins")} keep both candidates and change the '
        f"{term('reason')} (the pronoun, the describing words, the candidates' places), so that "
        f"the other candidate is the answer. The {term('CM (choice metric)', 'choice metric')} at "
        "the pronoun is logit(the antecedent's next word) - logit(the other's); accuracy: the "
        f"share above 0 on the sentence; {term('flip')}: above 0 on the sentence and below 0 on "
        "its twin (chance 50% and 25%). A head decides where patching its output alone flips "
        "the preference both ways (q, k, v: its query, key or value input alone). A set gets a "
        f"choice circuit, and a reason a word on what decides it, where its flip's interval "
        f"lies above {choice['prefers_from']:.0%} and its twins move the metric by at least "
        f"{MIN_GAP:g}."
        + (IDENTITY if identity else "")
        + "</p>"
        + _table([name for name, _, _ in sets], cells)
        + _decides_list(choice, probe)
        + "".join(figures)
        + "</section>"
    )


OWN_ANSWER = "answer (the model's own)"  # the glossary's term


def _decides_list(choice, probe):
    """Each reason in plain words (reports/decides.py), a list item per reason."""
    items = "".join(
        f"<li>{escape(decides_said(kind, part, _substitution(probe, kind)))}</li>"
        for kind, part in choice["by_kind"].items()
    )
    said = (
        f'<p class="help">For {term("agreement")}, {term("role")} and {term("meaning")}: what '
        "decides the choice, only where it follows the reason (the flip's interval above 25% and "
        f"a gap of at least {MIN_GAP:g}); else that the model does not choose by it. Where the "
        f"model's own {term(OWN_ANSWER, 'answer')} disagrees, what each "
        "measures.</p>"
    )
    return f'<div class="decides"><h3>Each reason, in plain words</h3>{said}<ul>{items}</ul></div>'


IDENTITY = (
    " The identity circuit, in the section above, answers another question: how the "
    "antecedent's noun reaches the prediction, the same candidate winning in both of its runs."
)
