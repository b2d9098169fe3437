"""The page's sections on depth: the logit lens at the pronoun (analysis/lens.py) and activation
patching (analysis/patching.py) as tables, each cell's number printed in it (a printout or a
screenshot keeps them) and tinted by its value."""

import html

from reports.causal_tables import interval_html
from reports.cells import ORANGE, tinted_cell
from reports.formatting import recovered_text, signed
from reports.glossary import term
from reports.lens_report import lens_example_text


def _tinted(text, share, best=False):
    """A <td> tinted orange in proportion to share (0..1, clipped); an interval in its text goes
    under the value where the table is too wide for the page (interval_html)."""
    return tinted_cell(interval_html(text), share, ORANGE, "best" if best else "")


def lens_section(lens):
    """The logit lens table; "" without one."""
    if not lens:
        return ""
    ex = lens["example"]
    rows = []
    for i, point in enumerate(lens["points"]):
        top = ", ".join(f"{t!r} {p:.2f}" for t, p in ex["top"][i])
        rows.append(
            f"<tr><th>{html.escape(point)}</th>"
            + _tinted(f"{lens['mean_probability'][i]:.3f}", lens["mean_probability"][i])
            + f"<td>{lens['median_rank'][i]:g}</td>"
            + _tinted(f"{lens['top1_share'][i]:.0%}", lens["top1_share"][i])
            + f'<td class="words">{html.escape(top)}</td></tr>'
        )
    return f"""<section class="lens"><h2>Where in depth is the next word decided?</h2>
<p class="help">{term("logit lens", "The logit lens")}: the residual stream at the pronoun, entering
each block and leaving the last, read through the final LayerNorm and the unembedding as if the
model stopped there; the probability and rank of the token that really follows the pronoun, over
{lens["n"]} sentences, and the top tokens for the first of them,
“{html.escape(lens_example_text(ex))}” (next: {html.escape(repr(ex["next"]))}). The last row is the
model's own prediction.</p>
<div class="scroll"><table><tr><th></th><th>p(next)</th><th>median rank</th><th>rank 1</th>
<th>top tokens (first sentence)</th></tr>{"".join(rows)}</table></div></section>"""


def patching_section(patching):
    """The patching heatmaps: each head's output, the residual stream by role, and each MLP's
    output by role; "" without."""
    if not patching:
        return ""
    heads = patching["heads"]
    best = max(
        ((l, h) for l in range(len(heads)) for h in range(len(heads[0]))),
        key=lambda lh: heads[lh[0]][lh[1]]["recovered"],
    )
    head_rows = "".join(
        f"<tr><th>L{l}</th>"
        + "".join(
            _tinted(recovered_text(c), c["recovered"], (l, h) == best) for h, c in enumerate(row)
        )
        + "</tr>"
        for l, row in enumerate(heads)
    )
    head_top = "".join(f"<th>H{h}</th>" for h in range(len(heads[0])))
    stream_rows = "".join(
        f"<tr><th>{html.escape(point)}</th>"
        + "".join(_tinted(recovered_text(c), c["recovered"]) for c in row)
        + "</tr>"
        for point, row in zip(patching["points"], patching["stream"])
    )
    stream_top = "".join(f"<th>{html.escape(c)}</th>" for c in patching["columns"])
    mlp_rows = "".join(
        f"<tr><th>block {l}</th>"
        + "".join(_tinted(recovered_text(c), c["recovered"]) for c in row)
        + "</tr>"
        for l, row in enumerate(patching["mlps"])
    )
    mlp_table = f"""
<div class="scroll"><table><caption>Each MLP's output, by place in the sentence</caption>
<tr><th></th>{stream_top}</tr>{mlp_rows}</table></div>"""
    return f"""<section class="patching"><h2>What carries the antecedent to the pronoun?</h2>
<p class="help">Activation patching on {patching["n"]} sentence pairs \
({patching["skipped"]} without a twin):
each {term("twin")} swaps the antecedent for another noun of its kind with other doings; one part of
the clean run is copied into the twin's run, and the cell says how much of the clean preference for
its own next word comes back (1 = all, 0 = none; 95% bootstrap intervals where there are enough
pairs). {term("LD (logit difference)", "Logit difference")} clean {signed(patching["clean_ld"])},
twin {signed(patching["corrupt_ld"])}.</p>
<div class="grids"><div class="scroll"><table><caption>Each head's output at the pronoun</caption>
<tr><th></th>{head_top}</tr>{head_rows}</table></div>
<div class="scroll"><table><caption>The residual stream, by place in the sentence</caption>
<tr><th></th>{stream_top}</tr>{stream_rows}</table></div>{mlp_table}</div></section>"""
