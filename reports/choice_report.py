"""Both circuits in plain text, as `generate.py --probe --circuit` prints them, each named by the
question it answers: the identity circuit (reports/circuit_report.py: how the antecedent's noun
reaches the prediction) and then the choice (analysis/choice.py: which candidate wins): the
twins found, the choice accuracy and flip beside the substitution answer, the deciding heads,
each reason in plain words (reports/decides.py), each set's choice circuit, the edges
it shares with the identity circuit and each MLP's deciding neurons."""

from analysis.circuit import CHECKED
from analysis.circuit_results import ChoiceResult
from analysis.probe import MIN_FOR_STATS
from analysis.results import AnswerResult, Study
from reports.circuit_report import columns_said, edge_lines, format_circuit, with_interval
from reports.decides import decides_said, neuron_lines
from reports.formatting import pct


def _pct(x, ci=None):
    return pct(x, ci, sep=",")


LISTED = 12  # edges listed per set at most


def format_circuits(result: Study) -> str:
    """The identity circuit's report (where the result has one) and the choice's."""
    parts = []
    if "circuit" in result:
        parts.append(
            "Question 1, identity: how does the antecedent's noun reach the prediction? "
            "(twins swap the antecedent's noun for another of its kind; the same candidate "
            "wins in both runs)\n" + format_circuit(result["circuit"])
        )
    if "choice" in result:
        parts.append(format_choice(result["choice"], result.get("model_answer")))
    elif "choice_skipped" in result:
        parts.append(f"The choice circuit skipped: {result['choice_skipped']['message']}")
    return "\n\n".join(parts)


def _twins_line(twins):
    found = ", ".join(
        f"{kind} {twins['found'].get(kind, 0)}/{n}" for kind, n in twins["tried"].items()
    )
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(twins["skipped"].items()))
    return f"Choice twins found: {found}" + (f"; skipped: {skipped}" if skipped else "")


def _substitution(answer, kind):
    if not answer:
        return None
    row = answer["all"] if kind is None else answer.get("decided_by", {}).get(kind)
    return None if row is None else row["cand_at_1"]["substitution"]


def format_choice(choice: ChoiceResult, answer: AnswerResult | None = None) -> str:
    """The choice part (choice_study's result), with the substitution answer's cand@1 (the
    study's model_answer, on all the set's items) beside the accuracy where given."""
    from analysis.choice_pairs import SKIPS

    twins = {
        **choice["twins"],
        "skipped": {SKIPS[k]: n for k, n in choice["twins"]["skipped"].items()},
    }
    lines = [
        "Question 2, choice: which candidate wins? (choice twins keep both candidates and "
        "change the reason, so that the other candidate is the answer; CM = logit(the "
        "antecedent's next word) - logit(the other candidate's), at the pronoun)",
        _twins_line(twins),
        f"  {'set':<10} {'n':>4}  {'accuracy':<18} {'flip (both runs)':<18} "
        f"{'subst.':>6}  {'CM sent/twin':>13}",
    ]
    sets = [("all", None, choice), *((k, k, p) for k, p in choice["by_kind"].items())]
    deciders = []
    for name, kind, part in sets:
        heads = ", ".join(_head(h, part) for h in part["deciding"]) or "none"
        heads = heads if part["right"] >= MIN_FOR_STATS else f"({part['right']} right both ways)"
        deciders.append(f"{name} {heads}")
        cm = f"{part['clean_cm']:.2f} / {part['twin_cm']:.2f}"
        lines.append(
            f"  {name:<10} {part['n']:>4}  {_pct(part['accuracy'], part['accuracy_ci']):<18} "
            f"{_pct(part['flip'], part['flip_ci']):<18} {_pct(_substitution(answer, kind)):>6}  "
            f"{cm:>13}"
        )
    lines.append("Deciding heads: " + "; ".join(deciders))
    lines.append(
        f"  (subst.: the substitution answer's cand@1 on all the set's items; "
        f"chance: accuracy 50%, flip 25%; a head decides where patching its output alone "
        f"flips the preference both ways on at least {100 * choice['decides_from']:.0f}% of "
        f"the examples the model gets right both ways, of which a set needs {MIN_FOR_STATS}; "
        "q, k, v: the same for its query, key and value inputs alone; in the choice circuits, "
        f"{columns_said(CHECKED, 'the CM gap')})"
    )
    lines += ["Each reason, in plain words:"] + [
        "  " + decides_said(kind, part, _substitution(answer, kind))
        for kind, part in choice["by_kind"].items()
    ]
    if "patching" in choice:
        lines += [""] + _patching_lines(choice["patching"])
    for name, _, part in sets:
        lines += [""] + _circuit_lines(name, part, choice) + neuron_lines(part)
    return "\n".join(lines)


def _patching_lines(patching):
    """Activation patching on the choice twins: the example's run patched into the twin's."""
    cell = lambda c: _pct(c["recovered"])  # noqa: E731
    H = len(patching["heads"][0])
    lines = [
        f"Activation patching on the choice twins ({patching['n']} pairs): the sentence's run "
        "patched into its twin's, the share of the CM gap recovered (intervals in --json); "
        "each head's output at the pronoun:",
        "        " + "".join(f"{'H' + str(h):>8}" for h in range(H)),
    ]
    lines += [
        f"  L{l:<4} " + "".join(f"{cell(c):>8}" for c in row)
        for l, row in enumerate(patching["heads"])
    ]
    lines += [
        "  the residual stream patched (columns: where in the sentence; in agreement's twins "
        "the changed token is the pronoun itself):",
        f"  {'':<10}" + "".join(f"{c:>10}" for c in patching["columns"]),
    ]
    lines += [
        f"  {point:<10}" + "".join(f"{cell(c):>10}" for c in row)
        for point, row in zip(patching["points"], patching["stream"])
    ]
    return lines


def _head(name, part):
    l, h = int(name[1 : name.index("H")]), int(name[name.index("H") + 1 :])
    through = part.get("inputs", {}).get(name)
    how = "" if not through else "; " + ", ".join(f"{x} {100 * v:.0f}%" for x, v in through.items())
    return f"{name} ({100 * part['flip_share'][l][h]:.0f}%{how})"


def _circuit_lines(name, part, top):
    circuit = part["circuit"]
    gap = (
        "-"
        if circuit["gap"] is None
        else with_interval(circuit["gap"], circuit["gap_ci"], "{:.2f}")
    )
    lines = [f"choice circuit, {name} ({part['n']} examples): CM gap {gap}"]
    if not part["prefers"]:
        lines.append(
            f"  no preference: flip {_pct(part['flip'], part['flip_ci'])} is not above chance "
            f"({100 * top['prefers_from']:.0f}%) with its interval; no circuit"
        )
        return lines
    if not circuit["drawn"]:
        lines.append(
            f"  the choice follows the reason (flip {_pct(part['flip'])}), but the twins hardly "
            "move CM (the gap is under 0.5 or its interval reaches 0): no circuit"
        )
        return lines
    size = circuit["size"]
    lines += edge_lines(circuit["edges"][: max(5, min(size, LISTED))])
    if size > LISTED:
        lines.append(f"  ... and {size - LISTED} more edges in the circuit")
    lines.append(
        f"  * the circuit: {size} of {top['n_edges']} edges keep "
        f"{_pct(circuit['faithfulness'], circuit['faithfulness_ci'])} of the gap (the target "
        f"is {100 * top['threshold']:.0f}%)"
    )
    if "shared_edges" in part:
        shared = ", ".join(part["shared_edges"]) or "none"
        lines.append(f"  shared with the identity circuit: {shared}")
    return lines
