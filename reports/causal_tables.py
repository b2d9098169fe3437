"""The causal tests of the probe's result (analysis.causal) as the page's tables: an L x H grid
for each measure (antecedent knocked out, the control, head ablation), tinted orange where the
loss went up and blue where it went down, and the heads together with their intervals, tinted
the same way."""

import html
import math

from reports.cells import BLUE, ORANGE, tinted_cell
from reports.formatting import signed, with_ci
from reports.glossary import term
from reports.text_reports import READING, intervals_said, together

CAUSAL_GRIDS = (
    ("antecedent", "Antecedent knocked out"),
    ("distractor", "Control: one distractor knocked out"),
    ("ablation", "Head ablated (its output replaced by its mean)"),
)


def interval_html(text):
    """A number as the reports write it, "+0.12 [+0.08, +0.16]", for a cell of the page: the
    interval in a span of its own, which the page's script puts under the value where a table
    is too wide for the page."""
    value, bracket, rest = text.partition(" [")
    if not bracket:
        return html.escape(text)
    return f'{html.escape(value)}<span class="ci"> [{html.escape(rest)}</span>'


def _delta(value, scale, best=False, text=None):
    """A <td> for one delta (shown as `text`, default the value alone), tinted orange when the
    loss went up, blue when it went down, as deep as the square root of its share of `scale`:
    a control of -0.25 beside a knockout of +3.65 is still plainly blue, one of 0.01 white."""
    share = math.sqrt(min(1.0, abs(value) / scale)) if round(value, 2) else 0.0
    return tinted_cell(
        interval_html(text or signed(value)),
        share,
        ORANGE if value > 0 else BLUE,
        "best" if best else "",
    )


def _causal_grid(heads, name, caption, best, scale):
    """One L x H table of a measure's mean deltas, tinted relative to `scale`; the best head's
    cell outlined."""
    head_row = "".join(f"<th>H{h}</th>" for h in range(len(heads[0])))
    rows = "".join(
        f"<tr><th>L{l}</th>"
        + "".join(_delta(cell[name], scale, [l, h] == best) for h, cell in enumerate(row))
        + "</tr>"
        for l, row in enumerate(heads)
    )
    return (
        f'<div class="scroll"><table><caption>{html.escape(caption)}</caption>'
        f"<tr><th></th>{head_row}</tr>{rows}</table></div>"
    )


def causal_section(causal, marked=True):
    """The causal tests of the probe's result ("causal", from analysis.causal): the three L x H
    grids and the heads together with their intervals, the best head's cell outlined where
    `marked` (it beats chance); "" when there is none."""
    if not causal:
        return ""
    try:
        b = causal.get("best_head")
        best = [b["layer"], b["head"]] if b and marked else None
        # One scale for the three grids, so a control near 0 looks near 0 beside a real effect.
        scale = max(
            0.05,
            *(
                abs(cell[name])
                for row in causal["heads"]
                for cell in row
                for name, _ in CAUSAL_GRIDS
            ),
        )
        grids = "".join(
            _causal_grid(causal["heads"], name, caption, best, scale)
            for name, caption in CAUSAL_GRIDS
        )
        n = causal["n"]
        rows = "".join(
            f"<tr><th>{html.escape(label)}</th>"
            + "".join(
                _delta(deltas[name], scale, text=with_ci(deltas, name, n))
                if name in deltas
                else "<td></td>"
                for name in ("antecedent", "distractor", "ablation")
            )
            + "</tr>"
            for label, deltas in together(causal)
        )
        said = (
            f"mean over {n} of the probe's sentences ({causal['skipped']} skipped), "
            f"clean loss {causal['clean_loss']:.3f}; heads together {intervals_said(causal)}"
        )
    except (KeyError, TypeError, IndexError, ValueError):
        raise ValueError(
            'the probe result\'s "causal" part is not what analysis.causal gives; '
            "run generate.py --probe again"
        ) from None
    return f"""<section class="causal"><h2>Does the head matter?</h2>
<p class="help">At the pronoun only, attention is changed (a {term("knockout")}: a head may
not attend to the antecedent, or as the control to one other noun; or the head ablated) and the
loss of the next token is measured again: each number is the change, in nats (changed − clean),
{html.escape(said)};
orange where the loss went up, blue where it went down, deeper for a larger change (by its
square root, so that a small one still shows).
{html.escape(" ".join(READING))}</p>
<div class="grids">{grids}</div>
<div class="scroll"><table class="together"><caption>Heads together</caption>
<tr><th></th><th>antecedent out</th><th>control</th><th>ablated</th></tr>{rows}</table></div>
</section>"""
