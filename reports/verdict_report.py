"""The study's verdict in a few lines, as `generate.py --probe --summary` prints it: the best
head's cand@1 beside the baselines and its p-value, the knockout, the model's own answer, its
choice for each reason (agreement, role, meaning) and the two circuits' sizes and faithfulness,
each term with a few words of what it means; and, for `--probe natural --summary`, the same
head on the hand-written sentences beside the built-in test set. Every number is one of the
full report's (reports/text_reports.py), read from the same result; the report gives each with
its interval, per kind of sentence."""

import math

from analysis.probe import beats_chance
from analysis.results import Study
from reports.decides import THROUGH
from reports.formatting import pct, signed


def format_verdict(result: Study) -> str:
    """One line a claim, unwrapped (the caller fits them to the terminal): the probe's, then the
    knockout's, the model's answer's and the circuits' where the result has them."""
    lines = [_probe_line(result)]  # the language it was drawn in: the full report says it
    if "causal" in result:
        lines.append(_knockout_line(result["causal"]["best_head"]))
    if "model_answer" in result:
        lines.append(
            "The model's own answer, the candidate likeliest in the pronoun's place, is the "
            f"antecedent in {_answer(result)}."
        )
    if "choice" in result:
        lines.append(_reasons_line(result["choice"]))
    circuits = _circuits(result)
    if circuits:
        lines.append(
            "Circuits, the fewest edges that keep the effect: " + "; ".join(circuits) + "."
        )
    return "\n".join(lines)


def format_natural(natural: Study, builtin: Study) -> str:
    """`--probe natural`'s verdict, one line: the head chosen on the built-in dev set, scored on
    the natural sentences, each number beside the built-in test set's (the terms are
    format_verdict's), and on the natural sentences whose nouns the training lexicon has and
    on the others."""
    best, b = natural["best_head"], natural["baselines"]
    p = "no p-value" if natural["p_value"] is None else f"p = {natural['p_value']:.4f}"
    parts = [
        f"cand@1 {best['test']:.1%} ({builtin['best_head']['test']:.1%} on test), random "
        f"{b['random']['test']:.1%}, {p}"
    ]
    if "causal" in natural and "causal" in builtin:
        ours, theirs = natural["causal"]["best_head"], builtin["causal"]["best_head"]
        parts.append(f"knockout {_nats(ours['antecedent'])} ({_nats(theirs['antecedent'])})")
    if "model_answer" in natural and "model_answer" in builtin:
        parts.append(f"the model's own answer {_answer(natural)} ({_answer(builtin)})")
    if {"lexicon", "unseen"} <= natural.get("by_lexicon", {}).keys():
        lexicon, unseen = natural["by_lexicon"]["lexicon"], natural["by_lexicon"]["unseen"]
        parts.append(
            f"the head {lexicon['cand_at_1']['head']:.1%} on the {lexicon['examples']} whose "
            "candidates are all nouns of the training lexicon, "
            f"{unseen['cand_at_1']['head']:.1%} on the {unseen['examples']} with one it lacks"
        )
    return (
        f"On {natural['counts']['test']['used']} hand-written sentences it never saw, the same "
        f"head {_head(best)}: " + "; ".join(parts) + "." + _plainly(natural)
    )


def _plainly(natural: Study) -> str:
    """The natural sentences' result in plain words: whether the head finds the antecedent (its
    p-value below 0.05) and whether the model's own answer does as well (the top of the
    answer's interval at least the head's cand@1); "" where the answer was not measured."""
    answer = natural.get("model_answer", {}).get("all")
    if answer is None:
        return ""
    if not beats_chance(natural):
        return " Plainly: on English no head finds the antecedent better than chance."
    head, said = natural["best_head"]["test"], answer["cand_at_1"]["substitution"]
    random = natural["baselines"]["random"]["test"]
    numbers = f"{said:.0%} against the head's {head:.0%}, random {random:.0%}"
    if answer["cand_at_1_ci"]["substitution"][1] >= head:
        return (
            f" Plainly: on English the head finds the antecedent and the answer agrees ({numbers})."
        )
    return (
        " Plainly: on English the head still finds the antecedent, but the model's own answer "
        f"picks it far less often ({numbers}): where it looks is not what it says."
    )


def _head(h) -> str:
    return f"L{h['layer']} H{h['head']}"


def _p(result) -> str:
    """The permutation test's p and how many shuffles did as well, or why there is none."""
    if result["p_value"] is None:
        return "too few sentences for a p-value"
    n = result["permutations"]
    as_good = round(result["p_value"] * (n + 1)) - 1  # p = (1 + as good) / (1 + shuffles)
    said = f"p = {result['p_value']:.4f} ({as_good} of {n} shuffled answer keys as good)"
    return said if beats_chance(result) else f"{said}: no head beats chance here"


def _probe_line(result) -> str:
    same = result["selection"] == "same data"
    split = "all" if same else "test"  # the key of the scored set's values
    b, best = result["baselines"], result["best_head"]
    sentences = f"{result['counts'][split]['used']}{'' if same else ' ' + result['test_set']}"
    return (
        f"Best head {_head(best)} (layer {best['layer']}, chosen on "
        f"{'them' if same else 'dev'}): cand@1 "
        f"{best[split]:.1%}, the share of {sentences} sentences where the candidate it attends "
        "to most is the antecedent (what the pronoun stands for); picking a random "
        f"candidate {b['random'][split]:.1%}, the first {b['first'][split]:.1%}, the nearest "
        f"{b['nearest'][split]:.1%}; {_p(result)}."
    )


def _nats(delta) -> str:
    return "0.00 nats" if signed(delta) == "0.00" else f"{signed(delta)} nats"


def _knockout_line(effects) -> str:
    """The best head's antecedent knockout: how the next token's loss changes, and what that does
    to the token's probability (the loss is a mean of -log p: a geometric mean's factor)."""
    delta = effects["antecedent"]
    factor = math.exp(abs(delta))
    times = f"{factor:.0f}x" if factor >= 10 else f"{factor:.1f}x"
    if signed(delta) == "0.00":
        change = "leaves the next token's loss as it was"
    elif delta > 0:
        change = f"raises the next token's loss {delta:.2f} nats ({times} less likely)"
    else:
        change = f"lowers the next token's loss {-delta:.2f} nats ({times} more likely)"
    return (
        f"Knockout: hiding the antecedent from {_head(effects)} {change}; hiding a distractor "
        f"(the control) {_nats(effects['distractor'])}."
    )


def _answer(result) -> str:
    return f"{result['model_answer']['all']['cand_at_1']['substitution']:.1%}"


def _reasons_line(choice) -> str:
    """For each reason a sentence gives, whether the model chooses by it (its choice circuit is
    drawn: reports/decides.py's rule), with the choice's accuracy and flip on its twins and the
    heads that decide it and what they read, or that no head decides it alone."""
    said = []
    for reason, part in choice["by_kind"].items():
        numbers = f"{pct(part['accuracy'])}, {pct(part['flip'])}"
        if not part["circuit"]["drawn"]:
            said.append(f"{reason}, no ({numbers})")
            continue
        heads = [_deciding(name, part.get("inputs", {}).get(name, {})) for name in part["deciding"]]
        by = f"; decided by {' and '.join(heads)}" if heads else "; no single head decides it"
        said.append(f"{reason}, yes ({numbers}{by})")
    return (
        "Does it choose by each reason (accuracy, flip on twins that change only the reason; "
        "chance 50%, 25%)? " + "; ".join(said) + "."
    )


def _deciding(name: str, through: dict) -> str:
    """ "L1 H0 through its query": a deciding head and the input that carries the reason."""
    inputs = {"q": "query", "k": "keys", "v": "values"}
    read = [inputs[x] for x, share in through.items() if share >= THROUGH]
    head = f"{name[:2]} {name[2:]}"
    return head + (f" through its {' and '.join(read)}" if read else "")


def _target(threshold) -> str:
    return f"{100 * threshold:.0f}%"


def _circuits(result) -> list[str]:
    """Each circuit's size and faithfulness (or why there is none), in words."""
    parts = []
    if "circuit" in result:
        c = result["circuit"]
        kept = (
            f"{c['size']} of {c['n_edges']} keep {pct(c['faithfulness'])} ("
            f"target {_target(c['threshold'])})"
            if c["preference"]
            else "none, no preference to explain"
        )
        parts.append(f"identity (how the noun reaches the prediction) {kept}")
    elif "circuit_skipped" in result:
        parts.append("identity skipped, no corrupted twins")
    if "choice" in result:
        ch = result["choice"]
        if not ch["prefers"]:
            kept = "none, its choice does not follow the reason"
        elif not ch["circuit"]["drawn"]:
            kept = "none, the reason hardly moves the preference"
        else:
            kept = (
                f"{ch['circuit']['size']} keep "
                f"{pct(ch['circuit']['faithfulness'])} (target {_target(ch['threshold'])})"
            )
        parts.append(f"choice (which candidate wins) {kept}")
    elif "choice_skipped" in result:
        parts.append("choice skipped")
    return parts
