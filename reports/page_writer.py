"""The page's writer: the sentences, the probe's result once, and a small Page of the run's facts,
put together into one self-contained HTML page (what each part shows: reports/html.py)."""

import html
import json
import re
from dataclasses import dataclass
from string import Template

from analysis.probe import beats_chance
from analysis.results import Study
from reports.causal_tables import causal_section
from reports.choice_page import choice_section
from reports.circuit_svg import circuit_section
from reports.curve import curve_section
from reports.depth_tables import lens_section, patching_section
from reports.glossary import terms_section
from reports.head_tables import heads_section, word_rows
from reports.html import (
    SCALE,
    asset,
    best_pair,
    maps_section,
    numbers_section,
    page_sentence,
    run_section,
)
from reports.probe_tables import probe_section
from reports.text_reports import measured_line
from storage.atomic import write_atomic


@dataclass(frozen=True)
class Page:
    """What the page says about the run beside the probe's result: its title; the run folder or
    model name, the checkpoint's "step" and "best_val_loss" (None leaves a fact out); and the
    run's metrics.jsonl records, whose probe lines are drawn as the training curve."""

    title: str = "Attention maps"
    checkpoint: str | None = None
    step: int | None = None
    val_loss: float | None = None
    records: tuple | list = ()


def render_html(sentences: list, probe: Study | None = None, page: Page | None = None) -> str:
    """The page as a string (see write_html)."""
    probe, page = probe or {}, page or Page()
    best_head, decided_by = probe.get("best_head"), probe.get("decided_by")
    chance = best_head is not None and not beats_chance(probe)
    if chance:  # the run's facts say so; no head is outlined
        best_head = None
    best = best_pair(best_head)
    if not sentences:
        raise ValueError("no sentences to draw; pass at least one")
    data = {
        "scale": SCALE,
        "best": best,
        "sentences": [page_sentence(s, i, best) for i, s in enumerate(sentences)],
    }
    words = [
        word_rows(s, i, (len(c["attention"]), len(c["attention"][0])))
        for i, (s, c) in enumerate(zip(sentences, data["sentences"]))
    ]
    # In a <script> element only "</script" (or "<!--") ends the text early; with every "<",
    # ">" and "&" escaped no token can, and JSON.parse reads the \u escapes back unchanged.
    payload = json.dumps(data, separators=(",", ":"))
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    # The page's parts, top to bottom, each with the id the contents link to. A new part is a
    # function that returns its <section> (its text escaped with html.escape), added here. The
    # curve comes early: how the head formed is the page's story after where it looks.
    sections = [
        (
            "run",
            run_section(page.checkpoint, page.step, page.val_loss, best_head, decided_by, chance),
        ),
        ("measured", measured_section(probe, page)),
        ("probe", probe_section(probe)),
        ("heads", heads_section(words, best)),
        ("training", curve_section(page.records)),
        ("numbers", numbers_section(data["sentences"], best)),
        ("causal", causal_section(probe.get("causal"), not chance)),
        ("patching", patching_section(probe.get("patching"))),
        ("circuit", circuit_section(probe.get("circuit"))),
        ("choice", choice_section(probe.get("choice"), probe.get("circuit"), probe or None)),
        ("lens", lens_section(probe.get("logit_lens"))),
        ("maps", maps_section(best)),
    ]
    sections = [(key, with_id(key, part)) for key, part in sections if part]
    terms = terms_section("".join(part for _, part in sections))
    if terms:
        sections.append(("terms", with_id("terms", terms)))
    return Template(asset("page.html")).substitute(
        title=html.escape(page.title),
        css=asset("page.css"),
        error_hook=asset("error-hook.js"),
        contents=contents(sections),
        sections="\n".join(part for _, part in sections),
        data=payload,
        script=asset("page.js"),
    )


def with_id(key: str, part: str) -> str:
    """A section's HTML with `key` as its heading's id, for the contents to link to."""
    assert "<h2>" in part, part[:60]
    return part.replace("<h2>", f'<h2 id="{key}">', 1)


def contents(sections: list[tuple[str, str]]) -> str:
    """The page's table of contents: a link to each (id, section) by its heading."""
    links = "".join(
        f'<li><a href="#{key}">{re.sub(r"<[^>]+>", "", heading(part))}</a></li>'
        for key, part in sections
    )
    return f'<nav id="contents" aria-label="Contents"><h2>Contents</h2><ol>{links}</ol></nav>'


def heading(part: str) -> str:
    """A section's <h2>, as HTML."""
    return re.search(r"<h2[^>]*>(.*?)</h2>", part, re.S).group(1)


def measured_section(probe: Study, page: Page) -> str:
    """The line that says which parts of the probe's result the page shows, of which run and
    when (reports.text_reports.measured_line); "" where the page has no probe result."""
    if "heads" not in probe:
        return ""
    line = measured_line(probe, page.checkpoint, page.step)
    return (
        '<section class="measured"><h2>What this page shows</h2>'
        f'<p class="help">{html.escape(line)}</p></section>'
    )


def write_html(path, sentences: list, probe: Study | None = None, page: Page | None = None) -> None:
    """Write the page to `path` with storage.atomic.write_atomic: a reader never sees half a
    page, and a path that cannot take it (a folder, a read-only place) is a one-line ValueError.

    sentences: list of {"tokens": [str] (display strings, T of them), "attention": (L, H, T, T)
    tensor or nested lists, "pronoun": token index or None (the row shown first), "note": a
    sentence shown above the maps, or None, and optionally "words" (up to the pronoun) and "rows"
    ((L, H, words) weights), the table of every head's attention over the words}; sentence_page
    makes one from sentence_attention.
    probe: the probe's result as generate.py --probe saves it (analysis.coreference.study), or
    any part of it, or None: its "best_head" ({"layer", "head", "dev", "test"}, or a plain
    (layer, head) pair) outlined in each grid and named with its scores; "heads", "baselines"
    and "p_value" (and "natural" where saved) as the probe's tables; "decided_by" beside the
    best head; "causal", "patching", "logit_lens" and "circuit" as their tables and graphs.
    A part the result lacks is left out of the page. page: the run's facts (Page)."""
    write_atomic(path, render_html(sentences, probe, page))


class Notebook:
    """The page in a Jupyter notebook: the last expression of a cell, or `display(...)`, shows
    it (`_repr_html_`), in an <iframe srcdoc> so that its CSS and scripts stay inside it, as
    circuitsvis and bertviz show theirs. `sentences`, `probe`, `page` as for write_html;
    `height`: the frame's in pixels (the page scrolls inside it)."""

    def __init__(
        self, sentences: list, probe: dict | None = None, page: Page | None = None, height=720
    ):
        self.html = render_html(sentences, probe, page)  # errors now, not when displayed
        self.height = int(height)

    def _repr_html_(self) -> str:
        return (
            f'<iframe srcdoc="{html.escape(self.html, quote=True)}" sandbox="allow-scripts" '
            f'style="width: 100%; height: {self.height}px; border: 0"></iframe>'
        )


def attention_view(model, tokenizer, text: str, probe: Study | None = None, **query) -> Notebook:
    """One sentence's page for a notebook: `attention_view(run.model, run.tokenizer, "The dog
    barked because it was hungry.")`; `query`: sentence_attention's `word` and `query`."""
    from analysis.words import sentence_attention
    from reports.html import sentence_page

    return Notebook([sentence_page(sentence_attention(model, tokenizer, text, **query))], probe)
