"""The logit lens' plain-text report (analysis/lens.py's result), and its example sentence as
the report and the page show it."""

import re

from analysis.results import LensExample, LensResult

LENS_EXAMPLE_CHARS = 160  # the logit lens' example sentence, shown whole up to this long


def lens_example_text(example: LensExample, limit: int = LENS_EXAMPLE_CHARS) -> str:
    """The logit lens' example as the report and the page show it: its text up to the pronoun,
    from the start of the sentence; a longer one from the first sentence start that leaves at
    most `limit` characters (else its last words), after "… "."""
    text = " ".join(example["text"].split())  # one line: newlines and runs of spaces as one
    if len(text) <= limit:
        return text
    starts = [m.end() for m in re.finditer(r"[.!?]['\"’”)]*\s+", text)]
    start = next((i for i in starts if len(text) - i <= limit), None)
    if start is None:
        cut = len(text) - limit
        start = text.index(" ", cut) + 1 if " " in text[cut:] else cut
    return "… " + text[start:]


def format_lens(lens: LensResult) -> str:
    """The logit lens as plain text: one row per point in depth."""
    ex = lens["example"]
    lines = [
        "Logit lens at the pronoun: the residual stream read through the final LayerNorm and the "
        f"unembedding ({lens['n']} examples, {lens['skipped']} skipped: no token after the "
        f"pronoun); the top tokens are those of the first, “{lens_example_text(ex)}” -> "
        f"{ex['next']!r}:",
        f"  {'point':<10} {'p(next)':>7} {'median rank':>11} {'rank 1':>6}   top tokens",
    ]
    for i, point in enumerate(lens["points"]):
        top = ""
        for tok, p in ex["top"][i]:  # as many as fit an 80-column row
            more = f"{', ' if top else ''}{tok!r} {p:.2f}"
            if len(top) + len(more) > 38:
                break
            top += more
        lines.append(
            f"  {point:<10} {lens['mean_probability'][i]:>7.3f} {lens['median_rank'][i]:>11g} "
            f"{lens['top1_share'][i]:>6.1%}   {top}"
        )
    decided = next((lens["points"][i] for i, r in enumerate(lens["median_rank"]) if r == 1), None)
    lines.append(
        f"The true next token is the first choice of the median example from {decided} on"
        if decided
        else "At no point is the true next token the median example's first choice (its median "
        "rank stays above 1)"
    )
    lines[-1] += "; the last row is the model's own prediction."
    return "\n".join(lines)
