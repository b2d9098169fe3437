"""The coreference study's plain-text reports, as `generate.py --probe` prints them: the probe
(analysis/probe.py), the logit lens (analysis/lens.py), the causal tests (analysis/causal.py) and
activation patching (analysis/patching.py), each from the JSON-ready result its module computes.
The page's tables (analysis/causal_tables.py, analysis/depth_tables.py) say a number as these
reports do, through the helpers here."""

from analysis.choice_report import format_circuits
from analysis.lens_report import format_lens
from analysis.probe import MIN_FOR_STATS, ONE_SET

PUBLISHED = (
    'Published context (other models and data): Clark et al. 2019, "What Does BERT Look At?": '
    "BERT-base head 5-4 selects the antecedent 65% of the time on CoNLL-2012, against 27% for "
    "the nearest mention."
)

# Where the probe read attention (analysis.words.QUERY_POSITIONS), as the report says it.
QUERY_WORDS = {
    "pronoun": "the pronoun",
    "next": "the token after the pronoun",
    "last": "the last token",
}

# What the model's-answer methods mean, as the report and the page say it.
ANSWER_METHODS = (
    'substitution: each candidate ("the dog") in the pronoun\'s place, the rest of the text '
    "scored (its log-probability); closeness: the candidate whose phrase gives the next-token "
    "distribution closest to the pronoun's (smallest KL)"
)
READING = (
    "Positive: the prediction needed what was taken away. The control should stay near 0.",
    "A head can attend to the antecedent and still not help the prediction.",
)


def study_report(result):
    """The probe's plain-text report, then the logit lens', the causal tests', activation
    patching's and the circuit's when the result has them."""
    parts = [format_report(result)]
    if "model_answer" in result:
        parts.append(format_answer(result["model_answer"], result.get("query", "pronoun")))
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


def patching_skipped(skipped: dict) -> str:
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


NOTE_WORDS = 3  # query words quoted in the note about non-pronouns


def query_word_notes(result: dict) -> list[str]:
    """The note on query words that are not pronouns, if some are (run_probe's query_words;
    results saved before it carry their notes as sentences)."""
    if "query_words" not in result:
        return result.get("notes", [])
    q = result["query_words"]
    if not q["not_pronouns"]:
        return []
    quoted = ", ".join(repr(w) for w in q["words"][:NOTE_WORDS])
    quoted += ", ..." if len(q["words"]) > NOTE_WORDS else ""
    return [
        f"the query words of {q['not_pronouns']} of {q['examples']} examples are not pronouns "
        f"({quoted}); for those the probe measures where that word looks, not how a pronoun "
        "finds its antecedent"
    ]


def significance(result: dict) -> str:
    """The permutation test's sentence, or, on fewer than MIN_FOR_STATS scored examples (where
    the result has no p-value), why there is none."""
    used = list(result["counts"].values())[-1]["used"]  # the examples the head is scored on
    if result["p_value"] is None or used < MIN_FOR_STATS:
        return (
            f"with {used} examples the set is too small for a p-value (at least {MIN_FOR_STATS} "
            "are needed): the scores above are point values only."
        )
    return (
        f"permutation test p = {result['p_value']:.4f} ({result['permutations']} shuffles of "
        "the antecedent among each item's candidates, the best head chosen again each time)."
    )


def format_report(result: dict, top: int = 5) -> str:
    """A plain-text report of run_probe's result: table, ranking, baselines, p-value, caveats."""
    same = result["selection"] == "same data"
    dev, test = ONE_SET * 2 if same else ("dev", "test")  # the keys of the per-split values
    test_name = result.get("test_set", "test")  # results saved before sets had names: "test"
    score = "cand@1" if same else f"{test_name} cand@1"
    heads, b, best = result["heads"], result["baselines"], result["best_head"]
    n_head = max(h["head"] for h in heads) + 1
    where = QUERY_WORDS[result.get("query", "pronoun")]  # results saved before --query: pronoun
    lines = [f"Pronoun probe: read at {where}, does a head's attention pick its antecedent?"]
    for split, c in list(result["counts"].items())[: 1 if same else 2]:
        name = "examples" if same else test_name if split == "test" else split
        lines.append(
            f"{name}: {c['used']} of {c['examples']} used "
            f"(skipped: {c['skipped_unencodable']} the tokenizer cannot encode)"
        )
        if c["windowed"]:
            lines += [
                f"  {c['windowed']} read in the model's window, the last "
                f"{result['block_size']} tokens up to the pronoun (block_size);",
                "  the candidates before it get attention 0, the antecedent among them in "
                f"{c['antecedent_unseen']}",
            ]
    lines += [f"Note: {note}." for note in query_word_notes(result)]
    lines += [
        "",
        f"{score} by layer (rows) and head (columns):",
        "     " + "".join(f"{'H' + str(h):>7}" for h in range(n_head)),
    ]
    for at in range(0, len(heads), n_head):
        row = "".join(f"{h[test]:>7.1%}" for h in heads[at : at + n_head])
        lines.append(f"L{heads[at]['layer']:<3} {row}")
    ranked = sorted(heads, key=lambda h: (-h[dev], h["layer"], h["head"]))[:top]
    columns = "cand@1" if same else f"   dev {test_name:>6}"
    lines += [
        "",
        f"Best {len(ranked)} heads, ranked by {'cand@1' if same else 'dev cand@1'}; "
        f"attention mass at {where}, mean over the {'' if same else test_name + ' '}examples:",
        f"  head    {columns}   antecedent  distractors  first token",
    ]
    for h in ranked:
        scores = f"{h[test]:>6.1%}" if same else f"{h[dev]:>6.1%} {h[test]:>6.1%}"
        lines.append(
            f"  L{h['layer']} H{h['head']:<3} {scores} {h['mass_antecedent']:>12.3f} "
            f"{h['mass_distractors']:>12.3f} {h['mass_first_token']:>12.3f}"
        )
    lines += [
        "",
        f"Baselines ({score}): random {b['random'][test]:.1%}, first "
        f"{b['first'][test]:.1%}, nearest before the pronoun {b['nearest'][test]:.1%}, "
        f'best position-only rule "{b["position"]["rule"]}" {b["position"][test]:.1%}',
        f"Best head L{best['layer']} H{best['head']}: {best[test]:.1%} {score}; "
        + significance(result),
    ]
    if same:
        paid = " (the p-value pays for the choice)" if result["p_value"] is not None else ""
        lines.append(
            "Note: no held-out split, so the head and the position rule were chosen and "
            f"scored on the same data: their scores are optimistic{paid}."
        )
    else:
        lines.append(
            "Note: the head and the position rule were chosen on dev and are reported "
            f"on {test_name}; choosing them there would inflate the numbers."
        )
    kinds = result.get("decided_by", {})  # older results lack it
    lines += _by_deciding_lines(kinds, best, score, same, test)
    return "\n".join(lines + ["", PUBLISHED])


def _by_deciding_lines(kinds: dict, best: dict, score: str, same: bool, test: str) -> list[str]:
    """format_report's table of the items by what tells their antecedent apart, if they say."""
    if not kinds:
        return []
    name = f"L{best['layer']} H{best['head']}"
    where = "the same items" if same else "dev's items of that kind"
    lines = [
        "",
        f"By what tells the antecedent apart ({score}; the last column's head is chosen "
        f"on {where}):",
        f"  {'decided by':<11} {'items':>5} {name:>7} {'random':>7}   best head for the kind",
    ]
    for kind, k in kinds.items():
        top = k["kind_best"]
        chosen = f"L{top['layer']} H{top['head']:<3} {top[test]:>6.1%}" if top else "none on dev"
        lines.append(
            f"  {kind:<11} {k['examples']:>5} {k['best_head']:>7.1%} {k['random']:>7.1%}   {chosen}"
        )
    return lines


def _cand_cell(row, name):
    """cand@1 of `name` in a row of model_answer's result: "71.0% [65%, 76%]", or the value
    alone where the row's items were too few for an interval."""
    text = f"{row['cand_at_1'][name]:.1%}"
    if "cand_at_1_ci" in row:
        lo, hi = row["cand_at_1_ci"][name]
        text += f" [{lo:.0%}, {hi:.0%}]"
    return text


def format_answer(answer: dict, query: str = "pronoun") -> str:
    """The model's own answer (analysis/answer.py) as plain text: both methods' cand@1 beside
    the head's, on the whole set and on each kind of item; then the baselines and how often
    each method's answer is the head's pick, on the same items. `query`: where the head was
    read (the probe's query position)."""
    head = f"L{answer['head']['layer']} H{answer['head']['head']}"
    methods = answer["methods"]
    rows = [("all", answer["all"]), *answer["decided_by"].items()]
    said = (
        f"95% bootstrap intervals ({answer['resamples']} resamples)"
        if "cand_at_1_ci" in answer["all"]
        else f"no intervals: {answer['n']} examples are too few, at least {MIN_FOR_STATS} "
        "are needed"
    )
    lines = [
        "The model's own answer: which candidate its prediction puts in the pronoun's place "
        f"({answer['n']} examples, {answer['skipped']} skipped: the tokenizer cannot encode "
        f"them with a candidate there); cand@1, {said}:",
        (
            f"  {'items':<10} {'n':>4}  " + "".join(f"{name:<20}" for name in (*methods, head))
        ).rstrip(),
    ]
    lines += [
        f"  {name:<10} {row['examples']:>4}  "
        + "".join(f"{_cand_cell(row, m):<20}" for m in (*methods, "head")).rstrip()
        for name, row in rows
    ]
    lines += [
        "",
        f"Baselines (cand@1) and how often the answer is {head}'s pick, the same items:",
        f"  {'items':<10} {'random':>7} {'first':>7} {'nearest':>7}   agrees: "
        + " ".join(f"{m:>12}" for m in methods),
    ]
    for name, row in rows:
        b = row["baselines"]
        lines.append(
            f"  {name:<10} {b['random']:>7.1%} {b['first']:>7.1%} {b['nearest']:>7.1%}"
            "           " + " ".join(f"{row['agreement'][m]:>12.1%}" for m in methods)
        )
    missing = ", ".join(f"{m} {answer['all']['no_answer'][m]}" for m in methods)
    where = "" if query == "pronoun" else f"; {head}'s pick is read at {QUERY_WORDS[query]}"
    lines += [
        "",
        f"No answer (the top candidates tie, or no text follows the pronoun): {missing}.",
        ANSWER_METHODS + where + ".",
    ]
    return "\n".join(lines)


def signed(x):
    """A delta as the reports and the page show it: +0.12, -0.05, and 0.00 (no sign) for
    anything that rounds to zero, so that no "-0.00" or "+0.00" claims a direction."""
    text = f"{x:+.2f}"
    return "0.00" if text in ("+0.00", "-0.00") else text


def with_ci(deltas, name, n):
    """deltas[name] and its interval deltas[name + "_ci"]: +0.12 [+0.08, +0.16]; the value
    alone when the mean is over fewer than MIN_FOR_STATS examples (n)."""
    if n < MIN_FOR_STATS:
        return signed(deltas[name])
    lo, hi = deltas[f"{name}_ci"]
    return f"{signed(deltas[name])} [{signed(lo)}, {signed(hi)}]"


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


def format_causal(result: dict, width: int = 100) -> str:
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


def recovered_text(cell):
    """A cell as the report and the page show it: "+0.98 [+0.98, +0.99]", or "+0.98" alone
    where the set was too small for an interval."""
    text = signed(cell["recovered"])
    if "recovered_ci" in cell:
        lo, hi = cell["recovered_ci"]
        text += f" [{signed(lo)}, {signed(hi)}]"
    return text


def format_patching(result: dict) -> str:
    """The patching results as plain text: the heads' grid, then the stream's map."""
    heads, H = result["heads"], len(result["heads"][0])
    intervals = (
        "recovered fraction [95% bootstrap interval]"
        if "recovered_ci" in heads[0][0]
        else f"recovered fraction (no intervals: {result['n']} pairs are too few, at least "
        f"{MIN_FOR_STATS} are needed)"
    )
    lines = [
        "Activation patching at the pronoun: clean run -> corrupted twin (the antecedent swapped "
        "for another noun of its kind),",
        f"{result['n']} pairs ({result['skipped']} skipped); logit difference clean next - "
        f"twin's next: clean {signed(result['clean_ld'])}, "
        f"corrupted {signed(result['corrupt_ld'])}; {intervals}:",
        "",
        "each head's output at the pronoun patched:",
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
        "columns: where in the sentence):",
        f"  {'':<10}" + "".join(f"{c:>21}" for c in result["columns"]),
    ]
    lines += [
        f"  {point:<10}" + "".join(f"{recovered_text(c):>21}" for c in row)
        for point, row in zip(result["points"], result["stream"])
    ]
    if "mlps" in result:  # results saved before MLPs were patched have none
        lines += [
            "",
            "each MLP's output patched (rows: the block; columns: where in the sentence):",
        ]
        lines += [
            f"  {'block ' + str(l):<10}" + "".join(f"{recovered_text(c):>21}" for c in row)
            for l, row in enumerate(result["mlps"])
        ]
    lines.append(
        "1 = the clean run's preference for its own continuation is back, 0 = as corrupted. Where "
        "the antecedent's column fades and the pronoun's rises is the block that carries the "
        "antecedent's identity to the pronoun."
    )
    return "\n".join(lines)
