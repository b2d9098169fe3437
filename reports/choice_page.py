"""The page's section on the choice (analysis/choice.py): which candidate wins. A table of the
twins found, the choice accuracy and flip with their intervals and the deciding heads per set;
then, per set, the identity circuit (analysis/circuit.py: how the antecedent's noun reaches the
prediction) and the choice circuit side by side, each captioned with its question, and the edges
they share. A set with no preference says so and draws no choice circuit."""

from html import escape

from analysis.probe import MIN_FOR_STATS
from reports.circuit_svg import circuit_svg
from reports.formatting import pct


def _through(head, inputs):
    if not inputs:
        return head
    return f"{head} (" + ", ".join(f"{x} {100 * v:.0f}%" for x, v in inputs.items()) + ")"


def _row(name, part, found, tried, substitution):
    heads = ", ".join(_through(h, part.get("inputs", {}).get(h)) for h in part["deciding"])
    heads = heads or "none"
    if part["right"] < MIN_FOR_STATS:
        heads = f"too few right both ways ({part['right']})"
    cells = [
        name,
        f"{found}/{tried}",
        pct(part["accuracy"], part["accuracy_ci"]),
        pct(part["flip"], part["flip_ci"]),
        pct(substitution),
        f"{part['clean_cm']:.2f} / {part['twin_cm']:.2f}",
        heads,
    ]
    return "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>"


def _said(part, choice):
    circuit = part["circuit"]
    if not part["prefers"]:
        return "no preference (accuracy at chance or under the bar): no choice circuit"
    if not circuit["drawn"]:
        return (
            f"prefers the antecedent ({pct(part['accuracy'])}) but the twin hardly moves it "
            f"(flip {pct(part['flip'])}): no choice circuit"
        )
    return (
        f"{circuit['size']} of {choice['n_edges']} edges keep "
        f"{pct(circuit['faithfulness'])} of the choice gap"
    )


def _figures(name, part, identity, choice):
    figures = []
    if identity is not None:
        said = "no preference: no circuit"
        if identity.get("faithfulness") is not None:
            said = f"{identity['size']} edges keep {pct(identity['faithfulness'])}"
        figures.append(
            f"<figure><figcaption>{escape(name)}, identity (does the antecedent's noun reach "
            f"the prediction?): {escape(said)}</figcaption>"
            f'<div class="scroll">{circuit_svg(identity)}</div></figure>'
        )
    choice_part = {"edges": part["circuit"]["edges"]}
    figures.append(
        f"<figure><figcaption>{escape(name)}, choice (which candidate wins?): "
        f"{escape(_said(part, choice))}</figcaption>"
        f'<div class="scroll">{circuit_svg(choice_part)}</div></figure>'
    )
    shared = part.get("shared_edges")
    note = "" if shared is None else f"<p>shared: {escape(', '.join(shared) or 'none')}</p>"
    return f'<div class="side-by-side">{"".join(figures)}</div>{note}'


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
    rows = [
        _row(
            name,
            part,
            part["n"],
            sum(twins["tried"].values()) if kind is None else twins["tried"].get(kind, 0),
            _substitution(probe, kind),
        )
        for name, kind, part in sets
    ]
    figures = []
    for name, kind, part in sets:
        ident = identity if kind is None or identity is None else identity["by_kind"].get(kind)
        figures.append(_figures(name, part, ident, choice))
    return (
        '<section class="circuit choice"><h2>Which candidate wins: the choice circuit</h2>'
        '<p class="help">Choice twins keep both candidates and change what decides (the '
        "pronoun, the describing words, the candidates' places), so that the other candidate "
        "is the answer. The choice metric at the pronoun is logit(the antecedent's next word) - "
        "logit(the other's); accuracy: the share above 0 on the sentence; flip: above 0 on the "
        "sentence and below 0 on its twin (chance 50% and 25%). A head decides where patching "
        "its output alone flips the preference both ways (q, k, v: its query, key or value "
        "input alone). The identity circuit (left) answers "
        "another question: how the antecedent's noun reaches the prediction, the same candidate "
        "winning in both of its runs.</p>"
        '<div class="scroll"><table><tr><th>set</th><th>twins</th><th>accuracy</th>'
        "<th>flip</th><th>substitution answer</th><th>metric sentence / twin</th>"
        "<th>deciding heads</th></tr>"
        + "".join(rows)
        + "</table></div>"
        + "".join(figures)
        + "</section>"
    )
