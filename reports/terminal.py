"""Attention maps as text: one line per head of where the query word looks, a compact list of
the heads that attend most to each word (for models with many heads), and a token grid;
reports/sentence_view.py puts them together for one sentence.

Pure rendering: functions take words and weights and return strings, so tests check the exact
output. A weight w in [0, 1] is drawn as a shade ( ░▒▓█, w rounded to the nearest quarter) and
printed with two decimals (".61", "1.0"); the most attended word of each head is marked ▲. With
`colour` set, the cell's background shows the weight instead of a shade, and the top word is
bold and underlined (the ▲ stays, so piping or copying loses nothing): "truecolor" draws the
viridis ramp from violet (0) to yellow (1), "256" a step of xterm's grey ramp: both brighter for
more weight, in even steps. On a light terminal (COLORFGBG says so: "truecolor-light",
"256-light") the ramps run the other way, from the light background to dark, so that more
weight stands out there too. In every mode a weight under LOW (1/8) keeps the terminal's own
background: the many near-zero cells never stand out, on a dark or a light terminal.
Prose (the sentence, notes, the legend) is wrapped at spaces to the width (wrap).
"""

import re
import unicodedata

from analysis.flat import FLAT
from reports.term_colour import LIGHT, sgr_colours

SHADES = " ░▒▓█"
MARK = "▲"
BEST = "★"  # beside the probe's best head's row
RESET = "\x1b[0m"
TOP = "\x1b[1;4m"  # bold + underline
LEGEND = ((0.0, "0"), (0.25, ".25"), (0.5, ".5"), (0.75, ".75"), (1.0, "1"))  # weight, label
LOW = 1 / 8  # weights under this get no background colour (and a · in the token grid)
SGR_RE = re.compile(r"\x1b\[[\d;]*m")
MAX_WORD = 12  # longest word label before it is cut with …
MAX_TOKEN = 8  # longest token label in the grid
MANY_HEADS = 32  # above this many heads, generate.py shows the compact view unless told otherwise
DEFAULT_TOP = 3  # heads per word in that default compact view


def shade(w):
    return SHADES[min(4, max(0, int(w * 4 + 0.5)))]


def format_weight(w):
    """Three characters: ".61", ".05", "1.0"."""
    text = f"{min(max(w, 0.0), 1.0):.2f}"
    return "1.0" if text == "1.00" else text[1:]


def weight_legend(colour):
    """How a cell shows its weight in this colour mode, for the token grid's header."""
    if colour is None:
        return f"weight {SHADES[1:]} to the nearest quarter, · under 1/8"
    scale = "".join(f"{sgr_colours(w, colour)} {label} {RESET}" for w, label in LEGEND)
    if colour == "truecolor":
        return f"weight {scale} violet to yellow (viridis), 24-bit colour; · under 1/8"
    if colour == "truecolor" + LIGHT:
        return f"weight {scale} white to blue, 24-bit colour (light background); · under 1/8"
    ramp = "light to dark grey" if colour.endswith(LIGHT) else "dark to light grey"
    return f"weight {scale} {ramp}, 256 colours (COLORTERM=truecolor for 24-bit); · under 1/8"


def visible_len(text):
    """The columns `text` takes on a terminal: its characters less the colour escapes."""
    return len(SGR_RE.sub("", text))


def wrap(text, width, indent="  "):
    """`text` wrapped at spaces into lines of at most `width` columns (a longer word stands
    alone), later lines after `indent`; colour escapes take no room, and a coloured stretch (a
    legend's scale) is never broken. Lines of the text that fit are left as they are."""
    out = []
    for line in text.split("\n"):
        if visible_len(line) <= width:
            out.append(line)
            continue
        words, word, coloured = [], "", False
        for part in re.split(r"(\x1b\[[\d;]*m| )", line):
            if part == " " and not coloured:
                words.append(word)
                word = ""
                continue
            if SGR_RE.fullmatch(part or "-"):
                coloured = part != RESET
            word += part
        words.append(word)
        current = ""
        for word in words:
            joined = f"{current} {word}" if current else word
            if current and visible_len(joined) > width:
                out.append(current)
                current = indent + word
            else:
                current = joined
        out.append(current)
    return "\n".join(out)


def display_token(text, limit=None, spaces=True):
    """`text` made visible on one line: space ␣ (unless spaces=False), newline ↵, tab ⇥, other
    control characters as \\xNN or \\uNNNN; cut to `limit` characters with … when longer."""
    visible = {" ": "␣" if spaces else " ", "\n": "↵", "\t": "⇥"}
    out = []
    for ch in text:
        if ch in visible:
            out.append(visible[ch])
        elif unicodedata.category(ch).startswith("C"):
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 256 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    text = "".join(out)
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def _cell(w, is_top, colour):
    """Five characters wide: shade and number, then ▲ on the most attended word; in colour, a
    weight under LOW keeps the terminal's background."""
    mark = MARK if is_top else " "
    if colour is None:
        return shade(w) + format_weight(w) + mark
    number = (TOP if is_top else "") + format_weight(w)
    if w < LOW:
        return " " + number + (RESET if is_top else "") + mark
    return sgr_colours(w, colour) + " " + number + RESET + mark


def head_rows(rows, layer=None):
    """(label, weights) pairs, "L0 H1" first, of a sentence's rows[l][h] (analysis.words'
    SentenceAttention.rows): every layer's heads, or `layer`'s."""
    return [
        (f"L{l} H{h}", weights)
        for l, layer_rows in enumerate(rows)
        for h, weights in enumerate(layer_rows)
        if layer in (None, l)
    ]


def render_word_rows(words, rows, colour=None, width=100, best=None, flat=()):
    """A table: the words as column headers, then one line per (label, weights) in `rows`.

    Columns that do not fit in `width` characters wrap into further blocks, each with its own
    header, as even in words as fit (split_columns), so that the query word, the last, is never
    left alone below the words it is read against. Each line marks its largest weight (the
    first, on a tie), but for the rows labelled in `flat` (near-uniform: no word stands out);
    the row labelled `best` ("L0 H2", the probe's best head) is marked BEST.
    """
    labels = [display_token(w, MAX_WORD) for w in words]
    col_widths = [max(len(label), 5) for label in labels]
    tops = [
        None if label in flat else max(range(len(weights)), key=lambda i: weights[i])
        for label, weights in rows
    ]
    if any(label == best for label, _ in rows):
        rows = [(f"{label} {BEST if label == best else ' '}", w) for label, w in rows]
    label_width = max(len(label) for label, _ in rows)

    blocks = []
    for cols in split_columns(col_widths, width - label_width - 2):
        lines = [
            (
                " " * (label_width + 2) + " ".join(labels[i].ljust(col_widths[i]) for i in cols)
            ).rstrip()
        ]
        for (label, weights), top in zip(rows, tops):
            cells = []
            for i in cols:
                pad = " " * (col_widths[i] - 5)
                cells.append(_cell(weights[i], i == top, colour) + pad)
            lines.append((label.ljust(label_width) + "  " + " ".join(cells)).rstrip())
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def flat_said(flat, shown):
    """The line under a map with flat heads (near-uniform rows, no word marked)."""
    heads = "every head shown" if len(flat) == shown else ", ".join(flat)
    return (
        f"flat: {heads} spread the attention almost evenly over the tokens (none gets "
        f"{FLAT:g}x the even share), so no word is marked there; summed, a word of more tokens "
        "gets more"
    )


def split_columns(widths, room):
    """The columns (ranges of indices) of each block of a table whose columns are `widths` wide,
    one space apart, in `room` characters: the fewest blocks, their counts of columns as even as
    fit, the later blocks the larger (11 words at 80 columns: 5 and 6, not 10 and 1). A column
    wider than `room` gets a block of its own."""
    n = len(widths)
    fits = lambda a, b: b - a == 1 or sum(widths[a:b]) + (b - a - 1) <= room  # noqa: E731
    for count in range(1, n + 1):
        bounds = [n * k // count for k in range(count + 1)]  # later blocks the larger
        if all(fits(a, b) for a, b in zip(bounds, bounds[1:])):
            return [range(a, b) for a, b in zip(bounds, bounds[1:])]
    return [range(i, i + 1) for i in range(n)]


def top_heads(words, rows, top):
    """[(i, best)]: for each word i that has a letter or digit (punctuation is no candidate),
    the `top` rows that give it the most weight, most first, ties in head order. rows: (label,
    weights) pairs as for render_word_rows, weights[i] belonging to words[i]."""
    shown = [i for i, w in enumerate(words) if any(c.isalnum() for c in w)]
    return [(i, sorted(rows, key=lambda row: -row[1][i])[:top]) for i in shown]  # sorted is stable


def render_top_heads(words, rows, top, colour=None):
    """The compact view: top_heads as a line a word:

    animal   L5 H1 ▒.62  L6 H9 ▒.48  L2 H3 ░.33
    """
    chosen = top_heads(words, rows, top)
    labels = {i: display_token(words[i], MAX_WORD) for i, _ in chosen}
    width = max(map(len, labels.values()), default=0)
    head_width = max(len(label) for label, _ in rows)  # "L9 H1" and "L11 H10" line up
    lines = []
    for i, best in chosen:
        heads = " ".join(
            f"{label.ljust(head_width)} {_cell(weights[i], False, colour)}"
            for label, weights in best
        ).rstrip()
        lines.append(f"{labels[i].ljust(width)}  {heads}")
    return "\n".join(lines) or "(no word before it)"


def column_numbers(T, cell, indent):
    """The token grid's header: each column's number (0 to T - 1, as the rows are numbered)
    written downwards, one digit a line, so that a column stays one or two characters wide."""
    digits = len(str(T - 1))
    numbers = [str(j).rjust(digits) for j in range(T)]
    return [
        (" " * indent + "".join(n[d].ljust(cell) for n in numbers)).rstrip() for d in range(digits)
    ]


def render_token_grid(tokens, weights, colour=None, width=100):
    """The full (T, T) map of one head: row i is query token i, column j key token j.

    Rows and columns are numbered alike in decimal, from 0, as the report numbers tokens ("its
    last token, #11"); a column's number is written downwards (1 over 2 is column 12), so column
    j is the token of row j (and the diagonal, each token's attention to itself, joins the
    two). A cell is two characters wide when the grid fits in `width`, else one. Keys a query
    may see (j <= i) but gives under 1/8 of its attention show as ·, so the causal triangle
    stays visible; future keys are blank.
    """
    T = len(tokens)
    digits = len(str(T - 1))
    labels = [f"{i:>{digits}} {display_token(t, MAX_TOKEN)}" for i, t in enumerate(tokens)]
    label_width = max(len(label) for label in labels)
    cell = 2 if label_width + 1 + 2 * T <= width else 1
    lines = column_numbers(T, cell, label_width + 1)
    for i in range(T):
        row = []
        for j in range(T):
            w = float(weights[i][j])
            if j > i:
                row.append(" " * cell)
            elif w < LOW:
                row.append("·".ljust(cell))
            elif colour is not None:
                row.append(sgr_colours(w, colour) + " " * cell + RESET)
            else:
                row.append(shade(w) * cell)
        lines.append((labels[i].ljust(label_width) + " " + "".join(row)).rstrip())
    return "\n".join(lines)
