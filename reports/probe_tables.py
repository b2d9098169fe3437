"""The probe's main result (analysis.probe's run_probe) as the page's tables, as `generate.py
--probe` prints it (reports.probe_report.format_report): every head's cand@1 on the held-out set as
an L x H grid, the best head outlined; the best head beside the baselines on dev and test; the
permutation test; and, when the saved result carries one under "natural", the same on the
hand-written natural sentences (`generate.py --probe natural`)."""

import html

from analysis.answer import METHODS
from analysis.probe import beats_chance
from reports.answer_report import ANSWER_METHODS
from reports.cells import BLUE, tinted_cell
from reports.glossary import term
from reports.probe_report import language_lines, significance


def _rate_cell(rate, best=False):
    """A <td> with a cand@1 rate as a percentage, tinted blue by it (0..1)."""
    return tinted_cell(f"{rate:.1%}", rate, BLUE, "best" if best else "")


def _grid(result, name):
    """The L x H table of each head's cand@1 on the scored set, the best head outlined."""
    heads, best = result["heads"], result["best_head"]
    if not beats_chance(result):
        best = {"layer": None, "head": None}  # no outline: no head beats chance
    n_head = max(h["head"] for h in heads) + 1
    top = "".join(f"<th>H{h}</th>" for h in range(n_head))
    rows = "".join(
        f"<tr><th>L{heads[at]['layer']}</th>"
        + "".join(
            _rate_cell(h["test"], (h["layer"], h["head"]) == (best["layer"], best["head"]))
            for h in heads[at : at + n_head]
        )
        + "</tr>"
        for at in range(0, len(heads), n_head)
    )
    return (
        f'<div class="scroll"><table class="probe-grid"><caption>{html.escape(name)}cand@1 '
        f"by layer and head</caption><tr><th></th>{top}</tr>{rows}</table></div>"
    )


def _against_baselines(result, name, same):
    """The best head's cand@1 and each baseline's, on dev and on the scored set (one column when
    both are the same examples)."""
    best, b = result["best_head"], result["baselines"]
    splits = [("test", name)] if same else [("dev", "dev"), ("test", name)]
    rows = [
        (f"best head L{best['layer']} H{best['head']}", best, "best"),
        ("random candidate", b["random"], ""),
        ("first candidate", b["first"], ""),
        ("nearest before the pronoun", b["nearest"], ""),
        (f"best position-only rule “{b['position']['rule']}”", b["position"], ""),
    ]
    top = "".join(f"<th>{html.escape(label)}</th>" for _, label in splits)
    body = "".join(
        f'<tr><th class="{cls}">{html.escape(label)}</th>'
        + "".join(_rate_cell(scores[split]) for split, _ in splits)
        + "</tr>"
        for label, scores, cls in rows
    )
    return (
        f'<div class="scroll"><table class="baselines"><caption>The best head against the '
        f"baselines (cand@1)</caption><tr><th></th>{top}</tr>{body}</table></div>"
    )


def _counts(result, name, same):
    """'test: 300 of 300 sentences used', and dev's, as sentences."""
    counts = list(result["counts"].items())[-1:] if same else list(result["counts"].items())
    said = []
    for split, c in counts:
        label = "examples" if same else name if split == "test" else split
        cannot = c["skipped_unencodable"]
        skipped = f" ({cannot} the tokenizer cannot encode)" if cannot else ""
        said.append(f"{label}: {c['used']} of {c['examples']} used{skipped}")
    return "; ".join(said)


def probe_result_tables(result):
    """(intro sentence, tables) of one run_probe result."""
    same = result["selection"] == "same data"
    name = result["test_set"]
    chosen = (
        "chosen and scored on the same examples (optimistic; the p-value pays for the choice)"
        if same
        else f"chosen on dev, scored on {name}"
    )
    intro = f"{_counts(result, name, same)}; the best head is {chosen}; {significance(result)}"
    return intro, _grid(result, "" if same else f"{name} ") + _against_baselines(result, name, same)


def answer_table(answer):
    """The model's own answer (analysis/answer.py) beside the best head: cand@1 of each method
    and of the head, on all items and on each kind; "" without one."""
    if not answer:
        return ""
    rows = [("all", answer["all"]), *answer["decided_by"].items()]
    head = f"L{answer['head']['layer']} H{answer['head']['head']}"
    caption = "The model's own answer against the best head (cand@1)"
    table = _cand_table(rows, answer["methods"], head, caption)
    return (
        f'<div class="answer-box">{table}<p class="help">{html.escape(ANSWER_METHODS)}.</p></div>'
    )


def lexicon_table(natural):
    """The natural sentences split by the training lexicon (the study's "by_lexicon"): each
    group's count, both methods' cand@1 and the best head's; "" without one."""
    groups = natural.get("by_lexicon")
    if not groups:
        return ""
    best = natural["best_head"]
    table = _cand_table(
        groups.items(),
        METHODS,
        f"L{best['layer']} H{best['head']}",
        "By the training lexicon: sentences whose candidates are all its nouns, and those "
        "with one it does not have (cand@1)",
    )
    return f'<div class="answer-box">{table}</div>'


def _cand_table(rows, methods, head, caption):
    """A table of cand@1: a row per (name, row of model_answer's result) with its count, a
    column per method and the head's."""
    top = "".join(f"<th>{html.escape(m)}</th>" for m in methods) + f"<th>{head}</th>"
    body = "".join(
        f"<tr><th>{html.escape(name)} ({row['examples']})</th>"
        + "".join(_rate_cell(row["cand_at_1"][m]) for m in (*methods, "head"))
        + "</tr>"
        for name, row in rows
    )
    caption = html.escape(caption, quote=False)
    return (
        f'<div class="scroll"><table class="answer"><caption>{caption}</caption>'
        f"<tr><th></th>{top}</tr>{body}</table></div>"
    )


TESTED = term("p (permutation test)", "permutation test")


def probe_section(result):
    """The page's section of the probe's main result; "" without a result that has heads (an
    older saved result, or none)."""
    if not result or not result.get("heads"):
        return ""
    try:
        intro, tables = probe_result_tables(result)
        natural = result.get("natural")
        more = ""
        if natural and natural.get("heads"):
            n_intro, n_tables = probe_result_tables(natural)
            more = (
                f"<h3>On hand-written English (data/pronouns/natural.jsonl)</h3>"
                f'<p class="help">The same probe on natural sentences the model never saw, the '
                f"head chosen on the generated dev set: {html.escape(n_intro)}</p>"
                f'<div class="grids">{n_tables}{lexicon_table(natural)}</div>'
            )
    except (KeyError, TypeError, IndexError, ValueError):
        raise ValueError(
            "the saved probe result is not what analysis.probe gives; run generate.py --probe again"
        ) from None
    return (
        f'<section class="probe"><h2>Which head finds the antecedent?</h2>'
        f'<p class="help">Read at each pronoun of the held-out sentences: how often a head '
        f"gives its antecedent more attention than any other candidate noun before it "
        f"({term('cand@1')}), against {term('baseline', 'baselines')} that use no attention. "
        + "".join(f"{html.escape(line)} " for line in language_lines(result))
        + html.escape(intro).replace("permutation test", TESTED, 1)
        + "</p>"
        f'<div class="grids">{tables}{answer_table(result.get("model_answer"))}</div>'
        f"{more}</section>"
    )
