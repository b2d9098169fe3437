"""The page's headline table, the one `generate.py --attention` prints in the terminal: for each
sentence, every head's attention from the pronoun to each word up to it (a word sums its
tokens, analysis/words.py), the most attended word of each head marked ▲, the probe's best head
in orange. With more than MANY_HEADS heads it is the terminal's compact view instead: each word
and the DEFAULT_TOP heads that attend most to it. Each number is printed in its cell, so a
printout or a screenshot keeps it, and the cell is tinted by it as the best head's row is. Where
a page is too narrow for the words across (a phone), its script shows the same table transposed,
the words down and the heads across, so that no number is out of sight."""

import html

import torch

from reports.cells import BLUE, tinted_cell
from reports.glossary import term
from reports.terminal import (
    DEFAULT_TOP,
    MANY_HEADS,
    MARK,
    display_token,
    format_weight,
    head_rows,
    top_heads,
)


def word_rows(sentence, i, heads):
    """(words, rows, flat) of a sentence dict for write_html: its "words" up to and including the
    pronoun and "rows", each head's attention over them as (L, H, words) numbers with (L, H) =
    `heads`, the shape of its maps, and the labels of its flat heads ("flat", analysis.words'
    flat_heads; none where not given); None when it has no words and rows (tokens only)."""
    words, rows = sentence.get("words"), sentence.get("rows")
    if words is None and rows is None:
        return None
    if (
        not isinstance(words, (list, tuple))
        or not words
        or not all(isinstance(w, str) for w in words)
    ):
        raise ValueError(
            f"sentence {i}: 'words' must be a list of the words up to the pronoun, "
            "as sentence_page gives it"
        )
    shape = (*heads, len(words))
    try:
        weights = torch.as_tensor(rows, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):  # ragged nested lists, strings, None, ...
        weights = None
    if weights is None or tuple(weights.shape) != shape or not torch.isfinite(weights).all():
        raise ValueError(
            f"sentence {i}: 'rows' must be each head's attention over the words, "
            f"numbers of shape {shape}, as sentence_page gives them"
        )
    return [str(w) for w in words], weights.tolist(), set(sentence.get("flat") or ())


def attention_cell(text, weight, cls="", tag="td"):
    """A cell of attention: `text` (escaped here), tinted blue by the weight (0..1)."""
    return tinted_cell(html.escape(text), weight, BLUE, cls, tag)


def _th(text, cls=""):
    return f'<th class="{cls}">{html.escape(text)}</th>' if cls else f"<th>{html.escape(text)}</th>"


def _mark(label, weights, flat):
    """The index of the word a head's row marks ▲, the first on a tie; None on a flat row."""
    return None if label in flat else max(range(len(weights)), key=weights.__getitem__)


def _all_heads(words, rows, best, flat=()):
    """Rows: heads; columns: the words, the pronoun last; a flat head's row marks no word."""
    top = "".join(
        _th(display_token(w), "q" if i == len(words) - 1 else "") for i, w in enumerate(words)
    )
    body = ""
    for label, weights in rows:
        mark = _mark(label, weights, flat)
        cells = "".join(
            attention_cell(
                format_weight(w) + (MARK if i == mark else ""), w, "top" if i == mark else ""
            )
            for i, w in enumerate(weights)
        )
        body += f"<tr>{_th(label, 'best' if label == best else '')}{cells}</tr>"
    return f"<tr><th></th>{top}</tr>{body}"


def _all_heads_down(words, rows, best, flat=()):
    """_all_heads transposed, for a page too narrow for it: rows are the words, the pronoun
    last; columns the heads."""
    marks = [_mark(label, weights, flat) for label, weights in rows]
    top = "".join(_th(label, "best" if label == best else "") for label, _ in rows)
    body = "".join(
        f"<tr>{_th(display_token(w), 'q' if i == len(words) - 1 else '')}"
        + "".join(
            attention_cell(
                format_weight(weights[i]) + (MARK if i == mark else ""),
                weights[i],
                "top" if i == mark else "",
            )
            for (_, weights), mark in zip(rows, marks)
        )
        + "</tr>"
        for i, w in enumerate(words)
    )
    return f"<tr><th></th>{top}</tr>{body}"


def _compact(words, rows, best, flat=()):
    """Rows: the words before the pronoun; in each, the heads that attend most to it."""
    body = "".join(
        f"<tr>{_th(display_token(words[i]))}"
        + "".join(
            attention_cell(
                f"{label} {format_weight(weights[i])}", weights[i], "best" if label == best else ""
            )
            for label, weights in heads
        )
        + "</tr>"
        for i, heads in top_heads(words[:-1], rows, DEFAULT_TOP)
    )
    return (
        f'<tr><th></th><th colspan="{DEFAULT_TOP}">the {DEFAULT_TOP} heads that attend most '
        f"to the word</th></tr>{body}"
    )


# Said where the page turns a sentence's table (words down): too wide across for the page.
TURNED = " (turned, words down: too wide for this page with the words across)"


def heads_section(sentences, best):
    """One table a sentence of where its pronoun looks, head by head (see the module docstring):
    `sentences` as word_rows gives them (None for a sentence without words), `best` the probe's
    [layer, head] or None; "" when no sentence has words."""
    found = [(n, *s) for n, s in enumerate(sentences, start=1) if s is not None]
    if not found:
        return ""
    label = f"L{best[0]} H{best[1]}" if best else None
    heads = len(head_rows(found[0][2]))  # one model: every sentence has its heads
    draw = _compact if heads > MANY_HEADS else _all_heads
    tables = []
    for n, words, grid, flat in found:
        flat_note = f" (flat, no word marked: {', '.join(sorted(flat))})" if flat else ""
        caption = (
            f"<caption>Sentence {n}: from “{html.escape(display_token(words[-1]))}”"
            f"{html.escape(flat_note)}</caption>"
        )
        body = draw(words, head_rows(grid), label, flat)
        table = f'<div class="scroll"><table>{caption}{body}</table></div>'
        if draw is _all_heads:  # the page's script shows the words down where across does not fit
            down = _all_heads_down(words, head_rows(grid), label, flat)
            turned = caption.replace("</caption>", f"{TURNED}</caption>")
            table = (
                f'<div class="flip">{table}<div class="scroll down"><table>{turned}{down}'
                "</table></div></div>"
            )
        tables.append(table)
    tables = "".join(tables)
    how = (
        f"with {heads} heads, each word before the pronoun and the {DEFAULT_TOP} heads that give "
        f"it the most attention"
        if draw is _compact
        else f"rows are heads; {MARK} marks each head's most attended word, but on a "
        f"{term('flat map', 'flat')} head, whose attention is spread almost evenly (summed, a "
        "word of more tokens would win there only by its length)"
    )
    outlined = f"; the probe's best head, {label}, in orange" if best else ""
    return (
        f'<section class="heads"><h2>Where the pronoun looks, head by head</h2><p class="help">'
        f"The attention of each sentence's pronoun (its last token) to every word up to it, a word "
        f"summing its tokens, as <code>generate.py --attention</code> prints it: {how}{outlined}."
        f'</p><div class="grids">{tables}</div></section>'
    )
