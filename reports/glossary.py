"""The page's short definitions of its terms, shown on hover where a section first uses a term
(term) and together in the page's "Terms" box (terms_section). The longer glossary a terminal
report points to is docs/reference/glossary.md; its terms are these, in the same words."""

import html
import re

GLOSSARY = "docs/reference/glossary.md"

# Each term as the glossary names it, with the page's definition of it.
TERMS = {
    "bpb (bits per byte)": "the validation loss in bits per byte of UTF-8 text rather than nats "
    "per token: comparable across tokenizers",
    "MFU (model FLOPs utilization)": "the FLOP/s training needs at its measured speed, as a share "
    "of the hardware's peak",
    "flat map": "a head whose attention is spread almost evenly (its largest share under 1.5× "
    "the even share): no word is marked",
    "␣": "a token's leading space",
    "cand@1": "the share of sentences where a head, read at the pronoun, gives the antecedent "
    "more attention than every other candidate noun before it (ties are misses)",
    "baseline": "a rule without attention, scored the same way: a random candidate, the first, "
    "the nearest before the pronoun, the best rule by position alone",
    "p (permutation test)": "how often chance does as well: the antecedent shuffled among each "
    "sentence's candidates 1000 times, the best head chosen again each time",
    "knockout": "at the pronoun, a head may not attend to some tokens (the antecedent's, or one "
    "other noun's as the control); the change of the next token's loss is measured",
    "logit lens": "the residual stream read through the final LayerNorm and the unembedding as "
    "if the model stopped there",
    "reason": "what in a sentence tells a reader which candidate the pronoun means: agreement, "
    "role or meaning",
    "agreement": "a reason: only the antecedent takes this pronoun (the king / the kettle / the "
    "children)",
    "role": "a reason: every candidate takes the pronoun, which continues the sentence's subject",
    "meaning": "a reason: every candidate takes the pronoun, but a description just before it "
    "fits only the antecedent's kind",
    "answer (the model's own)": "the share of stories where the model's next word after the "
    "pronoun is likelier for the antecedent than for every other candidate, on the story as "
    "written (any cue may help)",
    "twin": "the sentence with only what is under test changed, of the same token length: the "
    "antecedent's noun swapped for another of its kind, or (a choice twin) the reason changed "
    "so that the other candidate is the answer",
    "LD (logit difference)": "logit(the clean sentence's next token) − logit(its twin's next "
    "token), at the pronoun",
    "CM (choice metric)": "logit(the antecedent's next word) − logit(the other candidate's), at "
    "the pronoun: above 0 where the model prefers the antecedent",
    "flip": "the share of sentences with CM above 0 on the sentence and below 0 on its choice "
    "twin: the choice follows the reason (chance 25%)",
    "patched alone": "one edge given its value from the twin's run, everything else clean, "
    "measured for real",
    "share (estimated)": "edge attribution patching's first-order estimate of what patching an "
    "edge alone takes away, as a part of the gap; the top edges are then patched for real",
    "Spearman, signs agree, median ratio": "how the estimate matches real patching on the edges "
    "patched for real: rank correlation, the share with the same sign, the median of "
    "estimate / real",
    "faithfulness": "with only the circuit's edges kept and every other edge patched from the "
    "twin, the share of the clean-vs-twin gap that remains",
    ".q, .k, .v on an edge": "which input of the receiving head the edge reaches: its query, key "
    "or value",
}


def term(name: str, text: str | None = None) -> str:
    """`text` (default: the term's short name, before any parenthesis), marked as the term
    `name` of TERMS: its definition shows on hover, and the page's Terms box lists it."""
    if text is None:
        text = name.split(" (")[0]
    return (
        f'<abbr class="term" data-term="{html.escape(name)}" '
        f'title="{html.escape(TERMS[name])}">{html.escape(text)}</abbr>'
    )


def terms_section(page_html: str) -> str:
    """The Terms box: each term that `page_html` marks with term(), defined, in TERMS' order;
    "" when it marks none."""
    used = {html.unescape(n) for n in re.findall(r'data-term="([^"]*)"', page_html)}
    items = "".join(
        f"<dt>{html.escape(name)}</dt><dd>{html.escape(said)}</dd>"
        for name, said in TERMS.items()
        if name in used
    )
    if not items:
        return ""
    return (
        '<section class="terms"><h2>Terms</h2><p class="help">The words this page uses, a line '
        f"each (hover a dotted word for its line); the longer glossary is {GLOSSARY}.</p>"
        f"<dl>{items}</dl></section>"
    )
