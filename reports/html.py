"""Attention maps as one self-contained HTML page: no CDN, no network, works from a file.

For each sentence: the layer x head grid of small maps (rows: the token attending, the query;
columns: the token attended to, the key), its rows and columns labelled L0.. and H0..; click one
to enlarge it with token labels; hover a token or a row label to highlight its row (and tint the
sentence by that row's weights); hover a cell for its weight, or click or tap it to keep its
weight written under the map. The probe's best head, if given, is outlined. The maps shrink
(down to 16 px) so that the grid, GPT-2 small's 12 x 12 included, fits beside the enlarged map
or, on a narrow page, across it.

Above the maps, after the page's contents (reports.page_writer), the run's facts: checkpoint, step,
validation loss, and the probe's best head with its scores; the probe's main result
(reports.probe_tables: every head's cand@1, the baselines, the p-value, the natural sentences' where
saved); the table the terminal prints, every head's attention from the pronoun to each word
(reports.head_tables); when the run's metrics.jsonl has probe lines, the probe's training curve
(reports.curve); the best head's row over tokens; then, when the probe's result has them, its causal
tests as tables (does the head matter? reports.causal_tables), patching, the circuits and the logit
lens; and last the Terms box (reports.glossary). Each sentence's token strip is tinted by the
attention of one row (the query token, the pronoun at first), with a colour scale and a line that
says which row.

Everything is inline (CSS, JS, and the data as JSON) because bertviz, which loads its scripts
from a CDN, draws a blank page whenever the CDN is unreachable; the template, CSS and scripts
are files in reports/assets/, read and inlined as the page is written. Text from the user
(tokens, words) reaches the page inside the JSON block, with "<", ">" and "&" written as \\u
escapes so no token can close the <script> element, and the script puts it on screen with
textContent, never as HTML; the tables of numbers write it escaped with html.escape. Weights
are stored as integers in units of 1e-4 to keep pages small. The page fits a phone's width
(420 px) without sideways scrolling: where a table of a few heads is wider than the page, the
script puts its intervals under the values and its wrapping text in lines, and shows the
headline table transposed; only a table of many heads (GPT-2's 12) still scrolls in its box.
Each token strip and each grid of maps is one Tab stop (a roving tabindex: the selected token,
the enlarged map); the arrow keys move within it, a token selecting its row as hovering does, a
map being enlarged as it is reached.
"""

import html
import math
import operator
from pathlib import Path

import torch

from analysis.flat import flat_heads
from reports.glossary import term
from reports.head_tables import attention_cell
from reports.terminal import display_token

SCALE = 10_000  # weights are stored as round(weight * SCALE)
ASSETS = Path(__file__).with_name("assets")  # the page's template, CSS and scripts
BEST_HEAD_MEANS = (
    "The best head is the one whose attention, read at a pronoun, most often gives its "
    "antecedent more weight than any other noun before it (cand@1): chosen on the probe's dev "
    "sentences, scored on its held-out test sentences."
)


def asset(name):
    """The text of one of the page's files in reports/assets/."""
    return (ASSETS / name).read_text(encoding="utf-8")


def best_pair(best_head: object) -> tuple[int, int] | None:
    """(layer, head) from None, a pair, or the probe's {"layer": .., "head": ..} dict."""
    if best_head is None:
        return None
    if isinstance(best_head, dict):
        best_head = (best_head.get("layer"), best_head.get("head"))
    try:
        layer, head = (int(x) for x in best_head)
    except (TypeError, ValueError):
        raise ValueError(
            f"best_head must be (layer, head) or a probe result's best_head, got {best_head!r}"
        ) from None
    return [layer, head]


def sentence_page(sentence):
    """One analysis.words.SentenceAttention as a sentence for write_html: its window's tokens
    (spaces as ␣, newlines as ↵, as the terminal shows them, so a space-only token is not an
    empty box), its maps, the query's row shown first, what the window leaves out as the note,
    and the words up to the query with each head's attention over them (the terminal's table)."""
    return {
        "tokens": [display_token(token) for token in sentence.tokens],
        "pronoun": sentence.query_token,
        "note": sentence.window_note,
        "attention": torch.stack([torch.stack(layer) for layer in sentence.weights]),
        "words": sentence.words,
        "rows": sentence.rows,
        "flat": [f"L{l} H{h}" for l, h in sorted(flat_heads(sentence))],
    }


def page_sentence(s: dict, i: int, best: tuple[int, int] | None) -> dict:
    """Validate one sentence dict and turn it into the page's JSON form."""
    try:
        tokens, attention = s["tokens"], s["attention"]
        pronoun, note = s.get("pronoun"), s.get("note")
    except (KeyError, TypeError):
        raise ValueError(
            f"sentence {i} must be a dict with 'tokens', 'attention' and optionally 'pronoun' "
            "and 'note'"
        ) from None
    if note is not None and not isinstance(note, str):
        raise ValueError(f"sentence {i}: 'note' must be a string or None, got {note!r}")
    if not isinstance(tokens, (list, tuple)) or not all(isinstance(t, str) for t in tokens):
        raise ValueError(f"sentence {i}: 'tokens' must be a list of display strings, one per token")
    tokens = list(tokens)
    T = len(tokens)
    try:
        a = torch.as_tensor(attention, dtype=torch.float64).cpu()
        shape = tuple(a.shape)
    except (TypeError, ValueError, RuntimeError):  # ragged nested lists, strings, ...
        a, shape = None, "not a rectangular array of numbers"
    if a is None or a.dim() != 4 or a.shape[2:] != (T, T) or T == 0:
        raise ValueError(
            f"sentence {i}: attention must have shape (layers, heads, T, T) with T = {T} tokens, "
            f"got {shape}; pass one (H, T, T) map per layer for the same tokens"
        )
    if not torch.isfinite(a).all():
        raise ValueError(f"sentence {i}: attention has NaN or infinity; check the model's weights")
    if pronoun is not None:
        try:
            index = operator.index(pronoun)  # ints, numpy ints, 0-d integer tensors
        except TypeError:
            index = -1
        if not 0 <= index < T:
            raise ValueError(
                f"sentence {i}: pronoun must be a token index in [0, {T}) or None, got {pronoun!r}"
            )
        pronoun = index
    if best is not None and not (0 <= best[0] < a.shape[0] and 0 <= best[1] < a.shape[1]):
        raise ValueError(
            f"best_head {tuple(best)} is outside sentence {i}'s "
            f"{a.shape[0]} layers x {a.shape[1]} heads; pass the probe's result for this model"
        )
    weights = (a.clamp(0, 1) * SCALE).round().long().tolist()
    return {"tokens": tokens, "attention": weights, "pronoun": pronoun, "note": note}


NO_HEAD = "no head beats chance here (permutation test p ≥ 0.05): none is outlined"


def _facts(checkpoint, step, val_loss, best_head, decided_by=None, chance=False):
    """(label, value) rows of what is known about the run; None facts are left out; `chance`:
    the probe's best head does not beat chance, and the facts say so."""
    rows = [] if checkpoint is None else [("Checkpoint", str(checkpoint))]
    if step is not None:
        try:
            rows.append(("Training step", f"{operator.index(step):,}"))
        except TypeError:
            raise ValueError(f"step must be an integer or None, got {step!r}") from None
    if val_loss is not None:
        try:
            val_loss = float(val_loss)  # a float, or a number in a 0-d tensor
        except (TypeError, ValueError):
            raise ValueError(f"val_loss must be a number or None, got {val_loss!r}") from None
        # A run stopped before its first evaluation has best_val_loss = inf: nothing to say.
        if math.isfinite(val_loss):
            rows.append(("Best validation loss", f"{val_loss:.4f}"))
    best = best_pair(best_head)
    if chance:
        rows.append(("Best head", NO_HEAD))
    if best is not None:
        scores = best_head if isinstance(best_head, dict) else {}
        said = ", ".join(
            f"{split} {scores[split]:.1%}"
            for split in ("dev", "test")
            if isinstance(scores.get(split), (int, float))
        )
        rows.append(
            (
                "Best head",
                f"L{best[0]} H{best[1]}"
                + (f": {said} cand@1" if said else "")
                + ", outlined in each grid",
            )
        )
        if decided_by:
            said = (
                f"{kind} {k['best_head']:.1%} of {k['examples']}" for kind, k in decided_by.items()
            )
            rows.append(("Best head by reason", ", ".join(said)))
    return rows


def run_section(
    checkpoint=None, step=None, val_loss=None, best_head=None, decided_by=None, chance=False
):
    """The page's first section: the run's facts, and what "best head" means; "" if none;
    `chance`: the probe's best head does not beat chance (no head is named)."""
    rows = _facts(checkpoint, step, val_loss, best_head, decided_by, chance)
    if not rows:
        return ""
    items = "".join(
        f"<dt>{html.escape(label)}</dt><dd>{html.escape(value)}</dd>" for label, value in rows
    )
    said = BEST_HEAD_MEANS.replace("(cand@1)", f"({term('cand@1')})")
    means = f'<p class="help">{said}</p>' if best_head is not None else ""
    return f'<section class="facts"><h2>Run</h2><dl>{items}</dl>{means}</section>'


def maps_section(best):
    """How to read the maps, and the element the script fills with one section a sentence."""
    outlined = f"; outlined: the probe's best head, L{best[0]} H{best[1]}" if best else ""
    return f"""<section class="maps"><h2>Each head's attention, sentence by sentence</h2>
<p class="help">Each small map is one head, L layer and H head
(rows: the token attending; columns: the token attended to; darker = more weight, as in each
sentence's colour scale; grey = future tokens, masked){outlined}. Click a map to enlarge it,
hover a token to highlight its row, hover a cell of the enlarged map for its weight (click or
tap it to keep the weight written under the map).</p>
<div id="sentences"></div></section>"""


def numbers_section(sentences, best):
    """The pronoun's attention row of the best head as numbers, each token with its weight under
    it, a sentence a strip that wraps as text does (no sideways scrolling on a phone), so that
    a printout or a screenshot keeps them (the maps give a number only on hover); "" without a
    best head or a pronoun."""
    if best is None:
        return ""
    strips = []
    for s in sentences:
        q = s["pronoun"]
        if q is None:
            continue
        row = [w / SCALE for w in s["attention"][best[0]][best[1]][q][: q + 1]]
        top = max(range(len(row)), key=row.__getitem__)
        pairs = "".join(
            f'<span class="pair{" q" if t == q else ""}"><span class="t">'
            f"{html.escape(s['tokens'][t])}</span>"
            f"{attention_cell(f'{w:.2f}', w, 'best' if t == top else '', 'span')}</span>"
            for t, w in enumerate(row)
        )
        strips.append(f'<div class="pairs">{pairs}</div>')
    if not strips:
        return ""
    return (
        f'<section class="numbers"><h2>Where the pronoun looks, in numbers</h2><p class="help">'
        f"The best head, L{best[0]} H{best[1]}: the attention of each sentence's pronoun "
        f"(last, in orange) to every token up to it; the most attended token in bold; "
        f"{term('␣')} is a token's leading space.</p>"
        f"{''.join(strips)}</section>"
    )
