"""Attention maps as one self-contained HTML page: no CDN, no network, works from a file.

For each sentence: the layer x head grid of small maps (rows: the token attending, the query;
columns: the token attended to, the key), its rows and columns labelled L0.. and H0..; click one
to enlarge it with token labels; hover a token or a row label to highlight its row (and tint the
sentence by that row's weights); hover a cell for its weight. The probe's best head, if given,
is outlined. The maps shrink (down to 16 px) so that the grid, GPT-2 small's 12 x 12 included,
fits beside the enlarged map or, on a narrow page, across it.

Everything is inline (CSS, JS, and the data as JSON) because bertviz, which loads its scripts
from a CDN, draws a blank page whenever the CDN is unreachable. Text from the user (tokens) only
ever reaches the page inside the JSON block, with "<", ">" and "&" written as \\u escapes so no
token can close the <script> element, and the script puts it on screen with textContent, never
as HTML. Weights are stored as integers in units of 1e-4 to keep pages small.
"""

import html
import json
import operator

import torch

from storage.atomic import write_atomic

SCALE = 10_000  # weights are stored as round(weight * SCALE)

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 16px; color: #222; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 15px; margin: 18px 0 6px; }
.help { color: #555; margin: 0 0 8px; }
.tokens { margin: 4px 0 10px; line-height: 2; }
/* inline-block: a line may break between two tokens, so a long sentence wraps */
.tok { display: inline-block; line-height: 1.4; padding: 2px 3px; margin: 1px;
       border: 1px solid #ddd; border-radius: 3px; white-space: pre; cursor: default; }
.tok.pronoun { border-color: #d95f02; font-weight: bold; }
.note { color: #8c2d04; margin: 0 0 6px; }
.layout { display: flex; gap: 24px; align-items: flex-start; flex-wrap: wrap; }
/* Grows into the room the enlarged map leaves, up to 72 px maps; its columns shrink to fit. */
.grid { display: grid; gap: 4px; align-items: center; flex: 1 1 320px; max-width: max-content;
        min-width: 0; }
.grid .label { font-size: 11px; color: #555; text-align: center; padding: 0 2px; }
.grid .label.best { color: #d95f02; font-weight: bold; }
.cell { padding: 1px; border: 2px solid transparent; background: none; cursor: pointer;
        width: 100%; min-width: 0; box-sizing: border-box; }
.cell canvas { width: 100%; height: auto; aspect-ratio: 1; image-rendering: pixelated;
               display: block; border: 1px solid #ccc; box-sizing: border-box; }
.cell.selected { border-color: #2166ac; }
.cell.best { outline: 3px solid #d95f02; outline-offset: 1px; }
.big { position: relative; flex: 0 1 auto; min-width: 0; max-width: 100%; }
.big canvas { display: block; max-width: 100%; height: auto; }
.tip { position: absolute; pointer-events: none; background: #222; color: #fff; padding: 2px 6px;
       border-radius: 3px; font-size: 12px; white-space: pre; display: none; }
"""

SCRIPT = r"""
"use strict";
const DATA = JSON.parse(document.getElementById("attention-data").textContent);
const status = document.getElementById("status");
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;  // text, never HTML
  return e;
}
// White (no weight) to dark blue (all of it); future keys, masked by causality, in light grey.
function colour(w) { return [255 - 247 * w, 255 - 207 * w, 255 - 148 * w]; }
function bitmap(m) {  // one head's T x T map as a T x T pixel canvas
  const T = m.length, c = el("canvas"), ctx = c.getContext("2d");
  c.width = T; c.height = T;
  const img = ctx.createImageData(T, T);
  for (let q = 0; q < T; q++) for (let k = 0; k < T; k++) {
    const w = m[q][k] / DATA.scale, o = 4 * (q * T + k);
    const rgb = k > q && w === 0 ? [238, 238, 238] : colour(w);
    img.data.set([rgb[0], rgb[1], rgb[2], 255], o);
  }
  ctx.putImageData(img, 0, 0);
  return c;
}
const BEST = " (best head by the probe)";
function sentence(s, si) {
  const sec = el("section"), L = s.attention.length, H = s.attention[0].length, T = s.tokens.length;
  const best = DATA.best, head = { l: best ? best[0] : 0, h: best ? best[1] : 0 };
  let row = s.pronoun === null ? T - 1 : s.pronoun;
  sec.appendChild(el("h2", null, "Sentence " + (si + 1)));
  if (s.note) sec.appendChild(el("p", "note", "Note: " + s.note));
  const toks = el("div", "tokens");
  const spans = s.tokens.map((t, i) => {
    const sp = el("span", "tok" + (i === s.pronoun ? " pronoun" : ""), t);
    sp.addEventListener("mouseenter", () => { row = i; draw(); });
    toks.appendChild(sp);
    return sp;
  });
  sec.appendChild(toks);
  const layout = el("div", "layout"), grid = el("div", "grid"), cells = [];
  grid.style.gridTemplateColumns = "auto repeat(" + H + ", minmax(16px, 72px))";
  const bitmaps = s.attention.map(layer => layer.map(bitmap));
  const label = (text, isBest) =>
    grid.appendChild(el("div", "label" + (isBest ? " best" : ""), text));
  label("");
  for (let h = 0; h < H; h++) label("H" + h, best && best[1] === h);
  for (let l = 0; l < L; l++) {
    label("L" + l, best && best[0] === l);
    for (let h = 0; h < H; h++) {
      const isBest = best && best[0] === l && best[1] === h;
      const b = el("button", "cell" + (isBest ? " best" : ""));
      b.title = "layer " + l + ", head " + h + (isBest ? BEST : "") + ": click to enlarge";
      b.dataset.head = "L" + l + " H" + h;
      b.setAttribute("aria-label", b.title);
      const c = el("canvas"); c.width = T; c.height = T;
      c.getContext("2d").drawImage(bitmaps[l][h], 0, 0);
      b.appendChild(c);
      b.addEventListener("click", () => { head.l = l; head.h = h; draw(); });
      grid.appendChild(b); cells.push([l, h, b]);
    }
  }
  const bigBox = el("div", "big"), title = el("div"), big = el("canvas"), tip = el("div", "tip");
  const cell = Math.max(12, Math.min(28, Math.floor(560 / T)));
  const ctx0 = big.getContext("2d"); ctx0.font = "12px sans-serif";
  const margin = 12 + Math.min(140, Math.max(...s.tokens.map(t => ctx0.measureText(t).width), 10));
  big.width = margin + T * cell + 4; big.height = margin + T * cell + 4;
  big.dataset.margin = margin; big.dataset.cell = cell;  // geometry, for tests that hover
  bigBox.appendChild(title); bigBox.appendChild(big); bigBox.appendChild(tip);
  layout.appendChild(grid); layout.appendChild(bigBox); sec.appendChild(layout);
  function draw() {
    const m = s.attention[head.l][head.h], ctx = big.getContext("2d");
    const isBest = best && best[0] === head.l && best[1] === head.h;
    title.textContent = "Layer " + head.l + ", head " + head.h + (isBest ? BEST : "") +
      ": row = query token, column = key token";
    for (const [l, h, b] of cells) b.classList.toggle("selected", l === head.l && h === head.h);
    ctx.clearRect(0, 0, big.width, big.height);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(bitmaps[head.l][head.h], margin, margin, T * cell, T * cell);
    ctx.font = "12px sans-serif"; ctx.fillStyle = "#222"; ctx.textBaseline = "middle";
    for (let i = 0; i < T; i++) {
      ctx.fillStyle = i === row ? "#d95f02" : "#222";
      ctx.textAlign = "right";
      ctx.fillText(s.tokens[i], margin - 6, margin + (i + 0.5) * cell, margin - 8);
      ctx.save(); ctx.translate(margin + (i + 0.5) * cell, margin - 6); ctx.rotate(-Math.PI / 3);
      ctx.textAlign = "left"; ctx.fillText(s.tokens[i], 0, 0, margin - 8); ctx.restore();
    }
    ctx.strokeStyle = "#d95f02"; ctx.lineWidth = 2;
    ctx.strokeRect(margin, margin + row * cell, T * cell, cell);
    spans.forEach((sp, k) => {
      const w = m[row][k] / DATA.scale;
      sp.style.background = "rgb(" + colour(w).map(Math.round).join(",") + ")";
      sp.style.color = w > 0.5 ? "#fff" : "#222";
      sp.title = "\"" + s.tokens[row] + "\" attends to \"" + s.tokens[k] + "\": " + w.toFixed(4);
    });
  }
  big.addEventListener("mousemove", ev => {
    const r = big.getBoundingClientRect(), px = big.width / r.width;  // shrunk on a narrow page
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    const q = Math.floor((y * px - margin) / cell), k = Math.floor((x * px - margin) / cell);
    if (q < 0 || q >= T) { tip.style.display = "none"; return; }
    if (q !== row) { row = q; draw(); }
    if (k < 0 || k >= T) { tip.style.display = "none"; big.title = ""; return; }
    const w = (s.attention[head.l][head.h][q][k] / DATA.scale).toFixed(4);
    tip.textContent = "\"" + s.tokens[q] + "\" \u2192 \"" + s.tokens[k] + "\": " + w;
    big.title = tip.textContent;
    tip.style.left = (x + 14) + "px"; tip.style.top = (y + 14) + "px";
    tip.style.display = "block";
  });
  big.addEventListener("mouseleave", () => { tip.style.display = "none"; });
  draw();
  return [sec, grid];
}
const root = document.getElementById("sentences");
const grids = DATA.sentences.map((s, i) => {
  const [sec, grid] = sentence(s, i);
  root.appendChild(sec);
  return grid;
});
if (grids.length) {  // where the first grid landed, for tests that look at a screenshot
  const r = grids[0].getBoundingClientRect();
  status.dataset.grid = [r.left, r.top, r.width, r.height].map(Math.round).join(",");
}
status.dataset.rendered = String(grids.length);
"""

# Installed before the main script, so that even a syntax error in it is recorded.
ERROR_HOOK = """
window.addEventListener("error", e => {
  const s = document.getElementById("status");
  s.dataset.errors = (s.dataset.errors || "") + (e.message || "error") + "\\n";
});
"""


def _best(best_head):
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


def sentence_page(sa):
    """One analysis.words.SentenceAttention as a sentence for write_html: its window's tokens and
    maps, the query's row shown first, and what the window leaves out as the note."""
    return {"tokens": sa.tokens, "pronoun": sa.query_token, "note": sa.window_note,
            "attention": torch.stack([torch.stack(layer) for layer in sa.weights])}


def _sentence(s, i, best):
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


def render_html(sentences, best_head=None, title="Attention maps") -> str:
    """The page as a string (see write_html)."""
    best = _best(best_head)
    if not sentences:
        raise ValueError("no sentences to draw; pass at least one")
    data = {
        "scale": SCALE,
        "best": best,
        "sentences": [_sentence(s, i, best) for i, s in enumerate(sentences)],
    }
    # In a <script> element only "</script" (or "<!--") ends the text early; with every "<",
    # ">" and "&" escaped no token can, and JSON.parse reads the \u escapes back unchanged.
    payload = json.dumps(data, separators=(",", ":"))
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    outlined = f"; outlined: the probe's best head, L{best[0]} H{best[1]}" if best else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{html.escape(title)}</title>
<style>{CSS}</style>
</head><body>
<h1>{html.escape(title)}</h1>
<p class="help">Each small map is one head, L layer and H head (rows: the token attending;
columns: the token attended to; darker = more weight; grey = future tokens, masked){outlined}.
Click a map to enlarge it, hover a token to highlight its row, hover a cell for its weight.</p>
<div id="status" data-rendered="0"></div>
<script>{ERROR_HOOK}</script>
<div id="sentences"></div>
<script type="application/json" id="attention-data">{payload}</script>
<script>{SCRIPT}</script>
</body></html>
"""


def write_html(path, sentences, best_head=None, title="Attention maps") -> None:
    """Write the page to `path` with storage.atomic.write_atomic: a reader never sees half a
    page, and a path that cannot take it (a folder, a read-only place) is a one-line ValueError.

    sentences: list of {"tokens": [str] (display strings, T of them), "attention": (L, H, T, T)
    tensor or nested lists, "pronoun": token index or None (the row shown first), "note": a
    sentence shown above the maps, or None}; sentence_page makes one from sentence_attention.
    best_head: (layer, head), the probe's result["best_head"], or None."""
    write_atomic(path, render_html(sentences, best_head, title))
