"""The coreference study's plain-text report, as `generate.py --probe` prints it (study_report):
the probe's (reports/probe_report.py), the model's answer (reports/answer_report.py), the logit
lens' (reports/lens_report.py), and here the causal tests' (analysis/causal.py) and activation
patching's (analysis/patching.py), each from the JSON-ready result its module computes. The
page's tables (reports/causal_tables.py, reports/depth_tables.py) say a number as these
reports do, through the helpers here. And the run folder's report.txt (saved_report), whose
first line, as the page's, says what the saved result holds, of which run and when
(measured_line)."""

from typing import NamedTuple

from analysis.circuit_results import NoTwinsSaid, PatchingResult
from analysis.probe import MIN_FOR_STATS
from analysis.results import CausalResult, CausalStudy, SavedStudy, Study, study_parts
from reports.answer_report import format_answer, format_by_lexicon
from reports.choice_report import format_circuits
from reports.formatting import counted, recovered_text, signed, with_ci
from reports.lens_report import format_lens
from reports.probe_report import format_report, language_lines

READING = (
    "Positive: the prediction needed what was taken away. The control should stay near 0.",
    "A head can attend to the antecedent and still not help the prediction.",
)


def study_report(result: Study) -> str:
    """The probe's plain-text report, then the model's own answer's (on the natural sentences
    also by the training lexicon), the logit lens', the causal tests', activation patching's and
    the circuit's when the result has them."""
    parts = [
        "terms: see docs/reference/glossary.md",
        *language_lines(result),
        format_report(result),
    ]
    if "model_answer" in result:
        parts.append(format_answer(result["model_answer"], result.get("query", "pronoun")))
    if "by_lexicon" in result:
        parts.append(format_by_lexicon(result))
    if "logit_lens" in result:
        parts.append(format_lens(result["logit_lens"]))
    if "causal" in result:
        parts.append(format_causal(result["causal"]))
    if "patching" in result:
        parts.append(format_patching(result["patching"]))
    elif "patching_skipped" in result:
        parts.append(f"Activation patching skipped: {patching_skipped(result['patching_skipped'])}")
    if "circuit_skipped" in result:
        parts.append(f"The circuit skipped: {patching_skipped(result['circuit_skipped'])}")
    if "circuit" in result or "choice" in result or "choice_skipped" in result:
        parts.append(format_circuits(result))
    return "\n\n".join(parts)


NATURAL_HEADING = "== --probe natural: the same head on hand-written English it never saw =="
# A study's parts (analysis.results.study_parts; "natural": the natural sentences' study kept
# beside the built-in sets') in words.
PART_NAMES = {
    "probe": "probe",
    "causal": "causal tests",
    "patching": "patching",
    "circuit": "circuits",
    "natural": "natural sentences",
}


def saved_report(saved: Study | SavedStudy, folder: str | None = None) -> str:
    """The run folder's report.txt: measured_line, the built-in sets' study_report, then, where
    the natural sentences' study is kept beside it (`--probe natural`), that one's under
    NATURAL_HEADING."""
    parts = [measured_line(saved, folder), study_report(saved)]
    if "natural" in saved:
        parts += [NATURAL_HEADING, study_report(saved["natural"])]
    return "\n\n".join(parts)


def parts_said(parts: list[str]) -> str:
    """Parts in words: "causal tests, patching and circuits"."""
    names = [PART_NAMES[p] for p in parts]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def measured_line(
    study: Study | SavedStudy, folder: str | None = None, step: int | None = None
) -> str:
    """What a saved study holds, of which run and when: "Measured on out/default, checkpoint
    step 1200, 2025-03-01; parts: probe, causal tests, patching, circuits; natural sentences:
    probe, causal tests." Each part's date where they differ, "date not recorded" for a part
    saved before dates were; `step`: where the study names no checkpoint."""
    step = study.get("checkpoint", {}).get("step", step)
    levels = [("parts", study)]
    if "natural" in study:
        levels.append(("natural sentences", study["natural"]))
    dated = [(name, _dated(s)) for name, s in levels]
    days = {day for _, groups in dated for day, _ in groups}
    single = days.pop() if len(days) == 1 else False  # False: each group says its own day
    head = "Measured" + (f" on {folder}" if folder else "")
    head += "" if step is None else f", checkpoint step {step}"
    head += f", {single}" if single else ""

    def group(day, parts):
        names = ", ".join(PART_NAMES[p] for p in parts)
        return names if single is not False else f"{names} ({day or 'date not recorded'})"

    said = [f"{name}: " + ", ".join(group(*g) for g in groups) for name, groups in dated]
    return f"{head}; {'; '.join(said)}."


def _dated(study: Study) -> list[tuple[str | None, list[str]]]:
    """(day, parts) of a study's parts (its probe's first), one group a day of measuring."""
    groups: dict[str | None, list[str]] = {}
    for part in study_parts(study):
        when = study.get("measured", {}).get(part)
        groups.setdefault(when[:10] if when else None, []).append(part)
    return list(groups.items())


def patching_skipped(skipped: NoTwinsSaid) -> str:
    """Why activation patching found nothing to patch, in words (the study's patching_skipped)."""
    kind = skipped.get("tokenizer", "")
    if kind == "char":
        return (
            "no example has a corrupted twin under this model's char tokenizer: each "
            "continuation's first token is a space, the same for every noun; patching needs "
            "a tokenizer with word tokens (bpe, gpt2)"
        )
    return (
        f"no example has a corrupted twin under this model's {kind} tokenizer (an antecedent "
        "from the lexicon, a same-kind noun of its token length, and another continuation)"
    )


def intervals_said(result):
    """How the heads-together rows are given: with 95% bootstrap intervals, or why without."""
    if result["n"] < MIN_FOR_STATS:
        return (
            f"means only: {result['n']} examples are too few for intervals (at least "
            f"{MIN_FOR_STATS} are needed)"
        )
    return f"with 95% bootstrap intervals ({result['resamples']} resamples)"


def together(result):
    """(label, deltas) rows of the heads knocked out together: each layer, all layers, and the
    best head alone when with_best_head added it (its deltas include the ablation)."""
    rows = [(f"layer {l}", deltas) for l, deltas in enumerate(result["layers"])]
    rows.append(("all layers", result["all_heads"]))
    if "best_head" in result:
        b = result["best_head"]
        rows.append((f"L{b['layer']} H{b['head']} alone", b))
    return rows


def _grid(heads, name):
    """Rows 'L<l>' of a name's means for every head, 7 characters a head."""
    return [
        f"L{l:<3} " + "".join(f"{signed(h[name]):>7}" for h in row) for l, row in enumerate(heads)
    ]


def format_causal(result: CausalResult | CausalStudy, width: int = 100) -> str:
    """A plain-text report of causal_tests' result (with_best_head's too): the L x H grid of
    antecedent-knockout deltas with the control beside it (below it when side by side would be
    wider than `width`), the head-ablation grid, and the layer and all-heads rows with CIs."""
    heads = result["heads"]
    H = len(heads[0])
    header = "     " + "".join(f"{'H' + str(h):>7}" for h in range(H))
    ante, control = _grid(heads, "antecedent"), _grid(heads, "distractor")
    lines = [
        "Causal test at the pronoun: change of the next token's loss, in nats",
        f"(mean over {result['n']} examples, {result['skipped']} skipped; clean loss "
        f"{result['clean_loss']:.3f})",
        "",
    ]
    if 2 * len(header) + 3 <= width:
        lines += [
            "antecedent knocked out".ljust(len(header)) + " | control: one distractor out",
            f"{header} | {header[5:]}",
        ]
        lines += [f"{a} | {c[5:]}" for a, c in zip(ante, control)]
    else:
        lines += [
            "antecedent knocked out, by layer (rows) and head (columns):",
            header,
            *ante,
            "",
            "control: one distractor knocked out:",
            header,
            *control,
        ]
    lines += [
        "",
        "head ablated (its output at the query replaced by its mean):",
        header,
        *_grid(heads, "ablation"),
        "",
        f"heads together, {intervals_said(result)}:",
    ]
    n, rows = result["n"], together(result)
    # Every value right-aligned in one width: "0.00 [...]" has no sign to line up with "+3.99".
    w = max(len(with_ci(d, k, n)) for _, d in rows for k in ("antecedent", "distractor"))
    for label, deltas in rows:
        lines.append(
            f"  {label:<13} antecedent {with_ci(deltas, 'antecedent', n):>{w}}   control "
            f"{with_ci(deltas, 'distractor', n):>{w}}"
        )
        if "ablation" in deltas:  # the best head: its ablation beneath
            lines.append(f"  {'':<13} ablation   {with_ci(deltas, 'ablation', n):>{w}}")
    return "\n".join([*lines, "", *READING])


class PatchingWords(NamedTuple):
    """What a patching report calls its parts: the built-in twins' words (TWINS), or a user's
    pairs' (reports/pairs_report.py)."""

    heading: str  # what was patched into what
    metric: str  # the logit difference's name
    at: str  # where the heads are patched and the metric read
    reading: str  # how to read the maps, after them
    columns: str = "where in the sentence"  # what the stream's and the MLPs' columns are


TWINS = PatchingWords(
    "Activation patching at the pronoun: clean run -> corrupted twin (the antecedent swapped "
    "for another noun of its kind),",
    "logit difference clean next - twin's next",
    "the pronoun",
    "1 = the clean run's preference for its own continuation is back, 0 = as corrupted. Where "
    "the antecedent's column fades and the pronoun's rises is the block that carries the "
    "antecedent's identity to the pronoun.",
)


def format_patching(result: PatchingResult, words: PatchingWords = TWINS) -> str:
    """The patching results as plain text: the heads' grid, then the stream's map, said in
    `words`."""
    heads, H = result["heads"], len(result["heads"][0])
    intervals = (
        "recovered fraction [95% bootstrap interval]"
        if "recovered_ci" in heads[0][0]
        else f"recovered fraction (no intervals: {counted(result['n'], 'pair')} "
        f"{'is' if result['n'] == 1 else 'are'} too few, at least {MIN_FOR_STATS} are needed)"
    )
    lines = [
        words.heading,
        f"{counted(result['n'], 'pair')} ({result['skipped']} skipped); {words.metric}: "
        f"clean {signed(result['clean_ld'])}, corrupted {signed(result['corrupt_ld'])}; "
        f"{intervals}:",
        "",
        f"each head's output at {words.at} patched:",
        "     " + "".join(f"{'H' + str(h):>7}" for h in range(H)),
    ]
    lines += [
        f"L{l:<3} " + "".join(f"{signed(c['recovered']):>7}" for c in row)
        for l, row in enumerate(heads)
    ]
    best = max(
        ((l, h) for l in range(len(heads)) for h in range(H)),
        key=lambda lh: heads[lh[0]][lh[1]]["recovered"],
    )
    lines.append(f"  best: L{best[0]} H{best[1]} {recovered_text(heads[best[0]][best[1]])}")
    lines += [
        "",
        "the residual stream patched (rows: after the embedding, after each block; "
        f"columns: {words.columns}):",
        f"  {'':<10}" + "".join(f"{c:>21}" for c in result["columns"]),
    ]
    lines += [
        f"  {point:<10}" + "".join(f"{recovered_text(c):>21}" for c in row)
        for point, row in zip(result["points"], result["stream"])
    ]
    lines += [
        "",
        f"each MLP's output patched (rows: the block; columns: {words.columns}):",
    ]
    lines += [
        f"  {'block ' + str(l):<10}" + "".join(f"{recovered_text(c):>21}" for c in row)
        for l, row in enumerate(result["mlps"])
    ]
    lines.append(words.reading)
    return "\n".join(lines)
