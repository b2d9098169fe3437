// The attention page's script, inlined into each page by analysis/html.py. It reads the data
// block (id "attention-data") and draws each sentence: its token strip, the layer x head grid of
// small maps and the enlarged map. Tokens are put on screen with textContent, never as HTML.
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
const SCALE_STEPS = [0, 0.2, 0.4, 0.6, 0.8, 1];
function scale() {  // the colour of a weight, with its number
  const box = el("span", "scale");
  box.title = "attention weight: 0 (none) to 1 (all of the row's attention)";
  for (const w of SCALE_STEPS) {
    const sw = el("span", null, w === 0 || w === 1 ? String(w) : String(w).slice(1));
    sw.style.background = "rgb(" + colour(w).map(Math.round).join(",") + ")";
    sw.style.color = w > 0.5 ? "#fff" : "#222";
    box.appendChild(sw);
  }
  return box;
}
const BEST = " (best head by the probe)";
function sentence(s, si) {
  const sec = el("section"), L = s.attention.length, H = s.attention[0].length, T = s.tokens.length;
  const best = DATA.best, head = { l: best ? best[0] : 0, h: best ? best[1] : 0 };
  let row = s.pronoun === null ? T - 1 : s.pronoun;
  sec.appendChild(el("h2", null, "Sentence " + (si + 1)));
  if (s.note) sec.appendChild(el("p", "note", "Note: " + s.note));
  const legend = el("div", "legend"), legendText = el("span");
  legend.appendChild(legendText); legend.appendChild(scale());
  sec.appendChild(legend);
  const toks = el("div", "tokens");
  // Each token selects its row on hover and on keyboard focus, as a row label of the enlarged
  // map does; the selected one is outlined. The strip is one Tab stop (a roving tabindex: the
  // selected token's, see draw), and the arrow keys, Home and End move along it.
  const spans = s.tokens.map((t, i) => {
    const sp = el("span", "tok" + (i === s.pronoun ? " pronoun" : ""), t);
    sp.addEventListener("mouseenter", () => { row = i; draw(); });
    sp.addEventListener("focus", () => { row = i; draw(); });
    sp.addEventListener("keydown", ev => {
      const to = { ArrowRight: i + 1, ArrowDown: i + 1, ArrowLeft: i - 1, ArrowUp: i - 1,
                   Home: 0, End: T - 1 }[ev.key];
      if (to === undefined || to < 0 || to >= T) return;
      ev.preventDefault();
      spans[to].focus();
    });
    toks.appendChild(sp);
    return sp;
  });
  toks.setAttribute("role", "group");
  toks.setAttribute("aria-label",
    "the sentence's tokens: the arrow keys move along them, each showing its row");
  sec.appendChild(toks);
  const layout = el("div", "layout"), grid = el("div", "grid"), cells = [];
  grid.style.gridTemplateColumns = "auto repeat(" + H + ", minmax(16px, 120px))";  // wide screens: bigger maps
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
      // The grid is one Tab stop too: the arrow keys move between heads (left and right
      // along a layer, up and down between layers) and enlarge the one they reach.
      b.addEventListener("keydown", ev => {
        const to = { ArrowRight: [l, h + 1], ArrowLeft: [l, h - 1], ArrowDown: [l + 1, h],
                     ArrowUp: [l - 1, h], Home: [l, 0], End: [l, H - 1] }[ev.key];
        if (to === undefined || to[0] < 0 || to[0] >= L || to[1] < 0 || to[1] >= H) return;
        ev.preventDefault();
        head.l = to[0]; head.h = to[1]; draw();
        cells[to[0] * H + to[1]][2].focus();
      });
      grid.appendChild(b); cells.push([l, h, b]);
    }
  }
  grid.setAttribute("role", "group");
  grid.setAttribute("aria-label",
    "the maps, one per head: the arrow keys move between heads, each enlarged as it is reached");
  const bigBox = el("div", "big"), title = el("div"), big = el("canvas"), tip = el("div", "tip");
  const readout = el("div", "readout");  // a cell's weight without hovering: click or tap it
  readout.textContent = "Click or tap a cell for its weight.";
  const cell = Math.max(12, Math.min(28, Math.floor(560 / T)));
  const ctx0 = big.getContext("2d"); ctx0.font = "12px sans-serif";
  const margin = 12 + Math.min(140, Math.max(...s.tokens.map(t => ctx0.measureText(t).width), 10));
  big.width = margin + T * cell + 4; big.height = margin + T * cell + 4;
  // The geometry, for tests that hover.
  big.dataset.margin = margin; big.dataset.cell = cell; big.dataset.tokens = T;
  bigBox.appendChild(title); bigBox.appendChild(big); bigBox.appendChild(tip);
  bigBox.appendChild(readout);
  layout.appendChild(grid); layout.appendChild(bigBox); sec.appendChild(layout);
  function draw() {
    const m = s.attention[head.l][head.h], ctx = big.getContext("2d");
    const isBest = best && best[0] === head.l && best[1] === head.h;
    title.textContent = "Layer " + head.l + ", head " + head.h + (isBest ? BEST : "") +
      ": row = query token, column = key token";
    for (const [l, h, b] of cells) {
      const on = l === head.l && h === head.h;
      b.classList.toggle("selected", on);
      b.tabIndex = on ? 0 : -1;  // the grid's one Tab stop: the enlarged head
    }
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
    legendText.textContent = "Token colour: the attention of \"" + s.tokens[row] + "\" (row " +
      row + ", outlined here and in the enlarged map) to each token; hover a token, or reach " +
      "the strip with Tab and move along it with the arrow keys, for its row.";
    spans.forEach((sp, k) => {
      sp.classList.toggle("row", k === row);
      sp.tabIndex = k === row ? 0 : -1;  // the strip's one Tab stop: the selected token
      const w = m[row][k] / DATA.scale;
      sp.style.background = "rgb(" + colour(w).map(Math.round).join(",") + ")";
      sp.style.color = w > 0.5 ? "#fff" : "#222";
      sp.title = "\"" + s.tokens[row] + "\" attends to \"" + s.tokens[k] + "\": " + w.toFixed(4);
      sp.setAttribute("aria-label", s.tokens[k] + ": " + sp.title);
    });
  }
  function cellAt(ev) {  // [query row, key column, x, y] under the pointer, the canvas shrunk or not
    const r = big.getBoundingClientRect(), px = big.width / r.width;  // shrunk on a narrow page
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    return [Math.floor((y * px - margin) / cell), Math.floor((x * px - margin) / cell), x, y];
  }
  big.addEventListener("click", ev => {
    const [q, k] = cellAt(ev);
    if (q < 0 || q >= T || k < 0 || k >= T) return;
    if (q !== row) { row = q; draw(); }
    const w = (s.attention[head.l][head.h][q][k] / DATA.scale).toFixed(4);
    readout.textContent = "Layer " + head.l + ", head " + head.h + ": \"" + s.tokens[q] +
      "\" \u2192 \"" + s.tokens[k] + "\": " + w + (k > q ? " (a future token: masked)" : "");
  });
  big.addEventListener("mousemove", ev => {
    const [q, k, x, y] = cellAt(ev);
    if (q < 0 || q >= T) { tip.style.display = "none"; return; }
    if (q !== row) { row = q; draw(); }
    if (k < 0 || k >= T) { tip.style.display = "none"; big.title = ""; return; }
    const w = (s.attention[head.l][head.h][q][k] / DATA.scale).toFixed(4);
    tip.textContent = "\"" + s.tokens[q] + "\" \u2192 \"" + s.tokens[k] + "\": " + w;
    big.title = tip.textContent;
    tip.style.display = "block";
    // Right of the pointer where it fits, else left of it: never past the page's edge.
    const room = bigBox.clientWidth - tip.offsetWidth;
    const left = x + 14 <= room ? x + 14 : Math.min(room, x - 14 - tip.offsetWidth);
    tip.style.left = Math.max(0, left) + "px";
    tip.style.top = (y + 14) + "px";
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
// Tables of numbers wider than their box: first make them tight (intervals under the values,
// words wrapping), then show a headline table transposed; what still does not fit scrolls.
function fitTables() {
  for (const box of document.querySelectorAll(".scroll")) box.classList.remove("tight");
  for (const flip of document.querySelectorAll(".flip")) flip.classList.remove("flipped");
  const over = box => box.scrollWidth > box.clientWidth + 1;
  for (const box of document.querySelectorAll(".scroll")) {
    if (box.offsetParent !== null && over(box)) box.classList.add("tight");
  }
  for (const flip of document.querySelectorAll(".flip")) {
    const across = flip.firstElementChild;
    if (!over(across)) continue;
    flip.classList.add("flipped");
    const down = flip.querySelector(".down");
    if (over(down)) down.classList.add("tight");
  }
}
fitTables();
let fitting = 0;
window.addEventListener("resize", () => {
  cancelAnimationFrame(fitting);
  fitting = requestAnimationFrame(fitTables);
});
status.dataset.rendered = String(grids.length);
