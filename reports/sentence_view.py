"""One analysed sentence as generate.py --attention prints it: the sentence, what the model's
window leaves out, then its heads one line each (or the compact view of each word's top heads)
and, for one head, the token grid; the pieces are reports/terminal.py's."""

from analysis.flat import flat_heads
from reports.terminal import (
    BEST,
    MARK,
    display_token,
    flat_said,
    head_rows,
    render_token_grid,
    render_top_heads,
    render_word_rows,
    weight_legend,
    wrap,
)


def _read_at(sentence):
    """Where the query was read: '"it" (its last token, #11)', or, moved off the query word by
    --query, '"was" (the token after "it", #12)'."""
    query, at = sentence.words[sentence.query_word], sentence.query_token
    if sentence.position == "pronoun":
        return f'"{query}" (its last token, #{at})'
    moved = "the token after" if sentence.position == "next" else "the last token, after"
    return f'"{query}" ({moved} "{sentence.asked}", #{at})'


def render_sentence(
    sentence, colour=None, width=100, layer=None, head=None, top=None, terminal=False, best=None
):
    """Everything shown for one analysed sentence (an analysis.words.SentenceAttention): the
    sentence, what the model's window leaves out, then the heads of `layer` (None: of every
    layer) as one line each, the (layer, head) `best` marked, or with `top` as the compact view
    (render_top_heads), and with `head` that head's token grid. The tables fit in `width`; on a
    `terminal` the prose is wrapped to it too (piped, a line stays a line for grep)."""

    def fit(text):
        return wrap(text, width) if terminal else text

    parts = [fit(display_token(sentence.text, spaces=False))]
    if sentence.window_note:
        parts.append(fit(f"note: {sentence.window_note}"))
    rows = head_rows(sentence.rows, layer)
    if top is None:
        label = None if best is None else f"L{best[0]} H{best[1]}"
        marked = any(name == label for name, _ in rows)  # its layer shown
        flat = {f"L{l} H{h}" for l, h in flat_heads(sentence)} & {name for name, _ in rows}
        parts.append(
            fit(
                f"attention of {_read_at(sentence)} over the words up to it; each word sums "
                f"its tokens, {MARK} marks the largest"
                + (f"; {BEST} the probe's best head, {label}" if marked else "")
            )
        )
        parts.append(render_word_rows(sentence.words, rows, colour, width, label, flat))
        if flat:
            parts.append(fit(flat_said(sorted(flat), len(rows))))
    else:
        parts.append(
            fit(
                f"the {min(top, len(rows))} of {len(rows)} heads that attend most from "
                f"{_read_at(sentence)} to each word before it"
            )
        )
        parts.append(render_top_heads(sentence.words[: sentence.query_word], rows, top, colour))
    if head is not None:
        parts.append(
            "\n"
            + fit(
                f"L{layer} H{head}, token by token (rows: query tokens; "
                f"columns: key tokens, numbered as the rows, downwards; "
                f"{weight_legend(colour)})"
            )
        )
        parts.append(
            render_token_grid(sentence.tokens, sentence.weights[layer][head], colour, width)
        )
    return "\n".join(parts)
