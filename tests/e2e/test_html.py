"""The attention page: self-contained, hostile tokens stay text, and a real browser draws it.

The browser tests run Debian's chromium headless, with every host name made unresolvable so a
page that needed the network would fail here as it would offline. They skip, saying how to
install it, when no chromium is found. Headless chromium's window is never narrower than 500 px,
so a phone is emulated through the DevTools protocol (on a pipe, no port opened).
"""

import fcntl
import html
import json
import os
import re
import shutil
import subprocess
import time
from collections import Counter

import numpy as np
import pytest
import torch

from analysis.words import sentence_attention
from data.tokenizer import train_tokenizer
from model.gpt import GPT, GPTConfig
from reports.html import ASSETS, BEST_HEAD_MEANS, sentence_page
from reports.page_writer import Page, render_html, write_html
from tests.helpers import HOSTILE, SENTENCES, known_attention


def page_args(
    best_head=None,
    causal=None,
    lens=None,
    patching=None,
    decided_by=None,
    probe=None,
    circuit=None,
    **facts,
):
    """write_html's two arguments from the parts a test names: the probe's result (what a test
    passes apart merged with `probe`, as generate.py --probe saves them together; `probe`'s own
    best head, with its scores, over a bare pair) and the Page
    of the run's facts (checkpoint, step, val_loss, records, title)."""
    parts = {
        "best_head": best_head,
        "causal": causal,
        "logit_lens": lens,
        "patching": patching,
        "decided_by": decided_by,
        "circuit": circuit,
    }
    merged = {**{k: v for k, v in parts.items() if v is not None}, **(probe or {})}
    return {"probe": merged or None, "page": Page(**facts)}


T = len(HOSTILE)
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
no_browser = pytest.mark.skipif(
    BROWSER is None,
    reason="chromium not found; install it (Debian/Ubuntu: `apt-get install -y chromium`) "
    "to run the real-browser checks",
)


def needs_browser(test):
    """A real-browser test: slow, and skipped (saying how to install it) without chromium."""
    return pytest.mark.slow(no_browser(test))


def data_block(page):
    found = re.search(
        r'<script type="application/json" id="attention-data">(.*?)</script>', page, re.S
    )
    return found.group(1)


FACTS = {
    "checkpoint": "out/default",
    "step": 800,
    "val_loss": 1.23456,
    "best_head": {"layer": 1, "head": 2, "dev": 0.9933, "test": 0.9867},
}


def test_page_is_self_contained():
    page = render_html(SENTENCES, **page_args(**FACTS))
    assert "http://" not in page and "https://" not in page and "//cdn" not in page
    assert not re.search(r"<link\b", page, re.I)
    assert re.findall(r"\bsrc\s*=", page, re.I) == []  # no file, no URL, nothing
    links = re.findall(r'\bhref\s*=\s*"([^"]*)"', page, re.I)
    assert links and all(link.startswith("#") for link in links), links  # within the page only
    assert len(re.findall(r"\bhref\s*=", page, re.I)) == len(links)
    assert "@import" not in page and "url(" not in page


def test_the_assets_are_files_inlined_whole_into_the_page():
    page = render_html(SENTENCES)
    for name in ("page.css", "page.js", "error-hook.js"):
        text = (ASSETS / name).read_text(encoding="utf-8")
        assert len(text) > 100 and text in page, name
    assert not re.search(r"\$\w", page)  # every placeholder of the template filled
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page


def facts_of(page):
    """The run section's (label, value) rows, as text."""
    facts = re.search(r'<section class="facts">.*?</section>', page, re.S)
    rows = re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", facts.group(0) if facts else "")
    return {html.unescape(k): html.unescape(v) for k, v in rows}


def test_the_runs_facts_and_what_best_head_means_are_at_the_top():
    page = render_html(SENTENCES, **page_args(**FACTS))
    assert facts_of(page) == {
        "Checkpoint": "out/default",
        "Training step": "800",
        "Best validation loss": "1.2346",
        "Best head": "L1 H2: dev 99.3%, test 98.7% cand@1, outlined in each grid",
    }
    said = re.search(r'<section class="facts">.*?<p class="help">(.*?)</p>', page).group(1)
    assert re.sub(r"<[^>]+>", "", said) == BEST_HEAD_MEANS  # its term marked, for its definition
    assert page.index('class="facts"') < page.index('id="sentences"')


def test_the_best_head_on_each_kind_of_sentence_is_a_fact_beside_it():
    kinds = {
        "agreement": {"examples": 217, "best_head": 0.972, "random": 0.44, "kind_best": None},
        "meaning": {"examples": 42, "best_head": 0.571, "random": 0.46, "kind_best": None},
    }
    page = render_html(SENTENCES, **page_args(**FACTS, decided_by=kinds))
    assert facts_of(page)["Best head by reason"] == "agreement 97.2% of 217, meaning 57.1% of 42"
    assert "Best head by what decides" not in facts_of(
        render_html(SENTENCES, **page_args(**FACTS, decided_by={}))
    )


def test_facts_a_model_lacks_are_left_out():
    # A Hugging Face model: no step, no validation loss; a run never evaluated: best_val_loss inf.
    page = render_html(
        SENTENCES, **page_args(checkpoint="hf:gpt2", best_head=(1, 2), val_loss=float("inf"))
    )
    assert facts_of(page) == {"Checkpoint": "hf:gpt2", "Best head": "L1 H2, outlined in each grid"}
    page = render_html(SENTENCES, **page_args(checkpoint="<b>run</b>"))
    assert facts_of(page) == {"Checkpoint": "<b>run</b>"} and "<b>" not in page
    assert BEST_HEAD_MEANS not in page  # no probe, nothing to explain
    assert 'class="facts"' not in render_html(SENTENCES)  # nothing known: no section


@pytest.mark.parametrize(
    "facts, message",
    [
        ({"step": "800"}, "step.*integer.*'800'"),
        ({"val_loss": "low"}, "val_loss.*number.*'low'"),
    ],
)
def test_bad_facts_say_what_to_pass(facts, message):
    with pytest.raises(ValueError, match=message):
        render_html(SENTENCES, **page_args(**facts))


def test_space_only_tokens_are_shown_as_the_terminal_shows_them():
    text = "The king smiled because he  ruled."
    tokenizer = train_tokenizer("char", text)
    torch.manual_seed(0)
    config = GPTConfig(
        vocab_size=tokenizer.vocab_size, block_size=64, n_layer=1, n_head=2, n_embd=16
    )
    page = sentence_page(sentence_attention(GPT(config).eval(), tokenizer, text))
    assert page["tokens"][:4] == ["T", "h", "e", "␣"] and " " not in "".join(page["tokens"])


def test_hostile_tokens_cannot_end_the_script_and_round_trip_as_text():
    page = render_html(SENTENCES, **page_args(title="<i>maps</i> & more"))
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
    write_html(
        path, SENTENCES, **page_args(best_head={"layer": 0, "head": 1, "dev": 0.5, "test": 0.4})
    )
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["maps.html"]  # no temp file left behind


@pytest.mark.parametrize(
    "change, message",
    [
        ({"attention": torch.zeros(2, 2, 3, 3)}, "shape"),
        ({"attention": torch.full((1, 1, T, T), float("nan"))}, "NaN"),
        ({"pronoun": T}, "pronoun"),
        ({"attention": [[[[1.0]], [[1.0, 0.0]]]]}, "rectangular"),
        ({"pronoun": "it"}, "pronoun"),
        ({"tokens": None}, "'tokens'.*strings"),
        ({"tokens": [1, 2]}, "'tokens'.*strings"),
    ],
)
def test_bad_sentences_say_what_to_fix(change, message):
    with pytest.raises(ValueError, match=message):
        render_html([{**SENTENCES[0], **change}])


def deltas(value, names):
    return {**{n: value for n in names}, **{f"{n}_ci": [value - 0.1, value + 0.1] for n in names}}


def causal_result(L, H, best):
    """Shaped as analysis.causal's with_best_head gives it; head (l, h)'s antecedent knockout
    costs (l * H + h) / 10 nats, its control -0.01 * (h + 1), its ablation 0.05 * l."""
    heads = [
        [
            {
                **deltas((l * H + h) / 10, ["antecedent"]),
                **deltas(-0.01 * (h + 1), ["distractor"]),
                **deltas(0.05 * l, ["ablation"]),
            }
            for h in range(H)
        ]
        for l in range(L)
    ]
    pair = ("antecedent", "distractor")
    return {
        "heads": heads,
        "layers": [deltas(l + 0.5, pair) for l in range(L)],  # both alike
        "all_heads": deltas(3.25, pair),
        "n": 300,
        "skipped": 2,
        "clean_loss": 0.125,
        "seed": 0,
        "resamples": 1000,
        "best_head": {"layer": best[0], "head": best[1], **heads[best[0]][best[1]]},
    }


def probe_records(L, H, best, steps=(200, 400, 600, 800), kinds=False):
    """metrics.jsonl records as training logs them: probe lines and eval lines, with a log line;
    with `kinds`, each probe's probe_by_kind too (agreement learned, role never, meaning late)."""
    records = [{"step": 10, "loss": 6.5, "lr": 1e-3}]
    for i, step in enumerate(steps):
        grid = [[0.4 + 0.01 * h for h in range(H)] for _ in range(L)]
        grid[best[0]][best[1]] = 0.5 + 0.1 * i
        records += [
            {"step": step, "train_loss": 3 - i / 2, "val_loss": 3.25 - i / 2},
            {
                "step": step,
                "probe_best": grid[best[0]][best[1]],
                "probe_best_head": list(best),
                "probe_heads": grid,
                "probe_baselines": {"random": 0.45, "first": 0.46, "nearest": 0.47},
            },
        ]
        if kinds:
            rising = {"agreement": 0.75 + 0.08 * i, "role": 0.5, "meaning": 0.5 + 0.15 * i}
            records[-1]["probe_by_kind"] = {
                kind: {"examples": 10, "cand_at_1": 0.5, "twins": 8, "accuracy": v, "flip": v - 0.1}
                for kind, v in rising.items()
            }
    return records


def cells(section_html):
    """The text of each <td> in a section, in order."""
    return [
        html.unescape(re.sub("<.*?>", "", c))
        for c in re.findall(r"<td[^>]*>(.*?)</td>", section_html)
    ]


def test_the_causal_tests_are_three_grids_and_the_heads_together_with_the_best_head_outlined():
    page = render_html(SENTENCES, **page_args(best_head=(1, 2), causal=causal_result(3, 4, (1, 2))))
    section = re.search(r'<section class="causal">.*?</section>', page, re.S).group(0)
    assert section.count("<table") == 4 and "Does the head matter?" in section
    values = cells(section)
    # An exact zero is "0.00": no sign claims a direction it does not have.
    assert values[:12] == ["0.00", *(f"{k / 10:+.2f}" for k in range(1, 12))]
    assert values[12:24] == [f"{-0.01 * (h + 1):+.2f}" for _ in range(3) for h in range(4)]
    assert values[24:36] == ["0.00"] * 4 + [f"{0.05 * l:+.2f}" for l in (1, 2) for h in range(4)]
    assert re.findall(r'<td class="best"[^>]*>(.*?)</td>', section) == ["+0.60", "-0.03", "+0.05"]
    # layers 0..2, all layers, the best head: antecedent, control, and the best head's ablation
    together = [f"{v:+.2f} [{v - 0.1:+.2f}, {v + 0.1:+.2f}]" for v in (0.5, 1.5, 2.5, 3.25)]
    assert values[36:] == [
        *(x for v in together for x in (v, v, "")),
        "+0.60 [+0.50, +0.70]",
        "-0.03 [-0.13, +0.07]",
        "+0.05 [-0.05, +0.15]",
    ]
    assert "mean over 300 of the probe&#x27;s sentences (2 skipped)" in section
    assert page.index('class="facts"') < page.index('class="causal"') < page.index('id="sentences"')
    assert 'class="causal"' not in render_html(SENTENCES)  # no causal tests: no section


def test_a_malformed_causal_part_says_to_run_the_probe_again():
    with pytest.raises(ValueError, match="run generate.py --probe again"):
        render_html(SENTENCES, **page_args(causal={"heads": [[{"antecedent": 1.0}]]}))


def test_the_training_curve_is_inline_svg_with_every_head_the_best_bold_and_the_val_loss():
    page = render_html(SENTENCES, **page_args(records=probe_records(3, 4, (1, 2))))
    svg = re.search(r'<svg class="curve".*?</svg>', page, re.S).group(0)
    groups = re.findall(
        r'<g id="[^"]+" class="([a-z ]+)"><title>([^<]+)</title>\s*<path d="([^"]+)"[^>]*'
        r'style="([^"]*)"',
        svg,
    )
    # (class, its points, its stroke width: matplotlib leaves out SVG's default of 1)
    lines = [
        (cls, re.findall(r"[ML] ([\d.]+) ([\d.]+)", d), re.search(r"stroke-width: ([\d.]+)", style))
        for cls, _, d, style in groups
    ]
    lines = [(cls, points, width.group(1) if width else "1") for cls, points, width in lines]
    heads = [(points, width) for cls, points, width in lines if cls == "head"]
    [(best_points, best_width)] = [(p, w) for cls, p, w in lines if cls == "head best"]
    assert len(heads) == 11 and best_width == "3" and {w for _, w in heads} == {"1"}
    assert len(best_points) == 4  # one point per probe line
    ys = [float(y) for _, y in best_points]
    assert ys == sorted(ys, reverse=True)  # 50% .. 80%: rising, so up the page (y falls)
    assert [cls for cls, _, _ in lines].count("baseline") == 3
    # The val loss as points (markers), not a line across the axis, on an SVG of its own: its
    # nats never share the probe's axis of shares.
    assert 'class="loss"' not in svg
    loss_svg = re.search(r'<svg class="curve loss".*?</svg>', page, re.S).group(0)
    assert "val loss (nats/token)" in loss_svg and "100%" not in loss_svg
    loss = re.search(
        r'<g id="loss-loss" class="loss"><title>val loss: 1.750 at step 800</title>'
        r"(.*?)</g>",
        loss_svg,
        re.S,
    )
    assert loss and "<use " in loss.group(1) and loss.group(1).count("<use ") == 4
    assert "L1 H2, the best head at step 800" in page and "first baseline (dev) 46.0%" in page
    # Hovering a line says which it is, as the hand-drawn SVG's titles did.
    assert ("head best", "L1 H2: 80.0% at step 800 (best head)") in [
        (cls, t) for cls, t, _, _ in groups
    ]
    # matplotlib's SVG refers only to its own parts (clip paths, tick marks): nothing to fetch.
    assert "http" not in svg and re.findall(r'(?:href="|url\()([^")]*)', svg) != []
    assert all(ref.startswith("#") for ref in re.findall(r'(?:href="|url\()([^")]*)', svg))
    assert page.index('class="training"') < page.index('id="sentences"')
    # No probe lines (a run with the probe off, a Hugging Face model): no section, no SVG.
    assert "<svg" not in render_html(
        SENTENCES, **page_args(records=probe_records(3, 4, (1, 2))[:1])
    )


def test_each_kinds_curve_is_a_second_svg_with_its_legend_and_words_under_it():
    page = render_html(SENTENCES, **page_args(records=probe_records(3, 4, (1, 2), kinds=True)))
    section = re.search(r'<section class="training">.*?</section>', page, re.S).group(0)
    svg = re.search(r'<svg class="curve kinds".*?</svg>', section, re.S).group(0)
    assert section.index('<svg class="curve"') < section.index(svg)  # below the heads' curve
    groups = re.findall(
        r'<g id="kinds-([^"]+)" class="([a-z ]+)"><title>([^<]+)</title>\s*<path d="([^"]+)"', svg
    )
    classes = Counter(cls for _, cls, _, _ in groups)
    assert classes == {"kind cand": 3, "kind accuracy": 3, "kind flip": 3, "target": 2}
    said = {gid: title for gid, _, title, _ in groups}
    assert said["meaning-accuracy"] == "meaning, accuracy: 95.0% at step 800"
    assert said["target-flip"] == "target: flip 70%"
    points = {gid: re.findall(r"[ML] ([\d.]+) ([\d.]+)", d) for gid, _, _, d in groups}
    ys = [float(y) for _, y in points["agreement-accuracy"]]
    assert len(ys) == 4 and ys == sorted(ys, reverse=True)  # rising: up the page
    ids = re.findall(r' id="([^"]+)"', page)
    assert len(ids) == len(set(ids))  # two matplotlib figures in one page, no id twice
    legend = re.findall(r'<div class="curve-legend">(.*?)</div>', section)[1]
    assert "meaning flip" in legend and "target: accuracy 90%" in legend
    words = re.findall(r"<li>(.*?)</li>", section)
    assert [w.split(":")[0] for w in words] == ["agreement", "role", "meaning"]
    assert "first at step 600; held to the end" in words[0] and "not reached" in words[1]
    assert 'data-term="flip"' in section


def test_no_sentences_is_an_error():
    with pytest.raises(ValueError, match="at least one"):
        render_html([])


def test_best_head_outside_the_model_is_an_error():
    with pytest.raises(ValueError, match="outside"):
        render_html(SENTENCES, **page_args(best_head=(3, 0)))
    with pytest.raises(ValueError, match="best_head"):
        render_html(SENTENCES, **page_args(best_head="L1H2"))


def chromium(tmp_path, url, *args, width=1280):
    cmd = [
        BROWSER,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # offline: no CDN could load
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--window-size={width},1000",
        *args,
        url,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, console


def browse(tmp_path, sentences, script, best_head=(1, 2), width=1280, **facts):
    """Write the page, run `script` after the page's own (it fills the object `out`), load it in
    chromium and return (out, console messages, the DOM)."""
    path = tmp_path / "page.html"
    write_html(path, sentences, **page_args(best_head=best_head, **facts))
    script = (
        '<script>const out = {}, sec = document.querySelector("#sentences section");'
        + script
        + 'const p = document.createElement("pre"); p.id = "test-out";'
        "p.textContent = JSON.stringify(out); document.body.appendChild(p);</script></body>"
    )
    path.write_text(path.read_text(encoding="utf-8").replace("</body>", script), encoding="utf-8")
    dom, console = chromium(tmp_path, path.as_uri(), "--dump-dom", width=width)
    found = re.search(r'<pre id="test-out">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    return json.loads(html.unescape(found.group(1))), console, dom


class DevTools:
    """Chromium driven through the DevTools protocol on a pipe (--remote-debugging-pipe: it reads
    commands on fd 3 and writes replies and events on fd 4, each a JSON text ended by NUL)."""

    def __init__(self, tmp_path):
        to_browser, self.from_browser = os.pipe(), os.pipe()
        self.commands, self.replies = to_browser[1], self.from_browser[0]
        ends = (to_browser[0], self.from_browser[1])

        def fds_3_and_4():  # in the child: first out of the way, then onto 3 and 4
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in ends]
            for fd, target in zip(high, (3, 4)):
                os.dup2(fd, target)

        self.proc = subprocess.Popen(
            [
                BROWSER,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                "--hide-scrollbars",
                f"--user-data-dir={tmp_path / 'profile'}",
                "--remote-debugging-pipe",
            ],
            pass_fds=(3, 4),
            preexec_fn=fds_3_and_4,  # noqa: PLW1509 (no threads started here)
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for fd in ends:
            os.close(fd)
        self.next_id, self.buffer, self.events = 0, b"", []

    def _message(self, deadline):
        while b"\0" not in self.buffer:
            assert time.monotonic() < deadline, "chromium did not answer in time"
            chunk = os.read(self.replies, 1 << 16)
            assert chunk, "chromium closed the pipe"
            self.buffer += chunk
        text, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(text)

    def send(self, method, session=None, timeout=60, **params):
        """The result of one command; events that arrive meanwhile are kept in self.events."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self.commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self.next_id:
                assert "error" not in reply, reply
                return reply["result"]
            self.events.append(reply)

    def wait_for(self, method, timeout=60):
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._message(deadline))

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except (AssertionError, OSError):
            pass
        finally:
            self.proc.kill()
            self.proc.wait(timeout=30)
            os.close(self.commands)
            os.close(self.replies)


# What has the keyboard's focus, in a few words: its tag, class, link and text.
FOCUSED = """(() => { const e = document.activeElement;
  if (!e || e === document.body) return "body";
  return [e.tagName.toLowerCase(), e.className, e.getAttribute("href") || "",
          (e.getAttribute("aria-label") || e.textContent).slice(0, 40)].join("|"); })()"""


def phone(tmp_path, sentences, script, width, tabs=0, **facts):
    """Write the page and load it in chromium emulating a screen `width` CSS pixels wide (under
    500, a phone: its viewport meta tag applies); press Tab `tabs` times, keeping in out["tabs"]
    what each press focused (FOCUSED); run `script` (it fills the object `out`) and return
    (out, console messages and uncaught errors)."""
    path = tmp_path / "page.html"
    write_html(path, sentences, **page_args(**facts))
    browser = DevTools(tmp_path)
    try:
        target = browser.send("Target.createTarget", url="about:blank")["targetId"]
        session = browser.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page.enable", "Runtime.enable", "Log.enable"):
            browser.send(domain, session)
        browser.send(
            "Emulation.setDeviceMetricsOverride",
            session,
            width=width,
            height=900,
            deviceScaleFactor=1,
            mobile=width < 500,
        )
        browser.send("Page.navigate", session, url=path.as_uri())
        browser.wait_for("Page.loadEventFired")
        focused = []
        for _ in range(tabs):
            for kind in ("keyDown", "keyUp"):
                browser.send(
                    "Input.dispatchKeyEvent",
                    session,
                    type=kind,
                    key="Tab",
                    code="Tab",
                    windowsVirtualKeyCode=9,
                    nativeVirtualKeyCode=9,
                )
            said = browser.send("Runtime.evaluate", session, expression=FOCUSED, returnByValue=True)
            focused.append(said["result"]["value"])
        expression = (
            '(() => { const out = {}, sec = document.querySelector("#sentences section");'
            + script
            + "; out.errors = document.getElementById('status').dataset.errors"
            " || null; return JSON.stringify(out); })()"
        )
        result = browser.send(
            "Runtime.evaluate", session, expression=expression, returnByValue=True
        )
        assert "exceptionDetails" not in result, result
        noise = ("Runtime.consoleAPICalled", "Runtime.exceptionThrown", "Log.entryAdded")
        console = [e["params"] for e in browser.events if e.get("method") in noise]
        out = json.loads(result["result"]["value"])
        assert out.pop("errors") is None, out
        if tabs:
            out["tabs"] = focused
        return out, console
    finally:
        browser.close()


def drawn(tmp_path, sentences, script, width, **facts):
    """(out, console) of `script` on the page in a window `width` pixels wide: a phone's
    emulated viewport below headless chromium's 500 px minimum, a real window above it."""
    if width < 500:
        return phone(tmp_path, sentences, script, width, **facts)
    out, console, _ = browse(tmp_path, sentences, script, width=width, **facts)
    return out, console


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
out.legend = sec.querySelector(".legend span").textContent;
out.scale = [...sec.querySelectorAll(".scale span")].map(e => [e.textContent, e.style.background]);
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
    assert out["tokenTitle"].endswith(": 0.7000")  # the sentence tinted by the hovered row
    # The strip says whose attention tints it, and the scale gives the colours their numbers.
    assert out["legend"].startswith('Token colour: the attention of " it" (row 6,')
    assert out["scale"][0] == ["0", "rgb(255, 255, 255)"]
    assert out["scale"][-1] == ["1", "rgb(8, 48, 107)"]
    assert [label for label, _ in out["scale"]] == ["0", ".2", ".4", ".6", ".8", "1"]
    # The hostile token is on the page as text, never as markup.
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in dom
    assert "<b>" not in dom


@needs_browser
def test_real_browser_screenshot_shows_the_grid_and_the_best_head(tmp_path):
    Image = pytest.importorskip("PIL.Image", reason="Pillow (matplotlib needs it) reads the PNG")
    path = tmp_path / "page.html"
    write_html(path, SENTENCES, **page_args(best_head=(1, 2)))
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
    config = GPTConfig(
        vocab_size=tokenizer.vocab_size, block_size=48, n_layer=12, n_head=12, n_embd=48
    )
    return sentence_page(sentence_attention(GPT(config).eval(), tokenizer, LONG))


def test_a_12_by_12_model_page_holds_all_144_maps_and_the_window_note(gpt2_shaped_page):
    data = json.loads(data_block(render_html([gpt2_shaped_page], **page_args(best_head=(5, 7)))))
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
out.clientWidth = document.documentElement.clientWidth;
out.viewWidth = window.innerWidth;
out.right = Math.max(grid.getBoundingClientRect().right, big.getBoundingClientRect().right);
out.map = sec.querySelector("button.cell canvas").getBoundingClientRect().width;
out.note = sec.querySelector(".note").textContent;
"""


@needs_browser
@pytest.mark.parametrize("width", [1280, 800, 420])  # a desktop, a narrow window, a phone
def test_real_browser_fits_a_12_by_12_grid_in_the_page_width(tmp_path, gpt2_shaped_page, width):
    facts = {"best_head": (5, 7), "checkpoint": "out/" + "a-long-run-folder-name" * 4, "step": 800}
    out, console = drawn(tmp_path, [gpt2_shaped_page], LAYOUT, width, **facts)
    assert console == []
    assert out["cells"] == 144 and out["best"] == ["L5 H7"]
    assert out["labels"] == ["", *(f"H{h}" for h in range(12)), *(f"L{l}" for l in range(12))]
    assert out["viewWidth"] == out["clientWidth"] == width
    assert out["pageWidth"] <= out["clientWidth"], out  # no sideways scrolling
    assert out["right"] <= width, out
    assert out["map"] >= (16 if width < 500 else 24), out  # small multiples, still maps
    assert out["note"].startswith("Note: the model sees 48 tokens")


# The causal tables and the training curve as the browser drew them.
SECTIONS = """
const causal = document.querySelector("section.causal"), svg = document.querySelector("svg.curve");
out.tables = causal.querySelectorAll("table").length;
out.best = [...causal.querySelectorAll("td.best")].map(e => e.textContent);
const r = svg.getBoundingClientRect();
out.svg = [r.width, r.height, r.right];
out.heads = svg.querySelectorAll("g.head").length;
out.bestWidth = getComputedStyle(svg.querySelector("g.best path")).strokeWidth;
const kinds = document.querySelector("svg.kinds").getBoundingClientRect();
out.kinds = [kinds.width, kinds.right, document.querySelectorAll(".acquired li").length];
const right = sel => Math.max(...[...document.querySelectorAll(sel)].map(
  e => e.getBoundingClientRect().right));
out.right = Math.max(right(".curve-legend span"), right("section.causal .scroll"),
                     right("section.causal .grids"));
out.pageWidth = document.documentElement.scrollWidth;
out.clientWidth = document.documentElement.clientWidth;
"""


@needs_browser
@pytest.mark.parametrize("width", [1280, 420])  # a desktop, a phone
def test_real_browser_draws_the_causal_tables_and_the_curve_of_144_heads_in_the_width(
    tmp_path, gpt2_shaped_page, width
):
    facts = {
        "best_head": (5, 7),
        "causal": causal_result(12, 12, (5, 7)),
        "records": probe_records(12, 12, (5, 7), kinds=True),
    }
    out, console = drawn(tmp_path, [gpt2_shaped_page], SECTIONS, width, **facts)
    assert console == []
    assert out["tables"] == 4 and out["best"] == ["+6.70", "-0.08", "+0.25"]
    assert out["heads"] == 144 and out["bestWidth"] == "3px"
    svg_width, svg_height, svg_right = out["svg"]
    assert svg_width >= (380 if width < 500 else 600) and svg_height > 150 and svg_right <= width
    assert out["kinds"] == [svg_width, svg_right, 3]  # each kind's curve as wide, its words below
    assert out["right"] <= width and out["pageWidth"] <= out["clientWidth"] == width, out


# A phone: hover the far right of the enlarged map, where the tooltip would stick out.
PHONE = """
const big = sec.querySelector(".big canvas"), r = big.getBoundingClientRect();
out.bigWidth = r.width; out.bigDrawn = big.width;
const k = r.width / big.width, m = +big.dataset.margin, c = +big.dataset.cell;
const last = m + (big.dataset.tokens - 0.5) * c;  // the last row's and column's middle, drawn
const at = {clientX: r.left + k * last, clientY: r.top + k * last};
big.dispatchEvent(new MouseEvent("mousemove", at));
out.tip = sec.querySelector(".tip").textContent;
out.pageWidth = document.documentElement.scrollWidth;
out.clientWidth = document.documentElement.clientWidth;
const strip = [...sec.querySelectorAll(".tok, .legend")];
out.strip = Math.max(...strip.map(e => e.getBoundingClientRect().right));
"""


@needs_browser
def test_real_browser_fits_a_phone_with_the_facts_and_a_tooltip_on_the_edge(tmp_path):
    long_sentence = {"tokens": HOSTILE * 4, "attention": known_attention(T=4 * T), "pronoun": None}
    out, console = phone(tmp_path, [long_sentence], PHONE, 420, **FACTS)
    assert console == []
    assert out["clientWidth"] == 420 and out["pageWidth"] <= 420, out
    assert out["strip"] <= 420, out  # the strip wraps, its legend too
    assert out["bigWidth"] < out["bigDrawn"], out  # the enlarged map is scaled down to fit
    assert out["tip"].endswith(": 0.0000") or out["tip"].endswith(": 1.0000"), out


def patching_result(L, H, best):
    def cell(v):
        return {"recovered": v, "recovered_ci": [v - 0.05, v + 0.05]}

    return {
        "heads": [[cell(0.9 if (l, h) == best else 0.01) for h in range(H)] for l in range(L)],
        "stream": [
            [cell(1.0 if i == 0 else 0.0), cell(0.0), cell(0.0 if i == 0 else 1.0)]
            for i in range(L + 1)
        ],
        "points": ["embedding"] + [f"block {l}" for l in range(L)],
        "columns": ["antecedent", "between", "pronoun"],
        "mlps": [[cell(0.37), cell(0.0), cell(-0.12)] for _ in range(L)],
        "clean_ld": 5.3,
        "corrupt_ld": -5.1,
        "n": 297,
        "skipped": 3,
        "seed": 0,
        "resamples": 1000,
    }


def lens_result(L):
    points = ["embedding"] + [f"block {l}" for l in range(L)]
    return {
        "points": points,
        "mean_probability": [i / L for i in range(L + 1)],
        "median_rank": [2024] + [2] * L,
        "top1_share": [i / (L + 1) for i in range(L + 1)],
        "n": 300,
        "skipped": 0,
        "example": {
            "text": "The owl saw the mouse, and it",
            "next": " hooted",
            "top": [[[" hooted", 0.5], [" flew", 0.2]] for _ in points],
        },
    }


def test_the_patching_and_lens_sections_show_their_numbers():
    page = render_html(
        SENTENCES,
        **page_args(best_head=(1, 2), lens=lens_result(2), patching=patching_result(2, 4, (0, 2))),
    )
    patching = page[page.index('<section class="patching">') : page.index('<section class="lens">')]
    assert patching.count("<table>") == 3 and "+0.90 [+0.85, +0.95]" in cells(patching)
    table = page[page.index("Each MLP's output") : page.index('<section class="lens">')]
    assert "+0.37 [+0.32, +0.42]" in cells(table) and "-0.12 [-0.17, -0.07]" in cells(table)
    assert table.count("block 1") == 1
    assert "0.00 [-0.05, +0.05]" in cells(patching)  # the stream's zeros, unsigned
    assert patching.count('class="best"') == 1 and "297 sentence pairs" in patching
    lens = page[page.index('<section class="lens">') :]
    assert "block 1" in lens and "&#x27; hooted&#x27; 0.50" in lens and "2024" in lens


PATCH_SECTIONS = """
const right = sel => Math.max(...[...document.querySelectorAll(sel)]\
.map(e => e.getBoundingClientRect().right));
out.tables = document.querySelectorAll("section.patching table").length + \
document.querySelectorAll("section.lens table").length;
out.right = Math.max(right("section.patching .scroll"), right("section.lens .scroll"));
out.pageWidth = document.documentElement.scrollWidth;
out.clientWidth = document.documentElement.clientWidth;
"""


@needs_browser
@pytest.mark.parametrize("width", [1280, 420])  # a desktop, a phone
def test_real_browser_draws_the_patching_and_lens_tables_of_144_heads_in_the_width(
    tmp_path, gpt2_shaped_page, width
):
    patching = patching_result(12, 12, (5, 7))
    patching["mlps"] = [row[:3] for row in patching["stream"][1:]]  # one row per block, as saved
    facts = {"best_head": (5, 7), "lens": lens_result(12), "patching": patching}
    out, console = drawn(tmp_path, [gpt2_shaped_page], PATCH_SECTIONS, width, **facts)
    assert console == []
    assert out["tables"] == 4
    assert out["right"] <= width and out["pageWidth"] <= out["clientWidth"] == width, out


PHONE_READABLE = """
const label = document.querySelector("svg.curve text");
out.label = label.getBoundingClientRect().height;
const box = document.querySelector("section.causal .scroll:last-of-type");
out.cut = box.scrollWidth > box.clientWidth;
out.shadow = getComputedStyle(box).backgroundImage.includes("radial-gradient");
const big = sec.querySelector(".big").getBoundingClientRect();
out.bigRight = big.right; out.width = document.documentElement.clientWidth;
"""


@needs_browser
def test_a_phone_reads_the_curves_labels_sees_that_a_cut_table_scrolls_and_the_map_keeps_off_the_edge(  # noqa: E501
    tmp_path, gpt2_shaped_page
):
    facts = {
        "best_head": (5, 7),
        "causal": causal_result(12, 12, (5, 7)),
        "records": probe_records(12, 12, (5, 7)),
    }
    out, console = drawn(tmp_path, [gpt2_shaped_page], PHONE_READABLE, 420, **facts)
    assert console == []
    assert out["label"] >= 10, out  # the axis labels: 8 px before
    assert out["cut"] and out["shadow"], out  # a table wider than the phone, and a shadow saying so
    assert out["bigRight"] <= out["width"] - 8, out


def test_the_pronouns_row_of_the_best_head_is_on_the_page_as_numbers():
    page = render_html(SENTENCES, **page_args(best_head=(1, 2)))
    section = page[page.index('<section class="numbers">') :]
    section = section[: section.index("</section>")]
    assert section.count('<div class="pairs">') == sum(s["pronoun"] is not None for s in SENTENCES)
    assert "L1 H2" in section and '<span class="best"' in section
    first = SENTENCES[0]
    expected = float(torch.as_tensor(first["attention"])[1, 2, first["pronoun"], 0])
    assert f">{expected:.2f}</span>" in section
    assert section.count('class="pair q"') == 1  # the pronoun's own, marked
    assert '<section class="numbers">' not in render_html(SENTENCES)  # no best head: no section


def headline_run(L, H):
    """LONG through a random L x H model whose window holds it all, and the terminal's text."""
    tokenizer = train_tokenizer("char", LONG)
    torch.manual_seed(0)
    config = GPTConfig(
        vocab_size=tokenizer.vocab_size, block_size=80, n_layer=L, n_head=H, n_embd=16 * H
    )
    return sentence_attention(GPT(config).eval(), tokenizer, LONG)


# The terminal's headline table on the page, as the browser shows it.
HEADLINE = """
// the table on screen: across (words as columns), or where that does not fit, transposed
const box = [...document.querySelectorAll("section.heads .scroll")]
  .find(b => b.offsetParent !== null);
const table = box.querySelector("table");
out.down = box.classList.contains("down");
out.rows = [...table.rows].map(r => [...r.cells]
  .map(c => c.innerText.trim().replace(/\\s+/g, " ")));
out.best = [...table.querySelectorAll("th.best")].map(c => c.innerText);
out.right = box.getBoundingClientRect().right;
out.cut = box.scrollWidth > box.clientWidth;
out.shadow = getComputedStyle(box).backgroundImage.includes("radial-gradient");
out.pageWidth = document.documentElement.scrollWidth;
out.clientWidth = document.documentElement.clientWidth;
"""


@needs_browser
@pytest.mark.parametrize("width", [1280, 420])  # a desktop, a phone
def test_real_browser_shows_the_terminals_table_of_every_head_as_numbers(tmp_path, width):
    from reports.sentence_view import render_sentence

    sentence = headline_run(2, 4)
    terminal = render_sentence(sentence).splitlines()  # what generate.py --attention prints
    words = terminal[2].split()
    heads = [
        (line[:5], re.findall(r"(\.\d\d|1\.0)(▲?)", line[5:]))
        for line in terminal[3:]
        if line.startswith("L")  # not the line that names the flat heads (no ▲ on them)
    ]
    out, console = drawn(tmp_path, [sentence_page(sentence)], HEADLINE, width, best_head=(1, 2))
    assert console == []
    across = [["", *words], *([label, *(w + top for w, top in cells)] for label, cells in heads)]
    # A desktop shows it as the terminal does; a phone transposed (the words down), all of it
    # on screen: no number is cut off or behind a scroll.
    assert out["down"] == (width < 500), out
    assert out["rows"] == (list(map(list, zip(*across))) if out["down"] else across)
    assert words[-1] == "it" and out["best"] == ["L1 H2"]
    assert out["right"] <= width and out["pageWidth"] <= out["clientWidth"] == width, out
    assert not out["cut"] and out["shadow"], out


def test_with_many_heads_the_page_shows_the_terminals_compact_view_and_escapes_words():
    from reports.sentence_view import render_sentence

    sentence = headline_run(12, 12)
    terminal = render_sentence(sentence, top=3).splitlines()[2:]  # each word's 3 top heads
    section = re.search(
        r'<section class="heads">.*?</section>', render_html([sentence_page(sentence)]), re.S
    ).group(0)
    rows = re.findall(r"<tr><th>([^<]*)</th>(.*?)</tr>", section)[1:]  # after the header
    assert [[word, *cells(row)] for word, row in rows] == [
        [
            line.split()[0],
            *(" ".join(cell) for cell in re.findall(r"(L\d+) (H\d+) +[░▒▓█]?(\.\d\d|1\.0)", line)),
        ]
        for line in terminal
    ]
    assert len(rows) == 11 and all(len(cells(row)) == 3 for _, row in rows)  # the words before "it"
    hostile = {**sentence_page(headline_run(1, 2)), "words": ["</script>", "<b>it"]}
    hostile["rows"] = [[[0.5, 0.5], [1.0, 0.0]]]
    page = render_html([hostile])
    assert "&lt;/script&gt;" in page and "<b>it" not in page
    with pytest.raises(ValueError, match="'rows'"):
        render_html([{**hostile, "rows": [[[0.5]]]}])


def circuit_result():
    """A circuit result as analysis.circuit gives it, of a 2-layer model: the default model's
    five edges, two of them skipping rows (bowed to the right, their labels furthest right)."""
    edges = [
        ("L0H2", "MLP0", 0.66),
        ("embed:antecedent", "L0H2.v", 0.59),
        ("MLP0", "logits", 0.50),
        ("MLP1", "logits", 0.27),
        ("MLP0", "MLP1", 0.25),
    ]
    part = {
        "edges": [{"from": a, "to": b, "share": x, "in_circuit": True} for a, b, x in edges],
        "size": 5,
        "faithfulness": 0.973,
    }
    return {**part, "n_edges": 137, "by_kind": {"agreement": part, "role": part}}


def probe_result(L, H, best, test_set="test", natural=None):
    """Shaped as analysis.probe's run_probe gives it: head (l, h) scores (l * H + h) / 100 on
    dev and 0.01 more on test, the best head 0.9 and 0.91."""
    heads = [
        {
            "layer": l,
            "head": h,
            "dev": (l * H + h) / 100,
            "test": (l * H + h + 1) / 100,
            "mass_antecedent": 0.1,
            "mass_distractors": 0.2,
            "mass_first_token": 0.3,
        }
        for l in range(L)
        for h in range(H)
    ]
    heads[best[0] * H + best[1]].update(dev=0.9, test=0.91)

    def rate(dev, test):
        return {"dev": dev, "test": test}

    counts = {
        "examples": 300,
        "used": 300,
        "windowed": 0,
        "antecedent_unseen": 0,
        "skipped_unencodable": 0,
    }
    result = {
        "best_head": {"layer": best[0], "head": best[1], "dev": 0.9, "test": 0.91},
        "baselines": {
            "random": rate(0.451, 0.449),
            "first": rate(0.5, 0.41),
            "nearest": rate(0.407, 0.483),
            "position": {"rule": "first", **rate(0.5, 0.41)},
        },
        "decided_by": {},
        "p_value": 1 / 1001,
        "permutations": 1000,
        "seed": 0,
        "selection": "dev",
        "heads": heads,
        "counts": {"dev": counts, "test": counts},
        "block_size": 64,
        "test_set": test_set,
        "notes": [],
    }
    if natural:
        result["natural"] = probe_result(L, H, best, "natural")
    return result


def test_the_probes_main_result_is_on_the_page_with_the_natural_sets_where_saved():
    page = render_html(
        SENTENCES, **page_args(best_head=(1, 2), probe=probe_result(3, 4, (1, 2), natural=True))
    )
    section = re.search(r'<section class="probe">.*?</section>', page, re.S).group(0)
    assert page.index('class="facts"') < page.index('class="probe"') < page.index('id="sentences"')
    tables = re.findall(r"<table.*?</table>", section, re.S)
    grid, baselines, natural_grid, natural_baselines = tables
    # every head's test cand@1, layer by layer, the best head outlined
    assert cells(grid) == [f"{(k + 1) / 100:.1%}" if k != 6 else "91.0%" for k in range(12)]
    assert re.findall(r'<td class="best"[^>]*>(.*?)</td>', grid) == ["91.0%"]
    # the best head beside each baseline, on dev and on test
    assert cells(baselines) == [
        "90.0%",
        "91.0%",
        "45.1%",
        "44.9%",
        "50.0%",
        "41.0%",
        "40.7%",
        "48.3%",
        "50.0%",
        "41.0%",
    ]
    assert "permutation test p = 0.0010" in section and "chosen on dev, scored on test" in section
    assert "natural cand@1 by layer and head" in natural_grid and "natural" in natural_baselines
    assert "natural.jsonl" in section
    # no natural part saved, no natural tables; no probe result, no section
    assert "natural.jsonl" not in render_html(
        SENTENCES, **page_args(probe=probe_result(3, 4, (1, 2)))
    )
    assert 'class="probe"' not in render_html(SENTENCES)
    with pytest.raises(ValueError, match="run generate.py --probe again"):
        render_html(SENTENCES, **page_args(probe={"heads": [{"layer": 0}]}))


def test_signed_numbers_print_an_exact_or_rounded_zero_without_a_sign():
    from reports.formatting import signed
    from reports.text_reports import format_patching

    assert [signed(x) for x in (0.0, -0.0, -0.004, 0.004, -0.005001, 0.12)] == [
        "0.00",
        "0.00",
        "0.00",
        "0.00",
        "-0.01",
        "+0.12",
    ]
    patching = patching_result(2, 4, (0, 2))
    patching["heads"][1][0] = {"recovered": -0.001, "recovered_ci": [-0.003, 0.0]}
    text = format_patching(patching)
    assert "-0.00" not in text and "+0.00" not in text
    assert "\nL1      0.00  +0.01" in text and "  0.00 [-0.05, +0.05]" in text
    page = render_html(
        SENTENCES,
        **page_args(best_head=(1, 2), patching=patching, causal=causal_result(3, 4, (1, 2))),
    )
    assert "-0.00" not in page and "+0.00" not in page


# A 2 x 4 model as the default run's: the phone shows every number without sideways scrolling.
FITS = """
const W = document.documentElement.clientWidth;
out.over = [...document.querySelectorAll(".scroll")].filter(b => b.offsetParent !== null
  && b.scrollWidth > b.clientWidth + 1).map(b => b.closest("section").className);
out.offscreen = [...document.querySelectorAll("td, .pair")].filter(c => c.offsetParent !== null
  && c.getBoundingClientRect().right > W + 1).length;
const best = document.querySelector("section.patching td.best").getBoundingClientRect();
out.patchingBest = [best.left >= 0, best.right <= W];
out.tight = document.querySelectorAll(".scroll.tight").length;
out.pageWidth = document.documentElement.scrollWidth; out.width = W;
out.graphs = [...document.querySelectorAll("section.circuit svg")].map(g => {
  const box = g.getBoundingClientRect();
  const labels = [...g.querySelectorAll("text")].map(t => t.getBoundingClientRect());
  return [box.left >= 0 && box.right <= W, labels.every(t => t.right <= box.right + 0.5)];
});
"""


@needs_browser
@pytest.mark.parametrize("width", [1400, 420])  # a desktop, a phone
def test_real_browser_shows_every_table_of_a_small_model_without_sideways_scrolling(
    tmp_path, width
):
    sentence = sentence_page(headline_run(2, 4))
    facts = {
        "best_head": (0, 2),
        "causal": causal_result(2, 4, (0, 2)),
        "lens": lens_result(2),
        "patching": patching_result(2, 4, (0, 2)),
        "probe": probe_result(2, 4, (0, 2), natural=True),
        "records": probe_records(2, 4, (0, 2)),
        "circuit": circuit_result(),
    }
    out, console = drawn(tmp_path, [sentence, sentence], FITS, width, **facts)
    assert out["graphs"] == [[True, True]] * 3, out  # inside the page, every label inside its graph
    assert console == []
    assert out["over"] == [] and out["offscreen"] == 0, out
    assert out["patchingBest"] == [True, True] and out["pageWidth"] == out["width"] == width, out
    assert (out["tight"] > 0) == (width < 500), out  # a phone's intervals go under their values


# The page read without hovering: a cell's weight by click or tap, the keyboard's place on a
# button, what the answer's methods mean, why a table was turned.
WITHOUT_HOVER = """
const big = sec.querySelector(".big canvas"), r = big.getBoundingClientRect();
const m = +big.dataset.margin, c = +big.dataset.cell, px = big.width / r.width;
out.before = sec.querySelector(".readout").textContent;
big.dispatchEvent(new MouseEvent("click", {bubbles: true,
  clientX: r.left + (m + 1.5 * c) / px, clientY: r.top + (m + 2.5 * c) / px}));
out.readout = sec.querySelector(".readout").textContent;
out.readoutShown = sec.querySelector(".readout").getBoundingClientRect().height > 0;
const b = sec.querySelector("button.cell");
b.focus();
const style = getComputedStyle(b);
out.focus = [document.activeElement === b, style.outlineStyle, style.outlineWidth];
out.methods = document.querySelector(".answer-box .help").textContent;
const shown = t => t.offsetParent !== null;
out.turned = [...document.querySelectorAll(".flip")].map(f =>
  [f.classList.contains("flipped"), [...f.querySelectorAll("caption")].filter(shown)
    .map(t => t.textContent.includes("turned, words down"))]);
"""


@needs_browser
@pytest.mark.parametrize("width", [1400, 420])  # a desktop, a phone
def test_real_browser_gives_a_cells_weight_without_hovering_and_says_what_tables_mean(
    tmp_path, width
):
    sentence = sentence_page(headline_run(2, 4))
    answer = {
        "methods": ["substitution", "closeness"],
        "head": {"layer": 0, "head": 2},
        "all": {
            "examples": 300,
            "cand_at_1": {"substitution": 0.89, "closeness": 0.79, "head": 0.91},
        },
        "decided_by": {},
    }
    probe = {**probe_result(2, 4, (0, 2)), "model_answer": answer}
    out, console = drawn(tmp_path, [sentence], WITHOUT_HOVER, width, probe=probe)
    assert console == []
    # The enlarged map is the best head's at first, L0 H2: row 2, column 1, as the page stores it.
    weight = round(sentence["attention"][0][2][2][1].item() * 10_000) / 10_000
    assert out["before"].startswith("Click or tap a cell") and out["readoutShown"], out
    assert out["readout"].startswith("Layer 0, head 2: ") and "\u2192" in out["readout"], out
    assert out["readout"].endswith(f": {weight:.4f}"), out
    assert out["focus"] == [True, "solid", "3px"], out
    assert (
        out["methods"].startswith("substitution: each candidate") and "closeness:" in out["methods"]
    )
    # A table the page turned says so in its caption; one shown across does not.
    assert all(said == [flipped] for flipped, said in out["turned"]), out
    if width < 500:
        assert any(flipped for flipped, _ in out["turned"]), out  # a phone turns this one


KEYBOARD = """
const toks = [...sec.querySelectorAll(".tok")];
const tabbable = items => items.map((t, i) => t.tabIndex === 0 ? i : -1).filter(i => i >= 0);
out.tabbable = tabbable(toks);
toks[2].focus();
out.tabbableAfter = tabbable(toks);
out.focused = document.activeElement === toks[2];
out.marked = toks.map((t, i) => t.classList.contains("row") ? i : -1).filter(i => i >= 0);
out.legend = sec.querySelector(".legend span").textContent;
toks[2].dispatchEvent(new KeyboardEvent("keydown", {key: "ArrowRight", bubbles: true}));
out.next = toks.indexOf(document.activeElement);
out.markedNext = toks.map((t, i) => t.classList.contains("row") ? i : -1).filter(i => i >= 0);
toks[4].dispatchEvent(new KeyboardEvent("keydown", {key: "End", bubbles: true}));
out.end = toks.indexOf(document.activeElement);
// The grid of maps: one Tab stop, the enlarged head's; the arrow keys move and enlarge.
const cells = [...sec.querySelectorAll("button.cell")];
out.cellsTabbable = cells.filter(c => c.tabIndex === 0).map(c => c.dataset.head);
cells.find(c => c.tabIndex === 0).focus();
const press = key => document.activeElement.dispatchEvent(
  new KeyboardEvent("keydown", {key, bubbles: true}));
press("ArrowRight");
out.right = [document.activeElement.dataset.head, sec.querySelector(".big div").textContent];
press("ArrowUp");
out.up = document.activeElement.dataset.head;
out.cellsTabbableAfter = cells.filter(c => c.tabIndex === 0).map(c => c.dataset.head);
"""


@needs_browser
def test_real_browser_reaches_each_token_by_keyboard_and_marks_the_selected_one(tmp_path):
    out, console, _ = browse(tmp_path, SENTENCES, KEYBOARD)
    assert console == []
    # One Tab stop a strip (a roving tabindex): the pronoun's token, then the focused one.
    assert out["tabbable"] == [T - 1] and out["focused"] and out["tabbableAfter"] == [2], out
    assert out["marked"] == [2] and '" <b>&amp;" (row 2,' in out["legend"], out  # as hover does
    assert out["next"] == 3 and out["markedNext"] == [3], out
    assert out["end"] == T - 1, out
    # One Tab stop a grid, the best head's at first; the arrows move along and between layers.
    assert out["cellsTabbable"] == ["L1 H2"], out
    assert out["right"] == ["L1 H3", "Layer 1, head 3: row = query token, column = key token"]
    assert out["up"] == "L0 H3" and out["cellsTabbableAfter"] == ["L0 H3"], out


def choice_result():
    """A choice result as analysis.choice gives it, beside circuit_result's identity circuit:
    the whole set's choice circuit drawn, agreement's too, role under the bar for one."""
    edges = [
        ("embed:changed", "L0H2.q", 0.17),
        ("embed:changed", "L0H2.v", 0.07),
        ("L0H2", "MLP0", 0.41),
        ("MLP0", "MLP1", 0.19),
        ("MLP0", "logits", 0.41),
        ("MLP1", "logits", 0.23),
    ]
    circuit = {
        "drawn": True,
        "size": 6,
        "faithfulness": 0.946,
        "gap": 10.7,
        "edges": [{"from": a, "to": b, "share": x, "in_circuit": True} for a, b, x in edges],
    }

    def part(n, accuracy, prefers, right):
        return {
            "n": n,
            "accuracy": accuracy,
            "accuracy_ci": [accuracy - 0.05, accuracy + 0.04],
            "flip": accuracy - 0.2,
            "flip_ci": [accuracy - 0.25, accuracy - 0.15],
            "clean_cm": 6.17,
            "twin_cm": -4.51,
            "prefers": prefers,
            "right": right,
            "deciding": ["L0H2"] if prefers else [],
            "inputs": {"L0H2": {"q": 0.68, "k": 0.0, "v": 0.04}} if prefers else {},
            "circuit": circuit if prefers else {**circuit, "drawn": False, "edges": []},
            "shared_edges": ["L0H2 -> MLP0", "MLP0 -> logits"] if prefers else [],
        }

    return {
        **part(262, 0.874, True, 178),
        "by_kind": {"agreement": part(207, 0.932, True, 169), "role": part(21, 0.619, False, 8)},
        "twins": {"found": {"agreement": 207, "role": 21}, "tried": {"agreement": 217, "role": 41}},
        "n_edges": 137,
        "prefers_from": 0.65,
    }


# The page found one's way in: its contents, the headings they link to, the order of the parts,
# the choice table's numbers, every table's width and the circuits' edge labels.
WAY_IN = """
const W = document.documentElement.clientWidth;
const links = [...document.querySelectorAll("nav#contents a")];
out.contents = links.map(a => [a.textContent, (document.getElementById(a.hash.slice(1)) || {})
  .textContent]);
out.headings = [...document.querySelectorAll("main h2[id]")].map(h => h.id);
const shown = e => e.offsetParent !== null;
out.choiceAlign = [...new Set([...document.querySelectorAll(".choice td")].filter(shown)
  .map(td => (td.classList.contains("words") ? "words " : "") + getComputedStyle(td).textAlign))];
out.tinted = [...document.querySelectorAll(".choice td")].filter(shown)
  .filter(td => td.style.background.startsWith("rgba")).length;
out.wide = [...document.querySelectorAll("table")].filter(shown).filter(t => {
  const r = t.getBoundingClientRect();
  if (r.right <= W + 1 && r.left >= -1) return false;
  const box = t.closest(".scroll"), b = box && box.getBoundingClientRect();
  const shows = box && getComputedStyle(box).overflowX === "auto"
    && getComputedStyle(box).backgroundImage.includes("radial-gradient");
  return !(shows && b.left >= -1 && b.right <= W + 1);
}).map(t => t.closest("section").className);
out.labels = [...document.querySelectorAll("section.circuit svg text.share")].map(t => {
  const svg = t.ownerSVGElement, scale = svg.getBoundingClientRect().width
    / svg.viewBox.baseVal.width;
  t.scrollIntoView({block: "center"});
  const r = t.getBoundingClientRect();
  const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  return [Math.round(parseFloat(getComputedStyle(t).fontSize) * scale * 10) / 10,
          top === t || t.contains(top)];
});
out.terms = [...document.querySelectorAll(".terms dt")].map(dt => dt.textContent);
out.marked = [...new Set([...document.querySelectorAll("abbr.term")].map(a => a.dataset.term))];
out.titled = [...document.querySelectorAll("abbr.term")].every(a => a.title.length > 20);
"""


@needs_browser
@pytest.mark.parametrize("width", [1400, 420])  # a desktop, a phone
def test_real_browser_finds_its_way_by_contents_a_skip_link_and_few_tab_stops(tmp_path, width):
    sentence = sentence_page(headline_run(2, 4))
    facts = {
        "best_head": (0, 2),
        "causal": causal_result(2, 4, (0, 2)),
        "lens": lens_result(2),
        "patching": patching_result(2, 4, (0, 2)),
        "probe": {**probe_result(2, 4, (0, 2)), "choice": choice_result()},
        "records": probe_records(2, 4, (0, 2)),
        "circuit": circuit_result(),
    }
    out, console = phone(tmp_path, [sentence, sentence], WAY_IN, width, tabs=40, **facts)
    assert console == []
    # Every part in the contents, each link reaching its heading, the curve after the heads.
    assert [text for text, _ in out["contents"]] == [to for _, to in out["contents"]], out
    assert out["headings"] == [
        "run",
        "measured",
        "probe",
        "heads",
        "training",
        "numbers",
        "causal",
        "patching",
        "circuit",
        "choice",
        "lens",
        "maps",
        "terms",
    ]
    assert len(out["contents"]) == len(out["headings"])
    # The keyboard: the skip link first, then the contents, then one stop a figure; few in all.
    tabs = out["tabs"]
    assert tabs[0] == "a|skip|#main|Skip to main content", tabs
    assert tabs[1 : 1 + len(out["headings"])] == [
        f"a||#{key}|{text[:40]}" for key, (text, _) in zip(out["headings"], out["contents"])
    ]
    stops = tabs[: tabs.index(tabs[0], 1)] if tabs[0] in tabs[1:] else tabs
    stops = [t for t in stops if t != "body"]
    assert len(stops) <= 30 and len(stops) < len(tabs), tabs  # the walk came round
    assert sum(t.startswith("span|tok") for t in stops) == 2, stops  # a strip a sentence
    assert sum(t.startswith("button|cell") for t in stops) == 2, stops  # a grid a sentence
    # The choice table as every table: numbers to the right, shares tinted, words to the left.
    assert sorted(out["choiceAlign"]) == ["right", "words left"], out
    assert out["tinted"] == 2 * 3, out  # accuracy and flip of each set (no substitution)
    # No table wider than the page but in a box that scrolls and shows it.
    assert out["wide"] == [], out
    # The circuits' edge labels: 11 px or more, and no line or node over any of them.
    assert out["labels"] and all(size >= 11 and top for size, top in out["labels"]), out
    # Each term the page marks is defined in its Terms box, and on hover.
    assert sorted(out["terms"]) == sorted(out["marked"]) and out["titled"], out
    assert {"cand@1", "CM (choice metric)", "flip", "share (estimated)"} <= set(out["terms"])


def test_the_pages_terms_are_the_glossarys():
    from reports.glossary import GLOSSARY, TERMS
    from tests.helpers import ROOT

    glossary = (ROOT / GLOSSARY).read_text(encoding="utf-8")
    assert re.findall(r"^- \*\*(.+?)\*\*:", glossary, re.M) == list(TERMS)


def test_a_notebook_shows_the_same_page_in_a_sandboxed_frame():
    from reports.page_writer import Notebook, attention_view

    shown = Notebook(SENTENCES, {"best_head": (1, 2)})._repr_html_()
    frame = re.fullmatch(
        r'<iframe srcdoc="([^"]*)" sandbox="allow-scripts" style="[^"]*"></iframe>', shown
    )
    assert frame, shown[:200]
    assert html.unescape(frame.group(1)) == render_html(SENTENCES, {"best_head": (1, 2)})
    with pytest.raises(ValueError, match="outside"):  # refused when made, not when shown
        Notebook(SENTENCES, {"best_head": (3, 0)})
    torch.manual_seed(0)
    tokenizer = train_tokenizer("char", "The dog barked because it was hungry.")
    model = GPT(
        GPTConfig(vocab_size=tokenizer.vocab_size, block_size=64, n_layer=2, n_head=2, n_embd=16)
    )
    view = attention_view(model.eval(), tokenizer, "The dog barked because it was hungry.")
    data = json.loads(data_block(html.unescape(view._repr_html_())))
    assert len(data["sentences"]) == 1 and data["sentences"][0]["pronoun"] == 24  # "it"'s "t"
