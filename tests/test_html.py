"""The attention page: self-contained, hostile tokens stay text, and a real browser draws it.

The browser tests run Debian's chromium headless, with every host name made unresolvable so a
page that needed the network would fail here as it would offline. They skip, saying how to
install it, when no chromium is found.
"""

import html
import json
import re
import shutil
import subprocess

import numpy as np
import pytest
import torch

from analysis.html import render_html, sentence_page, write_html
from analysis.words import sentence_attention
from data.tokenizer import train_tokenizer
from model.gpt import GPT, GPTConfig

HOSTILE = [
    "The", " </script><script>alert(1)</script>", " <b>&amp;", ' "q"', " 'x'", "\u2028", " it",
]
T = len(HOSTILE)
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
needs_browser = pytest.mark.skipif(
    BROWSER is None,
    reason="chromium not found; install it (Debian/Ubuntu: `apt-get install -y chromium`) "
    "to run the real-browser checks",
)


def known_attention(L=3, H=4, T=T):
    """One-hot rows on a key that depends on (layer, head, query); L0 H1's last row is 0.3/0.7."""
    a = torch.zeros(L, H, T, T)
    for l in range(L):
        for h in range(H):
            for q in range(T):
                a[l, h, q, (q * (l + 1) + h) % (q + 1)] = 1.0
    a[0, 1, T - 1] = 0.0
    a[0, 1, T - 1, :2] = torch.tensor([0.3, 0.7])
    return a


SENTENCES = [
    {"tokens": HOSTILE, "attention": known_attention(), "pronoun": T - 1},
    {"tokens": ["A", " dog", " ran"], "attention": known_attention(T=3).tolist(), "pronoun": None},
]


def data_block(page):
    found = re.search(r'<script type="application/json" id="attention-data">(.*?)</script>', page, re.S)
    return found.group(1)


def test_page_is_self_contained():
    page = render_html(SENTENCES, best_head=(1, 2))
    assert "http://" not in page and "https://" not in page and "//cdn" not in page
    assert not re.search(r"<link\b", page, re.I)
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, re.I)
    assert "@import" not in page and "url(" not in page


def test_hostile_tokens_cannot_end_the_script_and_round_trip_as_text():
    page = render_html(SENTENCES, title="<i>maps</i> & more")
    # Exactly our three <script> elements close; no token closes one early.
    assert len(re.findall(r"</script", page, re.I)) == 3
    assert "<b>" not in page and "alert(1)</script>" not in page
    assert "<title>&lt;i&gt;maps&lt;/i&gt; &amp; more</title>" in page
    data = json.loads(data_block(page))
    assert data["sentences"][0]["tokens"] == HOSTILE
    assert data["sentences"][0]["attention"][0][1][T - 1][:2] == [3000, 7000]  # units of 1e-4
    assert data["best"] is None


def test_write_html_is_atomic_and_replaces_an_old_page(tmp_path):
    path = tmp_path / "maps.html"
    path.write_text("old")
    write_html(path, SENTENCES, best_head={"layer": 0, "head": 1, "dev": 0.5, "test": 0.4})
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["maps.html"]  # no temp file left behind


@pytest.mark.parametrize("change, message", [
    ({"attention": torch.zeros(2, 2, 3, 3)}, "shape"),
    ({"attention": torch.full((1, 1, T, T), float("nan"))}, "NaN"),
    ({"pronoun": T}, "pronoun"),
    ({"attention": [[[[1.0]], [[1.0, 0.0]]]]}, "not a rectangular array"),
    ({"pronoun": "it"}, "pronoun"),
    ({"tokens": None}, "list of display strings"),
    ({"tokens": [1, 2]}, "list of display strings"),
])
def test_bad_sentences_say_what_to_fix(change, message):
    with pytest.raises(ValueError, match=message):
        render_html([{**SENTENCES[0], **change}])


def test_no_sentences_is_an_error():
    with pytest.raises(ValueError, match="at least one"):
        render_html([])


def test_best_head_outside_the_model_is_an_error():
    with pytest.raises(ValueError, match="outside"):
        render_html(SENTENCES, best_head=(3, 0))
    with pytest.raises(ValueError, match="best_head"):
        render_html(SENTENCES, best_head="L1H2")


def chromium(tmp_path, url, *args, width=1280):
    cmd = [
        BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # offline: no CDN could load
        f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
        "--hide-scrollbars", "--force-device-scale-factor=1", f"--window-size={width},1000",
        *args, url,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, console


def browse(tmp_path, sentences, script, best_head=(1, 2), width=1280):
    """Write the page, run `script` after the page's own (it fills the object `out`), load it in
    chromium and return (out, console messages, the DOM)."""
    path = tmp_path / "page.html"
    write_html(path, sentences, best_head=best_head)
    script = ('<script>const out = {}, sec = document.querySelector("#sentences section");'
              + script + 'const p = document.createElement("pre"); p.id = "test-out";'
              "p.textContent = JSON.stringify(out); document.body.appendChild(p);</script></body>")
    path.write_text(path.read_text(encoding="utf-8").replace("</body>", script), encoding="utf-8")
    dom, console = chromium(tmp_path, path.as_uri(), "--dump-dom", width=width)
    found = re.search(r'<pre id="test-out">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    return json.loads(html.unescape(found.group(1))), console, dom


# Click a head, hover a token and a cell, report what changed.
INTERACT = """
const cells = sec.querySelectorAll("button.cell");
out.cells = cells.length;
out.best = [...cells].filter(c => c.classList.contains("best")).map(c => c.dataset.head);
cells[1].click();
out.title = sec.querySelector(".big div").textContent;
out.selected = [...cells].filter(c => c.classList.contains("selected")).map(c => c.dataset.head);
const big = sec.querySelector(".big canvas"), r = big.getBoundingClientRect();
const m = +big.dataset.margin, c = +big.dataset.cell, T = sec.querySelectorAll(".tok").length;
// over the last row (the pronoun) and the second column
const at = {clientX: r.left + m + 1.5 * c, clientY: r.top + m + (T - 0.5) * c};
big.dispatchEvent(new MouseEvent("mousemove", at));
out.tip = sec.querySelector(".tip").textContent;
out.tokenTitle = sec.querySelectorAll(".tok")[1].title;
"""


@needs_browser
def test_real_browser_renders_without_errors_and_responds_to_clicks_and_hover(tmp_path):
    out, console, dom = browse(tmp_path, SENTENCES, INTERACT)
    assert console == []  # no console messages at all: no errors, no warnings
    status = re.search(r'<div id="status"[^>]*>', dom).group(0)
    assert 'data-rendered="2"' in status and "data-errors" not in status, status
    assert out["cells"] == 12
    assert out["best"] == ["L1 H2"]
    assert out["title"].startswith("Layer 0, head 1:")
    assert out["selected"] == ["L0 H1"]
    assert out["tip"] == '" it" \u2192 " </script><script>alert(1)</script>": 0.7000'
    assert out["tokenTitle"].endswith(': 0.7000')  # the sentence tinted by the hovered row
    # The hostile token is on the page as text, never as markup.
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in dom
    assert "<b>" not in dom


@needs_browser
def test_real_browser_screenshot_shows_the_grid_and_the_best_head(tmp_path):
    Image = pytest.importorskip("PIL.Image", reason="Pillow (matplotlib needs it) reads the PNG")
    path = tmp_path / "page.html"
    write_html(path, SENTENCES, best_head=(1, 2))
    dom, _ = chromium(tmp_path, path.as_uri(), "--dump-dom")
    x, y, w, h = map(int, re.search(r'data-grid="([\d,]+)"', dom).group(1).split(","))
    assert w > 200 and h > 200 and x + w <= 1280 and y + h <= 1000  # in the screenshot's view
    shot = tmp_path / "shot.png"
    chromium(tmp_path, path.as_uri(), f"--screenshot={shot}")
    rgb = np.asarray(Image.open(shot).convert("RGB"))[y : y + h, x : x + w].astype(int)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    blue = int(((b - r > 50) & (r < 150)).sum())  # heavily weighted cells
    orange = int(((r > 180) & (g > 60) & (g < 130) & (b < 60)).sum())  # the best head's outline
    assert blue > 2000, blue
    assert orange > 200, orange


# --- GPT-2 small's 12 x 12 heads ------------------------------------------------------------

LONG = "The animal in the jungle went out on a hunt because it was hungry."


@pytest.fixture(scope="module")
def gpt2_shaped_page():
    """A random model with GPT-2 small's 12 layers x 12 heads (at width 48) and block_size 48,
    shorter than the sentence up to "it", through the path generate.py --html takes."""
    tokenizer = train_tokenizer("char", LONG)
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=tokenizer.vocab_size, block_size=48, n_layer=12, n_head=12,
                       n_embd=48)
    return sentence_page(sentence_attention(GPT(config).eval(), tokenizer, LONG))


def test_a_12_by_12_model_page_holds_all_144_maps_and_the_window_note(gpt2_shaped_page):
    data = json.loads(data_block(render_html([gpt2_shaped_page], best_head=(5, 7))))
    [s] = data["sentences"]
    assert np.array(s["attention"]).shape == (12, 12, 48, 48)
    assert s["pronoun"] == 47 and len(s["tokens"]) == 48
    assert s["note"].startswith('the model sees 48 tokens up to "it" (its block_size): the first')


# The layout as the browser drew it.
LAYOUT = """
const grid = sec.querySelector(".grid"), big = sec.querySelector(".big canvas");
out.cells = sec.querySelectorAll("button.cell").length;
out.labels = [...grid.querySelectorAll(".label")].map(e => e.textContent);
out.best = [...sec.querySelectorAll("button.cell.best")].map(c => c.dataset.head);
out.pageWidth = document.documentElement.scrollWidth;
out.viewWidth = window.innerWidth;
out.right = Math.max(grid.getBoundingClientRect().right, big.getBoundingClientRect().right);
out.map = sec.querySelector("button.cell canvas").getBoundingClientRect().width;
out.note = sec.querySelector(".note").textContent;
"""


@needs_browser
@pytest.mark.parametrize("width", [1280, 800])  # a desktop, and a narrow window
def test_real_browser_fits_a_12_by_12_grid_in_the_page_width(tmp_path, gpt2_shaped_page, width):
    out, console, _ = browse(tmp_path, [gpt2_shaped_page], LAYOUT, best_head=(5, 7), width=width)
    assert console == []
    assert out["cells"] == 144 and out["best"] == ["L5 H7"]
    assert out["labels"] == ["", *(f"H{h}" for h in range(12)), *(f"L{l}" for l in range(12))]
    assert out["viewWidth"] == width
    assert out["pageWidth"] <= width and out["right"] <= width, out  # no horizontal scrolling
    assert out["map"] >= 24, out  # small multiples, still maps
    assert out["note"].startswith("Note: the model sees 48 tokens")
